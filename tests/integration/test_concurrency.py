"""Many replicas at once, killed runners and paused runners: real processes, real connections."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fix_processes import process_gone, serial_periods, timed_job, wait_for, written_pid
from fix_project import Project
from fix_proxy import Pooler
from paths import ROOT

from catchup.ledger import sqlfiles

WORKER = ROOT / "tests" / "helpers" / "worker.py"


def start_replicas(
    project: Project,
    count: int,
    job: str,
    periods: list[str],
    passes: str = "1",
    dsn: str | None = None,
) -> list[subprocess.Popen[str]]:
    """``count`` worker processes that wait at a barrier, then all start at once."""
    go = project.path / "go"
    ready = [project.path / f"ready-{i}" for i in range(count)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                str(project.config),
                job,
                str(go),
                str(ready[i]),
                passes,
                *periods,
            ],
            env=project.env(**({"CATCHUP_DSN": dsn} if dsn else {})),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(count)
    ]
    try:
        wait_for(
            lambda: all(r.exists() for r in ready), timeout=120, what="replicas at the barrier"
        )
    except AssertionError:
        # say where the late ones were: each one's state and what it printed, then fail
        said = []
        for n, proc in enumerate(procs):
            if ready[n].exists():
                continue
            if proc.poll() is None:
                proc.kill()
            _, err = proc.communicate(timeout=30)
            said.append(f"replica {n} (exit {proc.returncode}): {err.strip()[-2000:]}")
        raise AssertionError("replicas never reached the barrier:\n" + "\n".join(said)) from None
    go.touch()
    return procs


def collect(procs: list[subprocess.Popen[str]], timeout: float = 180) -> list[dict[str, Any]]:
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err
        outcomes += [json.loads(line) for line in out.splitlines()]
    return outcomes


def days(n: int, first: str = "2026-01-01") -> list[str]:
    start = datetime.fromisoformat(first).replace(tzinfo=UTC)
    return [(start + timedelta(days=i)).date().isoformat() for i in range(n)]


def job_toml(log: Path, *, sleep: str = "0", script: str | None = None, **extra: str) -> str:
    record = f'echo "$CATCHUP_PERIOD $CATCHUP_ATTEMPT $$" >> {log}'
    script = script or f"sleep {sleep}; {record}"
    lines = [
        "[jobs.billing]",
        'schedule = "daily"',
        'start = "2026-01-01"',
        f"command = {json.dumps(['sh', '-c', script])}",
    ]
    lines += [f"{k} = {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


@pytest.mark.slow
def test_16_replicas_on_one_period_run_it_once(project: Project, sql: Any) -> None:
    """16 processes released together on the same period: the job ran once, as attempt 1."""
    log = project.path / "log"
    project.write(job_toml(log, sleep="0.3"))
    outcomes = collect(start_replicas(project, 16, "billing", ["2026-03-01"]))
    statuses = Counter(o["status"] for o in outcomes)
    assert statuses == {"succeeded": 1, "skipped": 15}
    assert log.read_text().splitlines()[0].split()[:2] == ["2026-03-01", "1"]
    assert len(log.read_text().splitlines()) == 1
    assert sql("SELECT status, attempt FROM {schema}.runs") == [("succeeded", 1)]


@pytest.mark.slow
def test_16_replicas_over_200_periods_run_each_once(project: Project, sql: Any) -> None:
    """16 processes over the same 200 periods: every period succeeded exactly once."""
    log = project.path / "log"
    project.write(job_toml(log, overlap='"allow"'))
    periods = days(200)
    outcomes = collect(start_replicas(project, 16, "billing", periods))
    ran = [line.split()[0] for line in log.read_text().splitlines()]
    assert sorted(ran) == sorted(periods)  # each exactly once
    assert Counter(o["status"] for o in outcomes)["succeeded"] == 200
    rows = sql("SELECT status, attempt, count(*) FROM {schema}.runs GROUP BY 1, 2")
    assert rows == [("succeeded", 1, 200)]
    (attempts,) = sql("SELECT count(*) FROM {schema}.history")[0]
    assert attempts == 200


@pytest.mark.slow
def test_forbid_never_runs_two_periods_at_once(project: Project, sql: Any) -> None:
    """4 replicas over 8 periods with overlap forbidden: the job's own clock shows no overlap."""
    log = project.path / "spans"
    project.write(job_toml(log, script=timed_job(log, "0.2")[2]))
    collect(start_replicas(project, 4, "billing", days(8), passes="until-done"))
    assert sorted(serial_periods(log)) == days(8)  # each once, one at a time
    assert sql("SELECT count(*) FROM {schema}.runs WHERE status = 'succeeded'") == [(8,)]


@pytest.mark.slow
def test_allow_does_run_periods_together(project: Project) -> None:
    """The contrast: with overlap allowed, two replicas on two periods both run at once."""
    log = project.path / "log"
    project.write(job_toml(log, sleep="1", overlap='"allow"'))
    a = project.spawn("run", "billing", "--period", "2026-01-01")
    b = project.spawn("run", "billing", "--period", "2026-01-02")
    for proc in (a, b):
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "succeeded" in out


def lease_expired(sql: Any) -> bool:
    rows = sql("SELECT lease_expires_at < clock_timestamp() FROM {schema}.runs")
    return bool(rows and rows[0][0])


@pytest.mark.slow
def test_killed_runner_is_taken_over_as_attempt_2(project: Project, sql: Any) -> None:
    """SIGKILL the runner mid-job: once the lease expires, another runner takes over."""
    pidfile = project.path / "job.pid"
    script = f'if [ "$CATCHUP_ATTEMPT" = 1 ]; then echo $$ > {pidfile}; exec sleep 600; fi'
    project.write(job_toml(project.path / "log", script=script, lease='"2s"'))
    first = project.spawn("run", "billing", "--period", "2026-01-05")
    orphan = wait_for(lambda: written_pid(pidfile), what="attempt 1's job pid")
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    try:
        wait_for(lambda: lease_expired(sql), timeout=30, what="the lease to expire")
        second = project.run("run", "billing", "--period", "2026-01-05")
        assert second.returncode == 0, second.stderr
        assert "attempt 2: succeeded" in second.stdout
        assert sql("SELECT status, attempt, failures FROM {schema}.runs") == [("succeeded", 2, 1)]
        history = sql("SELECT attempt, status FROM {schema}.history ORDER BY attempt")
        assert history == [(1, "lost"), (2, "succeeded")]
    finally:
        if not process_gone(orphan):
            os.kill(orphan, signal.SIGKILL)


@pytest.mark.slow
def test_paused_runner_is_fenced_off_and_stops_its_job(project: Project, sql: Any) -> None:
    """SIGSTOP a runner past its lease; attempt 2 runs; the resumed runner records nothing."""
    pidfile = project.path / "job.pid"
    script = f'if [ "$CATCHUP_ATTEMPT" = 1 ]; then echo $$ > {pidfile}; exec sleep 600; fi'
    project.write(job_toml(project.path / "log", script=script, lease='"2s"'))
    first = project.spawn("run", "billing", "--period", "2026-01-05")
    job_pid = wait_for(lambda: written_pid(pidfile), what="attempt 1's job pid")
    first.send_signal(signal.SIGSTOP)
    try:
        wait_for(lambda: lease_expired(sql), timeout=30, what="the lease to expire")
        second = project.run("run", "billing", "--period", "2026-01-05")
        assert second.returncode == 0, second.stderr
        assert "attempt 2: succeeded" in second.stdout
    finally:
        first.send_signal(signal.SIGCONT)
    out, _err = first.communicate(timeout=60)
    assert first.returncode == 1
    assert "attempt 1: lost" in out and "nothing recorded" in out
    wait_for(lambda: process_gone(job_pid), timeout=15, what="attempt 1's job to be stopped")
    assert sql("SELECT status, attempt FROM {schema}.runs") == [("succeeded", 2)]
    history = sql("SELECT attempt, status FROM {schema}.history ORDER BY attempt")
    assert history == [(1, "lost"), (2, "succeeded")]


@pytest.mark.slow
def test_concurrent_migrations_do_not_collide(project: Project, sql: Any) -> None:
    """Eight processes migrating a fresh schema at once: one applies it, all succeed."""
    project.write(job_toml(project.path / "log"))
    procs = [project.spawn("migrate") for _ in range(8)]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outputs.append(out)
    assert sum("applied 0001_ledger" in out for out in outputs) == 1
    assert sql("SELECT count(*) FROM {schema}.schema_version") == [(len(sqlfiles.migrations()),)]


@pytest.mark.slow
def test_16_replicas_through_a_transaction_pooler(
    project: Project, sql: Any, pgbouncer: Pooler
) -> None:
    """The same race through PgBouncer in transaction mode: still once per period, and the
    overlap guard (a transaction-scoped lock) still holds."""
    log = project.path / "log"
    project.write(job_toml(log, script=timed_job(log, "0.05")[2]))
    periods = days(12)
    collect(start_replicas(project, 16, "billing", periods, passes="until-done", dsn=pgbouncer.dsn))
    assert sorted(serial_periods(log)) == periods  # each exactly once, one at a time
    assert sql("SELECT status, attempt, count(*) FROM {schema}.runs GROUP BY 1, 2") == [
        ("succeeded", 1, 12)
    ]


def test_a_finish_after_a_takeover_is_refused_by_the_fence(project: Project, sql: Any) -> None:
    """The path where the old runner does send its finish: its lease ran out on the database
    clock while it saw no reason to stop (its next heartbeat is far off), attempt 2 took over
    and is still running when attempt 1's job ends. The database refuses attempt 1's finish;
    it says so, and attempt 2 finishes the period."""
    go = {n: project.path / f"go-{n}" for n in (1, 2)}
    log = project.path / "log"
    script = (
        f'while [ ! -e "{project.path}/go-$CATCHUP_ATTEMPT" ]; do sleep 0.05; done; '
        f'echo "$CATCHUP_ATTEMPT" >> {log}'
    )
    project.write(job_toml(log, script=script, lease='"300s"'))  # heartbeats 100 s apart
    assert project.cli("migrate").exit_code == 0
    first = project.spawn("run", "billing", "--period", "2026-01-05")
    wait_for(
        lambda: sql("SELECT attempt FROM {schema}.runs WHERE status = 'running'") == [(1,)],
        what="attempt 1 to run",
    )
    # the lease ran out as far as the database is concerned (its clock decides)
    sql("UPDATE {schema}.runs SET lease_expires_at = clock_timestamp() - interval '1 second'")
    second = project.spawn("run", "billing", "--period", "2026-01-05")
    wait_for(
        lambda: sql("SELECT attempt FROM {schema}.runs WHERE status = 'running'") == [(2,)],
        what="attempt 2 to take over",
    )
    go[1].touch()  # attempt 1's job ends now, while attempt 2 still runs
    out, err = first.communicate(timeout=60)
    assert first.returncode == 1, out + err
    assert "attempt 1: lost" in out and "fenced off" in out and "not recorded" in out
    assert sql("SELECT status, attempt FROM {schema}.runs") == [("running", 2)]
    go[2].touch()
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, out + err
    assert "attempt 2: succeeded" in out
    assert sql("SELECT status, attempt FROM {schema}.runs") == [("succeeded", 2)]
    history = sql("SELECT attempt, status FROM {schema}.history ORDER BY attempt")
    assert history == [(1, "lost"), (2, "succeeded")]
    assert log.read_text().split() == ["1", "2"]
