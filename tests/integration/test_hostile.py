"""Hostile input through the CLI: text that users and jobs wrote is printed as text."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
from fix_project import Project

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"


def daily(command: str = '["true"]') -> str:
    return f'[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = {command}\n'


@pytest.mark.parametrize("reason", ["[/bogus] x", "[red]alert[/red] [link=http://e.x]l[/link]"])
def test_brackets_in_a_reason_are_text(project: Project, reason: str) -> None:
    """A reason that looks like Rich markup is stored and shown as written; history never
    crashes on it."""
    project.write(daily())
    marked = project.cli("mark", "billing", "2026-10-02", "--skip", "--reason", reason)
    assert marked.exit_code == 0, marked.output
    shown = project.cli("history", "billing")
    assert shown.exit_code == 0, shown.output
    assert reason in " ".join(shown.stdout.split()).replace("│ ", "")


def test_a_jobs_escape_sequences_are_shown_escaped(project: Project) -> None:
    """A job's output with a title change, a screen clear and an OSC 8 link reaches the
    terminal escaped, never raw."""
    project.write(daily(f'["printf", "%s", {json.dumps(ESCAPES)}]'))
    ran = project.cli("run", "billing", "--period", "2026-10-02")
    assert ran.exit_code == 0, ran.output
    shown = project.cli("history", "billing", "--period", "2026-10-02")
    assert shown.exit_code == 0, shown.output
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in shown.stdout


def test_a_callables_exception_text_is_shown_escaped(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = f"hostile_{uuid.uuid4().hex[:8]}"
    (project.path / f"{module}.py").write_text(
        f"def run(ctx):\n    raise ValueError({('[red]boom[/red] ' + ESCAPES)!r})\n"
    )
    monkeypatch.syspath_prepend(str(project.path))
    project.write(
        f'[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncall = "{module}:run"\n'
    )
    failed = project.cli("run", "billing", "--period", "2026-10-02")
    assert failed.exit_code == 1
    assert "ValueError: [red]boom[/red] \\x1b]0;pwned\\x07" in failed.stdout
    assert "\x1b" not in failed.stdout
    shown = project.cli("history", "billing")
    assert "\x1b" not in shown.stdout and "[red]boom[/red]" in shown.stdout.replace("\n", "")


def test_an_actor_and_a_pause_reason_are_text(project: Project, sql: Any) -> None:
    project.write(daily())
    paused = project.cli("pause", "billing", "--reason", "[bold]freeze\x1b[2J", "--actor", "[i]ops")
    assert paused.exit_code == 0, paused.output
    shown = project.cli("history", "billing")
    text = shown.stdout
    assert "\x1b" not in text
    assert "[bold]freeze\\x1b[2J" in text and "[i]ops" in text


BAD_DSNS = [
    "postgresql://app:S3cr3tPW x@127.0.0.1:1/app",
    "postgresql://app:S3cr%zzPW@127.0.0.1:1/app",
    "postgresql://app:S3cr3tPW@[::1:5432/app",
    "mysql://app:S3cr3tPW@127.0.0.1/app",
    "host=127.0.0.1 password='S3cr3tPW",
    "host=127.0.0.1 password=S3cr3tPW dbname",
]


def write_config(project: Project, database_line: str = "") -> None:
    """catchup.toml with an extra line in [database] (line 3) and the billing job."""
    project.config.write_text(
        f'[database]\nschema = "{project.schema}"\n{database_line}\n\n' + daily()
    )


def given(source: str, dsn: str, command: str, home: Any) -> tuple[list[str], dict[str, str]]:
    """The arguments and environment that give ``dsn`` through ``source`` (the config file is
    written by the test itself)."""
    env = {"CATCHUP_HOME": str(home)}
    if source == "--dsn":
        return ["--dsn", dsn, command], env
    if source != "config":
        env[source] = dsn
    return [command], env


def one_line_error(result: Any, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return str(lines[0])


@pytest.mark.superuser
@pytest.mark.parametrize("dsn", BAD_DSNS)
@pytest.mark.parametrize("source", ["--dsn", "CATCHUP_DSN", "config", "DATABASE_URL"])
def test_a_dsn_that_does_not_parse_never_shows_its_password(
    project: Project, tmp_path: Any, dsn: str, source: str
) -> None:
    """Wherever a DSN comes from, one that does not parse is a usage error that names the
    source and never repeats the password; no server is started or touched."""
    home = tmp_path / "home"
    home.mkdir()
    write_config(project, f"dsn = {json.dumps(dsn)}" if source == "config" else "")
    args, env = given(source, dsn, "jobs", home)
    line = one_line_error(project.cli(*args, env=env))
    assert "S3cr3t" not in line
    expected = "catchup.toml:3: database.dsn" if source == "config" else source
    assert expected in line
    assert list(home.iterdir()) == []  # no embedded server was started


@pytest.mark.superuser
@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("--dsn", ""),
        ("CATCHUP_DSN", ""),
        ("CATCHUP_DSN", "  "),
        ("DATABASE_URL", ""),
        ("config", ""),
    ],
)
def test_an_empty_dsn_is_a_usage_error_never_a_local_server(
    project: Project, tmp_path: Any, where: str, value: str
) -> None:
    """`--dsn "$DATABASE_URL"` with the variable unset, or `CATCHUP_DSN=` in a pod, must not
    start an embedded server and run every backlog there."""
    home = tmp_path / "home"
    home.mkdir()
    write_config(project, 'dsn = ""' if where == "config" else "")
    args, env = given(where, value, "tick", home)
    line = one_line_error(project.cli(*args, env=env))
    assert "empty" in line
    assert list(home.iterdir()) == []


@pytest.mark.superuser
@pytest.mark.parametrize(
    ("setting", "config_line", "said"),
    [
        ("never", "", "CATCHUP_EMBEDDED=never"),
        ("", "embedded = false", "[database] embedded = false"),
        ("sometimes", "", "CATCHUP_EMBEDDED: 'sometimes' is not one of auto, never"),
    ],
)
def test_the_embedded_fallback_can_be_refused(
    project: Project, tmp_path: Any, setting: str, config_line: str, said: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    write_config(project, config_line)
    line = one_line_error(
        project.cli("tick", env={"CATCHUP_HOME": str(home), "CATCHUP_EMBEDDED": setting})
    )
    assert said in line
    assert list(home.iterdir()) == []


@pytest.mark.parametrize("name", ["public", "information_schema", "pg_catalog", "pg_temp"])
def test_postgresqls_own_schemas_are_refused(project: Project, sql: Any, name: str) -> None:
    project.config.write_text(f'[database]\nschema = "{name}"\n\n' + daily())
    line = one_line_error(project.cli("jobs"))
    assert f"catchup.toml:2: database.schema: {name!r} is one of PostgreSQL's own schemas" in line
    assert sql(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'runs' "
        "AND table_schema = %s",
        [name],
    ) == [(0,)]


BAD_JOB_LINES = [
    ('timeout = "1000000000d"', "jobs.billing.timeout: '1000000000d' is longer than the longest"),
    ('delay = "100000000d"', "jobs.billing.delay: '100000000d' is longer than the longest"),
    ('retry_backoff = "100000000d"', "jobs.billing.retry_backoff: '100000000d' is longer"),
    ('timeout = "99999999999999999999999d"', "is not a duration"),
    ("max_attempts = 100000000", "jobs.billing.max_attempts: at most 1,000"),
    ("max_per_tick = 100000000", "jobs.billing.max_per_tick: at most 100,000"),
]
BAD_SCHEDULES = [
    ("every 99999999999 days", "periods are at most 3650 days long"),
    ("RRULE:garbage", "expected KEY=VALUE parts"),
    ("RRULE:FREQ=SECONDLY", "periods are at least one minute long"),
    ("RRULE:FREQ=MINUTELY;BYSECOND=0,30", "periods are at least one minute long"),
    ("RRULE:FREQ=YEARLY;INTERVAL=20", "periods are at most 3650 days long"),
]
BAD_STARTS = ["0001-01-01", "9999-12-31"]
BAD_ARGS = [
    (["run", "billing", "--period", "9999-12-31"], "dates from 1900-01-02 to 2199-12-30 only"),
    (["explain", "billing", "--from", "9999-12-31"], "dates from 1900-01-02 to 2199-12-30 only"),
    (["scan", "--since", "0001-01-01"], "dates from 1900-01-02 to 2199-12-30 only"),
    (["mark", "billing", "2026-10-03", "--done", "--reason", ""], "must say why"),
    (["mark", "billing", "2026-10-03", "--done", "--reason", "  "], "must say why"),
    (["pause", "billing", "--reason", ""], "must say why"),
    (["scan", "--output", "/nonexistent/dir/r.svg"], "no folder /nonexistent/dir"),
    (["--dsn", "postgresql://app:S3cr3tPW x@127.0.0.1:1/app", "jobs"], "--dsn: cannot parse"),
]


def snapshot(sql: Any, schema: str) -> dict[str, list[str]]:
    tables = [
        name
        for (name,) in sql(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "ORDER BY table_name",
            [schema],
        )
    ]
    return {
        t: [row for (row,) in sql(f"SELECT row_to_json(x)::text FROM {{schema}}.{t} x ORDER BY 1")]
        for t in tables
    }


def test_the_hostile_corpus_gives_one_line_and_leaves_the_ledger_alone(
    project: Project, sql: Any
) -> None:
    """Every bad value: one line naming what is wrong (and where), exit 2, no traceback, no
    password, and every row of the ledger as it was."""
    project.write(daily())
    assert project.cli("run", "billing", "--period", "2026-10-01").exit_code == 0
    assert project.cli("mark", "billing", "2026-10-02", "--skip", "--reason", "r").exit_code == 0
    assert project.cli("pause", "billing").exit_code == 0
    before = snapshot(sql, project.schema)
    assert before["runs"] and before["events"]
    good = project.config.read_text()
    cases: list[tuple[str, list[str], str]] = []
    for line, said in BAD_JOB_LINES:
        cases.append((good + line + "\n", ["jobs"], said))
    for text, said in BAD_SCHEDULES:
        cases.append((good.replace('"daily"', json.dumps(text)), ["scan"], said))
    for start in BAD_STARTS:
        bad = good.replace('"2026-10-01"', f'"{start}"')
        cases.append((bad, ["scan"], "jobs.billing.start: " + start))
    for args, said in BAD_ARGS:
        cases.append((good, args, said))
    for body, args, said in cases:
        project.config.write_text(body)
        result = project.cli(*args)
        line = one_line_error(result)
        assert said in line, (args, line)
        assert "S3cr3t" not in line
        assert snapshot(sql, project.schema) == before, (args, said)


def test_one_jobs_database_error_does_not_stop_a_tick(project: Project, sql: Any) -> None:
    """A trigger makes every claim of one job fail inside PostgreSQL: the tick still runs the
    other jobs, reports that job's error, prints its summary, and exits 3."""
    (today,) = sql("SELECT date_trunc('day', clock_timestamp())")[0]
    start = (today - timedelta(days=3)).date().isoformat()
    body = "".join(
        f'[jobs.{name}]\nschedule = "daily"\nstart = "{start}"\ncatchup = "latest"\n'
        'command = ["true"]\n'
        for name in ("alpha", "poison", "zulu")
    )
    project.write(body)
    assert project.cli("-q", "jobs").exit_code == 0  # the ledger and its jobs exist
    sql(
        "CREATE FUNCTION {schema}.poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.job_id = (SELECT id FROM " + project.schema + ".jobs WHERE name = 'poison') "
        "THEN RAISE EXCEPTION 'poisoned row'; END IF; RETURN NEW; END $$"
    )
    sql(
        "CREATE TRIGGER poison BEFORE INSERT ON {schema}.runs "
        "FOR EACH ROW EXECUTE FUNCTION {schema}.poison()"
    )
    result = project.cli("tick")
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    assert "poison" in result.stdout and "database error: poisoned row" in result.stdout
    assert "tick: 2 succeeded, 0 failed, 0 skipped, 0 lost, 1 database error(s)" in result.stdout
    ran = sql(
        "SELECT j.name FROM {schema}.runs r JOIN {schema}.jobs j ON j.id = r.job_id "
        "WHERE r.status = 'succeeded' ORDER BY 1"
    )
    assert ran == [("alpha",), ("zulu",)]


@pytest.mark.superuser
def test_two_projects_on_one_host_keep_their_ledgers_apart(
    project: Project, sql: Any, tmp_path: Any
) -> None:
    """Two project folders with a job of the same name, both on the default embedded ledger
    (no schema chosen): each gets a database of its own, so one's run is not the other's."""
    from catchup.postgres.database import project_database_name

    folders = [tmp_path / "shop", tmp_path / "warehouse"]
    names = [project_database_name(f.resolve()) for f in folders]
    try:
        for folder in folders:
            folder.mkdir()
            (folder / "catchup.toml").write_text(
                '[jobs.export]\nschedule = "daily"\nstart = "2026-10-01"\n'
                f'command = ["sh", "-c", "echo ran >> {folder}/log"]\n'
            )
        first = project.cli(
            "--config", str(folders[0] / "catchup.toml"), "run", "export", "--period", "2026-10-02"
        )
        assert first.exit_code == 0, first.output
        assert f"database {names[0]}" in first.stderr and "created database" in first.stderr
        second = project.cli(
            "--config", str(folders[1] / "catchup.toml"), "run", "export", "--period", "2026-10-02"
        )
        assert second.exit_code == 0, second.output
        assert "attempt 1: succeeded" in second.stdout  # not "already succeeded"
        assert (folders[0] / "log").read_text() == (folders[1] / "log").read_text() == "ran\n"
        again = project.cli("--config", str(folders[0] / "catchup.toml"), "jobs")
        assert f"database {names[0]}," in again.stderr and "created" not in again.stderr
    finally:
        for name in names:
            sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.superuser
def test_a_ledger_made_before_project_databases_is_kept(
    project: Project, sql: Any, tmp_path: Any
) -> None:
    """A project whose jobs already have a ledger in the shared database (as an older catchup
    made it) keeps that ledger: nothing it ran is run again in a new database."""
    from catchup.postgres.database import project_database_name

    folder = tmp_path / "legacy"
    folder.mkdir()
    job = '[jobs.export]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
    config = folder / "catchup.toml"
    try:
        config.write_text('[database]\nschema = "catchup"\n\n' + job)  # where it used to go
        first = project.cli("--config", str(config), "run", "export", "--period", "2026-10-02")
        assert first.exit_code == 0, first.output
        config.write_text(job)  # the default: a project database, unless a ledger exists
        again = project.cli("--config", str(config), "run", "export", "--period", "2026-10-02")
        assert again.exit_code == 0, again.output
        assert "database postgres" in again.stderr and "already keeps these jobs" in again.stderr
        assert "already succeeded" in again.stdout
        assert sql(
            "SELECT count(*) FROM pg_database WHERE datname = %s", [project_database_name(folder)]
        ) == [(0,)]
    finally:
        sql("DROP SCHEMA IF EXISTS catchup CASCADE")


def test_usage_errors_are_one_line_and_no_command_is_the_help() -> None:
    """A usage error is one line naming the command's --help; `catchup` alone shows the help."""
    from click.testing import CliRunner

    from catchup.cli import cli

    missing = CliRunner().invoke(cli, ["run"], prog_name="catchup")
    assert missing.exit_code == 2
    assert missing.stderr.strip().splitlines() == [
        "catchup: Missing argument 'JOB'. (see catchup run --help)"
    ]
    alone = CliRunner().invoke(cli, [], prog_name="catchup")
    assert alone.exit_code in (0, 2)  # click 8.1 exits 0 here, 8.2 and later 2
    assert alone.output.startswith("Usage: catchup [OPTIONS] COMMAND [ARGS]...")
