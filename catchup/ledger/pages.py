"""What the status page and ``catchup ps`` read beside a scan: the periods running now, on
every host, and each job's failures that still stand."""

from __future__ import annotations

from psycopg.rows import class_row

from .base import LedgerBase
from .rows import FailureRow, RunningRow


class Pages(LedgerBase):
    def running_periods(self, limit: int) -> list[RunningRow]:
        """Every running period (at most ``limit``, oldest claim first), with the database
        clock's now."""
        with self.conn.cursor(row_factory=class_row(RunningRow)) as cur:
            return cur.execute(self._q("running_periods"), {"limit": limit}).fetchall()

    def standing_failures(
        self, names: list[str], per_job: int, tail_chars: int
    ) -> list[FailureRow]:
        """The newest ``per_job`` failed periods of each of ``names``, with the last attempt's
        error and the last ``tail_chars`` characters of its output tail."""
        params = {"names": names, "per_job": per_job, "tail_chars": tail_chars}
        with self.conn.cursor(row_factory=class_row(FailureRow)) as cur:
            return cur.execute(self._q("standing_failures"), params).fetchall()
