"""Alerts in the ledger: the gap ranges already told, and the outbox of posts to deliver."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from .base import LedgerBase

AlertRange = tuple[int, int, str, datetime, datetime, int]  # id, job_id, state, first, last, n


class Alerting(LedgerBase):
    def lock_alerts(self) -> None:
        """Held until the transaction ends: one replica compares and enqueues at a time."""
        self.conn.execute(self._q("lock_alerts"), {"schema": self.schema})

    def open_alert_ranges(self) -> list[AlertRange]:
        rows = self.conn.execute(self._q("open_alert_ranges"))
        return [(a, b, c, d, e, f) for a, b, c, d, e, f in rows]

    def add_alert_range(
        self, job_id: int, state: str, first: datetime, last: datetime, periods: int
    ) -> None:
        params = {"job_id": job_id, "state": state, "first": first, "last": last}
        self.conn.execute(self._q("add_alert_range"), {**params, "periods": periods})

    def update_alert_range(
        self, range_id: int, state: str, first: datetime, last: datetime, periods: int
    ) -> None:
        params = {"id": range_id, "state": state, "first": first, "last": last}
        self.conn.execute(self._q("update_alert_range"), {**params, "periods": periods})

    def close_alert_range(self, range_id: int) -> None:
        self.conn.execute(self._q("close_alert_range"), {"id": range_id})

    def enqueue_alert(self, webhook: str, body: dict[str, Any]) -> None:
        self.conn.execute(self._q("enqueue_alert"), {"webhook": webhook, "body": Jsonb(body)})

    def alerts_sent_lately(self) -> dict[str, int]:
        return {name: n for name, n in self.conn.execute(self._q("alerts_sent_lately"))}

    def take_alert(self, webhook: str) -> tuple[int, dict[str, Any], int] | None:
        row = self.conn.execute(self._q("take_alert"), {"webhook": webhook}).fetchone()
        return None if row is None else (row[0], row[1], row[2])

    def alert_delivered(self, alert_id: int) -> None:
        self.conn.execute(self._q("alert_delivered"), {"id": alert_id})

    def alert_failed(self, alert_id: int, error: str) -> None:
        self.conn.execute(self._q("alert_failed"), {"id": alert_id, "error": error})

    def alert_failure(
        self, job_id: int, first: datetime, last: datetime, key: str | None
    ) -> tuple[str, datetime, str | None, str | None] | None:
        """The newest failure of ``job_id`` in ``[first, last]`` (of ``key``): its key, period,
        error and the end of its output tail; None when none failed there."""
        params = {"job_id": job_id, "first": first, "last": last, "key": key}
        row = self.conn.execute(self._q("alert_failure"), params).fetchone()
        return None if row is None else (row[0], row[1], row[2], row[3])
