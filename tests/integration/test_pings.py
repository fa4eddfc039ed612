"""Observed jobs and ``catchup ping``: a job's own cron reports its runs, which settle its periods
through the one claim path; catchup never runs an observed job, and its missed periods are
gaps like any other's."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from fix_processes import wait_for
from fix_project import Project, job_toml

UUID = "5bf66975-d4c7-4bf5-bcc8-b8d8a82ea278"


def _days_ago(sql: Any, days: int) -> str:
    (day,) = sql(f"SELECT (now() AT TIME ZONE 'UTC')::date - {days}")[0]
    return str(day)


def _ping(project: Project, *args: str) -> dict[str, Any]:
    result = project.cli("-q", "ping", *args, "--json")
    assert result.exit_code == 0, result.output
    said: dict[str, Any] = json.loads(result.stdout)
    return said


def _scan(project: Project) -> dict[str, Any]:
    result = project.cli("-q", "scan", "--format", "json")
    job: dict[str, Any] = json.loads(result.stdout)["jobs"][0]
    return job


def test_an_observed_job_is_never_run_and_its_missed_periods_are_gaps(
    project: Project, sql: Any
) -> None:
    project.write(job_toml("vendor", "daily", _days_ago(sql, 3), ping=UUID))
    ticked = project.cli("-q", "tick", "--json")
    assert json.loads(ticked.stdout)["periods"] == []
    refused = project.cli("-q", "run", "vendor")
    assert refused.exit_code == 2
    assert "vendor is observed: its own cron runs it" in refused.stderr
    assert _scan(project)["missing"] == 3
    said = _ping(project, "vendor", "--exit", "0")
    assert (said["verdict"], said["attempt"]) == ("succeeded", 1)
    assert said["period"] == f"{_days_ago(sql, 1)}T00:00:00Z"  # the latest period due
    scanned = _scan(project)
    assert scanned["missing"] == 2 and scanned["succeeded"] == 1
    assert sql("SELECT owner FROM {schema}.history") == [("ping",)]


def test_a_finish_settles_the_period_its_start_claimed_not_the_latest(
    project: Project, sql: Any
) -> None:
    """A run that started for one period and finishes after the next fell due (here: a
    backfill of an older period) settles the period its start claimed."""
    project.write(job_toml("vendor", "daily", _days_ago(sql, 4), ping=UUID))
    older = _days_ago(sql, 3)
    started = _ping(project, "vendor", "--start", "--period", older, "--rid", "run-7")
    assert (started["verdict"], started["period"]) == ("started", f"{older}T00:00:00Z")
    assert sql("SELECT status FROM {schema}.runs") == [("running",)]
    finished = _ping(project, "vendor", "--rid", "run-7", "--exit", "0", "--body", "17 rows")
    assert (finished["verdict"], finished["period"]) == ("succeeded", f"{older}T00:00:00Z")
    assert sql("SELECT status, output_tail, owner FROM {schema}.runs") == [
        ("succeeded", "17 rows", "ping run-7")
    ]


def test_a_failing_exit_status_fails_the_period_and_keeps_its_output(
    project: Project, sql: Any
) -> None:
    project.write(job_toml("vendor", "daily", _days_ago(sql, 2), ping=UUID))
    said = _ping(project, "vendor", "--exit", "7", "--body", "disk full")
    assert said["verdict"] == "failed"
    row = sql("SELECT status, exit_code, output_tail, failures, error FROM {schema}.runs")
    assert row[0][:4] == ("failed", 7, "disk full", 1)
    assert "exit status 7" in row[0][4]
    again = _ping(project, "vendor")  # the cron's next try succeeds: the period is settled
    assert (again["verdict"], again["attempt"]) == ("succeeded", 2)


def test_a_ping_for_a_settled_period_is_kept_and_never_unsettles_it(
    project: Project, sql: Any
) -> None:
    project.write(job_toml("vendor", "daily", _days_ago(sql, 2), ping=UUID))
    assert _ping(project, "vendor")["verdict"] == "succeeded"
    late_failure = _ping(project, "vendor", "--fail")
    assert late_failure["verdict"] == "kept"
    assert sql("SELECT status, attempt FROM {schema}.runs") == [("succeeded", 1)]
    events = sql("SELECT action, previous, reason FROM {schema}.events ORDER BY id")
    assert events[-1] == ("ping", "succeeded", "fail ping: the period is succeeded: kept as it was")
    logged = _ping(project, "vendor", "--log", "--body", "line one\nline two")
    assert logged["verdict"] == "logged"
    assert sql("SELECT reason FROM {schema}.events ORDER BY id DESC LIMIT 1") == [
        ("log: line one line two",)
    ]


def test_a_ping_before_any_period_is_due_writes_nothing(project: Project, sql: Any) -> None:
    project.write(job_toml("vendor", "daily", _days_ago(sql, -2), ping=UUID))
    said = _ping(project, "vendor")
    assert said["verdict"] == "not_due" and said["period"] is None
    assert sql("SELECT count(*) FROM {schema}.runs") == [(0,)]


def test_a_ping_that_names_a_period_not_yet_over_is_refused(project: Project, sql: Any) -> None:
    project.write(job_toml("vendor", "daily", _days_ago(sql, 2), ping=UUID))
    today = _days_ago(sql, 0)
    refused = project.cli("-q", "ping", "vendor", "--period", today)
    assert refused.exit_code == 2
    assert "a ping settles a period that is over" in refused.stderr
    assert sql("SELECT count(*) FROM {schema}.runs") == [(0,)]


def test_bad_pings_are_one_line_and_write_nothing(project: Project, sql: Any) -> None:
    project.write(
        job_toml("vendor", "daily", _days_ago(sql, 2), ping=UUID)
        + job_toml("billing", "daily", _days_ago(sql, 2), command=["true"])
    )
    for args, words in (
        (["billing"], 'billing has no ping: add ping = "<uuid>"'),
        (["vendor", "--start", "--exit", "1"], "a start ping has no exit status"),
        (["vendor", "--exit", "256"], "256 is not in the range 0<=x<=255"),
        (["nobody"], "unknown job 'nobody'"),
    ):
        result = project.cli("-q", "ping", *args)
        assert result.exit_code == 2, (args, result.output)
        assert words in result.output, (args, result.output)
        assert "Traceback" not in result.output
    # refused before a database is touched: no table of the ledger was made (a team's database
    # gives each test its schema, empty; the embedded one makes none)
    made = "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s"
    assert sql(made, (project.schema,)) == [(0,)]


def test_a_ping_uuid_is_checked_and_never_shared(project: Project) -> None:
    project.write(
        job_toml("vendor", "daily", ping="not-a-uuid")
        + job_toml("a", "daily", ping=UUID)
        + job_toml("b", "daily", ping=UUID.upper())
    )
    result = project.cli("-q", "scan")
    assert result.exit_code == 2
    assert "jobs.vendor.ping: expected a UUID" in result.stderr
    assert "jobs.b.ping: a has this ping already" in result.stderr


def test_replay_runs_what_the_cron_missed_and_a_ping_never_wins_a_period_it_runs(
    project: Project, sql: Any
) -> None:
    """A job with a command and a ping: tick leaves it to its cron; replay runs the periods
    the cron missed; a ping for a period replay holds is kept, and replay's run is recorded."""
    start = _days_ago(sql, 3)
    marker = project.path / "ran"
    project.write(
        job_toml(
            "export",
            "daily",
            start,
            ping=UUID,
            command=["sh", "-c", f"echo $CATCHUP_PERIOD >> {marker}"],
        )
    )
    assert json.loads(project.cli("-q", "tick", "--json").stdout)["periods"] == []
    assert _ping(project, "export", "--period", start)["verdict"] == "succeeded"
    replayed = project.cli("-q", "replay", "--since", start, "--json")
    ran = sorted(p["label"] for p in json.loads(replayed.stdout)["periods"])
    assert ran == [_days_ago(sql, 2), _days_ago(sql, 1)]  # the cron's one run is not redone
    assert sorted(marker.read_text().split()) == ran
    counts = _scan(project)
    assert counts["succeeded"] == 3 and counts.get("missing", 0) == 0
    assert sql("SELECT count(*) FROM {schema}.history") == [(3,)]


@pytest.mark.slow  # six processes racing
def test_many_pings_and_runs_for_one_period_at_once_make_one_attempt(
    project: Project, sql: Any
) -> None:
    """Real processes racing for one period: pings and catchup runs. One claim wins; every
    other ping is kept in the audit trail, every other run says another has it."""
    start = _days_ago(sql, 2)
    project.write(job_toml("export", "daily", start, ping=UUID, command=["sleep", "1"]))
    assert project.cli("-q", "scan").exit_code in (0, 1)  # the job registered before the race
    racers = [project.spawn("-q", "ping", "export", "--period", start) for _ in range(4)]
    racers += [project.spawn("-q", "run", "export", "--period", start) for _ in range(2)]
    for racer in racers:
        _, err = racer.communicate(timeout=120)
        assert racer.returncode == 0, err
    assert sql("SELECT status, attempt FROM {schema}.runs") == [("succeeded", 1)]
    assert sql("SELECT count(*) FROM {schema}.history") == [(1,)]
    (kept,) = sql("SELECT count(*) FROM {schema}.events WHERE action = 'ping'")[0]
    (winner,) = sql("SELECT owner FROM {schema}.history")[0]
    pings_lost = 4 - (1 if winner.startswith("ping") else 0)
    assert kept == pings_lost


def test_named_periods_across_a_dst_change_settle_each_its_own(project: Project) -> None:
    """Berlin's spring-forward night of 2026-03-29: 02:30 does not exist, so the period
    starting then begins at 03:30 CEST (01:30Z) and the next is 23 hours long; a backfill's
    pings name each, and each settles its own."""
    project.write(
        job_toml("vendor", "30 2 * * *", "2026-03-27", timezone="Europe/Berlin", ping=UUID)
    )
    spans = []
    for start in ("2026-03-28T01:30:00Z", "2026-03-29T01:30:00Z"):
        said = _ping(project, "vendor", "--period", start)
        assert said["verdict"] == "succeeded" and said["start"] == start
        spans.append((said["start"], said["end"]))
    assert spans == [
        ("2026-03-28T01:30:00Z", "2026-03-29T01:30:00Z"),
        ("2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z"),
    ]
    refused = project.cli("-q", "ping", "vendor", "--period", "2026-03-29T00:30:00Z")
    assert refused.exit_code == 2 and "not a period start" in refused.stderr


def test_why_says_no_ping_came_and_names_the_ping_that_settles_it(
    project: Project, sql: Any
) -> None:
    project.write(job_toml("vendor", "daily", _days_ago(sql, 3), ping=UUID))
    assert _ping(project, "vendor")["verdict"] == "succeeded"
    older = _days_ago(sql, 2)
    said = project.cli("-q", "why", "vendor", older)
    flat = " ".join(said.output.split())
    assert f"no ping for this period; the last one settled {_days_ago(sql, 1)}" in flat
    assert f"catchup ping vendor --period {older}" in flat


def test_a_keyed_job_takes_a_ping_per_key(project: Project, sql: Any) -> None:
    project.write(job_toml("vendor", "daily", _days_ago(sql, 2), ping=UUID, keys=["eu", "us"]))
    said = _ping(project, "vendor", "--key", "eu")
    assert (said["key"], said["verdict"]) == ("eu", "succeeded")
    assert sql("SELECT key, status FROM {schema}.runs") == [("eu", "succeeded")]
    unknown = project.cli("-q", "ping", "vendor", "--key", "asia")
    assert (
        unknown.exit_code == 2 and "vendor has no key 'asia' (its keys: eu, us)" in unknown.stderr
    )
    keyless = project.cli("-q", "ping", "vendor")
    assert keyless.exit_code == 2 and "a ping names one (--key)" in keyless.stderr


def test_a_job_waits_for_an_observed_one_until_its_ping(project: Project, sql: Any) -> None:
    """billing after the vendor's export: billing's period is blocked until the vendor's cron
    reports the export's period, then it runs."""
    start = _days_ago(sql, 2)
    project.write(
        job_toml("vendor", "daily", start, ping=UUID)
        + job_toml("billing", "daily", start, command=["true"], after=["vendor"], catchup="latest")
    )
    first = json.loads(project.cli("-q", "tick", "--json").stdout)["periods"]
    assert [(p["job"], p["status"]) for p in first] == [("billing", "blocked")]
    assert _ping(project, "vendor")["verdict"] == "succeeded"
    second = json.loads(project.cli("-q", "tick", "--json").stdout)["periods"]
    assert [(p["job"], p["status"]) for p in second] == [("billing", "succeeded")]


def test_a_start_with_no_finish_by_its_lease_is_stale_and_a_late_finish_still_lands(
    project: Project, sql: Any
) -> None:
    """A start holds its period for the job's timeout: no finish by then and the period is
    stale, a gap as a vanished runner's; a finish that comes later still records the attempt
    while nobody took the period over."""
    project.write(job_toml("vendor", "daily", _days_ago(sql, 2), ping=UUID, timeout="1s"))
    assert _ping(project, "vendor", "--start", "--rid", "r-1")["verdict"] == "started"
    wait_for(lambda: _scan(project)["stale"] == 1, timeout=30, what="the start's lease to end")
    finished = _ping(project, "vendor", "--rid", "r-1")
    assert finished["verdict"] == "succeeded"
    assert _scan(project)["stale"] == 0


def test_a_finish_whose_start_was_taken_over_is_kept_never_planted_elsewhere(
    project: Project, sql: Any
) -> None:
    older = _days_ago(sql, 3)
    project.write(job_toml("vendor", "daily", _days_ago(sql, 4), ping=UUID, timeout="1s"))
    assert _ping(project, "vendor", "--start", "--rid", "r-9", "--period", older)["attempt"] == 1
    wait_for(lambda: _scan(project)["stale"] == 1, timeout=30, what="the start's lease to end")
    # another report of that period takes the stale claim over and settles it
    assert _ping(project, "vendor", "--period", older)["attempt"] == 2
    late = _ping(project, "vendor", "--rid", "r-9", "--exit", "1")
    assert (late["verdict"], late["period"]) == ("kept", f"{older}T00:00:00Z")
    assert sql("SELECT period_start::date::text, status FROM {schema}.runs") == [
        (older, "succeeded")
    ]


def test_a_start_without_a_run_id_pairs_only_while_its_lease_holds(
    project: Project, sql: Any
) -> None:
    older = _days_ago(sql, 3)
    project.write(job_toml("vendor", "daily", _days_ago(sql, 4), ping=UUID, timeout="1s"))
    _ping(project, "vendor", "--start", "--period", older)
    wait_for(lambda: _scan(project)["stale"] == 1, timeout=30, what="the start's lease to end")
    later = _ping(project, "vendor")  # a run of its own: the latest period's
    assert (later["verdict"], later["period"]) == ("succeeded", f"{_days_ago(sql, 1)}T00:00:00Z")


def test_a_ping_never_finishes_an_attempt_a_host_named_ping_holds(
    project: Project, sql: Any
) -> None:
    """An owner is "host:pid": a runner on a host whose name begins with "ping" is not a
    start ping's attempt."""
    project.write(
        job_toml("vendor", "daily", _days_ago(sql, 2), ping=UUID, command=["sleep", "60"])
    )
    assert _ping(project, "vendor", "--log")["verdict"] == "logged"  # registered
    (job_id,) = sql("SELECT id FROM {schema}.jobs WHERE name = 'vendor'")[0]
    latest = _days_ago(sql, 1)
    sql(
        "INSERT INTO {schema}.runs (job_id, period_start, period_end, status, attempt, owner,"
        " claimed_at, lease_expires_at) VALUES (%s, %s::date, %s::date + 1, 'running', 1,"
        " 'pingworker:4242', now(), now() + interval '1 hour')",
        (job_id, latest, latest),
    )
    said = _ping(project, "vendor")
    assert said["verdict"] == "busy"
    assert sql("SELECT status, owner FROM {schema}.runs") == [("running", "pingworker:4242")]


def test_a_log_ping_keeps_what_the_database_could_not_and_names_no_future_period(
    project: Project, sql: Any
) -> None:
    project.write(job_toml("vendor", "daily", _days_ago(sql, 2), ping=UUID))
    assert _ping(project, "vendor", "--log", "--body", "a\x00b\x1b[31m")["verdict"] == "logged"
    (reason,) = sql("SELECT reason FROM {schema}.events")[0]
    assert reason.startswith("log: a") and "\x00" not in reason
    future = project.cli("-q", "ping", "vendor", "--log", "--period", _days_ago(sql, 0))
    assert future.exit_code == 2 and "a ping settles a period that is over" in future.stderr
    bad_rid = project.cli("-q", "ping", "vendor", "--rid", "\x1b[31m")
    assert bad_rid.exit_code == 2 and "a run id is 1 to 64 letters" in bad_rid.stderr


def test_a_huge_body_on_stdin_keeps_its_tail(project: Project, sql: Any) -> None:
    project.write(job_toml("vendor", "daily", _days_ago(sql, 2), ping=UUID))
    body = "x" * 400_000 + "the end"
    done = subprocess.run(
        project.command("-q", "ping", "vendor", "--body", "-"),
        input=body,
        cwd=project.path,
        env=project.env(),
        text=True,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (tail,) = sql("SELECT output_tail FROM {schema}.runs")[0]
    assert tail.endswith("the end") and len(tail) <= 100_000
