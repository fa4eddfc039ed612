"""Observed jobs' pings (:mod:`catchup.pings`): the attempt a start ping claimed, found again
for its finish. The claim, the finish and the audit trail are the claim path's and the
changes' own statements."""

from __future__ import annotations

from datetime import datetime

from .base import LedgerBase


class Pings(LedgerBase):
    def open_ping(self, job_id: int, key: str, owner: str) -> tuple[datetime, datetime, int] | None:
        """The running attempt ``owner`` (``ping <rid>``) claimed, or with ``owner`` ``ping``
        the newest any start ping of the job claimed: its period's bounds and attempt."""
        row = self.conn.execute(
            self._q("open_ping"), {"job_id": job_id, "key": key, "owner": owner}
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def ping_started(self, job_id: int, key: str, owner: str) -> datetime | None:
        """The period an attempt of ``owner`` (``ping <rid>``) was ever claimed for, newest
        first; None when that run id never started one."""
        row = self.conn.execute(
            self._q("ping_started"), {"job_id": job_id, "key": key, "owner": owner}
        ).fetchone()
        return None if row is None else row[0]
