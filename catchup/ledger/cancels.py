"""``catchup cancel``: the running attempt's row locked, the request recorded for its heartbeat
to read, and where the attempt stands while its runner stops it."""

from __future__ import annotations

from datetime import datetime

from psycopg.rows import class_row

from .base import LedgerBase
from .rows import CancelProgress, CancelTarget


class Cancels(LedgerBase):
    def cancel_target(
        self, job_id: int, key: str, period_start: datetime, max_attempts: int
    ) -> CancelTarget | None:
        """The period's row, locked until the transaction ends; None when it has none."""
        params = {
            "job_id": job_id,
            "key": key,
            "period_start": period_start,
            "max_attempts": max_attempts,
        }
        with self.conn.cursor(row_factory=class_row(CancelTarget)) as cur:
            return cur.execute(self._q("cancel_target"), params).fetchone()

    def request_cancel(
        self, job_id: int, key: str, period_start: datetime, attempt: int, reason: str, actor: str
    ) -> tuple[bool, str, str]:
        """Ask ``attempt`` to stop: whether this was the first request, and the actor and
        reason of the one that stands (a second request keeps the first)."""
        params = {
            "job_id": job_id,
            "key": key,
            "period_start": period_start,
            "attempt": attempt,
            "reason": reason,
            "actor": actor,
        }
        row = self.conn.execute(self._q("request_cancel"), params).fetchone()
        assert row is not None  # inserted, or there already
        return bool(row[0]), str(row[1]), str(row[2])

    def cancel_progress(
        self, job_id: int, key: str, period_start: datetime, attempt: int
    ) -> CancelProgress | None:
        params = {"job_id": job_id, "key": key, "period_start": period_start, "attempt": attempt}
        with self.conn.cursor(row_factory=class_row(CancelProgress)) as cur:
            return cur.execute(self._q("cancel_progress"), params).fetchone()
