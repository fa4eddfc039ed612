"""One project, one ledger: on the embedded server ``[project] name`` names the project's
database, so two folders of one project share a ledger; a ledger an older catchup kept under
a folder's name is found, never left behind for an empty one; two ledgers of one project on one
server are warned of (doctor, scheduler)."""

from __future__ import annotations

import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fix_db import Database
from fix_processes import wait_for
from fix_project import Project
from psycopg.conninfo import make_conninfo

from catchup.postgres.database import project_database_name
from catchup.postgres.projectdb import named_database_name

# each test makes or moves databases of the embedded server: not a team's role's to do
pytestmark = pytest.mark.superuser


def folder(tmp_path: Path, name: str, log: Path, project: str | None = None) -> Path:
    """A project folder with a daily ``export`` that appends its period to ``log``."""
    made = tmp_path / name
    made.mkdir()
    said = f'[project]\nname = "{project}"\n\n' if project is not None else ""
    (made / "catchup.toml").write_text(
        f'{said}[jobs.export]\nschedule = "daily"\nstart = "2026-10-01"\n'
        f'command = ["sh", "-c", "echo $CATCHUP_PERIOD >> {log}"]\n'
    )
    return made / "catchup.toml"


def name(config: Path, project: str) -> None:
    """Give the folder's config a ``[project] name``."""
    config.write_text(f'[project]\nname = "{project}"\n\n' + config.read_text())


@pytest.fixture
def databases(database: Database) -> Iterator[list[str]]:
    """The databases a test names here, dropped when it ends."""
    made: list[str] = []
    yield made
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        for each in made:
            drop = psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            conn.execute(drop.format(psycopg.sql.Identifier(each)))


def in_database(database: Database, name: str, text: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(make_conninfo(database.conninfo, dbname=name), autocommit=True) as conn:
        cur = conn.execute(text)
        return cur.fetchall() if cur.description else []


def exists(database: Database, name: str) -> bool:
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", [name])
        return row.fetchone() == (1,)


def run(project: Project, config: Path, period: str = "2026-10-02", *flags: str) -> Any:
    result = project.cli(*flags, "--config", str(config), "run", "export", "--period", period)
    assert result.exit_code == 0, result.output
    return result


def test_two_folders_of_one_project_share_a_ledger(
    project: Project, tmp_path: Path, databases: list[str]
) -> None:
    """Two checkouts with the same [project] name on one host's embedded server: one ledger,
    named after the project, so a period run in one is skipped in the other."""
    title = f"shop {uuid.uuid4().hex[:8]}"
    log = tmp_path / "log"
    first, second = folder(tmp_path, "a", log, title), folder(tmp_path, "b", log, title)
    shared = named_database_name(title)
    databases += [shared, *(project_database_name(c.parent.resolve()) for c in (first, second))]
    ran = run(project, first)
    assert f"database {shared}," in ran.stderr and f'for project "{title}"' in ran.stderr
    assert "attempt 1: succeeded" in ran.stdout
    again = run(project, second)
    assert f"database {shared}," in again.stderr and "created" not in again.stderr
    assert "already succeeded" in again.stdout
    assert log.read_text() == "2026-10-02\n"


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_a_ledger_kept_under_the_folders_name_is_found(
    project: Project, database: Database, tmp_path: Path, databases: list[str]
) -> None:
    """A folder that ran periods before it had a [project] name keeps its ledger (then in a
    database named after the folder): in use, it is used where it is; once nobody is
    connected, it is moved to the project's name. Either way one line says so and the done
    period is not run again; a fresh checkout of the project finds it too."""
    title = f"billing {uuid.uuid4().hex[:8]}"
    log = tmp_path / "log"
    config = folder(tmp_path, "old", log)
    own, shared = project_database_name(config.parent.resolve()), named_database_name(title)
    databases += [own, shared]
    run(project, config)
    name(config, title)
    with psycopg.connect(make_conninfo(database.conninfo, dbname=own)):  # in use
        kept = run(project, config)
    assert f"database {own}," in kept.stderr
    assert f"kept database {own}, which holds this project's ledger: it is in use" in kept.stderr
    assert "already succeeded" in kept.stdout and not exists(database, shared)
    moved = run(project, config, "2026-10-02", "-q")  # said even under -q
    (line,) = moved.stderr.splitlines()
    assert f"database {shared}," in line and f"from database {own}, named after a folder" in line
    assert "already succeeded" in moved.stdout
    assert not exists(database, own) and exists(database, shared)
    assert log.read_text() == "2026-10-02\n"
    # a ledger of the project under another folder's name (an older catchup's), found by a
    # fresh checkout with the project's name, not started anew beside it
    stale = folder(tmp_path, "older", log)
    older, other = project_database_name(stale.parent.resolve()), f"other {title}"
    databases.append(older)
    run(project, stale, "2026-10-03")
    in_database(database, older, f"UPDATE catchup.jobs SET project = '{other}'")
    fresh = folder(tmp_path, "fresh", log, other)
    databases.append(named_database_name(other))
    found = run(project, fresh, "2026-10-03", "-q")
    assert f"moved this project's ledger from database {older}" in found.stderr
    again = run(project, fresh, "2026-10-03", "-q")
    assert again.stderr == "" and "already succeeded" in again.stdout  # said once
    assert "already succeeded" in found.stdout and not exists(database, older)
    assert log.read_text() == "2026-10-02\n2026-10-03\n"


def test_two_ledgers_of_one_project_are_warned_of(
    project: Project, database: Database, tmp_path: Path, databases: list[str]
) -> None:
    """A second ledger of the project on the server: the folder's own from before it had the
    project's name (the project's was made first, by another folder), or one whose jobs carry
    the project's name (a copy of the project left on an older catchup). doctor and the
    scheduler say so, in one line each."""
    title = f"report {uuid.uuid4().hex[:8]}"
    log = tmp_path / "log"
    config = folder(tmp_path, "here", log, title)
    shared = named_database_name(title)
    copy = folder(tmp_path, "copy", log)
    other = project_database_name(copy.parent.resolve())
    databases += [shared, other]
    run(project, config)
    run(project, copy)

    def warned(where: Path) -> str:
        doctor = project.cli("--config", str(where), "doctor")
        said = [ln for ln in doctor.stdout.splitlines() if "has another ledger" in ln]
        assert len(said) == 1, doctor.stdout
        assert f'project "{title}" has another ledger' in said[0]
        assert f"database {other}, beside {shared} used here" in said[0]
        return said[0]

    name(copy, title)  # its own ledger is left: the project's was there first
    warned(copy)
    in_database(database, other, f"UPDATE catchup.jobs SET project = '{title}'")
    warned(config)
    err = tmp_path / "scheduler.err"
    config.write_text(config.read_text().replace("2026-10-01", "2090-01-01"))  # nothing due
    with err.open("w") as sink:
        proc = subprocess.Popen(
            project.command("--config", str(config), "scheduler"),
            cwd=tmp_path,
            env=project.env(),
            text=True,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
        try:
            wait_for(lambda: "has another ledger" in err.read_text(), 60, "the warning")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    said = [ln for ln in err.read_text().splitlines() if "has another ledger" in ln]
    assert len(said) == 1 and said[0].startswith("catchup scheduler: warning: project")


def test_a_project_whose_every_keys_query_fails_makes_no_database(
    project: Project, database: Database, tmp_path: Path, databases: list[str]
) -> None:
    """A fresh folder whose one job is keyed, its keys query failing on the embedded default:
    the first tick says so, exits 3 and makes no database for the project."""
    made = tmp_path / "fresh"
    made.mkdir()
    config = made / "catchup.toml"
    config.write_text(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\n'
        'keys = "SELECT id FROM tenants"\ncommand = ["true", "{key}"]\n'
    )
    own = project_database_name(made.resolve())
    databases.append(own)
    result = project.cli("--config", str(config), "tick")
    assert result.exit_code == 3, result.output
    assert "jobs.billing.keys: the keys query failed:" in result.stderr
    assert 'relation "tenants" does not exist' in result.stderr
    assert not exists(database, own)
    config.write_text(config.read_text().replace("FROM tenants", "FROM (VALUES ('acme')) t(id)"))
    assert project.cli("--config", str(config), "tick").exit_code == 0  # now it is made
    assert exists(database, own)
