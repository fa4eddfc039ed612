"""`catchup scheduler` never waits on a period (issue 49): while one long period runs on the
leader, every-minute periods start as they fall due, a failed period is retried when its
backoff ends, and a job added to the config runs: each while the long period still runs (the
leader that waited for its tick started none of them until it ended). Lateness is measured by
benchmarks/scheduler.py, not asserted here."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fix_processes import wait_for
from fix_project import Project, job_toml

pytestmark = pytest.mark.faults


def day_before(sql: Any) -> str:
    ((now,),) = sql("SELECT date_trunc('day', clock_timestamp(), 'UTC')")
    return f"{now - timedelta(days=1):%Y-%m-%d}"


def long_job(path: Path, sql: Any) -> str:
    """A daily period due now that runs until the test writes ``release`` (its start in
    ``long.started``)."""
    started, release = path / "long.started", path / "release"
    # written whole, then moved into place: the test never reads it half-written
    script = (
        f"date +%s.%N > {started}.part && mv {started}.part {started}; "
        f"while [ ! -f {release} ]; do sleep 0.2; done"
    )
    return job_toml(
        "long", "daily", day_before(sql), catchup="latest", command=["sh", "-c", script]
    )


def running(path: Path) -> bool:
    """The long period still runs: it started, and the test has not released it."""
    return (path / "long.started").exists() and not (path / "release").exists()


class Leader:
    """A `catchup scheduler` started once the config is written (its stderr in leader.err)."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        with (self.project.path / "leader.err").open("w") as log:  # the child keeps its own
            self.proc = subprocess.Popen(
                self.project.command(
                    "scheduler", "--lease", "3s", "--workers", "4", "--grace", "10s"
                ),
                cwd=self.project.path,
                env=self.project.env(),
                text=True,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )

    def up(self) -> None:
        assert self.proc is not None and self.proc.poll() is None, said(self.project)


@pytest.fixture
def leader(project: Project) -> Iterator[Leader]:
    """At the end the long period is released and the scheduler stopped with SIGTERM, which
    must exit 0."""
    started = Leader(project)
    yield started
    (project.path / "release").touch()
    if started.proc is not None:
        started.proc.send_signal(signal.SIGTERM)
        code = started.proc.wait(timeout=60)
        assert code == 0, said(project)


def said(project: Project) -> str:
    return (project.path / "leader.err").read_text()


def test_minute_periods_start_while_a_long_period_runs(
    project: Project, sql: Any, leader: Leader
) -> None:
    """An every-minute job beside a long one: the periods that fall due after the long period
    started start as they fall due, the long one still running."""
    log = project.path / "minute.log"
    stamp = f'echo "$(date +%s.%N) $CATCHUP_PERIOD_END" >> {log}'
    project.write(
        long_job(project.path, sql)
        + job_toml(
            "minute",
            "every 1 minute",
            day_before(sql),
            catchup="latest",
            command=["sh", "-c", stamp],
        )
    )
    leader.start()
    wait_for(lambda: running(project.path), timeout=60, what="the long period to start")
    began = float((project.path / "long.started").read_text())

    def after_it() -> list[str]:
        leader.up()
        lines = log.read_text().split("\n")[:-1] if log.exists() else []  # whole lines
        return [line for line in lines if float(line.split()[0]) > began + 1]

    # the next minute falls due within 60 s of the long period's start
    wait_for(lambda: after_it() != [], timeout=90, what="a minute period due after it")
    assert running(project.path), "the long period ended: the test proves nothing"
    twice = sql(
        "SELECT job_id, key, period_start FROM {schema}.history"
        " GROUP BY job_id, key, period_start HAVING count(*) > 1"
    )
    assert twice == [], said(project)  # no period was started twice


def test_a_retry_starts_when_its_backoff_ends_while_a_long_period_runs(
    project: Project, sql: Any, leader: Leader
) -> None:
    """A period that fails once, retried after 3 s: nothing else falls due for a day, yet the
    retry starts (the leader wakes for its backoff, not for the next due moment or a minute
    later), the long period still running."""
    tries = project.path / "tries"
    fail_once = f'echo x >> {tries}; [ "$CATCHUP_ATTEMPT" -ge 2 ]'
    project.write(
        long_job(project.path, sql)
        + job_toml(
            "flaky",
            "daily",
            day_before(sql),
            catchup="latest",
            retry_backoff="3s",
            max_attempts=3,
            command=["sh", "-c", fail_once],
        )
    )
    leader.start()
    wait_for(lambda: running(project.path), timeout=60, what="the long period to start")
    wait_for(lambda: tries.exists(), timeout=30, what="the first attempt")

    def retried() -> bool:
        leader.up()
        return len(tries.read_text().splitlines()) >= 2

    # well inside the 60 s a leader with nothing due sleeps: it woke for the backoff
    wait_for(retried, timeout=30, what="the retry")
    assert running(project.path), "the long period ended: the test proves nothing"
    wait_for(
        lambda: (
            sql(
                "SELECT status FROM {schema}.runs r JOIN {schema}.jobs j ON j.id = r.job_id"
                " WHERE j.name = 'flaky'"
            )
            == [("succeeded",)]
        ),
        timeout=30,
        what="the retry's success recorded",
    )


def test_a_job_added_runs_while_a_long_period_runs(
    project: Project, sql: Any, leader: Leader
) -> None:
    """The config is read again between starts: a job appended while the long period runs
    runs its due period, the long one still running."""
    project.write(long_job(project.path, sql))
    leader.start()
    wait_for(lambda: running(project.path), timeout=60, what="the long period to start")
    added = project.path / "added.ran"
    project.config.write_text(
        project.config.read_text()
        + job_toml(
            "added", "daily", day_before(sql), catchup="latest", command=["touch", str(added)]
        )
    )

    def ran() -> bool:
        leader.up()
        return added.exists()

    wait_for(ran, timeout=30, what="the added job's period")
    assert running(project.path), "the long period ended: the test proves nothing"
    assert "config reloaded" in said(project)


def slow_job(path: Path, sql: Any, name: str) -> str:
    """A daily period due now in lane ``slow``, running until the test writes ``release``
    (``NAME.started`` says it started)."""
    started, release = path / f"{name}.started", path / "release"
    script = f"touch {started}; while [ ! -f {release} ]; do sleep 0.2; done"
    return job_toml(
        name, "daily", day_before(sql), catchup="latest", lane="slow", command=["sh", "-c", script]
    )


def test_a_lane_never_takes_another_lanes_workers(
    project: Project, sql: Any, leader: Leader
) -> None:
    """Two slow jobs in a lane of one worker, a quick one in the default lane (--workers 4):
    one slow period runs, the other waits for the lane's worker (and `why` says so, naming
    what keeps it busy), while the quick job runs on the default lane's."""
    quick = project.path / "quick.ran"
    project.write(
        "[scheduler.lanes]\nslow = 1\n\n"
        + slow_job(project.path, sql, "billing")
        + slow_job(project.path, sql, "invoices")
        + job_toml(
            "quick", "daily", day_before(sql), catchup="latest", command=["touch", str(quick)]
        )
    )
    leader.start()

    def slow_started() -> list[str]:
        leader.up()
        return sorted(p.stem for p in project.path.glob("*.started"))

    wait_for(
        lambda: slow_started() != [] and quick.exists(), timeout=60, what="a slow and the quick"
    )
    (first,) = slow_started()
    other = ({"billing", "invoices"} - {first}).pop()

    def waiting() -> str:
        leader.up()
        why = project.run("why", other, day_before(sql))
        return " ".join(why.stdout.split())

    wait_for(
        lambda: f"waiting for a free worker in lane slow: 1 of 1 busy with {first}" in waiting(),
        timeout=30,
        what=f"why {other} to say it waits for the lane's worker",
    )
    assert slow_started() == [first], said(project)  # the lane's one worker: never two
    metrics = project.run("scan", "--format", "openmetrics").stdout
    assert 'catchup_scheduler_workers{lane="slow"} 1\n' in metrics, metrics
    assert 'catchup_scheduler_workers_busy{lane="slow"} 1\n' in metrics, metrics
    assert 'catchup_scheduler_workers{lane="default"} 4\n' in metrics, metrics
    wait_for(  # published with the lease's next renewal, the quick period done
        lambda: (
            "workers busy: default 0 of 4, slow 1 of 1)"
            in " ".join(project.run("scan").stdout.split())
        ),
        timeout=30,
        what="the scan's pulse to name each lane's busy workers",
    )


def test_a_job_removed_while_its_period_runs_lets_it_finish(
    project: Project, sql: Any, leader: Leader
) -> None:
    """The config drops the long job while its period runs: the period finishes and is
    recorded (a removed job starts nothing more; what runs is not cut off)."""
    quick = job_toml("quick", "daily", day_before(sql), catchup="latest", command=["true"])
    project.write(long_job(project.path, sql) + quick)
    leader.start()
    wait_for(lambda: running(project.path), timeout=60, what="the long period to start")
    project.write(quick)

    def reloaded() -> bool:
        leader.up()
        return "config reloaded: 1 job (removed long)" in said(project)

    wait_for(reloaded, timeout=30, what="the reload")
    (project.path / "release").touch()
    wait_for(
        lambda: (
            sql(
                "SELECT r.status, r.attempt FROM {schema}.runs r JOIN {schema}.jobs j"
                " ON j.id = r.job_id WHERE j.name = 'long'"
            )
            == [("succeeded", 1)]
        ),
        timeout=30,
        what="the long period's success recorded",
    )
