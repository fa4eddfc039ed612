"""`catchup scheduler` on several replicas, as real processes on one ledger: one leads (the
`leader` row, its term), it starts each period as it falls due (not on a fixed minute), a
standby takes over within the lease (plus its one-second poll) when the leader is SIGKILLed,
SIGSTOPped or cut off from the database (`pg_terminate_backend`), a leader stopped past its
lease never ticks under its old term when it wakes, a PostgreSQL restart under three replicas
leaves one leading again within the lease, and SIGTERM hands the lead back at once and exits 0.
Every period runs once: the job's own log of its runs is counted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fix_db import Database
from fix_processes import wait_for
from fix_project import Project, job_toml
from fix_proxy import Gate

from catchup.postgres import embedded

pytestmark = pytest.mark.faults

LEASE = 3.0  # seconds: a standby takes over within this plus its one-second poll
SLACK = 0.75  # seconds for the processes and the round trips on a busy 2-core machine


class Replica:
    """One `catchup scheduler` process, its stderr in a file the test reads."""

    def __init__(self, project: Project, name: str, **env: str) -> None:
        self.log = project.path / f"{name}.err"
        self.out = project.path / f"{name}.out"
        with self.out.open("w") as out, self.log.open("w") as err:  # the child keeps its own
            self.proc = subprocess.Popen(
                project.command("scheduler", "--lease", f"{LEASE:g}s", "--grace", "5s"),
                cwd=project.path,
                env=project.env(**env),
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


def backlog_recorded(sql: Any, ran: Path) -> None:
    """The first leader's backlog run and recorded: each period its job logged is succeeded in
    the ledger and none runs. A fault struck while a run is being recorded would lose that
    record, and the period would run again once its lease ran out (a job's side effect the
    ledger never learned of: the window every lease has); these tests strike the leadership."""

    def recorded() -> bool:
        logged = len(runs(ran))
        if logged < BACKLOG:
            return False
        rows = sql("SELECT status, count(*) FROM {schema}.runs GROUP BY 1")
        return dict(rows) == {"succeeded": logged}

    wait_for(recorded, timeout=60, what="the backlog run and recorded")


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


def renewed_after(sql: Any, since: datetime) -> tuple[int, int] | None:
    """(pid, term) of a live lead renewed after ``since`` (database clock), or None."""
    rows = sql(
        "SELECT holder, term FROM {schema}.leader"
        " WHERE renewed_at > %s AND expires_at > clock_timestamp()",
        [since],
    )
    return (int(rows[0][0].split(":")[1]), rows[0][1]) if rows else None


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


def three(project: Project, names: str = "abc") -> dict[int, Replica]:
    return {r.proc.pid: r for r in (Replica(project, name) for name in names)}


def test_a_killed_leader_is_replaced_within_its_lease_and_nothing_runs_twice(
    project: Project, sql: Any
) -> None:
    ran, _ = setup(project, sql, due_in=40)
    replicas = three(project)
    try:
        pid, term = wait_for(lambda: leader(sql), timeout=30, what="a leader")
        backlog_recorded(sql, ran)
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
    replicas = three(project)
    try:
        pid, term = wait_for(lambda: leader(sql), timeout=30, what="a leader")
        backlog_recorded(sql, ran)
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


def long_period(project: Project, sql: Any) -> Path:
    """A daily period due now whose first attempt runs until the test writes ``release`` (a
    later attempt ends at once), with an 8-second lease (longer than the lead's: the new
    leader takes the lead while it still holds); each attempt logs its number in the file
    returned."""
    ((today,),) = sql("SELECT date_trunc('day', clock_timestamp(), 'UTC')")
    attempts, release = project.path / "attempts.log", project.path / "release"
    script = (
        f'echo "$CATCHUP_ATTEMPT" >> {attempts}; [ "$CATCHUP_ATTEMPT" -ge 2 ] || '
        f"while [ ! -f {release} ]; do sleep 0.2; done"
    )
    start = f"{today - timedelta(days=1):%Y-%m-%d}"
    project.write(
        job_toml("long", "daily", start, catchup="latest", lease="8s", command=["sh", "-c", script])
    )
    return attempts


def attempts_of(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def taken_over(
    sql: Any, project: Project, strike: Any, replicas: dict[int, Replica]
) -> tuple[int, Replica]:
    """Two ``replicas``; the leader's long period runs (attempt 1); ``strike(pid)``; then the
    period's lease as the struck leader left it: attempt 2 starts only after it, once."""
    attempts = long_period(project, sql)
    replicas.update(three(project, "ab"))
    pid, term = wait_for(lambda: leader(sql), timeout=30, what="a leader")
    wait_for(lambda: attempts_of(attempts) == ["1"], timeout=30, what="attempt 1 to start")
    strike(pid)
    # as it left it: its lease is renewed no more
    ((expires,),) = sql("SELECT lease_expires_at FROM {schema}.runs WHERE attempt = 1")
    new_leader(sql, pid)
    wait_for(
        lambda: sql("SELECT attempt, status FROM {schema}.runs") == [(2, "succeeded")],
        timeout=30,  # the new leader wakes when the lease runs out, not at the next due day
        what="attempt 2, once the lease ran out",
    )
    ((started,),) = sql("SELECT started_at FROM {schema}.history WHERE attempt = 2")
    assert started >= expires, f"attempt 2 started {started}, attempt 1's lease ran to {expires}"
    assert attempts_of(attempts) == ["1", "2"]
    return term, replicas[pid]


def test_a_leader_killed_mid_period_leaves_it_to_its_lease_then_attempt_2_once(
    project: Project, sql: Any
) -> None:
    replicas: dict[int, Replica] = {}

    def kill(pid: int) -> None:
        os.kill(pid, signal.SIGKILL)
        replicas[pid].proc.wait(timeout=10)

    try:
        taken_over(sql, project, kill, replicas)
    finally:
        (project.path / "release").touch()  # attempt 1's orphaned command ends
        for r in replicas.values():
            r.stop()
    assert sql("SELECT attempt, status FROM {schema}.runs") == [(2, "succeeded")]


def test_a_leader_stopped_mid_period_finds_it_taken_over_when_it_wakes(
    project: Project, sql: Any
) -> None:
    """SIGSTOP past both leases: attempt 2 runs on the new leader; woken, the old one finds
    its term and its claim gone, records nothing over attempt 2 and starts nothing."""
    stopped: list[int] = []

    def stop(pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        stopped.append(pid)

    replicas: dict[int, Replica] = {}
    try:
        term, old = taken_over(sql, project, stop, replicas)
        os.kill(stopped[0], signal.SIGCONT)
        wait_for(lambda: f"term {term} ended" in old.said(), timeout=30, what="its term ended")
        (project.path / "release").touch()
        wait_for(
            lambda: (
                sql("SELECT count(*) FROM {schema}.history WHERE finished_at IS NULL") == [(0,)]
            ),
            timeout=30,
            what="attempt 1 settled",
        )
        assert sql("SELECT attempt, status FROM {schema}.runs") == [(2, "succeeded")]
        assert attempts_of(project.path / "attempts.log") == ["1", "2"]
    finally:
        (project.path / "release").touch()
        for r in replicas.values():
            r.stop()


def test_sigterm_mid_period_hands_the_lead_back_and_lets_the_period_finish(
    project: Project, sql: Any
) -> None:
    """SIGTERM while the leader's long period runs: a standby leads at once (handed back, not
    expired), starts nothing of that period, and the period finishes within --grace on the
    old leader, which then exits 0: attempt 1 succeeded, no attempt 2."""
    attempts = long_period(project, sql)
    replicas = three(project, "ab")
    try:
        pid, term = wait_for(lambda: leader(sql), timeout=30, what="a leader")
        wait_for(lambda: attempts_of(attempts) == ["1"], timeout=30, what="attempt 1 to start")
        asked = time.monotonic()
        replicas[pid].proc.send_signal(signal.SIGTERM)
        _, second = new_leader(sql, pid)
        assert second == term + 1 and time.monotonic() - asked < LEASE
        assert replicas[pid].proc.poll() is None  # its period runs on, within the grace
        (project.path / "release").touch()
        assert replicas[pid].proc.wait(timeout=30) == 0, replicas[pid].said()
        assert sql("SELECT attempt, status FROM {schema}.runs") == [(1, "succeeded")]
        assert attempts_of(attempts) == ["1"]
    finally:
        (project.path / "release").touch()
        for r in replicas.values():
            r.stop()


def test_sigterm_past_the_grace_stops_the_period_and_the_new_leader_runs_it_once(
    project: Project, sql: Any
) -> None:
    """The period outlives --grace (5 s): stopped, recorded interrupted (no failure counted),
    the old leader exits 0, and the new leader runs it again as attempt 2, once."""
    attempts = long_period(project, sql)
    replicas = three(project, "ab")
    try:
        pid, _ = wait_for(lambda: leader(sql), timeout=30, what="a leader")
        wait_for(lambda: attempts_of(attempts) == ["1"], timeout=30, what="attempt 1 to start")
        replicas[pid].proc.send_signal(signal.SIGTERM)
        assert replicas[pid].proc.wait(timeout=30) == 0, replicas[pid].said()
        wait_for(
            lambda: (
                sql("SELECT attempt, status, failures FROM {schema}.runs") == [(2, "succeeded", 0)]
            ),
            timeout=30,
            what="attempt 2 on the new leader",
        )
        assert sql("SELECT status FROM {schema}.history ORDER BY attempt") == [
            ("interrupted",), ("succeeded",)
        ]  # fmt: skip
        assert attempts_of(attempts) == ["1", "2"]
    finally:
        (project.path / "release").touch()
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


def test_a_leader_cut_off_from_the_database_is_replaced_within_its_lease(
    project: Project, sql: Any, database: Database
) -> None:
    """The leader reaches the ledger through a gate that is then shut (its connections cut,
    new ones refused: a host that lost its network): it cannot renew, stops acting as the
    leader, and a standby takes the next term within the lease (plus its poll)."""
    ran, due = setup(project, sql, due_in=30)
    gate = Gate(database.conninfo)
    cut_off = Replica(project, "a", CATCHUP_DSN=gate.dsn(database.conninfo))
    replicas = {cut_off.proc.pid: cut_off}
    try:
        pid, term = wait_for(lambda: leader(sql), timeout=30, what="a leader")
        assert pid == cut_off.proc.pid
        replicas |= three(project, "bc")
        backlog_recorded(sql, ran)
        began = time.monotonic()
        gate.shut()
        other, second = new_leader(sql, pid)
        took = time.monotonic() - began
        assert second == term + 1 and other in replicas
        assert took <= LEASE + 1 + SLACK, f"the standby took {took:.2f} s"
        wait_for(lambda: "cannot renew the lead" in cut_off.said(), timeout=10, what="the cut said")
        assert cut_off.proc.poll() is None  # it stands by, trying to reach the ledger
        wait_for(lambda: started_after(ran, due), timeout=60, what="the next period")
        assert set(runs(ran).values()) == {1}, runs(ran)
    finally:
        for r in replicas.values():
            r.stop()


def test_a_leader_whose_connection_is_ended_keeps_its_term_or_hands_it_on(
    project: Project, sql: Any
) -> None:
    """The server ends the lead's connection (pg_terminate_backend, once): the leader
    reconnects and, its lease still live, leads on under the same term; whoever leads after
    it, one replica leads again within the lease, and nothing runs twice."""
    ran, _ = setup(project, sql, due_in=40)
    replicas = three(project)
    try:
        pid, term = wait_for(lambda: leader(sql), timeout=30, what="a leader")
        backlog_recorded(sql, ran)
        lead_connection = f"catchup scheduler %:{pid}:%"
        ended = sql(
            "SELECT pg_terminate_backend(pid), clock_timestamp() FROM pg_stat_activity"
            " WHERE application_name LIKE %s",
            [lead_connection],
        )
        assert len(ended) == 1 and ended[0][0], ended  # the lead's connection, named by holder
        began, since = time.monotonic(), ended[0][1]

        now, now_term = wait_for(
            lambda: renewed_after(sql, since), timeout=LEASE + 10, what="the lead renewed"
        )
        assert time.monotonic() - began <= LEASE + 1 + SLACK
        wait_for(
            lambda: "cannot renew the lead" in replicas[pid].said(), timeout=10, what="the cut"
        )
        if (now, now_term) == (pid, term):
            assert f"leading again (term {term}" in replicas[pid].said()
        else:
            assert now_term == term + 1
        assert set(runs(ran).values()) == {1}, runs(ran)
    finally:
        for r in replicas.values():
            r.stop()


def private_sql(conninfo: str, schema: str) -> Any:
    """`sql` on a server of the test's own: a connection per statement (the server restarts)."""
    from psycopg import sql as pgsql

    def run(text: str, params: Any = None) -> list[tuple[Any, ...]]:
        query = pgsql.SQL(text).format(schema=pgsql.Identifier(schema))  # type: ignore[arg-type, unused-ignore]
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description else []

    return run


def test_postgres_restarted_under_three_schedulers(project: Project, private_server: str) -> None:
    """An immediate-mode restart (a crash) of the ledger's server under three replicas: within
    the lease of the server being back, a replica leads again (the old leader resumes its
    term if its lease outlived the restart, else a standby takes the next); the period that
    falls due after it starts within the lease; nothing runs twice."""
    project.database = Database(private_server, {"CATCHUP_DSN": private_server})
    sql = private_sql(private_server, project.schema)
    ran, due = setup(project, sql, due_in=25)
    replicas = three(project)
    try:
        wait_for(lambda: leader(sql), timeout=30, what="a leader")
        backlog_recorded(sql, ran)
        # every replica past its start (a ledger it cannot reach at start is exit 3, by design)
        wait_for(
            lambda: all("database: " in r.said() for r in replicas.values()),
            timeout=60,
            what="every replica started",
        )
        embedded.restart("immediate")
        back = time.monotonic()
        (since,) = sql("SELECT clock_timestamp()")[0]

        pid, _ = wait_for(
            lambda: renewed_after(sql, since), timeout=LEASE + 10, what="a leader after the restart"
        )
        took = time.monotonic() - back
        assert pid in replicas and took <= LEASE + 1 + SLACK, f"{took:.2f} s"
        first = wait_for(lambda: started_after(ran, due), timeout=60, what="the next period")
        late = first[0] - due.timestamp()
        assert late < LEASE + 1, f"the period due after the restart started {late:.2f} s late"
        assert set(runs(ran).values()) == {1}, runs(ran)
    finally:
        codes = [r.stop() for r in replicas.values()]
    assert codes == [0, 0, 0], [r.said() for r in replicas.values()]
    assert not [r for r in replicas.values() if "Traceback" in r.said()]


def test_a_chaos_run_of_kills_and_stops_of_the_leader(project: Project, database: Database) -> None:
    """benchmarks/chaos.py for 40 s (its 10-minute figures are the benchmark's): three
    replicas, the leader SIGKILLed, SIGSTOPped past its lease and SIGTERMed in turn every few
    seconds. Each time another replica leads within the lease plus a second; no period runs
    twice by the jobs' own journal; every period that fell due started, within the lease plus
    its interval."""
    from paths import ROOT

    env = {**project.env(), "CATCHUP_DSN": database.conninfo}
    env.pop("CATCHUP_CONFIG")
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "chaos.py"), "--seconds", "40",
         "--schema", project.schema, "--json", "--seed", "7"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout.splitlines()[-1])
    kinds = Counter(s["kind"] for s in figures["strikes"])
    assert min(kinds.values()) >= 1 and len(kinds) == 3, figures["strikes"]
    assert not [s for s in figures["strikes"] if "took" not in s or s.get("exit", 0) != 0]
    for kind in ("kill", "stop"):
        assert figures["takeover_max_seconds"][kind] <= LEASE + 1 + SLACK, figures
    assert figures["takeover_max_seconds"]["term"] < LEASE, figures  # handed back, not expired
    assert figures["twice"] == [], figures["twice"]
    assert figures["due_periods"] >= 10 and figures["unstarted"] == [], figures
    assert figures["late_max_seconds"] < LEASE + 60, figures
    assert set(figures["exit_codes"]) == {0}, figures["exit_codes"]


def test_after_a_week_down_the_first_leader_does_what_tick_would(
    project: Project, sql: Any, database: Database, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every replica down for a week (the last tick eight days ago): the first leader applies
    each job's catch-up policy exactly as `catchup tick` does on a twin ledger (`all` within
    its catchup_window, `latest`, `none`), and nothing runs twice or more than that."""
    from fix_db import throwaway_schema

    now: datetime = sql("SELECT clock_timestamp()")[0][0]
    start = (now - timedelta(days=8)).replace(minute=0, second=0, microsecond=0)
    # due half an hour from now's minute: no period falls due while the test runs
    delay = f"{(now.minute + 30) % 60}m"
    ran = project.path / "ran.log"
    command = ["sh", "-c", f'echo "$CATCHUP_JOB $CATCHUP_PERIOD" >> {ran}']
    jobs = "".join(
        job_toml(
            name, schedule="hourly", start=f"{start:%Y-%m-%dT%H:%M:%SZ}", delay=delay,
            catchup=policy, catchup_window="1d", command=command,
        )
        for name, policy in (("every", "all"), ("newest", "latest"), ("none_old", "none"))
    )  # fmt: skip
    with throwaway_schema(database) as twin_schema:
        twin = Project(tmp_path_factory.mktemp("twin"), twin_schema, database)
        for p in (project, twin):
            p.write(jobs)
            assert p.cli("migrate").exit_code == 0
            p.cli("-q", "jobs")  # the jobs registered
        for schema in (project.schema, twin_schema):
            sql(
                f'INSERT INTO "{schema}".ticks (host, at)'
                " VALUES ('gone', clock_timestamp() - interval '8 days')"
            )
        assert twin.run("tick").returncode == 0
        by_tick = Counter(line.split()[0] for line in ran.read_text().splitlines())
        ran.unlink()
        # a day of hourly periods (less those the delay still holds back), the newest, the newest
        assert 20 <= by_tick["every"] <= 24 and by_tick["newest"] == 1, by_tick
        replicas = three(project, "ab")
        try:
            wait_for(lambda: leader(sql), timeout=30, what="a leader")
            total = sum(by_tick.values())

            def lines() -> list[str]:
                return ran.read_text().splitlines() if ran.exists() else []

            wait_for(lambda: len(lines()) >= total, timeout=60, what="the catch-up")
            time.sleep(2)  # and nothing more
            assert Counter(line.split()[0] for line in lines()) == by_tick
            assert len(set(lines())) == len(lines())  # each (job, period) once
        finally:
            codes = [r.stop() for r in replicas.values()]
    assert codes == [0, 0]
