"""A fleet of jobs on one ledger: a tick over more due jobs than the server takes connections
runs them all on a small pool, and the connections it holds stay bounded by that pool."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from typing import Any

import psycopg
import pytest
from fix_db import Database
from fix_processes import wait_for
from fix_project import Project

from catchup.replay.runs import round_robin
from catchup.results import Planned

JOBS = 250  # the embedded test server takes max_connections = 200


def fleet(n: int) -> str:
    return "".join(
        f'[jobs.j{i:03d}]\nschedule = "hourly"\nstart = "2026-10-01"\ncatchup = "latest"\n'
        'command = ["true"]\n'
        for i in range(n)
    )


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_a_tick_over_more_due_jobs_than_connections_runs_them_all(
    project: Project, database: Database
) -> None:
    project.write(fleet(JOBS))
    with psycopg.connect(database.conninfo) as conn:
        (limit,) = conn.execute("SHOW max_connections").fetchone() or (0,)
        # only the tick's connections count, not what earlier tests of this process left open
        (since,) = conn.execute("SELECT clock_timestamp()").fetchone() or (None,)
    assert int(limit) < JOBS
    assert project.run("-q", "migrate").returncode == 0
    peak = [0]
    done = threading.Event()

    def watch() -> None:
        with psycopg.connect(database.conninfo, autocommit=True) as conn:
            while not done.is_set():
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
                    " AND application_name LIKE 'catchup%%' AND backend_start >= %s",
                    [since],
                ).fetchone()
                peak[0] = max(peak[0], row[0] if row else 0)
                done.wait(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = project.run("-q", "tick", "--workers", "3", "--json", timeout=300)
    finally:
        done.set()
        watcher.join()
    assert result.returncode == 0, result.stderr[-2000:]
    totals = json.loads(result.stdout)["totals"]
    assert totals["planned"] == totals["succeeded"] == JOBS, totals
    assert 1 <= peak[0] <= 3 + 2, peak  # the pool and the heartbeat line, whatever the jobs
    # and the text summary is there too, after every job
    again = project.run("-q", "tick", "--workers", "3")
    assert again.returncode == 0
    assert again.stdout.splitlines()[-1].startswith("tick: 0 succeeded, 0 failed, 250 skipped")


def test_round_robin_takes_one_period_of_each_job_in_turn() -> None:
    def stream(name: str, n: int) -> Any:
        return iter([Planned(None, (name, k), "due") for k in range(n)])  # type: ignore[arg-type]

    order: list[Any] = [
        p.period for p in round_robin([stream("a", 3), stream("b", 1), stream("c", 2)])
    ]
    assert order == [("a", 0), ("b", 0), ("c", 0), ("a", 1), ("c", 1), ("a", 2)]


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_a_pool_worker_renews_leases_on_one_shared_connection(
    project: Project, database: Database, sql: Any, tmp_path: Any
) -> None:
    """Three jobs running at once, with leases renewed every second: one heartbeat connection."""
    project.write(
        "".join(
            f'[jobs.s{i}]\nschedule = "hourly"\nstart = "2026-10-01"\ncatchup = "latest"\n'
            f'lease = "3s"\ncommand = ["sh", "-c", "touch {tmp_path}/s{i}; sleep 4"]\n'
            for i in range(3)
        )
    )
    proc = project.spawn("-q", "tick", "--workers", "3")
    try:
        wait_for(lambda: len(list(tmp_path.glob("s?"))) == 3, what="three jobs running")

        def heartbeats() -> int:
            with psycopg.connect(database.conninfo) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE application_name = 'catchup-heartbeat'"
                ).fetchone()
                return row[0] if row else 0

        # every lease renewed twice (a renewal a second): each keeper has its connection by now
        wait_for(
            lambda: (
                sql(
                    "SELECT count(*) FROM {schema}.runs"
                    " WHERE heartbeat_at > claimed_at + interval '1.5 seconds'"
                )[0][0]
                == 3
            ),
            what="every lease renewed twice",
        )
        assert heartbeats() == 1
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out.splitlines()[-1].startswith("tick: 3 succeeded")


LONG = "nightly-billing-run-for-the-european-region"  # 43 characters


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_reports_at_80_columns_show_whole_names_and_dates(project: Project) -> None:
    project.write(
        f'[jobs.{LONG}]\nschedule = "daily"\nstart = "2026-11-01"\n'
        'timezone = "Europe/Berlin"\ncommand = ["true"]\n'
        '[jobs.payroll]\nschedule = "30 2 * * *"\nstart = "2026-11-02"\n'
        'timezone = "Europe/Berlin"\ncommand = ["true"]\n'
    )
    for args in (
        ["scan", "--since", "2026-11-01", "--until", "2026-11-21"],
        ["jobs"],
        ["replay", "--since", "2026-11-01", "--until", "2026-11-21", "--dry-run"],
    ):
        result = project.run("-q", *args)
        assert result.returncode in (0, 1), result.stderr
        narrow = subprocess.run(
            project.command("-q", *args),
            cwd=project.path,
            env=project.env(COLUMNS="80"),
            capture_output=True,
            text=True,
            check=False,
        )
        lines = narrow.stdout.splitlines()
        assert lines and max(len(line) for line in lines) <= 80, narrow.stdout
        assert LONG in narrow.stdout, narrow.stdout  # the whole name, on one line
        assert "…" not in narrow.stdout
        # whole dates: every label the wide report shows is in the narrow one too
        periods = [line for line in result.stdout.splitlines() if "database clock" not in line]
        for label in set(
            re.findall(r"2026-11-\d\dT\d\d:\d\d:\d\dZ|2026-11-\d\d", "\n".join(periods))
        ):
            assert label in narrow.stdout, (label, narrow.stdout)
