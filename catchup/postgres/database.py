"""Which database to use, connecting to it, and keeping its schema current."""

from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ConfigError, DatabaseError, first_line
from .dsn import hidden
from .dsn import redact as redact
from .projectdb import project_database_name as project_database_name  # tests import it here

if TYPE_CHECKING:
    import psycopg

    from ..config.job import Project
    from .projectdb import Found

# Imports inside functions: at first use: reading a DSN or a config never loads the driver
# nor the ledger.

MIN_SERVER_VERSION = 170000
BUSY_RETRY_SECONDS = 15.0  # the default of CATCHUP_CONNECT_RETRY
BUSY_RETRY_MOST = 3600.0


def busy_retry_seconds() -> float:
    """How long a connect waits for a busy server (``CATCHUP_CONNECT_RETRY``, in seconds, 0 to
    3600); a ConfigError that says so when the variable is not such a number."""
    given = os.environ.get("CATCHUP_CONNECT_RETRY")
    if given is None:
        return BUSY_RETRY_SECONDS
    try:
        seconds = float(given)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds <= BUSY_RETRY_MOST:
        raise ConfigError(
            f"CATCHUP_CONNECT_RETRY: expected seconds from 0 to {BUSY_RETRY_MOST:.0f}, "
            f"like 15, got {given[:40]!r}"
        )
    return seconds


BUSY_SIGNS = (
    "too many clients",  # 53300: max_connections exhausted
    "remaining connection slots are reserved",
    "the database system is starting up",
    "the database system is shutting down",
    "the database system is in recovery mode",
    # the server went away mid-handshake: a crash or a restart under way
    "server closed the connection unexpectedly",
)
PG_ENV = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE")


@dataclass(frozen=True)
class Target:
    """A resolved database: the conninfo to use, where it came from, and a safe description."""

    conninfo: str
    source: str
    embedded_data: str | None = None
    note: str | None = None  # said once, on the line that names the database
    database: str | None = None  # on the embedded server: which database holds the ledger
    relocated: bool = False  # the project's ledger was moved to it now (note says so)

    def __post_init__(self) -> None:
        object.__setattr__(self, "conninfo", hidden(self.conninfo))  # repr: no password

    def describe(self) -> str:
        if self.embedded_data is not None:
            where = f", database {self.database}" if self.database else ""
            return f"embedded PostgreSQL in {self.embedded_data}{where}"
        return f"{redact(self.conninfo)} (from {self.source})"


# What a DSN that does not parse is told, keyed by the start of psycopg's message: the message
# itself often quotes the DSN, password and all, so it is never printed.
_PARSE_PROBLEMS = (
    ("unexpected spaces", "it has spaces (percent-encode them as %20)"),
    ("invalid percent-encoded", "it has an invalid percent-encoded character"),
    ("end of string reached when looking for matching", "an IPv6 host's [ is never closed"),
    ("unterminated quoted string", "a quoted value is never closed"),
    ('missing "="', "it is neither a postgresql:// URL nor key=value pairs"),
    ("invalid connection option", "it names an unknown connection option"),
    ("invalid URI query parameter", "it names an unknown connection option"),
)
EMBEDDED_SETTINGS = ("auto", "never")


DURABLE_SETTINGS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def durable_claims(configured: bool) -> bool:
    """Whether claims and finishes wait for a synchronous standby: ``CATCHUP_DURABLE_CLAIMS``
    (true or false) over ``[database] durable_claims``."""
    given = os.environ.get("CATCHUP_DURABLE_CLAIMS")
    if given is None or not given.strip():
        return configured
    setting = DURABLE_SETTINGS.get(given.strip().lower())
    if setting is None:
        raise ConfigError(f"CATCHUP_DURABLE_CLAIMS: expected true or false, got {given[:20]!r}")
    return setting


def dsn_problem(value: str) -> str | None:
    """Why ``value`` cannot be a DSN, in words that never repeat any of it; None if it parses."""
    from psycopg.conninfo import conninfo_to_dict

    if not value.strip():
        return "it is empty (leave it out to use the next source, or give a DSN)"
    scheme = value.split("://", 1)[0] if "://" in value else None
    if scheme is not None and scheme.lower() not in ("postgresql", "postgres"):
        return f"{scheme[:20]!r} is not a PostgreSQL URL (postgresql://user@host:5432/db)"
    try:
        conninfo_to_dict(value)
    except Exception as exc:
        text = str(exc)
        for start, said in _PARSE_PROBLEMS:
            if text.startswith(start):
                return f"cannot parse it: {said}"
        return "cannot parse it as a postgresql:// URL or key=value pairs"
    return None


def resolve(
    flag_dsn: str | None,
    config_dsn: str | None,
    *,
    embedded_allowed: bool = True,
    project: Project | None = None,
    start_embedded: bool = True,
) -> Target:
    """``--dsn`` > ``CATCHUP_DSN`` > ``[database] dsn`` > ``DATABASE_URL`` > ``PG*`` > embedded.

    A DSN given but empty, or one that does not parse, is a usage error (never a reason to fall
    back to a local server); the embedded fallback is refused with ``CATCHUP_EMBEDDED=never``
    or ``[database] embedded = false`` (``embedded_allowed``).

    On the embedded server a ``project`` (see :attr:`Config.project`) gets a database of its
    own, so two projects on one host never share jobs by accident, and named after its
    ``[project] name`` when it has one, so two folders of one project share one ledger. Without
    ``start_embedded`` a stopped embedded server is an error, not started (``serve``
    reconnecting after ``catchup postgres stop``)."""
    for value, source in (
        (flag_dsn, "--dsn"),
        (os.environ.get("CATCHUP_DSN"), "CATCHUP_DSN"),
        (config_dsn, "catchup.toml [database] dsn"),
        (os.environ.get("DATABASE_URL"), "DATABASE_URL"),
    ):
        if value is None:
            continue
        problem = dsn_problem(value)
        if problem is not None:
            raise ConfigError(f"{source}: {problem}")
        return Target(value, source)
    present = [name for name in PG_ENV if os.environ.get(name)]
    if present:
        return Target("", "/".join(present))
    setting = os.environ.get("CATCHUP_EMBEDDED", "auto").strip().lower() or "auto"
    if setting not in EMBEDDED_SETTINGS:
        raise ConfigError(
            f"CATCHUP_EMBEDDED: {setting[:20]!r} is not one of {', '.join(EMBEDDED_SETTINGS)}"
        )
    if setting == "never" or not embedded_allowed:
        why = "CATCHUP_EMBEDDED=never" if setting == "never" else "[database] embedded = false"
        raise ConfigError(
            f"no database configured, and the embedded server is refused ({why}): set --dsn, "
            "CATCHUP_DSN, [database] dsn or DATABASE_URL"
        )
    from . import embedded
    from .processes import SERVER_USER

    if not start_embedded and embedded.running(embedded.data_dir(embedded.bin_dir())) is None:
        raise DatabaseError(
            "the embedded server is stopped (catchup postgres stop?); serve waits for it and "
            "never starts it again itself: `catchup postgres start`"
        )
    server = embedded.ensure_running()
    note = None
    if server.started:
        note = "started it"
        if server.copied is not None:
            note += (
                f"; copied PostgreSQL's binaries to {server.copied}, where its user "
                f"{SERVER_USER} can run them"
            )
    found = _project_database(server.conninfo, project) if project else None
    database, said = (found.database, found.note) if found else (None, None)
    conninfo = server.conninfo
    if database is not None:
        from psycopg.conninfo import make_conninfo

        conninfo = make_conninfo(conninfo, dbname=database)
    note = "; ".join(n for n in (note, said) if n) or None
    return Target(
        conninfo,
        "embedded",
        embedded_data=str(server.data),
        note=note,
        database=database,
        relocated=found is not None and found.relocated,
    )


def _project_database(conninfo: str, project: Project) -> Found:
    """The database that holds this project's ledger on the embedded server, and what finding
    it did (see :mod:`catchup.postgres.projectdb`); one line, without the password, when it
    fails."""
    import psycopg

    from .projectdb import find

    try:
        return find(conninfo, project)
    except psycopg.OperationalError as exc:
        raise DatabaseError(
            f"cannot connect to the embedded server: {scrub(first_line(exc), conninfo)}"
        ) from None


def twin_ledgers(target: Target, project: Project | None) -> list[str]:
    """On the embedded server, one warning when another of its databases keeps a ledger of
    this ``[project] name`` (see :func:`catchup.postgres.projectdb.twins`); else nothing."""
    if target.embedded_data is None or project is None or project.name is None:
        return []
    import psycopg

    from .projectdb import twins

    try:
        return twins(target.conninfo, target.database or "postgres", project)
    except psycopg.Error as exc:  # a look around, never a reason to stop
        said = scrub(first_line(exc), target.conninfo)
        return [f"cannot look for another ledger of this project on the server: {said}"]


# a password in what a driver echoes back: ``user:PASSWORD@`` in a URL, ``password=…`` pairs
_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")
_PAIR_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S+)", re.IGNORECASE)


def scrub(message: str, conninfo: str) -> str:
    """Remove any password that might be echoed back in a driver error: the conninfo's own,
    even when it does not parse (then the whole conninfo, which libpq quotes), and anything
    shaped like one."""
    secrets = [os.environ.get("PGPASSWORD") or ""]
    try:
        from psycopg.conninfo import conninfo_to_dict

        secrets.append(str(conninfo_to_dict(conninfo).get("password") or ""))
    except Exception:
        if conninfo.strip():
            message = message.replace(conninfo, "<DSN>")
    for secret in secrets:
        if secret:
            message = message.replace(secret, "***")
    message = _URL_PASSWORD.sub(r"\1***@", message)
    return _PAIR_PASSWORD.sub(r"\1***", message)


def connect(
    target: Target,
    *,
    application: str = "catchup",
    within: float | None = None,
    writes: bool = True,
) -> psycopg.Connection[object]:
    """An autocommit connection whose server is new enough; one-line errors, no password.

    ``within`` bounds the whole attempt, waits for a busy server included, in seconds (libpq
    still waits at least 2 s for one connection): the heartbeat reconnects inside its lease.
    ``writes`` (the ledger's connections): a server that takes no writes (a standby in
    recovery, or read-only by default) is not a ledger; it is asked again within the same
    bound (a switchover under way, a name that moves to the new primary), then refused."""
    import psycopg

    if target.conninfo and (problem := dsn_problem(target.conninfo)) is not None:
        # libpq's own message quotes a DSN that does not parse, password and all
        raise ConfigError(f"{target.source}: {problem}")
    delay = 0.1
    most = busy_retry_seconds()
    patience = most if within is None else min(most, within)
    deadline = time.monotonic() + patience
    while True:
        try:
            conn = psycopg.connect(
                target.conninfo,
                autocommit=True,
                application_name=application,
                connect_timeout=10 if within is None else max(2, math.ceil(within)),
            )
            try:
                _settle(conn)
                refused = _read_only(conn) if writes else None
            except BaseException:
                conn.close()  # one that answered the handshake and not the first statement
                raise
            if refused is None:
                break
            conn.close()
            if time.monotonic() + delay >= deadline:
                raise DatabaseError(
                    f"{target.describe()} is read-only ({refused}): the ledger needs the "
                    "primary; point the DSN at it, or list every server of the cluster with "
                    "target_session_attrs=read-write"
                )
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
            continue
        except psycopg.Error as exc:
            text = str(exc).strip()
            # A full server, or one starting up or shutting down, is worth waiting for; an
            # unreachable or misconfigured one is reported at once.
            if any(sign in text for sign in BUSY_SIGNS) and time.monotonic() + delay < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            first = text.splitlines()[0] if text else type(exc).__name__
            raise DatabaseError(
                f"cannot connect to {target.describe()}: {scrub(first, target.conninfo)}"
            ) from None
    # No server-side prepared statements: they do not survive a transaction-mode pooler
    # (PgBouncer before 1.21), and catchup's statements are cheap to plan.
    conn.prepare_threshold = None
    # Every transaction catchup opens says read committed in its BEGIN: a role's default
    # (serializable, say) reaches it through a transaction-mode pooler, which keeps no session
    # setting but the reported ones, and a migration's lock taken inside a snapshot older than
    # the lock would apply a migration twice.
    conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
    version = conn.info.server_version
    if version < MIN_SERVER_VERSION:
        conn.close()
        raise DatabaseError(
            f"{target.describe()} runs PostgreSQL {version // 10000}.{version % 10000}: "
            "catchup needs PostgreSQL 17 or newer"
        )
    return conn


def _settle(conn: psycopg.Connection[object]) -> None:
    """The session's settings catchup depends on (UTC, ISO dates), whatever the server's."""
    from ..ledger.base import settle_session

    settle_session(conn)


def _read_only(conn: psycopg.Connection[object]) -> str | None:
    """Why the server behind ``conn`` takes no writes, or None when it does."""
    from ..ledger.base import server_role

    recovery, read_only = server_role(conn)
    if recovery:
        return "a standby in recovery"
    if read_only:
        return "default_transaction_read_only is on"
    return None


def server_version(conn: psycopg.Connection[object]) -> str:
    version = conn.info.server_version
    return f"{version // 10000}.{version % 10000}"
