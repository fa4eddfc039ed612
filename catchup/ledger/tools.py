"""Statements that are not about the ledger's periods: the doctor's probes, the embedded
server's bootstrap, and the demo's and benchmarks' (``sql/queries/tools.sql``)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.rows import class_row

from . import sqlfiles
from .base import LedgerBase


@dataclass(frozen=True)
class Standbys:
    """The standbys the ledger's server streams to (doctor, durable_claims)."""

    names: str  # synchronous_standby_names ('' : every standby is asynchronous)
    synchronous: int  # streaming now as sync or quorum standbys
    streaming: int  # every standby streaming now
    unseen: int  # of those, whose state this role may not read (no pg_read_all_stats)


@dataclass(frozen=True)
class Privileges:
    """What the ledger's role may do, as doctor reports it."""

    role: str
    superuser: bool
    create_databases: bool
    create_schemas: bool  # CREATE on the database: may make a schema that is not there yet
    schema_present: bool
    owns_schema: bool
    read_all_stats: bool  # pg_read_all_stats (pg_monitor has it): the standbys' state


@dataclass(frozen=True)
class Probe:
    """What doctor asks the server: its clock, its port, this backend's pid."""

    now: datetime
    port: int
    pid: int


class Tools(LedgerBase):
    # -- doctor ----------------------------------------------------------------------------

    def probe(self) -> Probe:
        """The server's clock, the port it listens on and this backend's pid."""
        with self.conn.cursor(row_factory=class_row(Probe)) as cur:
            row = cur.execute(self._q("doctor_probe")).fetchone()
        assert row is not None
        return row

    def standbys(self) -> Standbys:
        """What the server says of its standbys: synchronous_standby_names, and how many
        stream from it, synchronously or not (or unseen: a role without pg_read_all_stats)."""
        with self.conn.cursor(row_factory=class_row(Standbys)) as cur:
            row = cur.execute(self._q("standbys")).fetchone()
        assert row is not None
        return row

    def privileges(self) -> Privileges:
        """What the ledger's role may do, and whether it owns the ledger's schema."""
        with self.conn.cursor(row_factory=class_row(Privileges)) as cur:
            row = cur.execute(self._q("role_privileges"), {"schema": self.schema}).fetchone()
        assert row is not None
        return row

    def timeline_durable(self) -> bool | None:
        """Whether the server's timeline is durable: declared by a session with durable_claims
        (True), a claim on it did not wait for a synchronous standby (False), or neither yet."""
        row = self.conn.execute(self._q("timeline_durable")).fetchone()
        return None if row is None or row[0] is None else bool(row[0])

    def commit_probe(self, *, durable: bool) -> float:
        """Seconds one small commit takes (it takes a transaction id, so it writes a commit
        record): as a claim commits with durable_claims, or as one commits without."""
        was, self.durable = self.durable, durable
        try:
            started = time.perf_counter()
            with self._committing(), self.conn.transaction():
                self.conn.execute(self._q("commit_probe"))
            return time.perf_counter() - started
        finally:
            self.durable = was

    def zone_walls(
        self, zones: list[str], instants: list[datetime]
    ) -> list[tuple[str, datetime, datetime]]:
        """The server's local time in each zone at each instant (its time zone database)."""
        rows = self.conn.execute(self._q("zone_walls"), {"zones": zones, "instants": instants})
        return [(zone, t, wall) for zone, t, wall in rows]

    # -- the embedded server ------------------------------------------------------------------

    def set_password(self, secret: str) -> None:
        """Give the embedded server's superuser a password (then require it)."""
        self.conn.execute(
            sqlfiles.query_naming("set_password", self.schema, password=sql.Literal(secret))
        )

    def reload_conf(self) -> None:
        self.conn.execute(self._q("reload_conf"))

    def lock_project_databases(self) -> None:
        """Until this connection closes, no other process finds, moves or creates a project's
        database on this server."""
        self.conn.execute(self._q("lock_project_databases"))

    def database_exists(self, name: str) -> bool:
        row = self.conn.execute(self._q("database_exists"), {"name": name}).fetchone()
        return bool(row and row[0])

    def server_databases(self) -> list[str]:
        """The server's databases a ledger could be in (no templates), by name."""
        return [str(row[0]) for row in self.conn.execute(self._q("server_databases"))]

    def carries_project(self, project: str) -> bool:
        """This database's ledger (in this schema) has a job the project ``project`` defined;
        False where there is no ledger, or one from before jobs recorded their project."""
        try:
            row = self.conn.execute(self._q("carries_project"), {"project": project}).fetchone()
        except (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName, pg_errors.UndefinedColumn):
            return False
        return bool(row and row[0])

    def rename_database(self, name: str, renamed: str) -> bool:
        """ALTER DATABASE ``name`` RENAME TO ``renamed``; False while anyone is connected to it
        (then nothing changed)."""
        try:
            self.conn.execute(
                sqlfiles.query_naming(
                    "rename_database", self.schema, database=name, renamed=renamed
                )
            )
        except pg_errors.ObjectInUse:
            return False
        return True

    # -- the demo and the benchmarks (sql/queries/tools.sql) ----------------------------------

    def demo_fill(self, params: dict[str, Any]) -> None:
        self.conn.execute(self._q("demo_fill"), params)

    def demo_fail(self, params: dict[str, Any]) -> None:
        self.conn.execute(self._q("demo_fail"), params)

    def demo_evidence(self, params: dict[str, Any]) -> None:
        self.conn.execute(self._q("demo_evidence_table"))
        self.conn.execute(self._q("demo_evidence"), params)

    def drop_schema(self) -> None:
        """Drop this ledger's schema: only ever the demo's throwaway one."""
        self.conn.execute(self._q("drop_schema"))

    def plain_gaps(self, params: dict[str, Any]) -> list[tuple[datetime, str | None]]:
        """The scan benchmark's reference: every period that is not succeeded, plainly (the
        rows as psycopg returns them, so the reference pays no conversion of ours)."""
        rows = self.conn.execute(self._q("plain_gaps"), params).fetchall()
        return cast(list[tuple[datetime, str | None]], rows)
