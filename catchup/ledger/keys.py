"""A keyed job's keys: the user's keys query (on the ledger's database or the job's
``keys_dsn``), the key history the ledger keeps, and the scan of each (key, period)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row

from ..errors import ConfigError
from ..scan.targets import KeyRange, KeyRow
from . import sqlfiles
from .base import LedgerBase
from .evidence import bound, fenced

# how long one keys query may take, and how many keys it may return
KEYS_TIMEOUT = 30.0  # seconds
MAX_KEYS = 10_000_000
# an index probe for one (key, period) costs about what reading this many of a job's rows in a
# merge does (benchmarks/keys.py: 4.5 us against 0.15 us): below that share of unverified
# periods, a scan probes for holes instead of reading every row
HOLE_PROBE_COST = 30
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
    timeout = KEYS_TIMEOUT
    with fenced(conn, schema, timeout):  # nothing it changes outlives it
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
        bound(conn, schema, timeout)  # the probe cannot have lifted it
        rows = conn.execute(query, {"zone": zone, "limit": MAX_KEYS + 1}).fetchall()
    if len(rows) > MAX_KEYS:
        raise ConfigError(f"returns more than {MAX_KEYS:,} keys")
    return [(key, since) for key, since in rows], kind is not None


def _spans(
    lowers: list[datetime] | None, uppers: list[datetime] | None
) -> tuple[tuple[datetime, datetime], ...] | None:
    """What scans verified of a key (its multirange's bounds) as (lower, upper) pairs."""
    if lowers is None or uppers is None:
        return None
    return tuple(zip(lowers, uppers, strict=True))


class Keys(LedgerBase):
    """The ledger's side of keys: their history, and the scan of (key, period)."""

    def key_history(self, job_id: int) -> list[KeyRow]:
        # binary: the bounds' arrays read several times faster than as text
        with self.conn.cursor(binary=True) as cur:
            rows = cur.execute(self._q("key_history"), {"job_id": job_id}).fetchall()
        # verified comes as its ranges' lower and upper bounds: (lower, upper) pairs
        return [
            KeyRow(key, since, first, last, gone, paused, _spans(lowers, uppers))
            for key, since, first, last, gone, paused, lowers, uppers in rows
        ]

    def record_keys(
        self,
        job_id: int,
        seen: Sequence[tuple[str, datetime | None]],
        *,
        start: datetime,
    ) -> None:
        """Record one read of the job's keys, under the job's row lock, its key rows locked in
        key order first (as :meth:`record_verified` locks those it updates)."""
        with self.conn.transaction():
            self.conn.execute(self._q("lock_job_row"), {"job_id": job_id})
            self.conn.execute(self._q("lock_key_rows"), {"job_id": job_id, "keys": None})
            self.conn.execute(
                self._q("record_keys"),
                {
                    "job_id": job_id,
                    "keys": [k for k, _ in seen],
                    "froms": [f for _, f in seen],
                    "start": start,
                },
            )

    def record_verified(
        self,
        job_id: int,
        signature: str,
        state: tuple[str, int] | None,
        verified: Sequence[tuple[str, Sequence[tuple[datetime, datetime]]]],
    ) -> bool:
        """Record what scans verified of each key (all its ranges of period starts with a row
        each), unless rows were removed since this scan's snapshot (the job's generation
        moved); for other schedules than those recorded, the old ranges are forgotten first.
        False when nothing was recorded."""
        params: dict[str, object] = {"job_id": job_id, "signature": signature}
        try:
            with self.conn.transaction():
                if state is None:
                    if self.conn.execute(self._q("open_scan_state"), params).fetchone() is None:
                        return False  # created meanwhile, perhaps by a deletion
                else:
                    current = self.conn.execute(self._q("lock_scan_state"), params).fetchone()
                    if current is None or current[1] != state[1]:
                        return False  # rows were removed since the scan's snapshot
                    if current[0] != signature:  # every key row: locked in key order first
                        self.conn.execute(self._q("lock_key_rows"), {**params, "keys": None})
                        self.conn.execute(self._q("forget_verified"), params)
                spans = [(key, lo, hi) for key, ranges in verified for lo, hi in ranges]
                if spans:
                    keys = sorted({key for key, _, _ in spans})  # in key order, as record_keys
                    self.conn.execute(self._q("lock_key_rows"), {"job_id": job_id, "keys": keys})
                    self.conn.execute(
                        self._q("record_verified"),
                        {
                            **params,
                            "keys": [key for key, _, _ in spans],
                            "los": [lo for _, lo, _ in spans],
                            "his": [hi for _, _, hi in spans],
                        },
                    )
        except psycopg.errors.InsufficientPrivilege:
            return False
        return True

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
        stretches: Sequence[tuple[str, int, int]],
        *,
        now: datetime,
        max_attempts: int,
    ) -> list[KeyRange]:
        """Each key's ranges of periods that have not succeeded, oldest first; holes (no row)
        are looked for only in ``stretches`` (a key, and ``[i0, i1)`` of 0-based indexes of
        ``periods``)."""
        if not keys or not periods:
            return []
        params = {
            "job_id": job_id,
            "keys": [k.key for k in keys],
            "froms": [k.expected_from for k in keys],
            "gones": [k.gone_at for k in keys],
            "ukeys": [key for key, _, _ in stretches],
            "i0s": [i0 + 1 for _, i0, _ in stretches],  # WITH ORDINALITY counts from 1
            "i1s": [i1 + 1 for _, _, i1 in stretches],
            "first": periods[0][0],
            "until": periods[-1][1],
            "starts": [s for s, _ in periods],
            "ends": [e for _, e in periods],
            "now": now,
            "max_attempts": max_attempts,
        }
        # a probe per unverified period costs about as much as reading 30 of the job's rows
        unverified = sum(i1 - i0 for _, i0, i1 in stretches)
        few = unverified * HOLE_PROBE_COST < len(keys) * len(periods)
        holes = sqlfiles.query("scan_holes_probed" if few else "scan_holes_merged", self.schema)
        query = sqlfiles.query_naming("scan_keys", self.schema, holes=holes)
        with self.conn.cursor(row_factory=class_row(KeyRange)) as cur:
            return cur.execute(query, params).fetchall()
