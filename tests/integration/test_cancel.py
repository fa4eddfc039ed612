"""``catchup ps`` and ``catchup cancel`` across processes: the runner in one process, ps and
cancel in others (as they would be on other hosts), the request carried by the ledger to the
running attempt's heartbeat."""

from __future__ import annotations

import json
import signal
import time
from datetime import date, timedelta
from typing import Any

import pytest
from fix_processes import process_gone, wait_for, written_pid
from fix_project import Project, job_toml

from catchup.api import Catchup

LEASE = 3  # seconds: a heartbeat every second
GRACE = 1


def yesterday(sql: Any) -> date:
    """The last whole day on the database clock: the period `catchup run` runs."""
    day: date = sql("SELECT (clock_timestamp() AT TIME ZONE 'UTC')::date - 1")[0][0]
    return day


def script(pids: str, first: str, later: str = "sleep 2") -> list[str]:
    """Attempt 1 writes its pid and does ``first``; a later attempt does ``later``."""
    return [
        "sh",
        "-c",
        f'if [ "$CATCHUP_ATTEMPT" = 1 ]; then echo $$ > {pids}; {first}; else {later}; fi',
    ]


def attempts(sql: Any) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = sql(
        "SELECT attempt, status, error FROM {schema}.history ORDER BY attempt"
    )
    return rows


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_cancel_from_another_process_stops_the_job_and_the_next_tick_runs_it(
    project: Project, sql: Any
) -> None:
    """A period running in one process is listed by `ps` in another and cancelled from a third
    within lease/3 + kill_grace (plus the time to record it); the job got SIGTERM; the attempt
    is `cancelled`, no failure counted, audited; the next tick runs it as attempt 2, which the
    request for attempt 1 leaves alone (its heartbeats see no cancel)."""
    day = yesterday(sql)
    pids = project.path / "pid"
    term = project.path / "term"
    first = f"trap 'echo term > {term}; exit 143' TERM; sleep 60 & wait"
    project.write(
        job_toml(
            "bill",
            start=day.isoformat(),
            lease=f"{LEASE}s",
            kill_grace=f"{GRACE}s",
            command=script(str(pids), first),
        )
    )
    runner = project.spawn("run", "bill")
    wait_for(pids.exists, what="the job to start")

    listed = project.run("ps", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)["running"]
    assert row["job"] == "bill" and row["attempt"] == 1
    assert row["period"]["label"] == day.isoformat()
    assert row["owner"].endswith(f":{runner.pid}") and row["cancelling"] is False
    shown = project.run("ps")
    assert "bill" in shown.stdout and day.isoformat() in shown.stdout

    asked = time.monotonic()
    done = project.run(
        "cancel", "bill", day.isoformat(), "--reason", "wrong rates", "--actor", "ops"
    )
    took = time.monotonic() - asked
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"cancelled bill {day.isoformat()} (attempt 1" in done.stdout
    # the heartbeat (every lease/3) saw it, the job stopped at SIGTERM: well inside the bound
    assert took < LEASE / 3 + GRACE + 3, took
    assert term.read_text().strip() == "term"
    out, _ = runner.communicate(timeout=30)
    # the period was not done: run exits 130 (interrupted), as under Ctrl-C, though no failure
    assert runner.returncode == 130 and "cancelled by ops: wrong rates" in out

    assert attempts(sql) == [(1, "cancelled", "cancelled by ops: wrong rates")]
    assert sql("SELECT status, failures, interrupted FROM {schema}.runs") == [("failed", 0, True)]
    assert sql("SELECT action, previous, reason, actor FROM {schema}.events") == [
        ("cancel", "running", "wrong rates", "ops")
    ]
    tick = project.run("tick")
    assert tick.returncode == 0, tick.stdout + tick.stderr
    assert attempts(sql)[1] == (2, "succeeded", None)
    assert sql("SELECT status, attempt, failures FROM {schema}.runs") == [("succeeded", 2, 0)]


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_a_job_that_ignores_sigterm_is_killed_after_kill_grace(project: Project, sql: Any) -> None:
    day = yesterday(sql)
    pids = project.path / "pid"
    project.write(
        job_toml(
            "bill",
            start=day.isoformat(),
            lease=f"{LEASE}s",
            kill_grace=f"{GRACE}s",
            command=script(str(pids), "trap '' TERM; sleep 60 & wait; wait"),
        )
    )
    runner = project.spawn("run", "bill")
    pid = wait_for(lambda: written_pid(pids), what="the job's pid")
    done = project.run("cancel", "bill", day.isoformat(), "--reason", "stuck")
    assert done.returncode == 0, done.stdout + done.stderr
    assert process_gone(pid)
    runner.communicate(timeout=30)
    ((status, exit_code),) = sql("SELECT status, exit_code FROM {schema}.history")
    assert (status, exit_code) == ("cancelled", -signal.SIGKILL)


def test_a_call_sees_ctx_cancelled(project: Project, sql: Any) -> None:
    """A Python call is asked, not killed: ctx.cancelled is set and it returns."""
    day = yesterday(sql)
    seen, started = project.path / "seen", project.path / "started"
    (project.path / "slowjob.py").write_text(
        "import time\n"
        "def work(ctx):\n"
        f"    open({str(started)!r}, 'w').write('started')\n"
        "    deadline = time.monotonic() + 60\n"
        "    while not ctx.cancelled.is_set() and time.monotonic() < deadline:\n"
        "        time.sleep(0.02)\n"
        f"    open({str(seen)!r}, 'w').write(str(ctx.cancelled.is_set()))\n"
    )
    project.write(job_toml("sync", start=day.isoformat(), lease=f"{LEASE}s", call="slowjob:work"))
    runner = project.spawn("run", "sync")
    wait_for(started.exists, what="the call to start")
    with Catchup(str(project.config), dsn=project.database.conninfo) as app:
        said = app.cancel("sync", day.isoformat(), reason="not today", actor="api")
    assert said.outcome == "cancelled" and said.done and not said.gone
    assert seen.read_text() == "True"
    runner.communicate(timeout=30)
    assert attempts(sql) == [(1, "cancelled", "cancelled by api: not today")]


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_a_runner_that_is_gone_is_recorded_cancelled_once_its_lease_runs_out(
    project: Project, sql: Any
) -> None:
    """SIGKILL the runner (its job goes with it): nobody renews the lease. `--no-wait` only
    asks; `ps` says the attempt is being cancelled; a waiting cancel records the attempt
    itself once the lease has run out, fenced, with no failure counted."""
    day = yesterday(sql)
    pids = project.path / "pid"
    project.write(
        job_toml(
            "bill",
            start=day.isoformat(),
            lease="8s",  # long enough for the first cancel to find it still live
            command=script(str(pids), "sleep 60"),
        )
    )
    runner = project.spawn("run", "bill")
    wait_for(pids.exists, what="the job to start")
    runner.send_signal(signal.SIGKILL)
    runner.communicate(timeout=30)

    asked = project.run("cancel", "bill", day.isoformat(), "--reason", "gone", "--no-wait")
    assert asked.returncode == 0 and "asked bill" in asked.stdout, asked.stdout + asked.stderr
    (row,) = json.loads(project.run("ps", "--json").stdout)["running"]
    assert row["cancelling"] is True

    again = project.run("cancel", "bill", day.isoformat(), "--reason", "second", "--json")
    assert again.returncode == 0, again.stdout + again.stderr
    said = json.loads(again.stdout)
    assert said["status"] == "cancelled" and said["runner_gone"] is True
    ((status, error),) = sql("SELECT status, error FROM {schema}.history")
    assert status == "cancelled" and error.startswith("cancelled by ") and ": gone" in error
    assert sql("SELECT status, failures, interrupted FROM {schema}.runs") == [("failed", 0, True)]
    # the second request kept the first: one request, one audit row
    assert sql("SELECT reason FROM {schema}.cancels") == [("gone",)]
    assert sql("SELECT count(*) FROM {schema}.events")[0][0] == 1
    assert project.run("ps", "--json").stdout.count('"job"') == 0


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_cancel_of_a_keyed_period_in_a_batch(project: Project, sql: Any) -> None:
    """A keyed job's periods run in batches (their leases renewed together): the request for
    one key's attempt reaches it through the batch's renewal, and only that period stops."""
    day = yesterday(sql)
    pids = project.path / "pid"
    keys = [f"t{i:03}" for i in range(10)]
    project.write(
        job_toml(
            "invoice",
            start=day.isoformat(),
            lease=f"{LEASE}s",
            kill_grace=f"{GRACE}s",
            keys=keys,
            command=[
                "sh",
                "-c",
                f'if [ "$CATCHUP_KEY" = t004 ]; then echo $$ > {pids}; sleep 60; fi',
            ],
        )
    )
    since, until = day.isoformat(), (day + timedelta(days=1)).isoformat()
    runner = project.spawn(
        "replay", "--job", "invoice", "--since", since, "--until", until, "--workers", "1"
    )
    wait_for(pids.exists, what="the job to start")
    # t004 runs in a batch: periods after it were claimed with it and wait
    behind = sql("SELECT key FROM {schema}.runs WHERE status = 'running' AND key > 't004'")
    assert behind, "nothing was claimed with t004"
    refused = project.run("cancel", "invoice", since, "--reason", "r")
    assert refused.returncode == 2 and "--key" in refused.stderr
    done = project.run("cancel", "invoice", since, "--key", "t004", "--reason", "wrong tenant")
    assert done.returncode == 0, done.stdout + done.stderr
    # the runner heard it through the batch's renewal: not recorded as gone by cancel
    assert "cancelled invoice t004" in done.stdout and "the job was stopped" in done.stdout
    out, _ = runner.communicate(timeout=30)
    assert "cancelled by " in out and ": wrong tenant" in out, out
    assert sql("SELECT key, status FROM {schema}.history ORDER BY key") == [
        (key, "cancelled" if key == "t004" else "succeeded") for key in keys
    ]


def test_cancel_refuses_a_period_that_is_not_running_and_writes_nothing(
    project: Project, sql: Any
) -> None:
    day = yesterday(sql)
    start = day - timedelta(days=10)
    project.write(job_toml("bill", start=start.isoformat(), command=["true"]))
    assert project.run("run", "bill", "--period", day.isoformat()).returncode == 0
    for period, state in ((day, "succeeded"), (day - timedelta(days=5), "missing")):
        said = project.run("cancel", "bill", period.isoformat(), "--reason", "r")
        assert said.returncode == 2 and said.stdout == ""
        assert said.stderr.strip().splitlines()[-1] == (
            f"catchup: bill {period.isoformat()}: not running (it is {state}); nothing to cancel"
        )
    bad = project.run("cancel", "bill", "2026-13-01", "--reason", "r")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert sql("SELECT count(*) FROM {schema}.cancels")[0][0] == 0
    assert sql("SELECT count(*) FROM {schema}.events")[0][0] == 0


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_a_cancelled_period_is_cancelled_in_why_and_a_later_failure_counts_as_the_first(
    project: Project, sql: Any
) -> None:
    """`run` of a period someone cancelled exits 130 (not done, as under Ctrl-C); `why` calls
    it cancelled, not interrupted; the next attempt's failure is failure 1 of max_attempts (a
    cancelled attempt counts none), whatever its attempt number."""
    day = yesterday(sql)
    pids = project.path / "pid"
    project.write(
        job_toml(
            "bill",
            start=day.isoformat(),
            lease=f"{LEASE}s",
            kill_grace=f"{GRACE}s",
            max_attempts=3,
            command=script(str(pids), "sleep 60 & wait", later="exit 1"),
        )
    )
    runner = project.spawn("run", "bill")
    wait_for(pids.exists, what="the job to start")
    done = project.run("cancel", "bill", day.isoformat(), "--reason", "wrong rates")
    assert done.returncode == 0, done.stdout + done.stderr
    out, _ = runner.communicate(timeout=30)
    assert runner.returncode == 130, out

    why = project.run("why", "bill", day.isoformat(), "--json")
    said = json.loads(why.stdout)
    assert said["state"] == "cancelled", said
    assert said["said"][0].startswith("cancelled (attempt 1, no failure counted): cancelled by ")
    text = project.run("why", "bill", day.isoformat()).stdout
    assert f"bill {day.isoformat()}: cancelled" in text and "interrupted" not in text
    # and so in every report: the scan, its table, jobs, the metrics (issue 46)
    window = ("--since", day.isoformat(), "--until", (day + timedelta(days=1)).isoformat())
    (job,) = json.loads(project.run("scan", *window, "--json").stdout)["jobs"]
    assert job["cancelled"] == 1 and job["interrupted"] == 0, job
    assert [gap["status"] for gap in job["gaps"]] == ["cancelled"], job
    table = project.run("scan", *window).stdout
    assert "cancelled" in table and "interrupted" not in table, table
    (line,) = json.loads(project.run("jobs", "--json").stdout)
    assert line["cancelled"] == 1 and line["interrupted"] == 0, line
    assert "1 cancelled" in project.run("jobs").stdout
    metrics = project.run("scan", *window, "--format", "openmetrics").stdout
    assert 'catchup_cancelled_periods{job="bill"} 1' in metrics, metrics
    assert 'catchup_interrupted_periods{job="bill"} 0' in metrics, metrics
    with Catchup(str(project.config), dsn=project.database.conninfo) as app:
        # not among the job page's failures that still stand: it counted none
        assert app.session.ledger.standing_failures(["bill"], 5, 100) == []

    failed = project.run("run", "bill", "--period", day.isoformat())
    assert failed.returncode == 1, failed.stdout + failed.stderr
    said = json.loads(project.run("why", "bill", day.isoformat(), "--json").stdout)
    assert said["state"] == "failed"
    assert said["said"][0].startswith("failed (failure 1 of 3, attempt 2)"), said
