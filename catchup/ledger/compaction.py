"""Compaction's statements (``sql/queries/compaction.sql``): a batch of one job, what one
would drop, how far behind it is, a compacted period's record; the ledger's size."""

from __future__ import annotations

from datetime import datetime

from psycopg.rows import class_row

from ..maintenance.retention import BatchDone, Behind, CompactedRun, Plan, TableSize
from .base import LedgerBase


class Compaction(LedgerBase):
    def compact_batch(self, job_id: int, before: datetime, limit: int) -> BatchDone:
        """One batch of ``job_id``'s runs finished before ``before``, in a transaction of its
        own; ``through`` is None when another process holds the job's turn."""
        params = {"schema": self.schema, "job_id": job_id, "before": before, "limit": limit}
        with self.conn.transaction():
            turn = self.conn.execute(self._q("compaction_turn"), params).fetchone()
            if not (turn and turn[0]):
                return BatchDone(0, 0, 0, None)
            self.conn.execute(self._q("compaction_lock"), params)
            with self.conn.cursor(row_factory=class_row(BatchDone)) as cur:
                row = cur.execute(self._q("compact_batch"), params).fetchone()
        assert row is not None
        return row

    def compaction_plan(self, job_id: int, before: datetime) -> Plan:
        params = {"job_id": job_id, "before": before}
        with self.conn.cursor(row_factory=class_row(Plan)) as cur:
            row = cur.execute(self._q("compaction_plan"), params).fetchone()
        assert row is not None
        return row

    def compaction_behind(self, job_id: int, before: datetime) -> Behind:
        params = {"job_id": job_id, "before": before}
        with self.conn.cursor(row_factory=class_row(Behind)) as cur:
            row = cur.execute(self._q("compaction_behind"), params).fetchone()
        assert row is not None
        return row

    def compacted_run(self, job_id: int, key: str, start: datetime) -> CompactedRun | None:
        """The compact record of one period, if its detail was compacted."""
        params = {"job_id": job_id, "key": key, "period_start": start}
        with self.conn.cursor(row_factory=class_row(CompactedRun)) as cur:
            return cur.execute(self._q("compacted_run"), params).fetchone()

    def compaction_totals(self, job_id: int) -> tuple[int, datetime | None]:
        """How many of the job's periods were compacted, and when last."""
        row = self.conn.execute(self._q("compaction_totals"), {"job_id": job_id}).fetchone()
        return (0, None) if row is None else (int(row[0]), row[1])

    def table_sizes(self) -> list[TableSize]:
        with self.conn.cursor(row_factory=class_row(TableSize)) as cur:
            return cur.execute(self._q("ledger_tables"), {"schema": self.schema}).fetchall()

    def oldest_detail(self) -> datetime | None:
        row = self.conn.execute(self._q("oldest_detail")).fetchone()
        return None if row is None else row[0]
