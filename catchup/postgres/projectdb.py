"""Which database holds a project's ledger on the embedded server.

A project with ``[project] name`` keeps its ledger in a database named after that name, so two
folders of one project (two checkouts, a config and a script) share one ledger and each period
runs once between them; a project without one, in a database named after its folder. A ledger
already kept elsewhere for the project (under the folder's name, or under another folder's
that carries the project's name) is found and moved to the name (``ALTER DATABASE … RENAME``,
when nobody is connected to it) or used where it is: never left behind for an empty one, which
would run every period again. Finding, moving and creating are serialised on the server.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config.job import Project
    from ..ledger import Ledger

# Imports inside functions: at first use: reading a DSN or a config never loads the driver
# nor the ledger.

SHARED = "postgres"  # the server's own database: where an older catchup kept every ledger


@dataclass(frozen=True)
class Found:
    """The database that holds a project's ledger, and what finding it did (for the line that
    names the database; said even under -q when the ledger was moved to it now)."""

    database: str
    note: str | None = None
    relocated: bool = False


def _database_name(readable: str, identity: str) -> str:
    """``catchup_<readable, as a slug>_<hash of identity>``: an identifier of at most 47 ASCII
    bytes (PostgreSQL keeps 63), the same for the same identity on every host."""
    slug = re.sub(r"[^a-z0-9]+", "_", readable.lower()).strip("_")[:30] or "project"
    digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"catchup_{slug}_{digest}"


def project_database_name(folder: Path) -> str:
    """``catchup_<folder name>_<hash of its path>``: readable, and one per project folder."""
    return _database_name(folder.name, str(folder))


def named_database_name(name: str) -> str:
    """``catchup_<project name>_<hash of it>``: one per ``[project] name``, wherever its
    folders are (the hash keeps names apart that make the same slug: ``Billing``, ``billing!``;
    and apart from every folder's, whose hash is of a path)."""
    return _database_name(name, f"[project] name\0{name}")


def database_name(project: Project) -> str:
    """The database a project's ledger is kept in: its name's, else its folder's."""
    if project.name is not None:
        return named_database_name(project.name)
    return project_database_name(project.folder)


def find(conninfo: str, project: Project) -> Found:
    """The database that holds ``project``'s ledger on the embedded server reached by
    ``conninfo`` (its ``postgres`` database), and what finding it did. Raises psycopg's
    OperationalError when the server cannot be reached (the caller words it, without the
    password)."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from ..ledger import Ledger

    name = database_name(project)
    try:
        psycopg.connect(make_conninfo(conninfo, dbname=name), connect_timeout=10).close()
        return Found(name)
    except psycopg.OperationalError as exc:
        if getattr(exc, "sqlstate", None) != "3D000" and "does not exist" not in str(exc):
            raise
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
        ledger = Ledger(conn, project.schema)
        ledger.lock_project_databases()  # until conn closes: one process decides at a time
        if ledger.database_exists(name):  # another process made or moved it a moment ago
            return Found(name)
        kept = _kept(conninfo, ledger, project) if project.name is not None else None
        if kept is not None:
            return _move(ledger, kept, name, project.name)
        if ledger.holds_jobs(list(project.jobs)):
            return Found(SHARED, "the shared database postgres, which already keeps these jobs")
        ledger.create_database(name)
    whose = f"project {_quoted(project.name)}" if project.name is not None else str(project.folder)
    return Found(name, f"created database {name} for {whose}")


def unmade(conninfo: str, project: Project) -> bool:
    """Whether :func:`find` would create the project's database: none of its name, none kept
    under another, and postgres holds none of its jobs. Reads only."""
    import psycopg

    from ..ledger import Ledger

    name = database_name(project)
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
        ledger = Ledger(conn, project.schema)
        if ledger.database_exists(name):
            return False
        if project.name is not None and _kept(conninfo, ledger, project) is not None:
            return False
        return not ledger.holds_jobs(list(project.jobs))


def _quoted(name: str) -> str:
    """A project's name in a line, as a TOML or JSON string (quotes and backslashes escaped)."""
    import json

    return json.dumps(name, ensure_ascii=False)


def _kept(conninfo: str, ledger: Ledger, project: Project) -> str | None:
    """A ledger this project already keeps under another name: the folder's own database (as
    catchup named it before ``[project] name`` did), else the first database whose ledger has a
    job this project defined (another folder's)."""
    own = project_database_name(project.folder)
    if ledger.database_exists(own):
        return own
    assert project.name is not None
    for database in ledger.server_databases():
        if _carries(conninfo, database, project.schema, project.name):
            return database
    return None


def _move(ledger: Ledger, kept: str, name: str, project: str | None) -> Found:
    """The ledger in ``kept`` renamed to ``name`` when nobody is connected to it, else used
    where it is (asked again by the next command)."""
    if kept == SHARED:
        return Found(SHARED, "the shared database postgres, which keeps this project's jobs")
    if ledger.rename_database(kept, name):
        said = (
            f"moved this project's ledger from database {kept}, named after a folder, to "
            f"{name}, named after [project] name {_quoted(project or '')}"
        )
        return Found(name, said, relocated=True)
    return Found(
        kept,
        f"kept database {kept}, which holds this project's ledger: it is in use, so it moves to "
        f"{name}, named after [project] name, once nothing is connected to it",
    )


def _carries(conninfo: str, database: str, schema: str, of: str | tuple[str, ...]) -> bool:
    """Whether the ledger in ``database`` (in ``schema``) has a job the project named ``of``
    defined (or, given job names, one of these jobs); a database that cannot be read carries
    nothing."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from ..ledger import Ledger

    try:
        with psycopg.connect(make_conninfo(conninfo, dbname=database), connect_timeout=10) as c:
            c.autocommit = True
            ledger = Ledger(c, schema)
            return ledger.carries_project(of) if isinstance(of, str) else ledger.holds_jobs([*of])
    except psycopg.Error:  # dropped a moment ago, or no ledger of a kind we can read
        return False


def twins(conninfo: str, in_use: str, project: Project) -> list[str]:
    """One warning when another database of the server keeps a ledger of ``project`` (by its
    ``[project] name``) beside ``in_use``: each ledger runs every period once, so its periods
    may run twice. Empty for a project without a name."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    from ..ledger import Ledger

    if project.name is None:
        return []
    server = make_conninfo(conninfo, dbname=SHARED)
    with psycopg.connect(server, autocommit=True, connect_timeout=10) as conn:
        databases = Ledger(conn, project.schema).server_databases()
    own = project_database_name(project.folder)  # this folder's, from before the name
    others = [
        database
        for database in databases
        if database != in_use
        and (
            _carries(server, database, project.schema, project.name)
            or (database == own and _carries(server, database, project.schema, project.jobs))
        )
    ]
    if not others:
        return []
    where = ", ".join(others)
    return [
        f"project {_quoted(project.name)} has another ledger on this server, in database {where}, "
        f"beside {in_use} used here: a period done in one runs again in the other; stop what "
        "still uses it (a copy of the project, an older catchup) and drop it once its history "
        "is not needed"
    ]
