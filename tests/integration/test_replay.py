"""replay and tick: gaps run oldest-first through the claim path, by any number of processes."""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fix_processes import process_gone, serial_periods, timed_job, wait_for
from fix_project import Project

TABLES = ("runs", "history", "coverage", "scan_state", "ticks")


def job(name: str, command: list[str], **keys: Any) -> str:
    lines = [f"[jobs.{name}]", f"command = {json.dumps(command)}"]
    keys.setdefault("schedule", "daily")
    keys.setdefault("start", "2026-10-01")
    lines += [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    return "\n".join(lines) + "\n"


def recorder(log: Path, extra: str = "") -> list[str]:
    return ["sh", "-c", f'{extra}echo "$CATCHUP_JOB $CATCHUP_PERIOD $CATCHUP_ATTEMPT" >> {log}']


def put(
    sql: Any,
    name: str,
    start: datetime,
    status: str,
    *,
    failures: int = 0,
    step: timedelta = timedelta(days=1),
) -> None:
    sql(
        "INSERT INTO {schema}.runs (job_id, period_start, period_end, status, attempt, failures,"
        " retry_after) SELECT id, %s, %s, %s, 1, %s, clock_timestamp() + interval '1 hour'"
        " FROM {schema}.jobs WHERE name = %s",
        [start, start + step, status, failures, name],
    )


def day(n: int) -> datetime:
    return datetime(2026, 10, 1, tzinfo=UTC) + timedelta(days=n)


def counts(sql: Any) -> dict[str, int]:
    return {t: sql(f"SELECT count(*) FROM {{schema}}.{t}")[0][0] for t in TABLES}


def test_replay_runs_gaps_oldest_first_and_skips_done(project: Project, sql: Any) -> None:
    log = project.path / "log"
    project.write(job("alpha", recorder(log)) + job("beta", recorder(log)))
    assert project.cli("migrate").exit_code == 0
    project.cli("-q", "scan")  # registers the jobs
    for n in (0, 2, 5):
        put(sql, "alpha", day(n), "succeeded")
    put(sql, "alpha", day(3), "waived")
    put(sql, "beta", day(1), "failed", failures=1)  # backing off: replay runs it anyway
    result = project.cli("-q", "replay", "--since", "2026-10-01", "--until", "2026-10-07", "--json")
    assert result.exit_code == 0, result.output
    ran = [line.split() for line in log.read_text().splitlines()]
    expected = sorted(
        [("alpha", f"2026-10-0{n + 1}") for n in (1, 4)]
        + [("beta", f"2026-10-0{n + 1}") for n in range(6)],
        key=lambda pair: (pair[1], pair[0]),
    )
    assert [(j, p) for j, p, _ in ran] == expected
    assert ["beta", "2026-10-02", "2"] in ran  # the failed one, as its second attempt
    data = json.loads(result.stdout)
    assert data["totals"]["succeeded"] == 8 and data["totals"]["planned"] == 8
    assert {"job", "period", "attempt", "status"} <= set(data["periods"][0])
    again = project.cli("-q", "replay", "--since", "2026-10-01", "--until", "2026-10-07")
    assert again.exit_code == 0 and len(log.read_text().splitlines()) == 8


def test_a_dry_run_before_any_job_is_registered_plans_each_job_apart(
    project: Project, sql: Any
) -> None:
    """A dry run on a new ledger registers no job; each job is still planned on its own (an
    unregistered job once shared its stand-in id with the others, and their counts mixed)."""
    project.write(job("alpha", ["true"]) + job("beta", ["true"], schedule="hourly"))
    assert project.cli("-q", "migrate").exit_code == 0
    result = project.cli(
        "-q", "replay", "--since", "2026-10-01", "--until", "2026-10-03", "--dry-run", "--json"
    )
    assert result.exit_code == 0, result.output
    planned = Counter(p["job"] for p in json.loads(result.stdout)["periods"])
    assert planned == {"alpha": 2, "beta": 48}
    assert sql("SELECT count(*) FROM {schema}.jobs") == [(0,)]


def test_dry_run_writes_nothing(project: Project, sql: Any) -> None:
    project.write(job("alpha", ["true"]))
    assert project.cli("-q", "scan", "--until", "2026-10-02").exit_code == 1
    before = counts(sql)
    result = project.cli(
        "-q", "replay", "--since", "2026-10-01", "--until", "2026-10-11", "--dry-run", "--json"
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["dry_run"] is True and data["totals"]["planned"] == 10
    assert data["periods"][0] == {
        "job": "alpha",
        "period": "2026-10-01T00:00:00Z",
        "start": "2026-10-01T00:00:00Z",
        "end": "2026-10-02T00:00:00Z",
        "label": "2026-10-01",
        "attempt": None,
        "status": "missing",
    }
    text = project.cli(
        "-q", "replay", "--since", "2026-10-01", "--until", "2026-10-04", "--dry-run"
    )
    assert "would run alpha: 3 periods (3 missing), 2026-10-01 .. 2026-10-03" in text.stdout
    assert "  alpha 2026-10-01 .. 2026-10-03 (3 missing)" in text.stdout
    assert "3 period(s) would run; nothing was written" in text.stdout
    each = project.cli(
        "-q", "replay", "--since", "2026-10-01", "--until", "2026-10-04", "--dry-run", "--each"
    )
    assert "would run alpha 2026-10-01 (missing)" in each.stdout
    assert counts(sql) == before


def test_max_and_stop_on_failure(project: Project, sql: Any) -> None:
    log = project.path / "log"
    failing = ["sh", "-c", f'echo "$CATCHUP_PERIOD" >> {log}; [ "$CATCHUP_PERIOD" != 2026-10-03 ]']
    project.write(job("alpha", failing))
    limited = project.cli(
        "-q", "replay", "--since", "2026-10-01", "--until", "2026-10-11", "--max", "2", "--json"
    )
    assert json.loads(limited.stdout)["totals"]["succeeded"] == 2
    stopped = project.cli(
        "-q",
        "replay",
        "--since",
        "2026-10-01",
        "--until",
        "2026-10-11",
        "--stop-on-failure",
        "--json",
    )
    assert stopped.exit_code == 1
    assert log.read_text().split() == ["2026-10-01", "2026-10-02", "2026-10-03"]


@pytest.mark.slow
def test_four_replays_share_a_300_period_backlog(project: Project, sql: Any) -> None:
    """4 replay processes started together over the same backlog: each period ran once."""
    log = project.path / "log"
    project.write(
        job("export", recorder(log), schedule="hourly", start="2026-10-01", overlap="allow")
    )
    procs = [
        project.spawn(
            "-q", "replay", "--since", "2026-10-01", "--until", "2026-10-13T12:00:00Z", "--json"
        )
        for _ in range(4)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    ran = Counter(line.split()[1] for line in log.read_text().splitlines())
    assert len(ran) == 300 and set(ran.values()) == {1}
    assert sum(r["totals"]["succeeded"] for r in results) == 300
    assert sum(1 for r in results if r["totals"]["succeeded"]) >= 2  # the work was shared
    assert sql("SELECT status, attempt, count(*) FROM {schema}.runs GROUP BY 1, 2") == [
        ("succeeded", 1, 300)
    ]


@pytest.mark.slow
def test_replay_racing_tick_never_overlaps(project: Project, sql: Any) -> None:
    """A replay and ticks on one overlap-forbidden job: each period once, never two at once."""
    spans = project.path / "spans"
    (now,) = sql("SELECT date_trunc('day', clock_timestamp())")[0]
    start = (now - timedelta(days=12)).date().isoformat()
    project.write(job("billing", timed_job(spans, "0.1"), start=start, catchup_window="30d"))
    replay = project.spawn("-q", "replay", "--since", start, "--json")
    ticks = [project.spawn("-q", "tick", "--json") for _ in range(2)]
    outputs = []
    for proc in [replay, *ticks]:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        outputs.append(out)
    ran = serial_periods(spans)  # never two at once
    assert len(set(ran)) == len(ran) == 12, outputs


@pytest.mark.slow
@pytest.mark.parametrize(
    "stop", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["SIGINT", "SIGTERM", "SIGHUP"]
)
def test_sigint_mid_replay_leaves_nothing_running(
    project: Project, sql: Any, stop: signal.Signals
) -> None:
    """Ctrl-C, or what a service manager sends: jobs stopped, recorded, exit 130."""
    pids = project.path / "pids"
    project.write(job("alpha", ["sh", "-c", f"echo $$ >> {pids}; exec sleep 60"], overlap="allow"))
    assert project.cli("migrate").exit_code == 0
    proc = project.spawn(
        "-q", "replay", "--since", "2026-10-01", "--until", "2026-10-05", "--workers", "2"
    )
    wait_for(
        lambda: sql("SELECT count(*) FROM {schema}.runs WHERE status = 'running'") == [(2,)],
        timeout=60,
        what="two periods running",
    )
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, what="two jobs")
    proc.send_signal(stop)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert sql("SELECT count(*) FROM {schema}.runs WHERE status = 'running'") == [(0,)]
    assert sql("SELECT DISTINCT status FROM {schema}.history") == [("interrupted",)]
    for pid in map(int, pids.read_text().split()):
        wait_for(functools.partial(process_gone, pid), timeout=15, what="the job to stop")
    # interrupted periods are left for a retry, with no failure counted
    assert sql("SELECT DISTINCT status, failures FROM {schema}.runs") == [("failed", 0)]


def outage_config(sql: Any, log: Path, **policy: dict[str, Any]) -> str:
    (today,) = sql("SELECT date_trunc('day', clock_timestamp())")[0]
    start = (today - timedelta(days=20)).date().isoformat()
    return "".join(job(name, recorder(log), start=start, **keys) for name, keys in policy.items())


def simulate_outage(sql: Any, names: list[str], *, days: int = 10) -> None:
    """Every period succeeded until ``days`` ago; nothing since (the hosts were down)."""
    (today,) = sql("SELECT date_trunc('day', clock_timestamp())")[0]
    for name in names:
        for n in range(20 - days):
            put(sql, name, today - timedelta(days=20 - n), "succeeded")
    sql(
        "INSERT INTO {schema}.ticks (host, at) VALUES ('old', clock_timestamp() - %s::interval)",
        [f"{days} days"],
    )


def test_each_catchup_policy_after_a_10_day_outage(project: Project, sql: Any) -> None:
    log = project.path / "log"
    project.write(
        outage_config(
            sql,
            log,
            every={"catchup": "all"},
            newest={"catchup": "latest"},
            quiet={"catchup": "none"},
        )
    )
    assert project.cli("-q", "scan").exit_code == 1  # registers the jobs
    simulate_outage(sql, ["every", "newest", "quiet"])
    result = project.cli("-q", "tick", "--json")
    assert result.exit_code == 0, result.output
    ran = Counter(line.split()[0] for line in log.read_text().splitlines())
    assert ran == {"every": 10, "newest": 1, "quiet": 1}
    (yesterday,) = sql("SELECT date_trunc('day', clock_timestamp()) - interval '1 day'")[0]
    lines = log.read_text().splitlines()
    assert f"newest {yesterday.date().isoformat()} 1" in lines
    every = [line.split()[1] for line in lines if line.startswith("every ")]
    assert every == sorted(every)  # oldest first
    # the next tick: nothing new became due, so nothing runs (none, latest: already done)
    again = project.cli("-q", "tick", "--json")
    assert json.loads(again.stdout)["totals"]["succeeded"] == 0
    assert sql("SELECT count(DISTINCT host) FROM {schema}.ticks")[0][0] == 2


def test_none_runs_nothing_that_became_due_before_the_last_tick(project: Project, sql: Any) -> None:
    log = project.path / "log"
    project.write(outage_config(sql, log, quiet={"catchup": "none"}))
    assert project.cli("-q", "scan").exit_code == 1
    sql("INSERT INTO {schema}.ticks (host) VALUES ('previous')")  # a tick just now
    assert project.cli("-q", "tick").exit_code == 0
    assert not log.exists()


def test_max_per_tick_caps_a_flood(project: Project, sql: Any) -> None:
    log = project.path / "log"
    (hour,) = sql("SELECT date_trunc('hour', clock_timestamp()) - interval '50 hours'")[0]
    project.write(
        job(
            "export",
            recorder(log),
            schedule="hourly",
            start=hour.strftime("%Y-%m-%dT%H:%M:%SZ"),
            max_per_tick=5,
        )
    )
    result = project.cli("-q", "tick", "--json")
    assert json.loads(result.stdout)["totals"]["succeeded"] == 5
    ran = [line.split()[1] for line in log.read_text().splitlines()]
    assert ran[0] == hour.strftime("%Y-%m-%dT%H:%M:%SZ") and len(ran) == 5


def test_tick_says_what_max_per_tick_left_and_what_lies_before_catchup_window(
    project: Project, sql: Any
) -> None:
    """40 missing days, a 10-day catchup_window and max_per_tick = 3: the tick runs 3, says
    in one line how many it left to later ticks and in another how many lie before the window
    (no tick runs them, a replay does, from the first); `why` of such a day says so too."""
    log = project.path / "log"
    (today,) = sql("SELECT (clock_timestamp() AT TIME ZONE 'UTC')::date")[0]
    start = today - timedelta(days=40)
    project.write(
        job("bill", recorder(log), start=start.isoformat(), catchup_window="10d", max_per_tick=3)
    )
    said = project.cli("-q", "tick", "--json")
    assert said.exit_code == 0, said.output
    data = json.loads(said.stdout)
    assert data["totals"]["succeeded"] == 3
    # the window is the last 10 days: the days starting at or after now - 10d, 9 or 10 of them
    left = data["left_to_max_per_tick"]["bill"]
    outside = data["outside_catchup_window"]["bill"]
    assert left in (6, 7) and outside["first"] == f"{start.isoformat()}T00:00:00Z"
    assert 3 + left + outside["periods"] == 40, data

    text = project.cli("-q", "tick").stdout.splitlines()
    assert text[-2] == f"left to later ticks by max_per_tick: bill {left - 3} gap period(s)"
    assert text[-1] == (
        f"before catchup_window: bill {outside['periods']} gap period(s); no tick runs them, a "
        f"replay does: catchup replay --job bill --since {start.isoformat()}T00:00:00Z"
    )
    old = project.cli("why", "bill", start.isoformat()).stdout
    assert "before catchup_window (10d): no tick runs it; a replay" in " ".join(old.split())
    recent = project.cli("why", "bill", (today - timedelta(days=1)).isoformat()).stdout
    assert "catchup_window" not in recent and "missing" in recent


def test_a_keyed_jobs_tick_counts_what_it_left_by_key_and_period(
    project: Project, sql: Any
) -> None:
    """Two keys, four due days, max_per_tick = 3 (a key's): 6 run, 2 (key, period)s left; the
    next tick with room for all runs them and says it left none (it counted each key's period
    once per key more: 10 left, then 8 after running every one)."""
    log = project.path / "log"
    (today,) = sql("SELECT (clock_timestamp() AT TIME ZONE 'UTC')::date")[0]
    start = (today - timedelta(days=4)).isoformat()
    project.write(job("bill", recorder(log), start=start, keys=["a", "b"], max_per_tick=3))
    data = json.loads(project.cli("-q", "tick", "--json").stdout)
    assert data["totals"]["succeeded"] == 6
    assert data["left_to_max_per_tick"] == {"bill": 2}, data
    project.write(job("bill", recorder(log), start=start, keys=["a", "b"], max_per_tick=100))
    data = json.loads(project.cli("-q", "tick", "--json").stdout)
    assert data["totals"]["succeeded"] == 2
    assert "left_to_max_per_tick" not in data, data


def test_paused_job_is_not_ticked(project: Project, sql: Any) -> None:
    log = project.path / "log"
    project.write(job("alpha", recorder(log), start="2026-11-01"))
    project.cli("-q", "scan")
    sql("UPDATE {schema}.jobs SET paused_at = clock_timestamp()")
    assert project.cli("-q", "tick").exit_code == 0
    assert not log.exists()


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_failed_period_backs_off_then_is_exhausted(project: Project, sql: Any) -> None:
    (yesterday,) = sql("SELECT date_trunc('day', clock_timestamp()) - interval '1 day'")[0]
    project.write(
        job(
            "alpha",
            ["false"],
            start=yesterday.date().isoformat(),
            max_attempts=3,
            retry_backoff="2s",
        )
    )

    def tick() -> dict[str, Any]:
        result = project.cli("-q", "tick", "--json")
        totals: dict[str, Any] = json.loads(result.stdout)["totals"]
        return totals

    def ready() -> bool:
        return bool(sql("SELECT retry_after <= clock_timestamp() FROM {schema}.runs")[0][0])

    def backoff() -> float:
        (seconds,) = sql(
            "SELECT extract(epoch FROM retry_after - finished_at)::float FROM {schema}.runs"
        )[0]
        return float(seconds)

    assert tick()["failed"] == 1
    assert backoff() == pytest.approx(2, abs=0.01)
    assert tick()["skipped"] == 1  # backing off, on the database clock
    wait_for(ready, timeout=10, what="the backoff to pass")
    assert tick()["failed"] == 1
    assert backoff() == pytest.approx(4, abs=0.01)  # doubled
    wait_for(ready, timeout=15, what="the backoff to pass")
    assert tick()["failed"] == 1
    assert sql("SELECT attempt, failures FROM {schema}.runs") == [(3, 3)]
    scan = json.loads(project.cli("-q", "scan", "--json").stdout)
    assert scan["jobs"][0]["exhausted"] == 1
    assert tick()["planned"] == 0  # exhausted: only a replay with --retry-exhausted runs it
    plain = project.cli("-q", "replay", "--since", yesterday.date().isoformat(), "--json")
    assert json.loads(plain.stdout)["totals"]["planned"] == 0
    forced = project.cli(
        "-q", "replay", "--since", yesterday.date().isoformat(), "--retry-exhausted", "--json"
    )
    assert json.loads(forced.stdout)["periods"][0]["attempt"] == 4


def test_checkpoint_of_attempt_1_reaches_attempt_2(project: Project, sql: Any) -> None:
    seen = project.path / "seen"
    script = (
        'if [ "$CATCHUP_ATTEMPT" = 1 ]; then '
        f"{sys.executable} -m catchup checkpoint '{{{{\"cursor\": 1234}}}}' || exit 3; exit 1; fi; "
        f'echo "$CATCHUP_CHECKPOINT" > {seen}'
    )
    project.write(job("alpha", ["sh", "-c", script], retry_backoff="0s"))
    first = project.cli("-q", "run", "alpha", "--period", "2026-10-01")
    assert first.exit_code == 1 and "exited with 1" in first.stdout
    second = project.cli("-q", "run", "alpha", "--period", "2026-10-01")
    assert second.exit_code == 0, second.output
    assert json.loads(seen.read_text()) == {"cursor": 1234}


def test_checkpoint_outside_a_job_is_a_usage_error(project: Project) -> None:
    project.write(job("alpha", ["true"]))
    result = project.cli("checkpoint", "x")
    assert result.exit_code == 2 and "runs inside a job" in result.stderr


def test_python_checkpoint_reaches_the_next_attempt(project: Project, monkeypatch: Any) -> None:
    module = project.path / "cp_jobs.py"
    module.write_text(
        "def run(ctx):\n"
        "    if ctx.attempt == 1:\n"
        "        ctx.save_checkpoint('row 500')\n"
        "        raise RuntimeError('crashed half way')\n"
        "    assert ctx.checkpoint == 'row 500', ctx.checkpoint\n"
    )
    monkeypatch.syspath_prepend(str(project.path))
    project.write(
        job("alpha", ["true"]).replace('command = ["true"]', 'call = "cp_jobs:run"')
        + 'retry_backoff = "0s"\n'
    )
    assert project.cli("-q", "run", "alpha", "--period", "2026-10-01").exit_code == 1
    assert project.cli("-q", "run", "alpha", "--period", "2026-10-01").exit_code == 0


@pytest.mark.slow
def test_workers_never_run_two_periods_of_a_forbid_job_at_once(project: Project, sql: Any) -> None:
    """replay --workers 4 over one overlap-forbidden job: every period once, one at a time."""
    spans = project.path / "spans"
    project.write(job("billing", timed_job(spans, "0.2")))
    result = project.cli(
        "-q", "replay", "--since", "2026-10-01", "--until", "2026-10-07", "--workers", "4"
    )
    assert result.exit_code == 0, result.output
    ran = serial_periods(spans)  # asserts no two overlapped
    assert sorted(ran) == [f"2026-10-0{d}" for d in range(1, 7)]


@pytest.mark.slow
def test_sigterm_to_a_tick_stops_and_records_its_job(project: Project, sql: Any) -> None:
    """What a systemd stop or a pod's termination sends: the running job is stopped, recorded
    as interrupted (no failure counted), nothing is left running, exit 130."""
    pids = project.path / "pids"
    (today,) = sql("SELECT date_trunc('day', clock_timestamp())")[0]
    start = (today - timedelta(days=2)).date().isoformat()
    project.write(
        job(
            "alpha",
            ["sh", "-c", f"echo $$ >> {pids}; exec sleep 60"],
            start=start,
            catchup="latest",
        )
    )
    assert project.cli("migrate").exit_code == 0
    proc = project.spawn("-q", "tick")
    wait_for(lambda: pids.exists() and pids.read_text().strip(), what="the job to start")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert sql("SELECT count(*) FROM {schema}.runs WHERE status = 'running'") == [(0,)]
    assert sql("SELECT DISTINCT status FROM {schema}.history") == [("interrupted",)]
    assert sql("SELECT status, failures FROM {schema}.runs") == [("failed", 0)]
    pid = int(pids.read_text().split()[0])
    wait_for(lambda: process_gone(pid), timeout=15, what="the job to stop")


def test_a_callable_sees_cancelled_on_a_timeout(
    project: Project, sql: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Python call cannot be killed, only asked: on its timeout ctx.cancelled is set, and the
    period is recorded as timed out."""
    import uuid

    module = f"cancel_{uuid.uuid4().hex[:8]}"
    seen = project.path / "seen"
    (project.path / f"{module}.py").write_text(
        "import pathlib\n"
        "def run(ctx):\n"
        f"    got = ctx.cancelled.wait(30)\n"
        f"    pathlib.Path({str(seen)!r}).write_text('cancelled' if got else 'not cancelled')\n"
    )
    monkeypatch.syspath_prepend(str(project.path))
    project.write(
        job("alpha", ["true"], timeout="1s").replace('command = ["true"]', f'call = "{module}:run"')
    )
    result = project.cli("run", "alpha", "--period", "2026-10-02")
    assert result.exit_code == 1, result.output
    assert "timed out after 1s" in result.stdout
    wait_for(seen.exists, timeout=15, what="the callable to return")
    assert seen.read_text() == "cancelled"


def test_a_callable_sees_cancelled_when_its_lease_is_lost(project: Project, sql: Any) -> None:
    """The lease is gone on the database clock while a Python call runs: the heartbeat notices,
    ctx.cancelled is set, and the attempt is recorded as lost, nothing else."""
    import uuid

    module = f"lost_{uuid.uuid4().hex[:8]}"
    seen = project.path / "seen"
    (project.path / f"{module}.py").write_text(
        "import pathlib\n"
        "def run(ctx):\n"
        "    got = ctx.cancelled.wait(60)\n"
        f"    pathlib.Path({str(seen)!r}).write_text('cancelled' if got else 'not cancelled')\n"
    )
    project.write(
        job("alpha", ["true"], lease="3s").replace('command = ["true"]', f'call = "{module}:run"')
    )
    assert project.cli("migrate").exit_code == 0
    proc = subprocess.Popen(
        project.command("run", "alpha", "--period", "2026-10-02"),
        cwd=project.path,
        env=project.env(PYTHONPATH=str(project.path)),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for(
        lambda: sql("SELECT count(*) FROM {schema}.runs WHERE status = 'running'") == [(1,)],
        what="the call to run",
    )
    sql("UPDATE {schema}.runs SET lease_expires_at = clock_timestamp() - interval '1 second'")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, out + err
    assert "attempt 1: lost" in out
    wait_for(seen.exists, timeout=15, what="the callable to return")
    assert seen.read_text() == "cancelled"
