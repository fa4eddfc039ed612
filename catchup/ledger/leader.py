"""The scheduler's leader (``catchup scheduler``): take or keep the lead, hand it back, and
who leads now (``sql/queries/leader.sql``, migration 0018)."""

from __future__ import annotations

from datetime import datetime, timedelta

from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from ..scheduler.leadership import Lead, Leader
from .base import LedgerBase

SCOPE = "scheduler"  # the leader row's name: one scheduler per ledger schema


class Leading(LedgerBase):
    def lead(
        self,
        holder: str,
        term: int,
        lease: timedelta,
        lanes: dict[str, tuple[int, int]] | None = None,
    ) -> Lead | None:
        """Take the lead, or keep the ``term`` held (0: none held); the term led after it,
        or None when another holder leads. ``lanes``: each one's workers and how many are
        busy, published with the lead."""
        loads = {name: list(load) for name, load in (lanes or {}).items()}
        params = {"name": SCOPE, "holder": holder, "term": term, "lease": lease}
        params["lanes"] = Jsonb(loads)
        with self.conn.cursor(row_factory=class_row(Lead)) as cur:
            return cur.execute(self._q("lead"), params).fetchone()

    def resign(self, holder: str, term: int) -> bool:
        """Hand the lease of ``term`` back; whether this holder still held it."""
        params = {"name": SCOPE, "holder": holder, "term": term}
        return self.conn.execute(self._q("resign"), params).rowcount == 1

    def leader_now(self) -> Leader | None:
        with self.conn.cursor(row_factory=class_row(Leader)) as cur:
            return cur.execute(self._q("leader_now"), {"name": SCOPE}).fetchone()

    def next_retry(self, job_ids: list[int], owner: str) -> datetime | None:
        """When the soonest backoff of a failed period of these jobs ends (after now), or
        the lease of a period that another than ``owner`` runs."""
        params = {"job_ids": job_ids, "owner": owner}
        row = self.conn.execute(self._q("next_retry"), params).fetchone()
        return None if row is None else row[0]
