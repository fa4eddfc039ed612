"""A keyed job's keys: the user's keys query (on the ledger's database or the job's
``keys_dsn``), the key history the ledger keeps, and the scan of each (key, period)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row

from .. import sqlfiles
from ..errors import ConfigError
from ..targets import KeyRange, KeyRow
from .base import LedgerBase

# how long one keys query may take, and how many keys it may return
KEYS_TIMEOUT = "30s"
MAX_KEYS = 10_000_000
SINCE_KINDS = {
    None: "keys_since_none",
    "date": "keys_since_date",
    "timestamp": "keys_since_timestamp",
    "timestamptz": "keys_since_timestamptz",
}


def read_keys(
    conn: psycopg.Connection[Any], text: str, zone: str, schema: str
) -> tuple[list[tuple[str, datetime | None]], bool]:
    """The keys query's rows (key, from when expected), in a read-only transaction with a
    statement timeout; and whether it has the second, dated column. A ConfigError says what is
    wrong with its columns or its size."""
    keys = sql.SQL(text.replace("%", "%%"))  # the user's SQL: % is not a placeholder
    with conn.transaction():
        conn.execute(sqlfiles.query("evidence_begin", schema))
        conn.execute(sqlfiles.query("evidence_timeout", schema), {"timeout": KEYS_TIMEOUT})
        columns = conn.execute(sqlfiles.query_naming("keys_probe", schema, keys=keys)).description
        columns = columns or []
        if len(columns) not in (1, 2):
            raise ConfigError(
                f"returns {len(columns)} columns; keys needs a key column and, optionally, "
                "a date or timestamp column (from when the key is expected)"
            )
        kind = None
        if len(columns) == 2:
            info = psycopg.adapters.types.get(columns[1].type_code)
            kind = info.name if info is not None else f"type {columns[1].type_code}"
            if kind not in SINCE_KINDS:
                raise ConfigError(f"its second column is {kind}; it must be a date or timestamp")
        query = sqlfiles.query_naming(
            "keys_read",
            schema,
            keys=keys,
            names=sql.SQL("(key, since)" if kind else "(key)"),
            since=sqlfiles.query(SINCE_KINDS[kind], schema),
        )
        rows = conn.execute(query, {"zone": zone, "limit": MAX_KEYS + 1}).fetchall()
    if len(rows) > MAX_KEYS:
        raise ConfigError(f"returns more than {MAX_KEYS:,} keys")
    return [(key, since) for key, since in rows], kind is not None


class Keys(LedgerBase):
    """The ledger's side of keys: their history, and the scan of (key, period)."""

    def key_history(self, job_id: int) -> list[KeyRow]:
        with self.conn.cursor(row_factory=class_row(KeyRow)) as cur:
            return cur.execute(self._q("key_history"), {"job_id": job_id}).fetchall()

    def record_keys(
        self,
        job_id: int,
        seen: Sequence[tuple[str, datetime | None]],
        *,
        start: datetime,
    ) -> None:
        """Record one read of the job's keys, under the job's row lock."""
        with self.conn.transaction():
            self.conn.execute(self._q("lock_job_row"), {"job_id": job_id})
            self.conn.execute(
                self._q("record_keys"),
                {
                    "job_id": job_id,
                    "keys": [k for k, _ in seen],
                    "froms": [f for _, f in seen],
                    "start": start,
                },
            )

    def pause_key(self, job_id: int, key: str) -> datetime | None:
        row = self.conn.execute(self._q("pause_key"), {"job_id": job_id, "key": key}).fetchone()
        return None if row is None else row[0]

    def key_paused(self, job_id: int, key: str) -> datetime | None:
        """Since when one key of a job is paused; None when it is not."""
        row = self.conn.execute(self._q("key_paused"), {"job_id": job_id, "key": key}).fetchone()
        return None if row is None else row[0]

    def resume_key(self, job_id: int, key: str) -> bool:
        row = self.conn.execute(self._q("resume_key"), {"job_id": job_id, "key": key}).fetchone()
        return row is not None

    def scan_keys(
        self,
        job_id: int,
        keys: Sequence[KeyRow],
        periods: Sequence[tuple[datetime, datetime]],
        *,
        now: datetime,
        max_attempts: int,
    ) -> list[KeyRange]:
        """Each key's ranges of periods that have not succeeded, oldest first."""
        if not keys or not periods:
            return []
        params = {
            "job_id": job_id,
            "keys": [k.key for k in keys],
            "froms": [k.expected_from for k in keys],
            "gones": [k.gone_at for k in keys],
            "starts": [s for s, _ in periods],
            "ends": [e for _, e in periods],
            "now": now,
            "max_attempts": max_attempts,
        }
        with self.conn.cursor(row_factory=class_row(KeyRange)) as cur:
            return cur.execute(self._q("scan_keys"), params).fetchall()
