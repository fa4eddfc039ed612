"""A job's evidence query (what the job left behind), on the ledger's database or on the job's
``evidence_dsn``: its column's type, its values in some ranges of time, and the check of those
values against the ledger's rows. The query is the user's own SQL, used as a subquery; every
value catchup adds goes in as a parameter."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
from psycopg import sql
from psycopg.rows import class_row

from ..errors import ConfigError
from . import sqlfiles
from .base import LedgerBase, settle_session
from .rows import EvidenceState

# how long one evidence query may take before the scan reports it as that job's error, in s
EVIDENCE_TIMEOUT = 30.0
# the column types evidence may have, by the snippet that turns them into instants
KINDS = {
    "date": "evidence_date",
    "timestamp": "evidence_timestamp",
    "timestamptz": "evidence_timestamptz",
}
UTC = ZoneInfo("UTC")
Range = tuple[datetime, datetime]


@contextmanager
def fenced(conn: psycopg.Connection[Any], schema: str, timeout: float) -> Iterator[None]:
    """Around the user's SQL (a keys or evidence query): a read-only transaction, bounded by
    ``timeout`` seconds, that is always rolled back, so a setting the query changed for the
    session (``set_config(…, false)``: read-only by default, a timeout, a search path) is undone
    with it; then ``DISCARD ALL`` (what a rollback keeps: advisory locks, cursors held) and the
    session settled again, so the connection the claim path uses next is as it was opened.
    The bound is the server's statement timeout, set before each statement, and a cancel this
    process sends when it has passed: SQL the planner runs (a function that lies that it is
    immutable) can lift the first, never the second."""
    watch = _Watchdog(conn, timeout)
    try:
        with conn.transaction(force_rollback=True):
            conn.execute(sqlfiles.query("evidence_begin", schema))
            bound(conn, schema, timeout)
            yield
    except psycopg.errors.QueryCanceled:
        if watch.stop():  # ours: said as the timeout it is
            raise psycopg.errors.QueryCanceled(f"ran longer than {timeout:g} s") from None
        raise
    finally:
        watch.stop()
        idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        if idle and not conn.closed and not conn.broken:
            conn.execute(sqlfiles.query("evidence_discard", schema))
            settle_session(conn)  # UTC, ISO dates: what every catchup connection is put in


class _Watchdog:
    """Cancels what ``conn`` runs once ``timeout`` seconds have passed, unless stopped first;
    the cancel is sent under a lock that :meth:`stop` takes, so none is sent after it."""

    def __init__(self, conn: psycopg.Connection[Any], timeout: float) -> None:
        self.conn, self.fired, self.done = conn, False, False
        self.lock = threading.Lock()
        self.timer = threading.Timer(timeout, self._fire)
        self.timer.daemon = True
        self.timer.start()

    def _fire(self) -> None:
        with self.lock:
            if not self.done:
                self.fired = True
                self.conn.cancel_safe(timeout=5)

    def stop(self) -> bool:
        """No cancel from now on; whether one was sent."""
        with self.lock:
            self.done = True
        self.timer.cancel()
        return self.fired


def bound(conn: psycopg.Connection[Any], schema: str, timeout: float) -> None:
    """The statement timeout set (again) before one of the user's statements: the statement
    before cannot have lifted it."""
    said = f"{round(timeout * 1000)}ms"
    conn.execute(sqlfiles.query("evidence_timeout", schema), {"timeout": said})


class EvidenceQuery:
    """One job's evidence query on ``conn`` (the ledger's connection, or one to its
    ``evidence_dsn``)."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        text: str,
        zone: str,
        schema: str,
        keyed: bool = False,
    ) -> None:
        self.conn = conn
        # the user's text is SQL, not a value: braces are literal, and % is not a placeholder
        self.evidence = sql.SQL(text.replace("%", "%%"))
        self.zone = zone
        self.schema = schema
        # a keyed job's evidence: two columns, the key and the date (or timestamp)
        self.keyed = keyed

    @contextmanager
    def read_only(self) -> Iterator[None]:
        with fenced(self.conn, self.schema, EVIDENCE_TIMEOUT):
            yield

    def bound(self) -> None:
        """Its timeout set again, before each statement that holds it."""
        bound(self.conn, self.schema, EVIDENCE_TIMEOUT)

    def kind(self) -> str:
        """The column's type name (date, timestamp or timestamptz); a ConfigError otherwise."""
        probe = sqlfiles.query_naming("evidence_probe", self.schema, evidence=self.evidence)
        self.bound()
        cur = self.conn.execute(probe, {})  # with parameters (none): the user's %% is %
        columns = cur.description or []
        wanted = 2 if self.keyed else 1
        if len(columns) != wanted:
            needs = "two (the key, then a date)" if self.keyed else "exactly one"
            raise ConfigError(f"returns {len(columns)} columns; evidence needs {needs}")
        info = psycopg.adapters.types.get(columns[-1].type_code)
        name = info.name if info is not None else f"type {columns[-1].type_code}"
        if name not in KINDS:
            which = "its second column" if self.keyed else "evidence needs"
            raise ConfigError(f"returns {name}; {which} a date or timestamptz column")
        return name

    def _source(self, kind: str, lo: sql.Composable, hi: sql.Composable) -> sql.Composed:
        return sqlfiles.query_naming(
            "evidence_source_keys" if self.keyed else "evidence_source",
            self.schema,
            evidence=self.evidence,
            value=sqlfiles.query(KINDS[kind], self.schema),
            elo=lo,
            ehi=hi,
        )

    def ranged(self, kind: str, ranges: Sequence[Range]) -> tuple[sql.Composed, dict[str, object]]:
        """The evidence in ``ranges`` (period starts, oldest first, not overlapping), as a
        subquery of instants ``v``, and its parameters."""
        source = self._source(kind, sql.SQL("x.elo"), sql.SQL("x.ehi"))
        query = sqlfiles.query_naming("evidence_ranged", self.schema, source=source)
        bounds = [self.bounds(kind, lo, hi) for lo, hi in ranges]
        return query, {
            "zone": self.zone,
            "los": [lo for lo, _ in ranges],
            "his": [hi for _, hi in ranges],
            "elos": [b[0] for b in bounds],
            "ehis": [b[1] for b in bounds],
        }

    def bounds(self, kind: str, lo: datetime, hi: datetime) -> tuple[object, object]:
        """``[lo, hi)`` in the column's own type, wide enough to hold every instant in it."""
        if kind == "date":
            local = ZoneInfo(self.zone)
            last = hi.astimezone(local)
            end: date = last.date() + timedelta(days=0 if last.time() == time(0) else 1)
            return lo.astimezone(local).date(), end
        if kind == "timestamp":
            return lo.astimezone(UTC).replace(tzinfo=None), hi.astimezone(UTC).replace(tzinfo=None)
        return lo, hi

    def values(self, kind: str, ranges: Sequence[Range]) -> list[datetime]:
        """The distinct instants of evidence in ``ranges``, oldest first (to be checked on
        another database's ledger)."""
        ranged, params = self.ranged(kind, ranges)
        query = sqlfiles.query_naming("evidence_values", self.schema, ranged=ranged)
        self.bound()
        return [row[0] for row in self.conn.execute(query, params)]

    def present(self, kind: str, lo: datetime, hi: datetime, key: str = "") -> bool:
        """Whether any evidence (of ``key``, for a keyed job's) falls in ``[lo, hi)``."""
        source = self._source(kind, sql.Placeholder("elo"), sql.Placeholder("ehi"))
        name = "evidence_present_key" if self.keyed else "evidence_present"
        query = sqlfiles.query_naming(name, self.schema, source=source)
        elo, ehi = self.bounds(kind, lo, hi)
        params = {"zone": self.zone, "elo": elo, "ehi": ehi, "lo": lo, "hi": hi, "key": key}
        self.bound()
        row = self.conn.execute(query, params).fetchone()
        return bool(row and row[0])

    def window(self, kind: str, lo: datetime, hi: datetime) -> tuple[sql.Composed, dict[str, Any]]:
        """A keyed job's evidence in ``[lo, hi)`` as a subquery of (k, v), and its parameters."""
        source = self._source(kind, sql.Placeholder("elo"), sql.Placeholder("ehi"))
        query = sqlfiles.query_naming("evidence_window", self.schema, source=source)
        elo, ehi = self.bounds(kind, lo, hi)
        return query, {"zone": self.zone, "elo": elo, "ehi": ehi, "lo": lo, "hi": hi}

    def pairs(self, kind: str, lo: datetime, hi: datetime) -> list[tuple[str, datetime]]:
        """A keyed job's (key, instant) pairs of evidence in ``[lo, hi)`` (to be checked on
        another database's ledger)."""
        window, params = self.window(kind, lo, hi)
        query = sqlfiles.query_naming("evidence_pairs", self.schema, window=window)
        self.bound()
        return [(k, v) for k, v in self.conn.execute(query, params)]


class EvidenceCheck(LedgerBase):
    """The ledger's side: which rows have no evidence, which evidence has no row, and what
    earlier scans verified."""

    def evidence_check(
        self,
        job_id: int,
        ranges: Sequence[Range],
        *,
        query: EvidenceQuery | None = None,
        kind: str = "timestamptz",
        values: list[datetime] | None = None,
    ) -> list[tuple[str, datetime]]:
        """(state, instant) oldest first in ``ranges``: ``untracked`` evidence values no row
        holds, and the starts of ``unverified`` succeeded rows. The evidence is ``query`` run
        here (the ledger's database) or ``values`` read elsewhere."""
        if not ranges:
            return []
        params: dict[str, object] = {
            "job_id": job_id,
            "los": [lo for lo, _ in ranges],
            "his": [hi for _, hi in ranges],
        }
        if query is not None:
            source, extra = query.ranged(kind, ranges)
            params |= extra
            query.bound()
        else:
            source = self._q("evidence_listed")
            params["values"] = values or []
        statement = sqlfiles.query_naming("evidence_check", self.schema, source=source)
        return [(state, t) for state, t in self.conn.execute(statement, params)]

    def evidence_check_keys(
        self,
        job_id: int,
        lo: datetime,
        hi: datetime,
        keys: Sequence[str],
        *,
        query: EvidenceQuery | None = None,
        kind: str = "timestamptz",
        pairs: list[tuple[str, datetime]] | None = None,
    ) -> list[tuple[str, str, datetime]]:
        """:meth:`evidence_check` of a keyed job, key by key, over ``[lo, hi)``: (state, key,
        instant) of ``keys`` only, by key and time. The evidence is ``query`` run here or the
        ``pairs`` read elsewhere."""
        params: dict[str, Any] = {"job_id": job_id, "lo": lo, "hi": hi, "keys": list(keys)}
        if query is not None:
            source, extra = query.window(kind, lo, hi)
            params |= extra
            query.bound()
        else:
            source = self._q("evidence_listed_keys")
            params["ks"] = [k for k, _ in pairs or []]
            params["vs"] = [v for _, v in pairs or []]
        statement = sqlfiles.query_naming("evidence_check_keys", self.schema, source=source)
        return [(state, k, t) for state, k, t in self.conn.execute(statement, params)]

    def evidence_states(self, job_ids: list[int]) -> dict[int, EvidenceState]:
        with self.conn.cursor(row_factory=class_row(EvidenceState)) as cur:
            rows = cur.execute(self._q("evidence_states"), {"job_ids": job_ids}).fetchall()
        return {row.job_id: row for row in rows}

    def evidence_changed(
        self, job_id: int, lo: datetime, hi: datetime, verified_at: datetime
    ) -> list[Range]:
        """A job's rows in ``[lo, hi)`` that finished after ``verified_at`` (or run now)."""
        params = {"job_id": job_id, "lo": lo, "hi": hi, "verified_at": verified_at}
        return [(a, b) for a, b in self.conn.execute(self._q("evidence_changed"), params)]

    def record_evidence_state(self, state: EvidenceState) -> None:
        self.conn.execute(
            self._q("record_evidence_state"),
            {
                "job_id": state.job_id,
                "signature": state.signature,
                "verified_until": state.verified_until,
                "verified_at": state.verified_at,
            },
        )
