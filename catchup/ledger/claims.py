"""The claim path: claim (``INSERT … ON CONFLICT``, one winner), reclaim after a reconnect,
heartbeat, finish and lose, each fenced by the attempt; and the rows that explain a refusal."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NotRequired, TypedDict, Unpack

from psycopg.rows import class_row

from ..claims.failover import Failover, Held
from ..config.values import storable
from ..schedule import Period
from .base import LedgerBase
from .rows import Blocked, Blocker, Claim, Finished, Renewed, RunRow, Waiting


class FinishFields(TypedDict):
    """An attempt's outcome, as :meth:`ClaimPath.finish` records it."""

    status: str
    history_status: str
    counts_as_failure: bool
    backoff: timedelta
    backoff_cap: NotRequired[timedelta]
    exit_code: int | None
    error: str | None
    output_tail: str | None


@dataclass(frozen=True)
class ClaimRequest:
    """What :meth:`ClaimPath.claim` takes, for a claim sent along with a finish."""

    job_id: int
    period: Period
    owner: str
    lease: timedelta
    max_attempts: int
    allow_overlap: bool
    ignore_backoff: bool = False
    retry_exhausted: bool = False
    # upstream periods: (job id, start, the upstream job's max_attempts, which names its state)
    needs: tuple[tuple[int, datetime, int], ...] = ()
    key: str = ""  # the period's key ('' for an unkeyed job)
    whole_job: bool = False  # overlap = "forbid-job": forbidden across the job's keys
    # the key of each of ``needs`` ('' for an unkeyed upstream job; default: all '')
    need_keys: tuple[str, ...] = ()


def _finish_params(
    job_id: int, key: str, period_start: datetime, attempt: int, fields: FinishFields
) -> dict[str, object]:
    # what a job wrote is stored whatever it holds (a NUL, a lone surrogate): a finish that
    # cannot be written would leave the period running
    text = {
        name: storable(value)
        for name in ("error", "output_tail")
        if isinstance(value := fields.get(name), str)
    }
    return {
        "job_id": job_id,
        "key": key,
        "period_start": period_start,
        "attempt": attempt,
        "backoff_cap": timedelta(hours=6),
        **fields,
        **text,
    }


class ClaimPath(LedgerBase):
    def claim(  # noqa: PLR0913
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
        key: str = "",
        whole_job: bool = False,
    ) -> Claim | None:
        """The one atomic claim of (job, key, period); None when another process has it or
        nothing is left to do."""
        params = {
            "schema": self.schema,
            "job_id": job_id,
            "key": key,
            "whole_job": whole_job,
            "period_start": period.start,
            "period_end": period.end,
            "owner": owner,
            "lease": lease,
            "max_attempts": max_attempts,
            "allow_overlap": allow_overlap,
            "ignore_backoff": ignore_backoff,
            "retry_exhausted": retry_exhausted,
        }
        with self._committing(lease), self.conn.cursor(row_factory=class_row(Claim)) as cur:
            return cur.execute(self._q("claim"), params).fetchone()

    def claim_request(self, request: ClaimRequest) -> Claim | Blocked | None:
        """:meth:`claim` of ``request``. A period that waits for upstream periods
        (``request.needs``: job id and start) is :class:`Blocked` when any is not done, checked
        in the claim's own transaction, with the upstream rows locked until it commits."""
        r = request

        def claim() -> Claim | None:
            return self.claim(
                r.job_id,
                r.period,
                owner=r.owner,
                lease=r.lease,
                max_attempts=r.max_attempts,
                allow_overlap=r.allow_overlap,
                ignore_backoff=r.ignore_backoff,
                retry_exhausted=r.retry_exhausted,
                key=r.key,
                whole_job=r.whole_job,
            )

        if not r.needs:
            return claim()
        with self._committing(r.lease), self.conn.transaction():
            rows = self.conn.execute(
                self._q("upstream_not_done"),
                {
                    "job_ids": [j for j, _, _ in r.needs],
                    "keys": list(r.need_keys) or [""] * len(r.needs),
                    "starts": [t for _, t, _ in r.needs],
                    "max_attempts": [m for _, _, m in r.needs],
                },
            ).fetchall()
            if rows:
                return Blocked(tuple(Waiting(*row) for row in rows))
            return claim()

    def reclaim(
        self, job_id: int, period_start: datetime, owner: str, key: str = ""
    ) -> Claim | None:
        with self.conn.cursor(row_factory=class_row(Claim)) as cur:
            return cur.execute(
                self._q("reclaim"),
                {"job_id": job_id, "key": key, "period_start": period_start, "owner": owner},
            ).fetchone()

    def heartbeat(
        self, job_id: int, period_start: datetime, attempt: int, lease: timedelta, key: str = ""
    ) -> Renewed | None:
        """Extend the lease; None when this attempt no longer holds it. A cancel request for
        the attempt comes back with it."""
        row = self.conn.execute(
            self._q("heartbeat"),
            {
                "job_id": job_id,
                "key": key,
                "period_start": period_start,
                "attempt": attempt,
                "lease": lease,
            },
        ).fetchone()
        return Renewed(row[0], row[1], row[2]) if row else None

    def finish(
        self,
        job_id: int,
        period_start: datetime,
        attempt: int,
        key: str = "",
        **fields: Unpack[FinishFields],
    ) -> Finished | None:
        """Record the outcome, fenced by ``attempt``; None when the period was taken over."""
        params = _finish_params(job_id, key, period_start, attempt, fields)
        with self._committing(), self.conn.cursor(row_factory=class_row(Finished)) as cur:
            return cur.execute(self._q("finish"), params).fetchone()

    def finish_then_claim(
        self,
        job_id: int,
        period_start: datetime,
        attempt: int,
        then: ClaimRequest,
        key: str = "",
        **fields: Unpack[FinishFields],
    ) -> tuple[Finished | None, Claim | None]:
        """:meth:`finish`, then :meth:`claim` of ``then``, in one transaction (one round trip,
        one commit). (None, None) when the finish was fenced off: nothing was claimed either."""
        params = {
            **_finish_params(job_id, key, period_start, attempt, fields),
            "schema": self.schema,
            "next_job_id": then.job_id,
            "next_key": then.key,
            "whole_job": then.whole_job,
            "next_start": then.period.start,
            "next_end": then.period.end,
            "owner": then.owner,
            "lease": then.lease,
            "max_attempts": then.max_attempts,
            "allow_overlap": then.allow_overlap,
            "ignore_backoff": then.ignore_backoff,
            "retry_exhausted": then.retry_exhausted,
        }
        with self._committing():
            row = self.conn.execute(self._q("finish_then_claim"), params).fetchone()
        if row is None:
            return None, None
        finished_at, failures, retry_after, run_id, start, end, attempt_, expires, checkpoint = row
        finished = Finished(finished_at, failures, retry_after)
        if run_id is None:
            return finished, None
        return finished, Claim(run_id, start, end, attempt_, expires, checkpoint)

    def lose(
        self, job_id: int, period_start: datetime, attempt: int, error: str, key: str = ""
    ) -> None:
        self.conn.execute(
            self._q("lose"),
            {
                "job_id": job_id,
                "key": key,
                "period_start": period_start,
                "attempt": attempt,
                "error": storable(error),
            },
        )

    def run_row(self, job_id: int, period_start: datetime, key: str = "") -> RunRow | None:
        with self.conn.cursor(row_factory=class_row(RunRow)) as cur:
            return cur.execute(
                self._q("run_row"), {"job_id": job_id, "key": key, "period_start": period_start}
            ).fetchone()

    def blocker(
        self, job_id: int, period_start: datetime, key: str = "", whole_job: bool = False
    ) -> Blocker | None:
        params = {"job_id": job_id, "period_start": period_start, "key": key}
        with self.conn.cursor(row_factory=class_row(Blocker)) as cur:
            return cur.execute(
                self._q("running_other"), {**params, "whole_job": whole_job}
            ).fetchone()

    def save_checkpoint(self, run_id: int, attempt: int, checkpoint: str) -> bool:
        row = self.conn.execute(
            self._q("save_checkpoint"),
            {"run_id": run_id, "attempt": attempt, "checkpoint": checkpoint},
        ).fetchone()
        return row is not None

    def recreate(self, held: Held, lease: timedelta) -> datetime | None:
        """Write ``held``'s row again, running, when a failover lost it (the row is absent and
        the claim was made before the ledger's new timeline was seen): its lease's new expiry,
        or None (nothing written)."""
        return self.recreate_many(held.job_id, [held], lease).get((held.key, held.period.start))

    def recreate_many(
        self, job_id: int, held: Sequence[Held], lease: timedelta
    ) -> dict[tuple[str, datetime], datetime]:
        """:meth:`recreate` of many claims of one job in one statement (a batch's): each row
        written again, with its lease's new expiry, by (key, start)."""
        params = {
            "schema": self.schema,
            "job_id": job_id,
            "job": held[0].job,
            "keys": [h.key for h in held],
            "starts": [h.period.start for h in held],
            "ends": [h.period.end for h in held],
            "attempts": [h.attempt for h in held],
            "owners": [h.owner for h in held],
            "claimed": [h.claimed_at for h in held],
            "lease": lease,
        }
        with self._committing():
            rows = self.conn.execute(self._q("recreate"), params).fetchall()
        return {(key, start): at for key, start, at in rows}

    def failover(self) -> Failover | None:
        """The failover the ledger's server went through last, if any (read only)."""
        row = self.conn.execute(self._q("failover_window")).fetchone()
        if row is None or not row[3]:
            return None
        return Failover(row[0], row[1], row[2])

    def suspect_rows(
        self,
        job_id: int,
        seen: datetime,
        lo: datetime,
        hi: datetime,
        keys: list[str] | None = None,
    ) -> list[tuple[str, datetime]]:
        """The (key, start) of ``job_id``'s rows in [lo, hi) that are suspect after the failover
        seen at ``seen``: running or failed, and not written since."""
        params = {"job_id": job_id, "seen": seen, "lo": lo, "hi": hi, "keys": keys}
        return [(r[0], r[1]) for r in self.conn.execute(self._q("suspect_rows"), params)]

    def suspect(self, job_id: int, period: Period, key: str = "") -> Failover | None:
        """The failover that makes ``period`` suspect, or None (it is not)."""
        params = {
            "job_id": job_id,
            "key": key,
            "period_start": period.start,
            "period_end": period.end,
        }
        row = self.conn.execute(self._q("period_suspect"), params).fetchone()
        if row is None or not row[3]:
            return None
        return Failover(row[0], row[1], row[2])
