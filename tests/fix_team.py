"""A team's PostgreSQL, as a DBA sets one up, on the test server: a database whose defaults are
not catchup's (``DateStyle = 'SQL, DMY'``, ``IntervalStyle = 'sql_standard'``, a
``search_path`` that finds a decoy schema first, holding tables and functions named like
catchup's), roles that may only connect (no CREATE on the database, no superuser, no
CREATEDB) with a DBA's limits for people's sessions (statement, lock and idle-in-transaction
timeouts), each in a zone of its own (``America/Los_Angeles``, with
DST; ``Etc/UTC``, Debian's and most containers' default), and for each test a schema the DBA
made and gave the role (``CREATE SCHEMA … AUTHORIZATION``): all the role owns."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fix_db import Database, drop_schema
from fix_project import Project
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

TEAM_DATABASE = "catchup_team"
ZONES = {"la": "America/Los_Angeles", "etc": "Etc/UTC"}
TEAM_ROLE = "la"  # the role the whole suite runs as under CATCHUP_TEST_TEAM
# what a careful DBA gives roles people use (catchup's sessions lift them: a scan of years may
# take longer). Not a serializable default: behind a transaction-mode pooler that keeps no
# session setting of catchup's, its claims' one statement would take its snapshot before the
# job's lock, and two periods of an overlap-forbidden job could run at once (the how-to says
# so); the tests that need one set it themselves (serializable_role)
LIMITS = (
    ("statement_timeout", "2s"),
    ("lock_timeout", "1s"),
    ("idle_in_transaction_session_timeout", "2s"),
)

# what a DBA might have in the way: objects named like catchup's, earlier in the search_path
_DECOYS = """
CREATE SCHEMA IF NOT EXISTS decoy;
CREATE TABLE IF NOT EXISTS decoy.runs (job_id bigint, period_start timestamptz);
CREATE TABLE IF NOT EXISTS decoy.jobs (id bigint, name text);
CREATE TABLE IF NOT EXISTS decoy.schema_version (version integer, name text);
CREATE OR REPLACE FUNCTION decoy.claim_period(VARIADIC anyarray) RETURNS void
    LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the decoy claim_period was called'; END $$;
GRANT USAGE ON SCHEMA decoy TO PUBLIC;
GRANT SELECT ON ALL TABLES IN SCHEMA decoy TO PUBLIC;
"""


@dataclass(frozen=True)
class Team:
    """The team's database: the DBA's conninfo, and each role's (by ZONES' key)."""

    admin: str = field(repr=False)
    roles: dict[str, str] = field(repr=False)

    def dsn(self, zone: str) -> str:
        return self.roles[zone]

    def role(self, zone: str) -> str:
        return f"team_{zone}"

    def grant_page(self, schema: str) -> None:
        """What a DBA grants the page's read-only role: the ledger's tables, to read."""
        name = sql.Identifier(schema)
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO team_page").format(name))
            conn.execute(
                sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO team_page").format(name)
            )


def setup(admin_server: str) -> Team:
    """The team's database and roles, made or made again (the same passwords: each is drawn
    from the server's own, so a Team made earlier in the run stays good)."""
    secret = str(conninfo_to_dict(admin_server).get("password") or "")
    with psycopg.connect(admin_server, autocommit=True) as conn:
        if not conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [TEAM_DATABASE]
        ).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEAM_DATABASE)))
        db = sql.Identifier(TEAM_DATABASE)
        conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(db))
        for setting, value in (
            ("DateStyle", "SQL, DMY"),
            ("IntervalStyle", "sql_standard"),
            ("search_path", 'decoy, "$user", public'),
            ("TimeZone", "Asia/Kolkata"),  # the database's own; each role overrides it
        ):
            conn.execute(
                sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                    db, sql.Identifier(setting), sql.Literal(value)
                )
            )
        roles = {}
        for zone, name in ZONES.items():
            role = sql.Identifier(f"team_{zone}")
            password = hashlib.sha256(f"{secret}/{zone}".encode()).hexdigest()[:32]
            exists = conn.execute(
                "SELECT 1 FROM pg_roles WHERE rolname = %s", [f"team_{zone}"]
            ).fetchone()
            verb = "ALTER" if exists else "CREATE"
            conn.execute(
                sql.SQL(
                    verb + " ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD {}"
                ).format(role, sql.Literal(password))
            )
            # the role's settings as this says, nothing left from an earlier run's
            conn.execute(sql.SQL("ALTER ROLE {} RESET ALL").format(role))
            conn.execute(sql.SQL("ALTER ROLE {} SET TimeZone = {}").format(role, sql.Literal(name)))
            for setting, value in LIMITS:  # a DBA's limits for people's sessions
                conn.execute(
                    sql.SQL("ALTER ROLE {} SET {} = {}").format(
                        role, sql.Identifier(setting), sql.Literal(value)
                    )
                )
            conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(db, role))
            roles[zone] = make_conninfo(
                admin_server, dbname=TEAM_DATABASE, user=f"team_{zone}", password=password
            )
        roles["page"] = _page_role(conn, secret, admin_server)
    admin = make_conninfo(admin_server, dbname=TEAM_DATABASE)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        conn.execute(_DECOYS)
    return Team(admin, roles)


def _server(admin: str) -> str:
    """The DBA's conninfo to the server's first database (the team's is made from it)."""
    return make_conninfo(admin, dbname="postgres")


def _page_role(conn: psycopg.Connection[Any], secret: str, admin_server: str) -> str:
    """``team_page``: SELECT only, read-only by default (``[serve] dsn``'s kind of role); a test
    grants it its schema's tables (``Team.grant_page``)."""
    password = hashlib.sha256(f"{secret}/page".encode()).hexdigest()[:32]
    role = sql.Identifier("team_page")
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'team_page'").fetchone()
    verb = "ALTER" if exists else "CREATE"
    conn.execute(
        sql.SQL(verb + " ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD {}").format(
            role, sql.Literal(password)
        )
    )
    conn.execute(sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(role))
    conn.execute(
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(TEAM_DATABASE), role)
    )
    return make_conninfo(admin_server, dbname=TEAM_DATABASE, user="team_page", password=password)


@pytest.fixture(scope="session")
def team(database: Database) -> Team:
    """The team's database and roles on the test server (made once per run)."""
    return setup(database.superuser if not database.owner else _server(database.admin))


@pytest.fixture(params=sorted(ZONES))
def team_zone(request: pytest.FixtureRequest) -> str:
    """Each of the team's roles in turn: ``la`` (America/Los_Angeles) and ``etc`` (Etc/UTC)."""
    return str(request.param)


@pytest.fixture
def team_schema(team: Team, team_zone: str) -> Iterator[str]:
    """A schema the DBA made for this test and gave the role: all the role owns."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(team.admin, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                sql.Identifier(name), sql.Identifier(team.role(team_zone))
            )
        )
    try:
        yield name
    finally:
        drop_schema(team.admin, name)


@pytest.fixture
def team_project(tmp_path: Path, team: Team, team_zone: str, team_schema: str) -> Project:
    """A project whose ledger is the role's schema on the team's database (``CATCHUP_DSN``)."""
    dsn = team.dsn(team_zone)
    return Project(tmp_path, team_schema, Database(dsn, {"CATCHUP_DSN": dsn}))


@contextmanager
def serializable_role(team: Team, role: str) -> Iterator[None]:
    """``role``'s sessions serializable by default while it lasts (new sessions only)."""
    name = sql.Identifier(role)
    with psycopg.connect(team.admin, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER ROLE {} SET default_transaction_isolation = 'serializable'").format(name)
        )
    try:
        yield
    finally:
        with psycopg.connect(team.admin, autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER ROLE {} RESET default_transaction_isolation").format(name))
