"""The claim path: claim (``INSERT … ON CONFLICT``, one winner), adopt after a reconnect,
heartbeat, finish and lose, each fenced by the attempt; and the rows that explain a refusal."""

from __future__ import annotations

from datetime import datetime, timedelta

from psycopg.rows import class_row

from ..models import Blocker, Claim, Finished, RunRow
from ..schedule import Period
from .base import LedgerBase


class ClaimPath(LedgerBase):
    def claim(
        self,
        job_id: int,
        period: Period,
        *,
        owner: str,
        lease: timedelta,
        max_attempts: int,
        allow_overlap: bool,
        ignore_backoff: bool = False,
        retry_exhausted: bool = False,
    ) -> Claim | None:
        """The one atomic claim; None when another process has it or nothing is left to do."""
        params = {
            "schema": self.schema,
            "job_id": job_id,
            "period_start": period.start,
            "period_end": period.end,
            "owner": owner,
            "lease": lease,
            "max_attempts": max_attempts,
            "allow_overlap": allow_overlap,
            "ignore_backoff": ignore_backoff,
            "retry_exhausted": retry_exhausted,
        }
        with self.conn.transaction():
            if not allow_overlap:
                self.conn.execute(self._q("lock_job"), params)
            with self.conn.cursor(row_factory=class_row(Claim)) as cur:
                return cur.execute(self._q("claim"), params).fetchone()

    def adopt(self, job_id: int, period_start: datetime, owner: str) -> Claim | None:
        with self.conn.cursor(row_factory=class_row(Claim)) as cur:
            return cur.execute(
                self._q("adopt"),
                {"job_id": job_id, "period_start": period_start, "owner": owner},
            ).fetchone()

    def heartbeat(
        self, job_id: int, period_start: datetime, attempt: int, lease: timedelta
    ) -> datetime | None:
        """Extend the lease; None when this attempt no longer holds it."""
        row = self.conn.execute(
            self._q("heartbeat"),
            {"job_id": job_id, "period_start": period_start, "attempt": attempt, "lease": lease},
        ).fetchone()
        return row[0] if row else None

    def finish(
        self,
        job_id: int,
        period_start: datetime,
        attempt: int,
        *,
        status: str,
        history_status: str,
        counts_as_failure: bool,
        backoff: timedelta,
        backoff_cap: timedelta = timedelta(hours=6),
        exit_code: int | None,
        error: str | None,
        output_tail: str | None,
    ) -> Finished | None:
        """Record the outcome, fenced by ``attempt``; None when the period was taken over."""
        params = {
            "job_id": job_id,
            "period_start": period_start,
            "attempt": attempt,
            "status": status,
            "history_status": history_status,
            "counts_as_failure": counts_as_failure,
            "backoff": backoff,
            "backoff_cap": backoff_cap,
            "exit_code": exit_code,
            "error": error,
            "output_tail": output_tail,
        }
        with self.conn.cursor(row_factory=class_row(Finished)) as cur:
            return cur.execute(self._q("finish"), params).fetchone()

    def lose(self, job_id: int, period_start: datetime, attempt: int, error: str) -> None:
        self.conn.execute(
            self._q("lose"),
            {"job_id": job_id, "period_start": period_start, "attempt": attempt, "error": error},
        )

    def run_row(self, job_id: int, period_start: datetime) -> RunRow | None:
        with self.conn.cursor(row_factory=class_row(RunRow)) as cur:
            return cur.execute(
                self._q("run_row"), {"job_id": job_id, "period_start": period_start}
            ).fetchone()

    def blocker(self, job_id: int, period_start: datetime) -> Blocker | None:
        with self.conn.cursor(row_factory=class_row(Blocker)) as cur:
            return cur.execute(
                self._q("running_other"), {"job_id": job_id, "period_start": period_start}
            ).fetchone()

    def save_checkpoint(self, run_id: int, attempt: int, checkpoint: str) -> bool:
        row = self.conn.execute(
            self._q("save_checkpoint"),
            {"run_id": run_id, "attempt": attempt, "checkpoint": checkpoint},
        ).fetchone()
        return row is not None
