"""The test database: the embedded PostgreSQL in ``.catchup-test/`` (or ``CATCHUP_TEST_HOME``), or
the server at ``CATCHUP_TEST_DSN``; a schema per test; servers of a test's own.

Every test gets a schema of its own, so tests never see each other's ledgers. When the server
cannot be reached the whole run stops at once instead of failing every test.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import psycopg.sql
import pytest
from paths import ROOT
from psycopg.conninfo import make_conninfo


def reachable_place(path: Path) -> Path:
    """``path``, or where the tests keep it instead when the embedded server's user (root
    runs it as a user of its own) cannot reach it: a checkout in a 0700 folder (``mktemp -d``)
    is refused by catchup, which never opens a folder to everyone. Then a folder of the same
    name under /var/tmp/catchup-tests/, one per checkout."""
    import hashlib

    from catchup.postgres import embedded, processes

    user = processes.server_user()  # root: made now if need be, as catchup itself would
    if user is None or embedded.unreachable(path, user) is None:
        return path
    base = Path("/var/tmp/catchup-tests")
    base.mkdir(mode=0o755, exist_ok=True)
    base.chmod(0o755)
    digest = hashlib.sha256(str(path.parent).encode()).hexdigest()[:12]
    folder = base / digest
    folder.mkdir(mode=0o755, exist_ok=True)
    return folder / path.name


TEST_HOME = reachable_place(
    Path(os.environ.get("CATCHUP_TEST_HOME") or ROOT / ".catchup-test").resolve()
)


# What catchup sets on each of its connections (sql/queries/base.sql: settle_session), for the
# tests' own connections to a team's database (CATCHUP_TEST_TEAM)
SETTLED = (
    "-c TimeZone=UTC -c DateStyle=ISO,MDY -c IntervalStyle=postgres -c statement_timeout=0"
    " -c lock_timeout=0 -c idle_in_transaction_session_timeout=0"
    " -c default_transaction_isolation=read\\ committed"
)


@dataclass(frozen=True)
class Database:
    conninfo: str = field(repr=False)  # its password is never printed, not even by a test
    env: dict[str, str] = field(repr=False)  # what a child needs to reach the same server
    # CATCHUP_TEST_TEAM: the suite runs as a role that owns only its schema, on a database set
    # up as a team's (fix_team): the DBA's conninfo to the same database, and that role
    admin: str = field(default="", repr=False)
    owner: str = ""

    @property
    def superuser(self) -> str:
        """A conninfo to the same database that may do anything (the DBA's, in team mode)."""
        return self.admin or self.conninfo


@pytest.fixture(scope="session")
def database() -> Iterator[Database]:
    explicit = os.environ.get("CATCHUP_TEST_DSN")
    if explicit:
        env = {"CATCHUP_DSN": explicit}
        conninfo = explicit
        started = False
    else:
        os.environ["CATCHUP_HOME"] = str(TEST_HOME)
        for name in ("CATCHUP_DSN", "DATABASE_URL", "PGHOST", "PGDATABASE", "PGUSER", "PGPORT"):
            os.environ.pop(name, None)
        from catchup.postgres import embedded

        TEST_HOME.mkdir(exist_ok=True)
        try:
            server = embedded.ensure_running()
        except Exception as exc:  # the whole run depends on it
            pytest.exit(f"cannot start the embedded PostgreSQL: {exc}", returncode=3)
        conninfo = server.conninfo
        env = {"CATCHUP_HOME": str(TEST_HOME)}
        started = True
    try:
        with psycopg.connect(conninfo, connect_timeout=10) as conn:
            conn.execute("select 1")
    except psycopg.Error as exc:
        pytest.exit(f"test database unreachable: {exc}", returncode=3)
    if os.environ.get("CATCHUP_TEST_TEAM"):
        from fix_team import TEAM_ROLE, setup

        team = setup(conninfo)
        role = team.dsn(TEAM_ROLE)
        # the tests' own connections read times as catchup's do; catchup gets the role as is
        own = make_conninfo(role, options=SETTLED)
        yield Database(own, {"CATCHUP_DSN": role}, team.admin, team.role(TEAM_ROLE))
    else:
        yield Database(conninfo, env)
    if started and not os.environ.get("CATCHUP_TEST_KEEP_SERVER"):
        from catchup.postgres import embedded

        embedded.stop()


@contextmanager
def throwaway_schema(database: Database) -> Iterator[str]:
    """A schema name of this test's own, dropped (with all in it) when the test ends."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    if database.owner:  # as a DBA hands one out: made for the role, all it owns
        with psycopg.connect(database.admin, autocommit=True) as conn:
            conn.execute(
                psycopg.sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                    psycopg.sql.Identifier(name), psycopg.sql.Identifier(database.owner)
                )
            )
    try:
        yield name
    finally:
        drop_schema(database.superuser, name)


def schema_made(sql: Callable[..., list[tuple[Any, ...]]], schema: str) -> None:
    """The test's schema made where it is not there yet (where the team keeps its tenants, in a
    test), asking first: a role that owns only its schema may not run CREATE SCHEMA IF NOT
    EXISTS, which needs CREATE on the database even when the schema is there."""
    if not sql("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema]):
        sql("CREATE SCHEMA {schema}")


def nothing_written(database: Database, schema: str) -> bool:
    """Nothing of a ledger in ``schema``: catchup never made it, or, where a DBA made it for the
    role (a team's database: CATCHUP_TEST_TEAM), not one table is in it."""
    with psycopg.connect(database.superuser) as conn:
        row = conn.execute(
            "SELECT count(DISTINCT n.oid), count(c.oid) FROM pg_namespace n"
            " LEFT JOIN pg_class c ON c.relnamespace = n.oid WHERE n.nspname = %s",
            [schema],
        ).fetchone()
    assert row is not None
    schemas, relations = row
    return schemas == 0 or (bool(database.owner) and relations == 0)


def waits_holding_only_the_first(
    other: psycopg.Connection[Any], pid: int, lock: Any, job_id: int, rest: list[str]
) -> None:
    """Wait (bounded) until the backend ``pid`` waits for a lock, then check that it holds
    none of the key rows ``rest`` of ``job_id``: ``other`` takes each at once (``lock``: a
    SELECT ... FOR UPDATE of one key row, by job and key)."""
    from fix_processes import wait_for

    def waiting() -> bool:
        found = other.execute(
            "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
        ).fetchone()
        other.rollback()
        return found is not None and found[0] == "Lock"

    wait_for(waiting, timeout=30, what="the read to wait for the held row")
    for key in rest:
        other.execute(lock + psycopg.sql.SQL(" NOWAIT"), [job_id, key])
        other.rollback()


def drop_schema(conninfo: str, name: str) -> None:
    """Drop ``name`` with all in it, within a bound: a connection a failed test left open in
    a transaction (a worker thread still running, say) would hold the DROP, and with it the
    whole run, for ever. Such connections are ended, and the DROP tried again."""
    drop = psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(psycopg.sql.Identifier(name))
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=30) as conn:
        conn.execute("SET lock_timeout = '10s'")
        for _ in range(5):
            try:
                conn.execute(drop)
                return
            except psycopg.errors.LockNotAvailable:
                conn.execute(
                    "SELECT pg_terminate_backend(l.pid) FROM pg_locks l"
                    " LEFT JOIN pg_class c ON c.oid = l.relation"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace"
                    "  OR (l.classid = 'pg_namespace'::regclass AND l.objid = n.oid)"
                    " WHERE n.nspname = %s AND l.pid <> pg_backend_pid()",
                    (name,),
                )
        conn.execute(drop)


@pytest.fixture
def schema(database: Database) -> Iterator[str]:
    with throwaway_schema(database) as name:
        yield name


def reachable(path: Path) -> Path:
    """``path`` (a test's own folder) and the folders above it opened for search (o+x): as
    root, the embedded server's user must reach a home below it, and catchup itself refuses to
    open a folder to everyone for that."""
    import stat

    for folder in [path, *path.parents]:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXOTH)
    return path


# Homes of the embedded servers tests start of their own: beside the project, not in pytest's
# tmp, which is 0700 (the server's user could not reach it) and whose mode another pytest
# session may reset at any moment.
HOMES = reachable_place(ROOT / ".catchup-test-homes")


@contextmanager
def own_home() -> Iterator[Path]:
    """An empty CATCHUP_HOME that the server's user can reach, removed after."""
    import shutil
    import tempfile

    HOMES.mkdir(exist_ok=True)
    HOMES.chmod(0o755)
    folder = Path(tempfile.mkdtemp(dir=HOMES))
    folder.chmod(0o755)
    home = folder / "home"
    home.mkdir()
    try:
        yield home
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def server_home() -> Iterator[Path]:
    """An empty CATCHUP_HOME of this test's own that the server's user can reach."""
    with own_home() as home:
        yield home


@pytest.fixture
def private_server(server_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An embedded server of this test's own, to stop and restart at will."""
    from catchup.postgres import embedded

    monkeypatch.setenv("CATCHUP_HOME", str(server_home))
    server = embedded.ensure_running()
    yield server.conninfo
    embedded.stop()


@pytest.fixture
def ledger(database: Database, schema: str) -> Iterator[Any]:
    """The test's schema as a migrated :class:`catchup.ledger.Ledger` on a connection of its own."""
    from catchup.ledger import Ledger

    conn = psycopg.connect(database.conninfo, autocommit=True)
    ledger = Ledger(conn, schema)
    ledger.migrate()
    yield ledger
    conn.close()


@pytest.fixture
def sql(database: Database, schema: str) -> Iterator[Callable[..., list[tuple[Any, ...]]]]:
    """Run a statement against the test database with ``{schema}`` bound; returns the rows."""
    conn = psycopg.connect(database.conninfo, autocommit=True)

    def run(text: str, params: Any = None) -> list[tuple[Any, ...]]:
        query = psycopg.sql.SQL(text).format(schema=psycopg.sql.Identifier(schema))  # type: ignore[arg-type, unused-ignore]
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []

    yield run
    conn.close()


def pytest_report_header(config: pytest.Config) -> str:
    if os.environ.get("CATCHUP_TEST_TEAM"):
        return "catchup: a team's database (fix_team), as a role that owns only its schema"
    if os.environ.get("CATCHUP_TEST_DSN"):
        return "catchup: CATCHUP_TEST_DSN"
    from catchup.postgres import embedded

    bins = embedded.bin_dir()
    return f"catchup: embedded PostgreSQL {embedded.major_version(bins)} from {bins}"


def ledger_contents(sql: Any, schema: str) -> dict[str, str]:
    """Every table of the test's schema as one digest each: what a refusal must leave alone."""
    tables = sql("SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", [schema])
    assert len(tables) > 5
    out = {}
    for (table,) in tables:
        name = psycopg.sql.Identifier(schema, table).as_string(None)
        ((digest,),) = sql(
            f"SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM {name} t"
        )
        out[table] = digest
    return out
