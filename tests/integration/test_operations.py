"""Fixing the ledger by hand, pausing, and the scheduler's pulse: audited, refused when running."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fix_project import Project


def setup(project: Project, log: Path | None = None, **keys: Any) -> None:
    command = ["sh", "-c", f'echo "$CATCHUP_JOB $CATCHUP_PERIOD" >> {log}'] if log else ["true"]
    lines = [
        "[jobs.billing]",
        'schedule = "daily"',
        'start = "2026-10-01"',
        f"command = {json.dumps(command)}",
    ]
    lines += [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    project.write("\n".join(lines) + "\n")
    assert project.cli("migrate").exit_code == 0


def status(sql: Any, day: str) -> Any:
    rows = sql(
        "SELECT status, attempt, failures FROM {schema}.runs WHERE period_start = %s",
        [datetime.fromisoformat(day).replace(tzinfo=UTC)],
    )
    return rows[0] if rows else None


def test_mark_done_and_skip_with_ranges_and_audit(project: Project, sql: Any) -> None:
    setup(project)
    assert project.cli("run", "billing", "--period", "2026-10-02").exit_code == 0
    done = project.cli(
        "-q",
        "mark",
        "billing",
        "2026-10-01..2026-10-03",
        "--done",
        "--reason",
        "ran by hand",
        "--actor",
        "ops@desk",
    )
    assert done.exit_code == 0, done.output
    assert "billing 2026-10-01: missing → waived" in done.stdout
    # done means done: the period that succeeded stays succeeded
    assert "billing 2026-10-02: unchanged (already succeeded)" in done.stdout
    assert "marked done: 2 of 3 period(s)" in done.stdout
    skip = project.cli("-q", "mark", "billing", "2026-10-05", "--skip", "--reason", "freeze")
    assert skip.exit_code == 0
    assert [status(sql, f"2026-10-0{d}")[0] for d in (1, 2, 3, 5)] == [
        "waived",
        "succeeded",
        "waived",
        "waived",
    ]
    assert status(sql, "2026-10-01")[1] == 0  # no attempt was ever made
    events = sql("SELECT action, previous, reason, actor FROM {schema}.events ORDER BY id")
    assert events[:2] == [
        ("done", "missing", "ran by hand", "ops@desk"),
        ("done", "missing", "ran by hand", "ops@desk"),
    ]
    assert events[2][:3] == ("skip", "missing", "freeze") and "@" in events[2][3]
    history = project.cli("-q", "history", "billing", "--json")
    changes = json.loads(history.stdout)["changes"]
    assert {c["action"] for c in changes} == {"done", "skip"}
    table = project.cli("-q", "history", "billing")
    assert "changes to billing" in table.stdout and "ops@desk" in table.stdout
    scan = json.loads(project.cli("-q", "scan", "--json", "--until", "2026-10-06").stdout)
    assert scan["jobs"][0]["waived"] == 3 and scan["jobs"][0]["succeeded"] == 1
    assert scan["jobs"][0]["missing"] == 1
    # a waived period is never run
    assert "waived by hand" in project.cli("run", "billing", "--period", "2026-10-01").stdout


def test_reset_makes_done_and_exhausted_periods_runnable(project: Project, sql: Any) -> None:
    log = project.path / "log"
    setup(project, log, max_attempts=1)
    project.cli("run", "billing", "--period", "2026-10-01")
    project.cli("-q", "mark", "billing", "2026-10-02", "--skip", "--reason", "x")
    sql(
        "INSERT INTO {schema}.runs (job_id, period_start, period_end, status, attempt, failures)"
        " SELECT id, '2026-10-03', '2026-10-04', 'failed', 4, 1 FROM {schema}.jobs"
    )  # exhausted
    result = project.cli(
        "-q", "reset", "billing", "2026-10-01..2026-10-04", "--reason", "rates were wrong"
    )
    assert result.exit_code == 0, result.output
    assert "billing 2026-10-04: unchanged" in result.stdout
    assert "reset: 3 of 4 period(s)" in result.stdout
    assert status(sql, "2026-10-01") == ("failed", 1, 0)
    assert status(sql, "2026-10-03") == ("failed", 4, 0)
    assert status(sql, "2026-10-04") is None
    replay = project.cli("-q", "replay", "--since", "2026-10-01", "--until", "2026-10-05", "--json")
    attempts = {p["period"][:10]: p["attempt"] for p in json.loads(replay.stdout)["periods"]}
    assert attempts == {"2026-10-01": 2, "2026-10-02": 1, "2026-10-03": 5, "2026-10-04": 1}
    assert Counter(line.split()[1] for line in log.read_text().splitlines())["2026-10-01"] == 2
    previous = sql("SELECT previous FROM {schema}.events WHERE action = 'reset' ORDER BY 1")
    assert previous == [("failed",), ("succeeded",), ("waived",)]


def test_mark_and_reset_refuse_a_running_period(project: Project, sql: Any) -> None:
    setup(project)
    project.cli("run", "billing", "--period", "2026-10-01")
    sql(
        "INSERT INTO {schema}.runs (job_id, period_start, period_end, status, attempt,"
        " lease_expires_at) SELECT id, '2026-10-02', '2026-10-03', 'running', 1,"
        " clock_timestamp() + interval '1 hour' FROM {schema}.jobs"
    )
    before = sql("SELECT period_start, status FROM {schema}.runs ORDER BY 1")
    for args in (
        ["mark", "billing", "2026-10-01..2026-10-03", "--done", "--reason", "x"],
        ["reset", "billing", "2026-10-01..2026-10-02", "--reason", "x"],
    ):
        result = project.cli("-q", *args)
        assert result.exit_code == 2
        assert "2026-10-02 is running; nothing was changed" in result.stderr
    assert sql("SELECT period_start, status FROM {schema}.runs ORDER BY 1") == before
    assert sql("SELECT count(*) FROM {schema}.events") == [(0,)]


@pytest.mark.parametrize(
    "args",
    [
        ["mark", "billing", "2026-10-01T05:00:00Z", "--done", "--reason", "x"],
        ["mark", "billing", "2026-09-01", "--done", "--reason", "x"],
        ["mark", "billing", "2026-10-05..2026-10-01", "--done", "--reason", "x"],
        ["mark", "billing", "2026-10-01", "--reason", "x"],
        ["mark", "billing", "2026-10-01", "--done"],
        ["reset", "billing", "someday", "--reason", "x"],
    ],
)
def test_mark_and_reset_usage_errors(project: Project, sql: Any, args: list[str]) -> None:
    setup(project)
    result = project.cli("-q", *args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert sql("SELECT count(*) FROM {schema}.runs") == [(0,)]


def outage(project: Project, sql: Any, log: Path, policy: str) -> None:
    (today,) = sql("SELECT date_trunc('day', clock_timestamp())")[0]
    start = (today - timedelta(days=40)).date().isoformat()
    project.write(
        f'[jobs.billing]\nschedule = "daily"\nstart = "{start}"\ncatchup = "{policy}"\n'
        f'command = ["sh", "-c", "echo $CATCHUP_PERIOD >> {log}"]\n'
    )
    assert project.cli("migrate").exit_code == 0
    project.cli("-q", "scan")
    for n in range(10):  # ten good days, then a month paused
        sql(
            "INSERT INTO {schema}.runs (job_id, period_start, period_end, status, attempt)"
            " SELECT id, %s, %s, 'succeeded', 1 FROM {schema}.jobs",
            [today - timedelta(days=40 - n), today - timedelta(days=39 - n)],
        )


# 30 days paused; "all" runs those whose period starts inside the 30-day catchup_window (29:
# the oldest began a few hours before the window), "latest" the newest, "none" nothing old.
@pytest.mark.parametrize(("policy", "runs"), [("all", 29), ("latest", 1), ("none", 0)])
def test_pause_and_resume_follow_the_catchup_policy(
    project: Project, sql: Any, policy: str, runs: int
) -> None:
    log = project.path / "log"
    outage(project, sql, log, policy)
    paused = project.cli("-q", "pause", "billing", "--reason", "vendor outage")
    assert paused.exit_code == 0 and "paused since" in paused.stdout
    ticked = project.cli("-q", "tick", "--json")
    assert json.loads(ticked.stdout)["totals"]["planned"] == 0  # paused: nothing claimed
    run = project.cli("run", "billing")
    assert run.exit_code == 0 and "is paused" in run.stdout
    scan = json.loads(project.cli("-q", "scan", "--json").stdout)
    assert scan["jobs"][0]["paused"] is True and scan["jobs"][0]["gaps"] == []
    resumed = project.cli("-q", "resume", "billing")
    assert resumed.exit_code == 0 and f"catchup = '{policy}'" in resumed.stdout
    project.cli("-q", "tick")
    ran = log.read_text().split() if log.exists() else []
    assert len(ran) == runs
    actions = [a for (a,) in sql("SELECT action FROM {schema}.events ORDER BY id")]
    assert actions == ["pause", "resume"]


def put_ticks(sql: Any, ticks: list[tuple[str, str]]) -> None:
    for host, ago in ticks:
        sql(
            "INSERT INTO {schema}.ticks (host, at) VALUES (%s, clock_timestamp() - %s::interval)",
            [host, ago],
        )


def test_a_stopped_scheduler_is_reported(project: Project, sql: Any) -> None:
    setup(project)
    put_ticks(sql, [("cron-1", f"{60 + 5 * n} minutes") for n in range(6)])
    scan = project.cli("-q", "scan", "--until", "2026-10-02")
    assert "scheduler: last tick" in scan.stdout and "from cron-1" in scan.stdout
    assert "seems to be gone" in scan.stdout
    jobs = project.cli("-q", "jobs")
    assert "seems to be gone" in jobs.stdout
    metrics = project.cli("-q", "scan", "--format", "openmetrics", "--until", "2026-10-02")
    assert "catchup_last_tick_timestamp_seconds " in metrics.stdout
    put_ticks(sql, [("cron-1", "1 minute")])
    fresh = project.cli("-q", "scan", "--until", "2026-10-02")
    assert "seems to be gone" not in fresh.stdout


def test_a_scheduler_in_every_replica_is_reported(project: Project, sql: Any) -> None:
    setup(project)
    put_ticks(
        sql,
        [
            ("pod-a", "10 seconds"),
            ("pod-b", "10 seconds"),
            ("pod-c", "10 seconds"),
            ("pod-a", "5 minutes 10 seconds"),
        ],
    )
    scan = project.cli("-q", "scan", "--until", "2026-10-02")
    assert "ticks from 3 hosts in the same minute" in scan.stdout
    assert "pod-a, pod-b, pod-c" in scan.stdout
    md = project.cli("-q", "scan", "--format", "markdown", "--until", "2026-10-02")
    assert "> **warning:** ticks from 3 hosts" in md.stdout


def test_no_tick_yet_is_said(project: Project) -> None:
    setup(project)
    assert "no tick recorded yet" in project.cli("-q", "jobs").stdout


def test_resume_of_a_job_that_is_not_paused_says_so(project: Project, sql: Any) -> None:
    """Nothing to resume: said plainly, and no resume is recorded in the audit trail."""
    setup(project)
    result = project.cli("-q", "resume", "billing")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "billing: not paused; nothing to resume"
    assert sql("SELECT count(*) FROM {schema}.events WHERE action = 'resume'") == [(0,)]
    assert project.cli("-q", "pause", "billing").exit_code == 0
    resumed = project.cli("-q", "resume", "billing")
    assert "billing: resumed;" in resumed.stdout
    assert sql("SELECT count(*) FROM {schema}.events WHERE action = 'resume'") == [(1,)]
