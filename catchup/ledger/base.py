"""The ledger's base: the connection and schema, migrations, the database clock, the jobs and
their recorded schedules. Every statement of catchup goes through a method of
:class:`catchup.ledger.Ledger` (this class and its parts) and comes back as a typed row."""

from __future__ import annotations

import contextlib
import threading
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import pq
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from ..claims.failover import Failover, Moved
from ..errors import DatabaseError, Unconfirmed
from ..schedule import iso_utc
from ..schedule.reconcile import Reconciliation, Recorded
from ..vocabulary import EventAction
from . import sqlfiles
from .rows import JobRow


def settle_session(conn: psycopg.Connection[Any]) -> None:
    """Put ``conn`` in UTC, ISO dates and postgres intervals, whatever the server, database or
    role set: sent by every connection catchup makes, before anything else."""
    conn.execute(sqlfiles.query("settle_session", "catchup"))


def server_role(conn: psycopg.Connection[Any]) -> tuple[bool, bool]:
    """Whether the server behind ``conn`` is in recovery (a standby), and whether it is
    read-only by default: asked by every ledger connection before anything else is sent."""
    row = conn.execute(sqlfiles.query("server_role", "catchup")).fetchone()
    assert row is not None
    return bool(row[0]), bool(row[1])


class LedgerBase:
    """The ledger in ``schema``, through one autocommit connection: the schema and the jobs."""

    def __init__(
        self, conn: psycopg.Connection[Any], schema: str, *, durable: bool = False
    ) -> None:
        self.conn = conn
        self.schema = schema
        # [database] durable_claims: claims and finishes commit once a synchronous standby
        # has applied them (synchronous_commit = remote_apply, for their transaction only)
        self.durable = durable

    def _committing(self, bound: timedelta | None = None) -> AbstractContextManager[Any]:
        """Around a claim or a finish: with ``durable``, a transaction of its own (or the
        caller's) whose commit waits for the synchronous standby; else nothing. ``bound`` (a
        claim's lease): a commit the standby did not confirm by then raises
        :class:`Unconfirmed` (the claim is committed on the primary only, and is not used)."""
        return _Durable(self, bound) if self.durable else contextlib.nullcontext()

    def _q(self, name: str) -> psycopg.sql.Composed:
        return sqlfiles.query(name, self.schema)

    def holds_jobs(self, names: list[str]) -> bool:
        """This schema already keeps a ledger for one of ``names``."""
        try:
            row = self.conn.execute(self._q("ledger_holds_jobs"), {"names": names}).fetchone()
        except (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName):
            return False
        return bool(row and row[0])

    def create_database(self, name: str) -> bool:
        """CREATE DATABASE ``name``; False when another process made it first."""
        try:
            self.conn.execute(sqlfiles.query_naming("create_database", self.schema, database=name))
        except pg_errors.DuplicateDatabase:
            return False
        except pg_errors.UniqueViolation as exc:
            # two processes creating it at the same moment: the loser meets the catalog's own
            # unique index rather than the "already exists" check
            if exc.diag.constraint_name != "pg_database_datname_index":
                raise
            return False
        return True

    # -- schema ------------------------------------------------------------------------------

    def only_read(self) -> None:
        """Every later transaction of this connection read-only: a write is the server's error."""
        self.conn.execute(self._q("only_reads"))

    def version(self) -> int:
        """The applied schema version; 0 when the schema does not exist yet."""
        try:
            row = self.conn.execute(self._q("schema_version")).fetchone()
        except (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName):
            return 0
        return int(row[0]) if row else 0

    def ensure_schema(self) -> list[str]:
        """Apply pending migrations, if any; returns the names applied."""
        latest = max(v for v, _, _ in sqlfiles.migrations())
        if self.version() >= latest:
            return []
        return self.migrate()

    def declare_durable(self) -> bool:
        """With durable_claims: the server's timeline takes durable claims only, so a failover
        from it opens no suspect window (sql/migrations/0021). True: declared now."""
        row = self.conn.execute(self._q("declare_durable")).fetchone()
        return bool(row and row[0])

    def note_timeline(self) -> Moved | None:
        """Record the server's timeline if it is new to the ledger (sql/migrations/0021): the
        move this session was the first to see, or None."""
        row = self.conn.execute(self._q("note_timeline")).fetchone()
        if row is None or not row[4]:
            return None
        return Moved(row[0], Failover(row[0], row[1], row[2]) if row[3] else None)

    def transaction(self) -> AbstractContextManager[Any]:
        """One transaction around several of these calls (a mark, a reset, a pause)."""
        return self.conn.transaction()

    def migrate(self, through: int | None = None) -> list[str]:
        """Apply pending migrations (up to ``through``: a ledger as an older catchup left it,
        for tests and benchmarks) in one transaction, serialised across processes."""
        applied = []
        with self.conn.transaction():
            self.conn.execute(self._q("unbounded_here"))  # a pooler may have lost the session's
            self.conn.execute(self._q("lock_migrations"), {"schema": self.schema})
            self._create_schema()
            current = self.version()
            for version, name, text in sqlfiles.migrations():
                if version <= current or (through is not None and version > through):
                    continue
                self.conn.execute(sqlfiles.migration(text, self.schema))
                self.conn.execute(self._q("record_migration"), {"version": version, "name": name})
                applied.append(name)
        return applied

    def _create_schema(self) -> None:
        """The schema, when it is not there yet (a role that owns only its schema may not
        create one), and its migrations' table."""
        row = self.conn.execute(self._q("schema_exists"), {"schema": self.schema}).fetchone()
        if row is None or not row[0]:
            self.conn.execute(self._q("create_schema"))
        self.conn.execute(self._q("create_schema_version"))

    # -- jobs --------------------------------------------------------------------------------

    def register_jobs(self, names: list[str]) -> dict[str, JobRow]:
        """Give every job a stable id (created on first sight); returns them by name."""
        self.conn.execute(self._q("register_jobs"), {"names": names})
        return self.job_rows(names)

    def schedules(self, job_ids: list[int]) -> dict[int, tuple[datetime | None, list[Recorded]]]:
        """Each job's recorded start and schedules, oldest first."""
        found: dict[int, tuple[datetime | None, list[Recorded]]] = {}
        for job_id, start, since, text, zone in self.conn.execute(
            self._q("job_schedules"), {"job_ids": job_ids}
        ):
            rows = found.setdefault(job_id, (start, []))[1]
            if since is not None:
                rows.append(Recorded(since, text, zone))
        return found

    def record_schedule(
        self, job_id: int, decide: Any, start: datetime, actor: str
    ) -> Reconciliation:
        """Bring the job's recorded schedule and start in line with its config, under a row lock
        so replicas that notice one change at once record it once. ``decide(recorded, now)``
        gives the :class:`~catchup.schedule.reconcile.Reconciliation` for the rows as they are
        now."""
        with self.conn.transaction():
            self.conn.execute(self._q("lock_job_row"), {"job_id": job_id})
            recorded_start, rows = self.schedules([job_id]).get(job_id, (None, []))
            now = self.now()
            chosen: Reconciliation = decide(rows, now)
            if chosen.drop_after is not None:
                self.conn.execute(
                    self._q("drop_schedules"), {"job_id": job_id, "after": chosen.drop_after}
                )
            if chosen.add is not None:
                self.conn.execute(
                    self._q("add_schedule"),
                    {
                        "job_id": job_id,
                        "since": chosen.add.since,
                        "schedule": chosen.add.schedule,
                        "timezone": chosen.add.timezone,
                        "actor": actor,
                    },
                )
                if chosen.previous is not None:
                    old, new = chosen.previous, chosen.add
                    self._change(
                        job_id,
                        EventAction.schedule,
                        new.since,
                        f"{old.schedule} ({old.timezone})",
                        f"{new.schedule} ({new.timezone}) from {iso_utc(new.since)}",
                        actor,
                    )
            if recorded_start != start:
                if recorded_start is not None:
                    self._change(
                        job_id,
                        EventAction.start,
                        start,
                        iso_utc(recorded_start),
                        f"start {iso_utc(start)}",
                        actor,
                    )
                self.conn.execute(self._q("set_job_start"), {"job_id": job_id, "start": start})
        return chosen

    def _change(
        self,
        job_id: int,
        action: EventAction,
        since: datetime,
        previous: str,
        now_is: str,
        actor: str,
    ) -> None:
        self.conn.execute(
            self._q("record_change"),
            {
                "job_id": job_id,
                "since": since,
                "action": action,
                "previous": previous,
                "now_is": now_is,
                "actor": actor,
            },
        )

    def record_definition(self, job_id: int, project: str, definition: dict[str, object]) -> bool:
        """Record ``project`` as defining the job, as ``definition``; False when another
        project holds it."""
        row = self.conn.execute(
            self._q("record_definition"),
            {"job_id": job_id, "project": project, "definition": Jsonb(definition)},
        ).fetchone()
        return row is not None

    def job_rows(self, names: list[str]) -> dict[str, JobRow]:
        """The jobs already known to the ledger, by name; writes nothing."""
        with self.conn.cursor(row_factory=class_row(JobRow)) as cur:
            return {row.name: row for row in cur.execute(self._q("job_ids"), {"names": names})}

    def _instant(self, name: str, params: dict[str, Any] | None = None) -> datetime:
        """The one timestamptz a statement returns."""
        row = self.conn.execute(self._q(name), params).fetchone()
        if row is None or not isinstance(row[0], datetime):
            raise DatabaseError(f"{name}: expected a time from the server, got {row!r}")
        return row[0]

    def now(self) -> datetime:
        """The database clock: every time decision of catchup is made on it."""
        return self._instant("server_now")


class _Durable:
    """A transaction whose commit waits for the synchronous standby to apply it (SET LOCAL: a
    pooler in transaction mode keeps it to this transaction, nothing leaks to the session).
    Inside a transaction of the caller's, only the setting: the caller's commit waits.

    With a ``bound``, a commit still waiting then is cancelled (statement_timeout cannot do
    it: the server turns it off before a commit): the server stops waiting, commits locally
    and warns (SQLSTATE 01000, "canceling wait for synchronous replication"), and the claim
    is :class:`Unconfirmed`. A cancel that lands after the commit finds the backend idle,
    and the server ignores it."""

    def __init__(self, ledger: LedgerBase, bound: timedelta | None) -> None:
        self._ledger = ledger
        self._bound = bound
        self._tx: AbstractContextManager[Any] | None = None

    def __enter__(self) -> None:
        conn = self._ledger.conn
        if conn.info.transaction_status == pq.TransactionStatus.IDLE:
            self._tx = conn.transaction()
            self._tx.__enter__()
        conn.execute(self._ledger._q("durable_commit"))

    def __exit__(self, *exc: Any) -> bool | None:
        if self._tx is None:
            return None
        conn = self._ledger.conn
        heard: list[pg_errors.Diagnostic] = []

        def hear(notice: pg_errors.Diagnostic) -> None:
            if notice.sqlstate == "01000":
                heard.append(notice)

        committing = threading.Lock()
        state = {"done": False}

        def cancel() -> None:
            with committing:
                if not state["done"]:
                    with contextlib.suppress(psycopg.Error):
                        conn.cancel_safe(timeout=5.0)

        timer = None
        bound = self._bound.total_seconds() if self._bound is not None else None
        if bound is not None and exc[0] is None:
            timer = threading.Timer(bound, cancel)
            timer.daemon = True
        conn.add_notice_handler(hear)
        try:
            if timer is not None:
                timer.start()
            swallowed = self._tx.__exit__(*exc)
        finally:
            with committing:
                state["done"] = True
            if timer is not None:
                timer.cancel()
            conn.remove_notice_handler(hear)
        if heard and timer is not None:
            raise Unconfirmed(
                "the synchronous standby did not confirm the claim within its lease "
                f"({bound:g}s): it is committed on the primary only, "
                "and a failover could lose it; not started"
            )
        return swallowed
