"""A team's first week with catchup (issue 23): what cannot start counts no attempt, and a job
runs in its config file's folder whatever folder the scheduler starts catchup in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fix_project import Project, job_toml


def from_root(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """catchup started from / (as a CronJob or a systemd unit would), its config by path."""
    env = project.env()
    return subprocess.run(
        [sys.executable, "-m", "catchup", "--config", str(project.config), *args],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_relative_command_runs_in_the_config_files_folder(project: Project, sql: Any) -> None:
    """`command = ["./close.sh"]` run by a scheduler from / failed `cannot start`: the
    database was chosen by the config's folder, the command by the process's. Now both are
    the config's folder (the job runs there too)."""
    script = project.path / "close.sh"
    script.write_text('#!/bin/sh\npwd > ran-in\necho "$CATCHUP_PERIOD" >> ran-in\n')
    script.chmod(0o755)
    project.write(job_toml("close", command=["./close.sh"]))
    ran = from_root(project, "run", "close", "--period", "2026-10-02")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (project.path / "ran-in").read_text().split() == [
        str(project.path.resolve()),
        "2026-10-02",
    ]


def test_a_call_module_beside_the_config_is_found(project: Project, sql: Any) -> None:
    (project.path / "myjobs.py").write_text(
        "from pathlib import Path\n"
        "def export(ctx):\n"
        "    Path(__file__).with_name('exported').write_text(ctx.period)\n"
    )
    project.write(job_toml("export", call="myjobs:export"))
    ran = from_root(project, "run", "export", "--period", "2026-10-02")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (project.path / "exported").read_text() == "2026-10-02"


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_what_cannot_start_counts_no_attempt(project: Project, sql: Any) -> None:
    """A missing module, a missing program, a missing folder: `run` exits 2 and claims
    nothing; `tick` runs the other jobs, reports those, exits 2; three ticks of a bad deploy
    leave no period exhausted; doctor names each."""
    project.write(
        job_toml("nomodule", call="no_such_module_here:export", catchup="latest")
        + job_toml("noprogram", command=["./missing.sh"], catchup="latest")
        + job_toml("nofolder", command=["true"], workdir="gone", catchup="latest")
        + job_toml("fine", command=["true"], catchup="latest")
    )
    ran = from_root(project, "run", "nomodule", "--period", "2026-10-02")
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "cannot load no_such_module_here:export: ModuleNotFoundError" in ran.stdout
    assert "no attempt counted" in ran.stdout
    for _ in range(3):
        ticked = from_root(project, "tick")
        assert ticked.returncode == 2, ticked.stdout + ticked.stderr
        assert "cannot start './missing.sh': not found" in ticked.stdout
        assert "its folder" in ticked.stdout and "gone does not exist" in ticked.stdout
        assert "3 could not start (no attempt counted)" in ticked.stdout
    rows = sql(
        "SELECT j.name, r.status, r.attempt, r.failures FROM {schema}.runs r "
        "JOIN {schema}.jobs j ON j.id = r.job_id ORDER BY 1"
    )
    assert rows == [("fine", "succeeded", 1, 0)]
    assert sql("SELECT count(*) FROM {schema}.history h") == [(1,)]
    doctor = from_root(project, "doctor")
    assert doctor.returncode == 1, doctor.stdout
    for name in ("nomodule", "noprogram", "nofolder"):
        assert f"✗ jobs: {name}: cannot" in doctor.stdout, doctor.stdout


def test_a_module_that_fails_to_import_is_reported_by_doctor_without_running_it(
    project: Project, tmp_path: Path
) -> None:
    """doctor imports every call in a child process: an import error is its finding, and
    what the module does at import time never happens in doctor's own process."""
    marker = tmp_path / "imported-in"
    (project.path / "broken.py").write_text(
        f"import os\nopen({str(marker)!r}, 'a').write(str(os.getpid()) + '\\n')\n"
        "raise ImportError('the vendored client is missing')\n"
    )
    project.write(job_toml("broken", call="broken:run"))
    doctor = project.cli("doctor")
    assert doctor.exit_code == 1, doctor.output
    assert "broken: cannot load broken:run: ImportError: the vendored client is missing" in (
        doctor.stdout
    )
    assert marker.read_text().split() != [str(os.getpid())]


# --- the smaller findings --------------------------------------------------------------------


def test_openmetrics_exits_0_with_gaps_so_a_textfile_collector_publishes(
    project: Project,
) -> None:
    project.write(job_toml("billing", command=["true"]))
    metrics = project.cli("scan", "--format", "openmetrics")
    assert metrics.exit_code == 0, metrics.output
    assert 'catchup_missing_periods{job="billing"}' in metrics.stdout
    assert project.cli("-q", "scan", "--format", "json").exit_code == 1  # the others still 1


def test_an_exhausted_period_says_how_to_run_it_again(project: Project, sql: Any) -> None:
    project.write(job_toml("billing", command=["false"], max_attempts=1))
    assert project.cli("run", "billing", "--period", "2026-10-02").exit_code == 1
    again = project.cli("run", "billing", "--period", "2026-10-02")
    assert again.exit_code == 0, again.output
    said = " ".join(again.stdout.split())
    assert "exhausted: failed 1 times" in said
    assert (
        "catchup replay --job billing --since 2026-10-02 --max-periods 1 --retry-exhausted" in said
    )


def test_ages_are_whole_seconds_and_scan_json_has_the_scheduler(project: Project, sql: Any) -> None:
    """`(6.07292s ago)` became `(6s ago)`; scan --json now has the scheduler's pulse, which
    every other format had."""
    import json

    project.write(job_toml("billing", command=["true"]))
    assert project.cli("migrate").exit_code == 0
    sql(
        "INSERT INTO {schema}.ticks (host, at) VALUES "
        "('web-1', clock_timestamp() - interval '6.07292 seconds')"
    )
    table = project.cli("scan")
    assert "from web-1 (6s ago" in table.stdout or "from web-1 (7s ago" in table.stdout
    assert "6.07" not in table.stdout
    document = json.loads(project.cli("scan", "--json").stdout)
    assert document["scheduler"]["last_host"] == "web-1"
    assert document["scheduler"]["last_tick"].endswith("Z")


def test_global_options_are_accepted_after_the_command(project: Project) -> None:
    """`catchup tick -q` was `No such option: -q`; a command's own option keeps its value
    even when that value looks like a global option."""
    project.write(job_toml("billing", command=["true"]))
    quiet = project.cli("jobs", "-q")
    assert quiet.exit_code == 0, quiet.output
    assert "database:" not in quiet.stderr
    marked = project.cli("mark", "billing", "2026-10-02", "--skip", "--reason", "-q")
    assert marked.exit_code == 0, marked.output
    assert "database:" in marked.stderr  # -q was the reason, not the flag
    shown = project.cli("history", "billing", "--period", "2026-10-02", "-q", "--json")
    assert shown.exit_code == 0 and '"-q"' in shown.stdout


def test_doctor_suggests_a_delay_longer_than_the_one_the_job_has(project: Project) -> None:
    project.write(job_toml("billing", command=["true"], delay="2h"))
    doctor = project.cli("doctor")
    said = " ".join(doctor.stdout.split())
    assert 'for billing, delay = "2h7m"' in said, said
    assert 'delay = "7m")' not in said


# --- one identity per job: rename, renamed_from, retire ---------------------------------------

WEEKLY = '[jobs.{name}]\nschedule = "weekly"\nstart = "2026-10-05"\ncommand = ["true"]\n'


def ran_four_weeks(project: Project, sql: Any) -> int:
    """`report` with its first four weeks succeeded; the job's ledger id."""
    project.write(WEEKLY.format(name="report"))
    done = project.cli("-q", "replay", "--since", "2026-10-05", "--until", "2026-11-02")
    assert done.exit_code == 0, done.output
    ((job_id,),) = sql("SELECT id FROM {schema}.jobs WHERE name = 'report'")
    sql(
        "INSERT INTO {schema}.alert_ranges (job_id, state, first, last, periods) "
        "VALUES (%s, 'missing', '2026-11-02', '2026-11-02', 1)",
        [job_id],
    )
    return int(job_id)


def planned(project: Project, exit_code: int = 0) -> int:
    import json

    dry = project.cli(
        "-q", "replay", "--since", "2026-10-05", "--until", "2026-11-30", "--dry-run", "--json"
    )
    assert dry.exit_code == exit_code, dry.output
    return int(json.loads(dry.stdout)["totals"]["planned"])


def test_a_renamed_job_keeps_its_past_and_runs_no_done_period_again(
    project: Project, sql: Any
) -> None:
    """`[jobs.report]` renamed to `[jobs.weekly-report]`: every command warns, naming both,
    and the new name is held (a dry run plans none of it: every week again would have been a
    second invoice run); `catchup rename` moves the job's id, so history, coverage and alert
    ranges follow and the dry run plans only the four weeks never run."""
    job_id = ran_four_weeks(project, sql)
    project.write(WEEKLY.format(name="weekly-report"))
    warned = project.cli("-q", "jobs")
    said = " ".join(warned.stderr.split())
    assert (
        "warning: weekly-report is held: it is new to the ledger and has the schedule of report"
        in said
    )
    assert planned(project, exit_code=2) == 0  # held
    renamed = project.cli("rename", "report", "weekly-report", "--reason", "one name per team")
    assert renamed.exit_code == 0, renamed.output
    assert "renamed report to weekly-report" in renamed.stdout
    assert planned(project) == 4
    assert sql("SELECT id FROM {schema}.jobs WHERE name = 'weekly-report'") == [(job_id,)]
    assert sql("SELECT count(*) FROM {schema}.jobs") == [(1,)]  # the empty row it replaced
    assert sql("SELECT job_id FROM {schema}.alert_ranges") == [(job_id,)]
    shown = project.cli("history", "weekly-report")
    assert shown.stdout.count("succeeded") == 4 and "rename" in shown.stdout
    assert "one name per team" in " ".join(shown.stdout.split())
    quiet = project.cli("-q", "jobs")
    assert quiet.stderr == ""  # nothing left to warn about


def test_renamed_from_renames_on_the_first_command_that_writes(project: Project, sql: Any) -> None:
    job_id = ran_four_weeks(project, sql)
    project.write(WEEKLY.format(name="weekly-report") + 'renamed_from = "report"\n')
    assert planned(project) == 4  # a dry run reads the old row, and renames nothing
    assert sql("SELECT name FROM {schema}.jobs") == [("report",)]
    assert project.cli("-q", "jobs").exit_code == 0
    assert sql("SELECT id, name FROM {schema}.jobs") == [(job_id, "weekly-report")]
    (event,) = sql("SELECT action, previous FROM {schema}.events WHERE action = 'rename'")
    assert event == ("rename", "report")
    old = project.cli("history", "report")
    assert "report was renamed to weekly-report" in old.stderr


def test_a_rename_onto_a_job_with_runs_is_refused_and_changes_nothing(
    project: Project, sql: Any
) -> None:
    ran_four_weeks(project, sql)
    project.write(WEEKLY.format(name="report") + WEEKLY.format(name="other"))
    assert project.cli("-q", "run", "other", "--period", "2026-10-05").exit_code == 0
    before = sql("SELECT id, name FROM {schema}.jobs ORDER BY id")
    refused = project.cli("rename", "report", "other", "--reason", "oops")
    assert refused.exit_code == 2, refused.output
    assert "the ledger already has runs or changes for other" in refused.stderr
    assert sql("SELECT id, name FROM {schema}.jobs ORDER BY id") == before
    missing = project.cli("rename", "nope", "other2", "--reason", "x")
    assert missing.exit_code == 2 and "the ledger has no job nope" in missing.stderr


def test_a_job_gone_on_purpose_is_retired_and_no_longer_mentioned(
    project: Project, sql: Any
) -> None:
    ran_four_weeks(project, sql)
    project.write(job_toml("billing", command=["true"]))
    noted = project.cli("-q", "jobs")
    said = " ".join(noted.stderr.split())
    assert "the ledger has jobs this config does not name: report (last success 2026-10-26" in said
    listed = " ".join(noted.stdout.split())
    assert "not in this config: report (last success 2026-10-26" in listed, noted.stdout
    still = project.cli("retire", "billing", "--reason", "x")
    assert still.exit_code == 2 and "still in the config" in still.stderr
    retired = project.cli("retire", "report", "--reason", "replaced by the warehouse sync")
    assert retired.exit_code == 0, retired.output
    after = project.cli("-q", "jobs")
    assert after.stderr == "" and "not in this config" not in after.stdout
    assert sql("SELECT count(*) FROM {schema}.history") == [(4,)]  # its history stays


def test_a_slow_backlog_never_holds_another_jobs_period(project: Project, sql: Any) -> None:
    """An hourly job with six missed slow periods beside a five-minute job, one worker:
    the quick job's due period goes first, and after --max-time the tick starts nothing
    new (the backlog is the next tick's), so the next tick, on schedule, is not held."""
    import json
    from datetime import timedelta

    (now,) = sql("SELECT date_trunc('hour', clock_timestamp())")[0]
    start = (now - timedelta(hours=6)).strftime("%Y-%m-%dT%H:%M:%SZ")
    project.write(
        f'[jobs.backlog]\nschedule = "hourly"\nstart = "{start}"\n'
        'command = ["sleep", "1.5"]\n'
        f'[jobs.quick]\nschedule = "every 5 minutes"\nstart = "{start}"\ncatchup = "latest"\n'
        'command = ["true"]\n'
    )
    first = project.cli("-q", "tick", "--workers", "1", "--max-time", "1s", "--json")
    assert first.exit_code == 0, first.output
    batch = json.loads(first.stdout)
    ran = [(p["job"], p["status"]) for p in batch["periods"]]
    assert ran[0] == ("quick", "succeeded")
    slow = ran[1:]
    assert slow in ([], [("backlog", "succeeded")])  # at most the one started in time
    assert batch["totals"]["deferred"] == 6 - len(slow)
    shown = project.cli("-q", "tick", "--workers", "1", "--max-time", "1s")
    assert "left for the next tick (--max-time 1s)" in shown.stdout
    (count,) = sql(
        "SELECT count(*) FROM {schema}.runs r JOIN {schema}.jobs j ON j.id = r.job_id "
        "WHERE j.name = 'backlog'"
    )[0]
    assert 1 <= count <= 2


@pytest.mark.superuser
def test_jobs_in_code_never_redefine_the_folders_jobs(
    project: Project, sql: Any, monkeypatch: Any
) -> None:
    """The README's Python example, run in a folder with a catchup.toml whose daily `export`
    the CLI runs: it used the same ledger, moved the job's start and recorded a schedule change
    to hourly, and the next CLI command changed both back. Jobs in code are a project of their
    own: the CLI's job keeps its schedule, start and history."""
    from catchup import Catchup, make_job
    from catchup.api import code_origin
    from catchup.postgres.database import project_database_name
    from catchup.postgres.projectdb import named_database_name
    from catchup.results import NotDue

    monkeypatch.chdir(project.path)
    project.config.write_text(job_toml("export", command=["true"]))
    names = [
        project_database_name(project.path.resolve()),
        named_database_name("nightly"),  # project= in code: the project's name names it
        project_database_name(code_origin(None)),  # no project named: the running script's
    ]
    try:
        cli = project.cli("-q", "run", "export", "--period", "2026-10-02")
        assert cli.exit_code == 0, cli.output
        job = make_job("export", "hourly", "2026-11-01", call=lambda ctx: None)
        with Catchup(jobs=[job], project="nightly") as app:
            assert app.database.endswith(f"database {names[1]}")
            outcome = app.run("export", "2026-11-01T05:00:00Z")
            assert not isinstance(outcome, NotDue) and str(outcome.status) == "succeeded"
        with Catchup(jobs=[job]) as unnamed:
            assert unnamed.database.endswith(f"database {names[2]}") and names[2] != names[0]
        shown = project.cli("-q", "history", "export", "--json")
        assert shown.exit_code == 0, shown.output
        import json

        history = json.loads(shown.stdout)
        assert [a["period"] for a in history["attempts"]] == ["2026-10-02T00:00:00Z"]
        assert not [c for c in history["changes"] if c["action"] == "schedule"]
    finally:
        for name in names:
            sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_history_and_explain_at_80_columns_cut_no_date(project: Project) -> None:
    """`history` and `explain` cut dates at 80 columns (`2026-11-…`, `(Ameri…`), though
    narrow consoles were promised whole names and dates: blocks instead of a table."""
    project.write(job_toml("billing", command=["true"], timezone="America/New_York"))
    assert project.cli("-q", "run", "billing", "--period", "2026-10-02").exit_code == 0
    assert (
        project.cli(
            "-q", "mark", "billing", "2026-10-03", "--skip", "--reason", "bank holiday"
        ).exit_code
        == 0
    )
    for args in (
        ["history", "billing"],
        ["explain", "billing", "--from", "2026-11-01", "--count", "3"],
    ):
        shown = project.cli("-q", *args, env={"COLUMNS": "80"})
        assert shown.exit_code == 0, shown.output
        assert "…" not in shown.stdout, shown.stdout
    explained = project.cli(
        "-q", "explain", "billing", "--from", "2026-11-01", "--count", "3", env={"COLUMNS": "80"}
    ).stdout
    assert "(America/New_York) 2026-11-01" in explained and "2026-11-01T04:00:00Z" in explained


def test_jobs_json_has_utc_times_and_counts_exhausted_apart(project: Project) -> None:
    import json

    project.write(job_toml("billing", command=["false"], max_attempts=1, timezone="Europe/Berlin"))
    assert project.cli("-q", "run", "billing", "--period", "2026-10-02").exit_code == 1
    (line,) = json.loads(project.cli("-q", "jobs", "--json").stdout)
    assert line["first_period"] == "2026-10-01"
    assert line["first_period_start"] == "2026-09-30T22:00:00Z"
    assert line["last_success"] is None and line["last_success_start"] is None
    assert (line["failed"], line["exhausted"]) == (0, 1)
    table = project.cli("-q", "jobs")
    assert "0 + 1 exhausted" in table.stdout


def test_a_job_whose_first_period_is_ahead_gives_a_window_that_runs_forward(
    project: Project, sql: Any
) -> None:
    import json
    from datetime import timedelta

    (now,) = sql("SELECT clock_timestamp()")[0]
    later = (now + timedelta(days=40)).date().isoformat()
    project.write(f'[jobs.later]\nschedule = "daily"\nstart = "{later}"\ncommand = ["true"]\n')
    document = json.loads(project.cli("-q", "scan", "--json").stdout)
    assert document["since"] <= document["until"]
    assert document["jobs"][0]["expected"] == 0


def test_a_calls_prints_are_kept_and_a_failure_in_a_replay_shows_how_it_ended(
    project: Project, sql: Any
) -> None:
    """A Python call's print() was never kept, though `history --period` promises the output
    tail; tick and replay, which do not stream output, never showed why a period failed."""
    (project.path / "printing.py").write_text(
        "def run(ctx):\n    print('exported', ctx.period, 'rows 1-500')\n"
    )
    project.write(
        job_toml("export", call="printing:run")
        + job_toml(
            "fragile", command=["sh", "-c", "echo connecting; echo refused: db-7 >&2; exit 4"]
        )
    )
    ran = from_root(project, "run", "export", "--period", "2026-10-02")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "exported 2026-10-02 rows 1-500" in ran.stdout  # run streams it, as for a command
    shown = project.cli("-q", "history", "export", "--period", "2026-10-02")
    assert "exported 2026-10-02 rows 1-500" in shown.stdout
    replayed = from_root(
        project,
        "-q",
        "replay",
        "--job",
        "fragile",
        "--since",
        "2026-10-02",
        "--until",
        "2026-10-03",
    )
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr
    assert "  │ refused: db-7" in replayed.stdout and "  │ connecting" in replayed.stdout


def test_a_bare_date_ending_a_range_is_that_whole_day_and_runs_are_summed_up(
    project: Project, sql: Any
) -> None:
    """`mark sync 2026-10-01..2026-10-31` on a 15-minute job stopped at 2026-10-31T00:00:00Z
    and printed 2,881 lines: now the 31st is taken whole (2,976 periods), in one line."""
    project.write(job_toml("sync", "every 15 minutes", command=["true"]))
    marked = project.cli(
        "-q", "mark", "sync", "2026-10-01..2026-10-31", "--skip", "--reason", "migrated"
    )
    assert marked.exit_code == 0, marked.output
    assert sql("SELECT count(*), max(period_start) FROM {schema}.runs")[0][0] == 31 * 96
    (last,) = sql("SELECT max(period_start) FROM {schema}.runs")[0]
    assert (last.hour, last.minute, last.day) == (23, 45, 31)
    lines = marked.stdout.strip().splitlines()
    assert len(lines) == 2, lines
    assert (
        "2026-10-01T00:00:00Z .. 2026-10-31T23:45:00Z: missing → waived (2,976 periods)"
        in (lines[0])
    )
    assert lines[1] == "marked skip: 2976 of 2976 period(s)"


def test_an_interrupted_period_is_its_own_state_in_every_report(project: Project, sql: Any) -> None:
    """SIGTERM to a run: the period counts no failure, and scan, its JSON, the calendar,
    the metrics and jobs say `interrupted` (they said `failed` ✗), and replay runs it."""
    import json
    import signal

    from fix_processes import wait_for

    project.write(job_toml("billing", command=["sh", "-c", "[ -f go ] || sleep 60"]))
    assert project.cli("migrate").exit_code == 0
    proc = project.spawn("run", "billing", "--period", "2026-10-02")
    wait_for(
        lambda: sql("SELECT 1 FROM {schema}.runs WHERE status = 'running'"),
        timeout=60,
        what="the run to start",
    )
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    assert sql("SELECT status, failures, interrupted FROM {schema}.runs") == [("failed", 0, True)]
    window = ("--since", "2026-10-01", "--until", "2026-10-04")
    scanned = project.cli("scan", "--json", *window)
    (job,) = json.loads(scanned.stdout)["jobs"]
    assert (job["interrupted"], job["failed"], job["missing"]) == (1, 0, 2)
    assert [g["status"] for g in job["gaps"]] == ["missing", "interrupted", "missing"]
    table = project.cli("scan", *window, env={"COLUMNS": "200"})
    assert "interrupted" in table.stdout
    calendar = project.cli("scan", "--calendar", *window, env={"COLUMNS": "200"})
    assert "◐ interrupted" in calendar.stdout and "✗" not in calendar.stdout.split("legend")[0]
    metrics = project.cli("scan", "--format", "openmetrics", *window)
    assert 'catchup_interrupted_periods{job="billing"} 1' in metrics.stdout
    (listed,) = json.loads(project.cli("jobs", "--json").stdout)
    assert (listed["interrupted"], listed["failed"]) == (1, 0)
    (project.path / "go").write_text("")
    planned = project.cli("replay", "--dry-run", *window)
    assert "2026-10-02" in planned.stdout, planned.stdout
    ran = project.cli("replay", *window)
    assert ran.exit_code == 0, ran.output
    assert sql(
        "SELECT status, interrupted FROM {schema}.runs WHERE period_start = %s",
        ["2026-10-02T00:00:00Z"],
    ) == [("succeeded", False)]


def ledger_state(sql: Any) -> list[list[tuple[Any, ...]]]:
    return [
        sql(f"SELECT * FROM {{schema}}.{table} ORDER BY 1")
        for table in ("jobs", "schedules", "events", "runs", "history")
    ]


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_a_second_definition_of_a_job_is_refused_naming_both(project: Project, sql: Any) -> None:
    """Two projects on one ledger define `export` differently: the second is refused before
    it writes anything (exit 2, one line naming both, no secret from its command), through
    the CLI and the Python API alike; the same definition is welcome, and a config that says
    it is the first project ([project] name) may change the job."""
    from catchup import Catchup, ConfigError, make_job

    first, second = project.path / "first", project.path / "second"
    first.mkdir()
    second.mkdir()
    header = f'[database]\nschema = "{project.schema}"\n\n'
    daily = '[jobs.export]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
    hourly = (
        '[jobs.export]\nschedule = "hourly"\nstart = "2026-11-01"\n'
        'command = ["sh", "-c", "echo --token=s3cret"]\n'
    )
    (first / "catchup.toml").write_text(header + daily)
    (second / "catchup.toml").write_text(header + hourly)

    def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "catchup",
                "-q",
                "--config",
                str(folder / "catchup.toml"),
                *args,
            ],
            cwd=folder,
            env=project.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    ran = cli(first, "run", "export", "--period", "2026-10-02")
    assert ran.returncode == 0, ran.stderr
    assert sql("SELECT project FROM {schema}.jobs") == [(str(first / "catchup.toml"),)]
    before = ledger_state(sql)
    for args in (("run", "export", "--period", "2026-11-02T05:00:00Z"), ("tick",), ("scan",)):
        refused = cli(second, *args)
        assert refused.returncode == 2, (args, refused.stdout, refused.stderr)
        assert "Traceback" not in refused.stderr and "s3cret" not in refused.stderr
        (line,) = [ln for ln in refused.stderr.splitlines() if ln.strip()]
        assert str(first / "catchup.toml") in line and str(second / "catchup.toml") in line
        assert "daily (UTC) from 2026-10-01T00:00:00Z, runs true" in line
        assert "they differ in schedule, start, what it runs" in line
        assert ledger_state(sql) == before

    doctor = cli(second, "doctor")
    assert doctor.returncode != 0 and "defined by another project" in doctor.stdout, doctor.stdout
    assert ledger_state(sql) == before
    with (
        Catchup(
            jobs=[make_job("export", "hourly", "2026-11-01", command=["true"])],
            dsn=project.database.conninfo,
            schema=project.schema,
            project="billing-script",
        ) as app,
        pytest.raises(ConfigError, match=r"another project, .*first/catchup\.toml.*billing-script"),
    ):
        app.scan()
    assert ledger_state(sql) == before

    (second / "catchup.toml").write_text(header + daily)  # the same definition: welcome
    assert cli(second, "run", "export", "--period", "2026-10-03").returncode == 0
    assert sql("SELECT project FROM {schema}.jobs") == [(str(first / "catchup.toml"),)]

    said = f'[project]\nname = "{first / "catchup.toml"}"\n\n'
    (second / "catchup.toml").write_text(said + header + hourly)  # "I am that project"
    moved = cli(second, "tick")
    assert moved.returncode in (0, 1), moved.stderr
    assert sql("SELECT definition->>'schedule' FROM {schema}.jobs") == [("hourly",)]
