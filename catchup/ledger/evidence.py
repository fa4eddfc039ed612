"""A job's evidence query (what the job left behind), on the ledger's database or on the job's
``evidence_dsn``: its column's type, its values in a window, and the check of those values
against the ledger's rows. The query is the user's own SQL, used as a subquery; every value
catchup adds goes in as a parameter."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
from psycopg import sql

from .. import sqlfiles
from ..errors import ConfigError
from .base import LedgerBase

# how long one evidence query may take before the scan reports it as that job's error
EVIDENCE_TIMEOUT = "30s"
# the column types evidence may have, by the snippet that turns them into instants
KINDS = {
    "date": "evidence_date",
    "timestamp": "evidence_timestamp",
    "timestamptz": "evidence_timestamptz",
}


class EvidenceQuery:
    """One job's evidence query on ``conn`` (the ledger's connection, or one to its
    ``evidence_dsn``)."""

    def __init__(self, conn: psycopg.Connection[Any], text: str, zone: str, schema: str) -> None:
        self.conn = conn
        # the user's text is SQL, not a value: braces are literal, and % is not a placeholder
        self.evidence = sql.SQL(text.replace("%", "%%"))
        self.zone = zone
        self.schema = schema

    @contextmanager
    def read_only(self) -> Iterator[None]:
        with self.conn.transaction():
            self.conn.execute(sqlfiles.query("evidence_begin", self.schema))
            self.conn.execute(
                sqlfiles.query("evidence_timeout", self.schema), {"timeout": EVIDENCE_TIMEOUT}
            )
            yield

    def kind(self) -> str:
        """The column's type name (date, timestamp or timestamptz); a ConfigError otherwise."""
        probe = sqlfiles.query_naming("evidence_probe", self.schema, evidence=self.evidence)
        cur = self.conn.execute(probe)
        columns = cur.description or []
        if len(columns) != 1:
            raise ConfigError(f"returns {len(columns)} columns; evidence needs exactly one")
        info = psycopg.adapters.types.get(columns[0].type_code)
        name = info.name if info is not None else f"type {columns[0].type_code}"
        if name not in KINDS:
            raise ConfigError(f"returns {name}; evidence needs a date or timestamptz column")
        return name

    def source(self, kind: str) -> tuple[sql.Composed, dict[str, object]]:
        """The bounded subquery of instants, and the parameters it needs but the window."""
        value = sqlfiles.query(KINDS[kind], self.schema)
        composed = sqlfiles.query_naming(
            "evidence_source", self.schema, evidence=self.evidence, value=value
        )
        return composed, {"zone": self.zone}

    def bounds(self, kind: str, lo: datetime, hi: datetime) -> dict[str, object]:
        """``[lo, hi)`` in the column's own type, wide enough to hold every instant in it."""
        if kind == "date":
            local = ZoneInfo(self.zone)
            first = lo.astimezone(local).date()
            last = hi.astimezone(local)
            end = last.date() + (timedelta(0) if last.time() == time(0) else timedelta(days=1))
            return {"elo": first, "ehi": end}
        if kind == "timestamp":
            return {"elo": _naive(lo), "ehi": _naive(hi)}
        return {"elo": lo, "ehi": hi}

    def values(self, kind: str, lo: datetime, hi: datetime) -> list[datetime]:
        """The distinct instants of evidence in ``[lo, hi)``, oldest first (for a check on
        another database's ledger)."""
        source, params = self.source(kind)
        query = sqlfiles.query_naming("evidence_values", self.schema, source=source)
        rows = self.conn.execute(query, {**params, **self.bounds(kind, lo, hi)}).fetchall()
        return [row[0] for row in rows]

    def present(self, kind: str, lo: datetime, hi: datetime) -> bool:
        """Whether any evidence falls in ``[lo, hi)``."""
        source, params = self.source(kind)
        query = sqlfiles.query_naming("evidence_present", self.schema, source=source)
        row = self.conn.execute(
            query, {**params, **self.bounds(kind, lo, hi), "lo": lo, "hi": hi}
        ).fetchone()
        return bool(row and row[0])


class EvidenceCheck(LedgerBase):
    """The ledger's side: which rows have no evidence, which evidence has no row."""

    def evidence_check(
        self,
        job_id: int,
        lo: datetime,
        hi: datetime,
        *,
        query: EvidenceQuery | None = None,
        kind: str = "timestamptz",
        values: list[datetime] | None = None,
    ) -> list[tuple[str, datetime]]:
        """(state, instant) oldest first: ``untracked`` evidence values no row holds, and the
        starts of ``unverified`` succeeded rows. The evidence is ``query`` run here (the
        ledger's database) or ``values`` read elsewhere."""
        params: dict[str, object] = {"job_id": job_id, "lo": lo, "hi": hi}
        if query is not None:
            source, extra = query.source(kind)
            params |= extra | query.bounds(kind, lo, hi)
        else:
            source = self._q("evidence_listed")
            params["values"] = values or []
        statement = sqlfiles.query_naming("evidence_check", self.schema, source=source)
        return [(state, t) for state, t in self.conn.execute(statement, params)]


def _naive(t: datetime) -> datetime:
    return t.astimezone(ZoneInfo("UTC")).replace(tzinfo=None)
