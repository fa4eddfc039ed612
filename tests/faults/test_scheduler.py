"""`catchup scheduler` on several replicas, as real processes on one ledger: one leads (the
`leader` row, its term), it starts each period as it falls due (not on a fixed minute), a
standby takes over within the lease (plus its one-second poll) when the leader is SIGKILLed or
SIGSTOPped, a leader stopped past its lease never ticks under its old term when it wakes, and
SIGTERM hands the lead back at once and exits 0. Every period runs once: the job's own log of
its runs is counted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fix_processes import wait_for
from fix_project import Project, job_toml

pytestmark = pytest.mark.faults

LEASE = 3.0  # seconds: a standby takes over within this plus its one-second poll
SLACK = 0.75  # seconds for the processes and the round trips on a busy 2-core machine


class Replica:
    """One `catchup scheduler` process, its stderr in a file the test reads."""

    def __init__(self, project: Project, name: str) -> None:
        self.log = project.path / f"{name}.err"
        self.out = project.path / f"{name}.out"
        with self.out.open("w") as out, self.log.open("w") as err:  # the child keeps its own
            self.proc = subprocess.Popen(
                project.command("scheduler", "--lease", f"{LEASE:g}s", "--grace", "5s"),
                cwd=project.path,
                env=project.env(),
                text=True,
                stdout=out,
                stderr=err,
            )

    def said(self) -> str:
        return self.log.read_text()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


def setup(project: Project, sql: Any, due_in: float) -> tuple[Path, datetime]:
    """A job every minute whose periods started ten minutes ago (eight or nine of them due),
    delayed so that its next period falls due about ``due_in`` seconds from now (returned);
    the job logs each run it makes: its period and when it started."""
    now: datetime = sql("SELECT clock_timestamp()")[0][0]
    boundary = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    delay = round((now + timedelta(seconds=due_in) - boundary).total_seconds()) % 60
    # the first period end plus the delay that is still ahead: the next due moment
    due = min(
        end + timedelta(seconds=delay)
        for end in (boundary - timedelta(minutes=1), boundary)
        if end + timedelta(seconds=delay) > now
    )
    ran = project.path / "ran.log"
    project.write(
        job_toml(
            "pulse",
            schedule="every 1 minute",
            start=(boundary - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            delay=f"{delay}s",
            command=["sh", "-c", f'echo "$CATCHUP_PERIOD $(date +%s.%N)" >> {ran}'],
        )
    )
    return ran, due


BACKLOG = 8  # the periods due when the replicas start (eight or nine)


def runs(ran: Path) -> Counter[str]:
    if not ran.exists():
        return Counter()
    return Counter(line.split()[0] for line in ran.read_text().splitlines() if line)


def started_after(ran: Path, due: datetime) -> list[float]:
    """When the runs that started from a second before ``due`` on started."""
    times = [float(line.split()[1]) for line in ran.read_text().splitlines() if line]
    return [t for t in times if t > due.timestamp() - 1]


def leader(sql: Any) -> tuple[int, int] | None:
    """(pid, term) of the live leader, or None."""
    try:
        rows = sql("SELECT holder, term FROM {schema}.leader WHERE expires_at > clock_timestamp()")
    except (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName):
        return None  # the replicas have not made the ledger yet
    if not rows:
        return None
    holder, term = rows[0]
    return int(holder.split(":")[1]), term


def new_leader(sql: Any, gone: int) -> tuple[int, int]:
    """(pid, term) of the leader that took over from the replica ``gone``, waited for."""

    def taken() -> tuple[int, int] | None:
        now = leader(sql)
        return now if now is not None and now[0] != gone else None

    found: tuple[int, int] = wait_for(taken, timeout=LEASE + 10, what="a new leader")
    return found


def test_one_replica_leads_and_starts_each_period_as_it_falls_due(
    project: Project, sql: Any
) -> None:
    ran, due = setup(project, sql, due_in=12)
    replicas = [Replica(project, "a"), Replica(project, "b")]
    try:
        pid, term = wait_for(lambda: leader(sql), timeout=30, what="a leader")
        assert term == 1 and pid in {r.proc.pid for r in replicas}
        # who leads, where people and machines look: scan's JSON, jobs, the metrics
        said = json.loads(project.run("scan", "--json").stdout)["scheduler"]["leader"]
        assert said["live"] is True and said["term"] == 1 and f":{pid}:" in said["holder"]
        assert f"led by {said['holder']} (term 1" in project.run("jobs").stdout
        metrics = project.run("scan", "--format", "openmetrics").stdout
        assert f'catchup_scheduler_leader{{holder="{said["holder"]}"}} 1' in metrics
        assert "catchup_scheduler_term 1" in metrics
        # the first leader's tick: what came due while nobody led, each period once
        wait_for(lambda: len(runs(ran)) >= BACKLOG, timeout=60, what="the backlog run")
        # the next period starts as it falls due, not at the next minute's tick
        first = wait_for(lambda: started_after(ran, due), timeout=90, what="the next period")
        late = first[0] - due.timestamp()
        assert -0.5 < late < 2.0, f"started {late:.2f} s after it fell due"
        assert set(runs(ran).values()) == {1}, runs(ran)
    finally:
        codes = [r.stop() for r in replicas]
    assert codes == [0, 0], [r.said() for r in replicas]
    assert set(runs(ran).values()) == {1}


def test_a_killed_leader_is_replaced_within_its_lease_and_nothing_runs_twice(
    project: Project, sql: Any
) -> None:
    ran, _ = setup(project, sql, due_in=40)
    replicas = {r.proc.pid: r for r in (Replica(project, "a"), Replica(project, "b"))}
    try:
        pid, term = wait_for(lambda: leader(sql), timeout=30, what="a leader")
        wait_for(lambda: len(runs(ran)) >= BACKLOG, timeout=60, what="the backlog run")
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        replicas[pid].proc.wait(timeout=10)
        other, second = new_leader(sql, pid)
        took = time.monotonic() - killed
        assert second == term + 1 and other in replicas
        assert took <= LEASE + 1 + SLACK, f"the standby took {took:.2f} s"
        assert set(runs(ran).values()) == {1}, runs(ran)
    finally:
        for r in replicas.values():
            r.stop()


def test_a_stopped_leader_loses_its_term_and_starts_no_tick_when_it_wakes(
    project: Project, sql: Any
) -> None:
    ran, due = setup(project, sql, due_in=15)
    replicas = {r.proc.pid: r for r in (Replica(project, "a"), Replica(project, "b"))}
    try:
        pid, term = wait_for(lambda: leader(sql), timeout=30, what="a leader")
        wait_for(lambda: len(runs(ran)) >= BACKLOG, timeout=60, what="the backlog run")
        os.kill(pid, signal.SIGSTOP)  # paused past its lease and past the next due moment
        other, second = new_leader(sql, pid)
        assert second == term + 1
        now: datetime = sql("SELECT clock_timestamp()")[0][0]
        time.sleep(max(0.0, (due - now).total_seconds()) + 1)  # its wake-up time passes
        stopped = replicas[pid]
        ticks_before = stopped.said().count(f"tick (term {term})")
        os.kill(pid, signal.SIGCONT)
        wait_for(
            lambda: f"term {term} ended" in stopped.said(),
            timeout=LEASE + 10,
            what="the woken leader to see its term ended",
        )
        time.sleep(1)
        # the term fence: it renewed before ticking, found its term gone, started nothing
        assert stopped.said().count(f"tick (term {term})") == ticks_before, stopped.said()
        assert leader(sql) == (other, second)
        wait_for(lambda: started_after(ran, due), timeout=30, what="the next period")
        assert set(runs(ran).values()) == {1}, runs(ran)
    finally:
        for r in replicas.values():
            r.stop()


def test_sigterm_hands_the_lead_back_at_once_and_exits_0(project: Project, sql: Any) -> None:
    setup(project, sql, due_in=40)
    replicas = {r.proc.pid: r for r in (Replica(project, "a"), Replica(project, "b"))}
    try:
        pid, term = wait_for(lambda: leader(sql), timeout=30, what="a leader")
        asked = time.monotonic()
        replicas[pid].proc.send_signal(signal.SIGTERM)
        assert replicas[pid].proc.wait(timeout=15) == 0, replicas[pid].said()
        assert "handed the lead back" in replicas[pid].said()
        _, second = new_leader(sql, pid)
        took = time.monotonic() - asked
        # handed back, not expired: the standby's next ask (within a second) takes it
        assert second == term + 1 and took < LEASE, f"{took:.2f} s"
    finally:
        for r in replicas.values():
            r.stop()
