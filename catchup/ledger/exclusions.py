"""Windows recorded afterwards (``catchup exclude``): spans of a job's periods nobody expected,
recorded, undone (the rows kept), and read for the scan and the claim path."""

from __future__ import annotations

from datetime import datetime

from psycopg.rows import class_row

from .base import LedgerBase
from .rows import WindowRow


class Exclusions(LedgerBase):
    def record_exclusion(
        self, job_id: int, key: str | None, lo: datetime, hi: datetime, reason: str, actor: str
    ) -> int | None:
        """A live window of ``job_id`` (of ``key``; None: every key) over ``[lo, hi)``; None
        when that window is recorded and live already."""
        params = {
            "job_id": job_id,
            "key": key,
            "lo": lo,
            "hi": hi,
            "reason": reason,
            "actor": actor,
        }
        row = self.conn.execute(self._q("record_exclusion"), params).fetchone()
        return None if row is None else int(row[0])

    def undo_exclusions(
        self, job_id: int, key: str | None, lo: datetime, hi: datetime, reason: str, actor: str
    ) -> list[WindowRow]:
        """The live windows of ``job_id`` (of ``key``) within ``[lo, hi)``, undone."""
        params = {
            "job_id": job_id,
            "key": key,
            "lo": lo,
            "hi": hi,
            "reason": reason,
            "actor": actor,
        }
        rows = self.conn.execute(self._q("undo_exclusions"), params).fetchall()
        return [WindowRow(job_id, key, *row) for row in rows]

    def live_exclusions(self, spans: list[tuple[int, datetime, datetime]]) -> list[WindowRow]:
        """The live windows meeting each (job id, lo, hi), every key's, oldest first."""
        if not spans:
            return []
        params = {
            "job_ids": [s[0] for s in spans],
            "los": [s[1] for s in spans],
            "his": [s[2] for s in spans],
        }
        with self.conn.cursor(row_factory=class_row(WindowRow)) as cur:
            return cur.execute(self._q("live_exclusions"), params).fetchall()

    def exclusion_at(self, job_id: int, key: str, start: datetime) -> WindowRow | None:
        """The live window the period of ``job_id`` (of ``key``) starting at ``start`` falls
        in, or None."""
        params = {"job_id": job_id, "key": key, "start": start}
        with self.conn.cursor(row_factory=class_row(WindowRow)) as cur:
            return cur.execute(self._q("exclusion_at"), params).fetchone()

    def excluded_among(self, periods: list[tuple[int, str, datetime]]) -> set[int]:
        """The indexes (from 0) of the periods (job id, key, start) a live window excludes."""
        if not periods:
            return set()
        params = {
            "job_ids": [p[0] for p in periods],
            "keys": [p[1] for p in periods],
            "starts": [p[2] for p in periods],
        }
        return {int(row[0]) - 1 for row in self.conn.execute(self._q("excluded_among"), params)}
