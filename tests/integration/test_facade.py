"""The command line and the Python API are two skins over one facade: the same story told
through each, on two ledgers, gives the same results, rendered the same way."""

from __future__ import annotations

import functools
import io
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fix_db import Database, nothing_written, throwaway_schema
from fix_project import Project, job_toml
from rich.console import Console

from catchup import Catchup
from catchup.errors import ConfigError
from catchup.render import changes, tables
from catchup.render import explain as render_explain
from catchup.render import json as render_json
from catchup.results import NotDue

CONFIG = """
[jobs.billing]
schedule = "daily"
start = "2026-10-20"
timezone = "Europe/Berlin"
catchup = "latest"
command = ["true"]

[jobs.export]
schedule = "hourly"
start = "2026-10-20"
timezone = "Europe/Berlin"
catchup = "latest"
command = ["true"]
"""
# ISO times of the database clock, durations and hosts differ between the two ledgers
MOVING = re.compile(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z|\d+\.\d+s|\"seconds\": [\d.]+|[\w.-]+:\d+\b"
)


@pytest.fixture
def other_schema(database: Database) -> Iterator[str]:
    with throwaway_schema(database) as name:
        yield name


def rendered(render: Callable[[Console], None]) -> str:
    """What the CLI prints for a result on a pipe (the same console settings, its lines
    without the spaces Rich pads them with)."""
    from catchup.cli.base import Trimmed

    out = io.StringIO()
    trimmed: Any = Trimmed(out)
    render(Console(file=trimmed, width=200, highlight=False, markup=False, emoji=False))
    return out.getvalue()


def steady(text: str) -> str:
    return MOVING.sub("…", text)


def test_every_operation_gives_the_same_result_through_both(
    project: Project, database: Database, other_schema: str, tmp_path: Path
) -> None:
    project.write(CONFIG)
    api_config = tmp_path / "api" / "catchup.toml"
    api_config.parent.mkdir()
    api_config.write_text(project.config.read_text().replace(project.schema, other_schema))
    app = Catchup(api_config, dsn=database.conninfo, require_config=True)

    def cli(*args: str, code: int = 0) -> str:
        result = project.cli("-q", *args)
        assert result.exit_code == code, result.output
        return str(result.stdout)

    # run
    ran = app.run("billing", "2026-10-25")
    assert not isinstance(ran, NotDue)
    assert steady(json.dumps(render_json.outcome_json(ran), ensure_ascii=False)) == steady(
        cli("run", "billing", "--period", "2026-10-25", "--json").strip()
    )
    # mark, reset
    marked = app.mark("billing", ["2026-10-21..2026-10-22"], kind="skip", reason="freeze")
    assert rendered(lambda c: changes.changes(c, marked)) == cli(
        "mark", "billing", "2026-10-21..2026-10-22", "--skip", "--reason", "freeze"
    )
    again = app.reset("billing", ["2026-10-22", "2026-10-25"], reason="rates were wrong")
    assert rendered(lambda c: changes.changes(c, again)) == cli(
        "reset", "billing", "2026-10-22", "2026-10-25", "--reason", "rates were wrong"
    )
    # pause, resume (twice: the second finds nothing to resume)
    paused = app.pause("export", reason="maintenance")
    assert steady(rendered(lambda c: changes.paused(c, paused))) == steady(
        cli("pause", "export", "--reason", "maintenance")
    )
    for _ in range(2):
        resumed = app.resume("export")
        assert rendered(functools.partial(changes.resumed, result=resumed)) == cli(
            "resume", "export"
        )
    # scan, replay (a dry run, then for real), tick, jobs, history
    window = ("--since", "2026-10-20", "--until", "2026-10-27")
    report = app.scan(since="2026-10-20", until="2026-10-27")
    scanned = cli("scan", "--json", *window, code=1)
    assert steady(render_json.scan_json(report)) == steady(scanned.strip())
    dry = app.replay(since="2026-10-20", until="2026-10-24", dry_run=True)
    assert (
        render_json.batch_json(dry)
        == cli(
            "replay", "--since", "2026-10-20", "--until", "2026-10-24", "--dry-run", "--json"
        ).strip()
    )
    done = app.replay(since="2026-10-20", until="2026-10-24")
    assert steady(render_json.batch_json(done)) == steady(
        cli("replay", "--since", "2026-10-20", "--until", "2026-10-24", "--json").strip()
    )
    ticked = app.tick()  # jobs run side by side: their outcomes come in either order

    def by_job(text: str) -> Any:
        batch = json.loads(steady(text))
        return batch["totals"], sorted(batch["periods"], key=lambda p: p["job"])

    assert by_job(render_json.batch_json(ticked)) == by_job(cli("tick", "--json"))
    assert steady(render_json.jobs_json(app.jobs())) == steady(cli("jobs", "--json").strip())
    history = app.history("billing", limit=3)
    assert steady(render_json.history_json(history)) == steady(
        cli("history", "billing", "--limit", "3", "--json").strip()
    )
    assert steady(rendered(lambda c: tables.history(c, history))) == steady(
        cli("history", "billing", "--limit", "3")
    )
    # explain, checkpoint (from outside a running attempt: refused by both), migrate, doctor
    explained = app.explain("billing", start="2026-10-24", count=3)
    assert rendered(lambda c: render_explain.explanation(c, explained)) == cli(
        "explain", "billing", "--from", "2026-10-24", "--count", "3"
    )
    assert app.checkpoint("x", run_id=1, attempt=1) is False
    refused = project.cli("checkpoint", "x", env={"CATCHUP_RUN_ID": "1", "CATCHUP_ATTEMPT": "1"})
    assert refused.exit_code == 1 and "not saved" in refused.stderr
    migrated = app.migrate()
    assert rendered(lambda c: tables.migrated(c, migrated)).replace(
        other_schema, project.schema
    ) == cli("migrate")
    found = Catchup.doctor(str(api_config), database.conninfo)
    # the same DSN for both (a DSN's role is examined: the embedded server's is catchup's own)
    assert [f.topic for f in found] == [
        line.split(":")[0][2:] for line in cli("--dsn", database.conninfo, "doctor").splitlines()
    ]
    app.close()


def test_run_before_anything_is_due_is_not_due_in_both(
    project: Project, database: Database
) -> None:
    """Once the API raised ConfigError where the CLI said "not due" and exited 0."""
    project.write(job_toml("later", start="2199-12-01", command=["true"]))
    with Catchup(project.config, dsn=database.conninfo) as app:
        result = app.run("later")
    assert isinstance(result, NotDue) and result.label == "2199-12-01"
    shown = project.cli("-q", "run", "later")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == rendered(lambda c: tables.not_due(c, result))
    as_json = json.loads(project.cli("-q", "run", "later", "--json").stdout)
    assert as_json == render_json.not_due_json(result)
    assert as_json["status"] == "not-due" and as_json["first"]["label"] == "2199-12-01"


def test_bad_input_is_refused_alike_and_writes_nothing(
    project: Project, database: Database, sql: Any
) -> None:
    project.write(CONFIG)
    with Catchup(project.config, dsn=database.conninfo) as app:
        cases: list[tuple[Callable[[], object], str]] = [
            (lambda: app.scan(since="2026-10-27", until="2026-10-20"), "is not before"),
            (lambda: app.replay(since="2026-10-27", until="2026-10-27"), "is not before"),
            (lambda: app.run("nope"), "nope"),
            (lambda: app.mark("billing", ["2026-10-21"], kind="skip", reason=" "), "must say"),
            (lambda: app.history("billing", limit=0), "--limit"),
        ]
        for call, words in cases:
            with pytest.raises(Exception, match=words) as caught:
                call()
            assert type(caught.value).__name__ == "ConfigError"
    for args in (
        ["scan", "--since", "2026-10-27", "--until", "2026-10-20"],
        ["replay", "--since", "2026-10-27", "--until", "2026-10-27"],
        ["run", "nope"],
    ):
        result = project.cli("-q", *args)
        assert result.exit_code == 2, result.output
        assert len(result.stderr.splitlines()) == 1
    assert nothing_written(project.database, project.schema)


def test_rename_and_retire_give_the_same_result_through_both(
    project: Project, database: Database, other_schema: str, tmp_path: Path
) -> None:
    """The ledger's job `old` is renamed to `billing` (the config's), and `gone` retired, by
    the API on one ledger and the CLI on another: the same words, the same rows."""
    project.write(CONFIG)
    api_config = tmp_path / "api" / "catchup.toml"
    api_config.parent.mkdir()
    api_config.write_text(project.config.read_text().replace(project.schema, other_schema))
    assert project.cli("-q", "migrate").exit_code == 0
    with Catchup(api_config, dsn=database.conninfo) as first:
        first.migrate()
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        for schema in (project.schema, other_schema):
            conn.execute(
                psycopg.sql.SQL("INSERT INTO {}.jobs (name) VALUES ('old'), ('gone')").format(
                    psycopg.sql.Identifier(schema)
                )
            )
    app = Catchup(api_config, dsn=database.conninfo)
    renamed = app.rename("old", "billing", reason="one name")
    cli = project.cli("-q", "rename", "old", "billing", "--reason", "one name")
    assert cli.exit_code == 0, cli.output
    assert rendered(lambda c: changes.renamed(c, renamed)) == cli.stdout
    retired = app.retire("gone", reason="replaced")
    cli = project.cli("-q", "retire", "gone", "--reason", "replaced")
    assert cli.exit_code == 0, cli.output
    assert rendered(lambda c: changes.retired(c, retired)) == cli.stdout
    with pytest.raises(ConfigError, match="the ledger has no job 'nope'"):
        app.retire("nope", reason="x")
    refused = project.cli("-q", "retire", "nope", "--reason", "x")
    assert refused.exit_code == 2 and "the ledger has no job 'nope'" in refused.stderr
    app.close()
