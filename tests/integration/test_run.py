"""``catchup run``: one period through the claim path, with the job as a real process group."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fix_processes import process_gone, wait_for
from fix_project import Project, job_toml

from catchup.ledger import sqlfiles


def daily(command: str, **extra: str) -> str:
    lines = [
        "[jobs.billing]",
        'schedule = "daily"',
        'start = "2026-10-01"',
        f"command = {command}",
    ]
    lines += [f"{key} = {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def test_run_records_success_and_passes_the_period(project: Project) -> None:
    log = project.path / "log"
    project.write(
        daily(
            f'["sh", "-c", "echo $0 $CATCHUP_PERIOD $CATCHUP_ATTEMPT $CATCHUP_PERIOD_END >> {log}",'
            ' "{period_start:%Y%m%d}"]'
        )
    )
    result = project.cli("run", "billing", "--period", "2026-10-05")
    assert result.exit_code == 0, result.output
    assert "billing 2026-10-05 attempt 1: succeeded" in result.stdout
    assert log.read_text() == "20261005 2026-10-05 1 2026-10-06T00:00:00Z\n"
    again = project.cli("run", "billing", "--period", "2026-10-05")
    assert again.exit_code == 0
    assert "already succeeded" in again.stdout
    assert log.read_text().count("\n") == 1


def test_run_defaults_to_the_latest_due_period(project: Project, sql: Any) -> None:
    project.write(daily('["true"]', delay='"30m"'))
    result = project.cli("--quiet", "run", "billing", "--json")
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.stdout)
    (now,) = sql("SELECT clock_timestamp() - interval '30 minutes'")[0]
    expected = now.replace(hour=0, minute=0, second=0, microsecond=0) - __import__(
        "datetime"
    ).timedelta(days=1)
    assert outcome["period"] == expected.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert outcome["status"] == "succeeded" and outcome["attempt"] == 1


def test_failed_job_exits_1_and_keeps_its_output(project: Project, sql: Any) -> None:
    project.write(daily('["sh", "-c", "echo to-out; echo to-err >&2; exit 7"]'))
    result = project.cli("run", "billing", "--period", "2026-10-01")
    assert result.exit_code == 1
    assert "failed" in result.stdout and "exited with 7" in result.stdout
    status, exit_code, tail, failures = sql(
        "SELECT status, exit_code, output_tail, failures FROM {schema}.runs"
    )[0]
    assert (status, exit_code, failures) == ("failed", 7, 1)
    assert "to-out" in tail and "to-err" in tail
    history = project.cli("history", "billing", "--period", "2026-10-01")
    assert "exited with 7" in history.stdout and "to-err" in history.stdout


def test_output_tail_is_bounded_with_a_marker(project: Project, sql: Any) -> None:
    project.write(daily('["sh", "-c", "head -c 300000 /dev/zero | tr \'\\\\0\' a; echo END"]'))
    result = project.run("run", "billing", "--period", "2026-10-01")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout) > 300000  # streamed through in full
    (tail,) = sql("SELECT output_tail FROM {schema}.runs")[0]
    assert tail.startswith("[catchup: ")
    assert "earlier bytes of output not kept" in tail
    assert tail.rstrip().endswith("END")
    assert len(tail) < 70 * 1024


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_timeout_kills_the_whole_process_group(project: Project, sql: Any) -> None:
    """On a timeout the runner itself takes the job's whole process group down before it
    returns: SIGTERM first (the job's trap sees it), SIGKILL only after kill_grace, for the
    grandchild that ignores SIGTERM too (not left for the watcher to find later)."""
    pids = project.path / "pids"
    termed = project.path / "termed"
    # the job starts a grandchild that ignores SIGTERM, then waits on it
    job = project.path / "job.sh"
    job.write_text(
        f"trap 'echo TERM >> {termed}; exit 0' TERM\n"
        "sh -c 'trap \"\" TERM; exec sleep 1000' &\n"
        f"echo $! > {pids}\necho $$ >> {pids}\nwait\n"
    )
    script = f"exec sh {job}"
    project.write(daily(json.dumps(["sh", "-c", script]), timeout='"1s"', kill_grace='"3s"'))
    started = time.monotonic()
    result = project.run("run", "billing", "--period", "2026-10-01", timeout=60)
    took = time.monotonic() - started
    assert result.returncode == 1, result.stdout + result.stderr
    assert "timed out after 1s" in result.stdout
    children = [int(p) for p in pids.read_text().split()]
    assert len(children) == 2
    assert termed.read_text() == "TERM\n"  # SIGTERM first
    assert took >= 1 + 3 - 0.2  # and the SIGKILL only after the grace
    # gone when the runner returns (a second for the kernel to finish the kill); the watcher,
    # the fallback for a runner that dies, would take a poll and the whole grace longer
    wait_for(
        lambda: all(process_gone(pid) for pid in children),
        timeout=1,
        what="the job's process group to be gone when the runner returned",
    )
    status, error = sql("SELECT status, error FROM {schema}.runs")[0]
    assert (status, error) == ("failed", "timed out after 1s")


def test_period_must_be_a_due_boundary(project: Project) -> None:
    project.write(daily('["true"]'))
    off = project.cli("run", "billing", "--period", "2026-10-05T03:00:00Z")
    assert off.exit_code == 2 and "not a period start" in off.stderr
    early = project.cli("run", "billing", "--period", "2026-09-01")
    assert early.exit_code == 2 and "before the job's first period" in early.stderr
    future = project.cli("run", "billing", "--period", "2099-01-01")
    assert future.exit_code == 2 and "not due until" in future.stderr
    bad = project.cli("run", "billing", "--period", "yesterday")
    assert bad.exit_code == 2 and "not a date" in bad.stderr


def test_nothing_due_yet_exits_0(project: Project) -> None:
    project.write(daily('["true"]').replace("2026-10-01", "2099-01-01"))
    result = project.cli("run", "billing")
    assert result.exit_code == 0
    assert "nothing due yet" in result.stdout


def test_unknown_job_is_a_usage_error(project: Project) -> None:
    project.write(daily('["true"]'))
    result = project.cli("run", "biling")
    assert result.exit_code == 2
    assert "did you mean 'billing'" in result.stderr


def test_python_call_job_gets_a_context(project: Project, monkeypatch: Any) -> None:
    module = project.path / "jobs_for_test.py"
    out = project.path / "seen.json"
    module.write_text(
        "import json\n"
        "def run(ctx):\n"
        "    import pathlib\n"
        f"    seen = [ctx.job, ctx.period, ctx.attempt]\n"
        f"    pathlib.Path({str(out)!r}).write_text(json.dumps(seen))\n"
        "    ctx.save_checkpoint('half')\n"
        "def fail(ctx):\n"
        "    raise ValueError('bad input')\n"
    )
    monkeypatch.syspath_prepend(str(project.path))
    project.write(
        job_toml("billing", call="jobs_for_test:run")
        + job_toml("broken", call="jobs_for_test:fail")
    )
    assert project.cli("run", "billing", "--period", "2026-10-02").exit_code == 0
    assert json.loads(out.read_text()) == ["billing", "2026-10-02", 1]
    failed = project.cli("run", "broken", "--period", "2026-10-02")
    assert failed.exit_code == 1
    assert "ValueError: bad input" in failed.stdout


def test_the_database_in_use_is_named_without_password(project: Project) -> None:
    project.write(daily('["true"]'))
    result = project.cli("jobs")
    assert result.exit_code == 0
    assert "database: " in result.stderr and "PostgreSQL" in result.stderr
    assert "billing" in result.stdout


def test_unreachable_database_exits_3_without_the_password(project: Project) -> None:
    project.write(daily('["true"]'))
    result = project.cli("--dsn", "postgresql://app:s3cret-pw@127.0.0.1:1/app", "run", "billing")
    assert result.exit_code == 3
    assert "cannot connect to postgresql://app@127.0.0.1:1/app" in result.stderr
    assert "s3cret-pw" not in result.output


def test_python_m_catchup_and_version(project: Project) -> None:
    result = project.run("--version")
    assert result.returncode == 0 and "catchup, version" in result.stdout


def test_jobs_lists_done_and_expected(project: Project) -> None:
    project.write(daily('["true"]').replace("2026-10-01", "2026-11-01"))
    project.cli("run", "billing", "--period", "2026-11-02")
    result = project.cli("jobs", "--json")
    (line,) = json.loads(result.stdout)
    assert line["job"] == "billing" and line["done"] == 1 and line["expected"] >= 2
    assert line["last_success"] == "2026-11-02"


def test_migrate_command(project: Project, sql: Any) -> None:
    project.write(daily('["true"]'))
    first = project.cli("migrate")
    assert first.exit_code == 0 and "applied 0001_ledger" in first.stdout
    latest = len(sqlfiles.migrations())
    again = project.cli("migrate")
    assert f"up to date (version {latest})" in again.stdout
    assert sql("SELECT max(version) FROM {schema}.schema_version") == [(latest,)]


def test_explain_command(project: Project) -> None:
    project.write(daily('["true"]', delay='"30m"'))
    result = project.cli("-q", "explain", "billing", "--count", "4", "--from", "2026-10-03")
    assert result.exit_code == 0, result.output
    assert "billing: daily, time zone UTC, delay 30m" in result.stdout
    assert "2026-10-03T00:00:00Z" in result.stdout and "2026-10-06T00:00:00Z" in result.stdout
    assert "due since 2026-10-04T00:30:00Z" in result.stdout
