"""Real faults against the claim path: the ledger and a history the job writes itself must show
every period succeeded at most once, nothing stuck in running, no forbidden overlap.

Run alone with ``uv run pytest -m faults``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from fix_db import Database
from fix_processes import process_gone, wait_for, written_pid
from fix_project import Project, job_toml
from fix_proxy import CutAfter, Pooler

from catchup.postgres import embedded

pytestmark = [pytest.mark.faults, pytest.mark.slow]
PSQL = embedded.bin_dir() / "psql"


def journal(sql: Any) -> None:
    """The job's own history: one row per run, times from the database clock."""
    sql(
        "CREATE TABLE {schema}.journal (job text, period text, attempt int, pid int,"
        " started timestamptz, ended timestamptz)"
    )


def journaled(schema: str, sleep: str = "0") -> list[str]:
    """A command that writes its start and end to the journal with psql."""
    table = f'"{schema}".journal'
    script = (
        f'"$PSQL" -qAt -d "$JOURNAL_DSN" -c "INSERT INTO {table} VALUES '
        "('$CATCHUP_JOB', '$CATCHUP_PERIOD', $CATCHUP_ATTEMPT, $$, clock_timestamp(), NULL)\" "
        f"&& sleep {sleep} && "
        f'"$PSQL" -qAt -d "$JOURNAL_DSN" -c "UPDATE {table} SET ended = clock_timestamp() '
        "WHERE period = '$CATCHUP_PERIOD' AND attempt = $CATCHUP_ATTEMPT\""
    )
    return ["sh", "-c", script]


def check_journal(sql: Any, periods: int) -> dict[str, Any]:
    rows = sql("SELECT period, started, ended FROM {schema}.journal WHERE ended IS NOT NULL")
    done = Counter(period for period, _, _ in rows)
    succeeded = sql("SELECT count(*) FROM {schema}.runs WHERE status = 'succeeded'")[0][0]
    stuck = sql("SELECT count(*) FROM {schema}.runs WHERE status = 'running'")[0][0]
    duplicates = sum(count - 1 for count in done.values())
    figures = {"periods": len(done), "duplicates": duplicates, "stuck": stuck}
    assert stuck == 0, figures
    assert succeeded == periods, figures
    assert len(done) == periods and duplicates == 0, f"a period ran twice: {figures}"
    return figures  # measured, printed by the caller


def env_for(project: Project, database: Database, **extra: str) -> dict[str, str]:
    return project.env(PSQL=str(PSQL), JOURNAL_DSN=database.conninfo, **extra)


def replay_argv(until: str, *extra: str) -> list[str]:
    """``catchup replay`` of everything since 2026-01-01 and before ``until``."""
    return [
        sys.executable,
        "-m",
        "catchup",
        "-q",
        "replay",
        "--since",
        "2026-01-01",
        "--until",
        until,
        *extra,
    ]


def test_16_processes_over_1000_periods(project: Project, sql: Any, database: Database) -> None:
    """16 replay processes released together from a barrier over the same 1,000 periods."""
    project.write(
        '[jobs.export]\nschedule = "hourly"\nstart = "2026-01-01"\noverlap = "allow"\n'
        f"command = {json.dumps(journaled(project.schema))}\n"
    )
    assert project.cli("migrate").exit_code == 0
    journal(sql)
    barrier = project.path / "go"
    # each process says it is ready, waits for the barrier file, then execs the same replay
    gate = 'touch "$1"; shift; while [ ! -e "$0" ]; do sleep 0.01; done; exec "$@"'
    replay = replay_argv("2026-02-11T16:00:00Z", "--json")
    ready = [project.path / f"ready-{n}" for n in range(16)]
    procs = [
        subprocess.Popen(
            ["sh", "-c", gate, str(barrier), str(ready[n]), *replay],
            env=env_for(project, database),
            cwd=project.path,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(16)
    ]
    wait_for(lambda: all(r.exists() for r in ready), timeout=60, what="16 processes at the gate")
    started = time.monotonic()
    barrier.touch()
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    figures = check_journal(sql, 1000)
    print(f"16 processes x 1000 periods: {figures}, {time.monotonic() - started:.1f}s")


def test_killed_runner_takes_its_grandchildren_along(
    project: Project, sql: Any, database: Database
) -> None:
    """SIGKILL the runner: the job's grandchildren are gone within the lease, and another
    runner takes the period over as attempt 2."""
    pids = project.path / "pids"
    script = (
        f'if [ "$CATCHUP_ATTEMPT" = 1 ]; then sh -c "sleep 1000 & echo \\$! >> {pids}; '
        f'sleep 1000" & echo $! >> {pids}; wait; fi'
    )
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-01-01"\nlease = "3s"\n'
        f"command = {json.dumps(['sh', '-c', script])}\n"
    )
    runner = project.spawn("run", "billing", "--period", "2026-01-05")
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, what="grandchildren")
    runner.send_signal(signal.SIGKILL)
    runner.communicate(timeout=30)
    killed = time.monotonic()
    children = [int(p) for p in pids.read_text().split()]
    try:
        wait_for(
            lambda: all(process_gone(p) for p in children),
            timeout=3,
            what="the grandchildren to go within the lease (3s)",
        )
        gone_after = time.monotonic() - killed
        wait_for(
            lambda: sql("SELECT lease_expires_at < clock_timestamp() FROM {schema}.runs")[0][0],
            timeout=30,
            what="the lease to expire",
        )
        second = project.run("run", "billing", "--period", "2026-01-05")
        assert second.returncode == 0 and "attempt 2: succeeded" in second.stdout
        recovered = time.monotonic() - killed
        print(
            f"grandchildren gone {gone_after:.1f}s after the kill; taken over "
            f"{recovered:.1f}s after it"
        )
    finally:
        for pid in children:
            if not process_gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_heartbeat_connection_terminated(project: Project, sql: Any) -> None:
    """pg_terminate_backend on the heartbeat's connection, then on the one it reconnected
    with: it reconnects each time (a third connection is seen), the job succeeds."""
    project.write(job_toml("billing", start="2026-01-01", lease="3s", command=["sleep", "8"]))
    runner = project.spawn("run", "billing", "--period", "2026-01-05")

    def heartbeat_pids() -> list[int]:
        return [
            pid
            for (pid,) in sql(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'catchup-heartbeat'"
            )
        ]

    killed: set[int] = set()

    def new_heartbeat() -> list[int]:
        return [pid for pid in heartbeat_pids() if pid not in killed]

    for what in ("the first heartbeat connection", "a reconnect", "a second reconnect"):
        victims = wait_for(new_heartbeat, timeout=15, what=what)
        if len(killed) < 2:  # cut the first two; the third proves the second reconnect
            for pid in victims:
                sql("SELECT pg_terminate_backend(%s)", [pid])
            killed.update(victims)
    assert len(killed) == 2
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 0, out + err
    assert "attempt 1: succeeded" in out
    assert sql("SELECT status, attempt FROM {schema}.runs") == [("succeeded", 1)]


def test_postgres_restarted_during_claims_runs_and_finishes(
    project: Project, private_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Immediate-mode restarts while three replays work through a backlog, each placed while
    a job is running: every period is recorded succeeded once and its job completed once (the
    journal, a file the restarts cannot cut, is written when the job ends), nothing is left
    running, and every replay ends with its periods' outcomes (0 or 1, never 3: a worker's
    reads before a claim, and a worker's own connection, are reopened too)."""
    project.database = Database(private_server, {"CATCHUP_DSN": private_server})
    journal = project.path / "journal"
    script = f'sleep 0.2; echo "$CATCHUP_PERIOD $CATCHUP_ATTEMPT" >> {journal}'
    project.write(
        '[jobs.export]\nschedule = "hourly"\nstart = "2026-01-01"\noverlap = "allow"\n'
        f'lease = "20s"\ncommand = {json.dumps(["sh", "-c", script])}\n'
    )
    assert project.cli("migrate").exit_code == 0
    env = project.env()
    args = replay_argv("2026-01-02T12:00:00Z", "--workers", "2")
    procs = [
        subprocess.Popen(args, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    restarts = []

    def running() -> bool:
        """A job runs now, and every replay has claimed (it is past planning, which does not
        reconnect: a restart then is exit 3, for the next tick to retry)."""
        try:
            with psycopg.connect(private_server, autocommit=True) as conn:
                rows = conn.execute(f'SELECT status, owner FROM "{project.schema}".runs').fetchall()
        except psycopg.Error:
            return False
        owners = {int(owner.rsplit(":", 1)[1]) for _, owner in rows if owner}
        return any(status == "running" for status, _ in rows) and owners >= {
            proc.pid for proc in procs
        }

    for n in range(2):
        wait_for(running, timeout=120, what=f"a running job before restart {n + 1}")
        began = time.monotonic()
        embedded.restart("immediate")
        restarts.append(time.monotonic() - began)
    for proc in procs:
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode in (0, 1), err
    # a job cut off mid-write may have failed; one more replay finishes the backlog
    final = subprocess.run(args, env=env, text=True, capture_output=True, timeout=300, check=False)
    assert final.returncode == 0, final.stderr
    with psycopg.connect(private_server, autocommit=True) as conn:
        runs = conn.execute(
            f'SELECT status, count(*) FROM "{project.schema}".runs GROUP BY 1'
        ).fetchall()
    ended = Counter(line.split()[0] for line in journal.read_text().splitlines())
    assert runs == [("succeeded", 36)]
    assert len(ended) == 36
    # no period's job completed twice, across attempts
    assert [period for period, n in ended.items() if n > 1] == []
    print(f"restarts took {', '.join(f'{r:.1f}s' for r in restarts)}; 36 periods, 0 stuck")


def test_database_gone_longer_than_the_lease_stops_the_job(
    project: Project, private_server: str
) -> None:
    """The server stops while a job runs and stays away past the lease: the runner stops its
    job (the lease can no longer be renewed), records nothing, says so, and exits 1; with the
    server back, the period is taken over as attempt 2 and succeeds."""
    project.database = Database(private_server, {"CATCHUP_DSN": private_server})
    pidfile = project.path / "job.pid"
    script = f'if [ "$CATCHUP_ATTEMPT" = 1 ]; then echo $$ > {pidfile}; exec sleep 600; fi'
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-01-01"\nlease = "3s"\n'
        f"command = {json.dumps(['sh', '-c', script])}\n"
    )
    runner = project.spawn("run", "billing", "--period", "2026-01-05")
    job_pid = wait_for(lambda: written_pid(pidfile), timeout=60, what="attempt 1's job pid")
    embedded.stop("immediate")
    try:
        out, err = runner.communicate(timeout=60)
        assert runner.returncode == 1, out + err
        assert "attempt 1: lost" in out and "could not be renewed" in out
        wait_for(lambda: process_gone(job_pid), timeout=15, what="attempt 1's job to stop")
    finally:
        embedded.ensure_running()
    later = project.run("run", "billing", "--period", "2026-01-05")
    assert later.returncode == 0, later.stderr
    assert "attempt 2: succeeded" in later.stdout


def test_commit_outcome_unknown_is_read_back(
    project: Project, sql: Any, database: Database
) -> None:
    """The finish commits (PostgreSQL answered it) but the answer never reaches the runner:
    it reconnects and reads the row back instead of guessing (and does not run the job again)."""
    proxy = CutAfter(database.conninfo, arm=b".finish_attempt(")
    try:
        log = project.path / "log"
        project.write(
            '[jobs.billing]\nschedule = "daily"\nstart = "2026-01-01"\n'
            f'command = ["sh", "-c", "echo ran >> {log}"]\n'
        )
        assert project.cli("migrate").exit_code == 0  # the migration names the function too
        dsn = proxy.dsn(database.conninfo)
        result = project.run("--dsn", dsn, "run", "billing", "--period", "2026-01-05")
        assert proxy.cut.is_set(), f"the proxy never saw the finish: {result}"
        assert result.returncode == 0, result.stderr
        assert "attempt 1: succeeded" in result.stdout
        assert log.read_text() == "ran\n"
        assert sql("SELECT status, attempt FROM {schema}.runs") == [("succeeded", 1)]
    finally:
        proxy.close()


def test_a_claim_whose_commit_answer_is_lost_is_reclaimed(
    project: Project, sql: Any, database: Database
) -> None:
    """The claim commits (PostgreSQL answered the statement, its own transaction) but the
    runner never hears it: after reconnecting it finds the running row is its own and adopts
    it, rather than calling the period "running elsewhere" and leaving it to expire."""
    proxy = CutAfter(database.conninfo, arm=b".claim_period(")
    try:
        log = project.path / "log"
        project.write(
            '[jobs.billing]\nschedule = "daily"\nstart = "2026-01-01"\n'
            f'command = ["sh", "-c", "echo $CATCHUP_ATTEMPT >> {log}"]\n'
        )
        assert project.cli("migrate").exit_code == 0
        dsn = proxy.dsn(database.conninfo)
        result = project.run("--dsn", dsn, "run", "billing", "--period", "2026-01-05")
        assert proxy.cut.is_set(), f"the proxy never saw the claim commit: {result}"
        assert result.returncode == 0, result.stderr
        assert "attempt 1: succeeded" in result.stdout, result.stdout
        assert log.read_text() == "1\n"
        assert sql("SELECT status, attempt FROM {schema}.runs") == [("succeeded", 1)]
        assert sql("SELECT attempt, status FROM {schema}.history") == [(1, "succeeded")]
    finally:
        proxy.close()


def test_a_read_before_a_claim_cut_off_is_asked_again(
    project: Project, sql: Any, database: Database
) -> None:
    """A claim found nothing to do, and the read that follows it (is the period suspect after a
    failover) loses its connection: the runner reconnects and asks again, and says why nothing
    ran, rather than ending the command with a database error (exit 3)."""
    project.write('[jobs.billing]\nschedule = "daily"\nstart = "2026-01-01"\ncommand = ["true"]\n')
    assert project.cli("migrate").exit_code == 0
    assert project.run("run", "billing", "--period", "2026-01-05").returncode == 0
    proxy = CutAfter(database.conninfo, arm=b"is_suspect(w.seen_at, ")
    try:
        dsn = proxy.dsn(database.conninfo)
        result = project.run("--dsn", dsn, "run", "billing", "--period", "2026-01-05")
        told = result.stdout + result.stderr
        assert proxy.cut.is_set(), f"the proxy never saw the suspect read: {told}"
        assert "already succeeded (attempt 1)" in told, told
        assert "database error" not in result.stderr, result.stderr
        assert sql("SELECT status, attempt FROM {schema}.runs") == [("succeeded", 1)]
    finally:
        proxy.close()


def test_a_workers_session_cut_off_as_it_opens_is_opened_again(
    project: Project, sql: Any, database: Database
) -> None:
    """A replay's second worker opens its own session just as the server goes away (its first
    statements answered, the connection then cut): it opens another and takes its share, and
    the replay runs every period, rather than ending with "cannot prepare schema" (exit 3)."""
    project.write('[jobs.billing]\nschedule = "daily"\nstart = "2026-01-01"\ncommand = ["true"]\n')
    assert project.cli("migrate").exit_code == 0
    # the replay's own session sends it first; the second worker's session second
    proxy = CutAfter(database.conninfo, arm=b"known.newest IS NOT NULL", skip=1)
    try:
        dsn = proxy.dsn(database.conninfo)
        argv = ("--dsn", dsn, "replay", "--since", "2026-01-01", "--until", "2026-01-09")
        result = project.run(*argv, "--workers", "2")
        assert proxy.cut.is_set(), f"no second session was cut: {result.stderr}"
        assert result.returncode == 0, result.stderr
        assert sql("SELECT status, count(*) FROM {schema}.runs GROUP BY 1") == [("succeeded", 8)]
    finally:
        proxy.close()


@pytest.mark.parametrize(
    "statement",
    [b".claim_periods(", b".finish_periods("],
    ids=["claim", "finish"],
)
def test_a_batch_whose_answer_is_lost_runs_every_key_once(
    project: Project, sql: Any, database: Database, statement: bytes
) -> None:
    """A batch's claim (or finish) of many keys commits, but its answer never reaches the
    runner: after reconnecting it reads back what the statement did (its claims, adopted; its
    finishes, recorded) and no key runs twice, none is left running, each is attempt 1. The
    first key runs alone (a worker claims one until one has run); the claim cut is of the 39
    others, the finish cut the first batch's first flush."""
    proxy = CutAfter(database.conninfo, arm=statement)
    try:
        log = project.path / "log"
        keys = [f"t{n:02}" for n in range(40)]
        project.write(
            job_toml(
                "invoice",
                "daily",
                "2026-01-01",
                keys=keys,
                command=["sh", "-c", f'echo "$0 $CATCHUP_ATTEMPT" >> {log}', "{key}"],
            )
        )
        assert project.cli("migrate").exit_code == 0
        dsn = proxy.dsn(database.conninfo)
        window = ("--since", "2026-01-05", "--until", "2026-01-06")
        result = project.run("--dsn", dsn, "replay", *window, "--workers", "1")
        assert proxy.cut.is_set(), f"the proxy never saw {statement!r}: {result}"
        assert result.returncode == 0, result.stderr
        ran = [tuple(line.split()) for line in log.read_text().splitlines()]
        assert sorted(ran) == [(k, "1") for k in keys]  # each key once, as attempt 1
        rows = sql("SELECT status, attempt, count(*) FROM {schema}.runs GROUP BY 1, 2")
        assert rows == [("succeeded", 1, len(keys))]
        history = sql("SELECT attempt, status, count(*) FROM {schema}.history GROUP BY 1, 2")
        assert history == [(1, "succeeded", len(keys))]
    finally:
        proxy.close()


def test_postgres_restarted_as_a_finish_is_sent(
    project: Project, sql: Any, private_server: str
) -> None:
    """The server restarts (immediate mode) at the moment the finish is sent, before PostgreSQL
    sees it: the runner reconnects after the restart, finds its attempt still running, writes
    the finish, and the period is succeeded as attempt 1, its job run once."""
    project.database = Database(private_server, {"CATCHUP_DSN": private_server})
    proxy = CutAfter(
        private_server, arm=b".finish_attempt(", instead=lambda: embedded.restart("immediate")
    )
    try:
        log = project.path / "log"
        project.write(
            '[jobs.billing]\nschedule = "daily"\nstart = "2026-01-01"\nlease = "60s"\n'
            f'command = ["sh", "-c", "echo $CATCHUP_ATTEMPT >> {log}"]\n'
        )
        assert project.run("migrate").returncode == 0  # the migration names the function too
        result = project.run(
            "--dsn", proxy.dsn(private_server), "run", "billing", "--period", "2026-01-05"
        )
        assert proxy.cut.is_set(), f"the proxy never saw the finish: {result}"
        assert result.returncode == 0, result.stderr
        assert "attempt 1: succeeded" in result.stdout
        assert log.read_text() == "1\n"
        with psycopg.connect(private_server, autocommit=True) as conn:
            runs = conn.execute(f'SELECT status, attempt FROM "{project.schema}".runs').fetchall()
        assert runs == [("succeeded", 1)]
    finally:
        proxy.close()


# runs the command it is given and says, last on stderr, the peak RSS (KiB) of its children
MEASURED = (
    "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
    "sys.exit(done.returncode)"
)


def test_a_gigabyte_of_output(project: Project, sql: Any) -> None:
    """1 GiB on stdout and stderr: no deadlock, bounded memory, a truncated tail that ends
    with the last bytes written. (THE-END on stderr, after stderr's half gigabyte: the two
    pipes are read apart, so what one says is ordered against the other's only as their
    readers happen to run; under load stderr's last 64 KiB came after stdout's THE-END.)"""
    script = (
        "head -c 536870912 /dev/zero | tr '\\0' o; head -c 536870912 /dev/zero | "
        "tr '\\0' e >&2; echo THE-END >&2"
    )
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-01-01"\n'
        f"command = {json.dumps(['sh', '-c', script])}\n"
    )
    # measured in a process of its own whose only child is the runner: this process's
    # RUSAGE_CHILDREN is the largest of every child it ever waited for (a server set up
    # earlier in the session peaked at 100 MB once, and the test failed for it)
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            MEASURED,
            *project.command("-q", "run", "billing", "--period", "2026-01-05", "--json"),
        ],
        cwd=project.path,
        env=project.env(),
        text=True,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    peak = int(result.stderr.strip().splitlines()[-1])
    assert peak < 100 * 1024, f"peak RSS {peak} KiB"
    (tail,) = sql("SELECT output_tail FROM {schema}.runs")[0]
    assert tail.startswith("[catchup: ") and "earlier bytes of output not kept" in tail
    assert tail.rstrip().endswith("e" * 1000 + "THE-END")  # the bytes, as tr made them
    print(f"1 GiB of output: peak RSS of the children {peak // 1024} MB")


def test_strict_timeouts_and_a_long_job(project: Project, sql: Any, database: Database) -> None:
    """idle_in_transaction_session_timeout = 1s, statement_timeout = 5s: a 10-second job
    still succeeds, since no transaction is held open while it runs."""
    role = f"strict_{project.schema}"
    sql(f"CREATE ROLE \"{role}\" LOGIN PASSWORD 'strict-pw'")
    sql(f"ALTER ROLE \"{role}\" SET idle_in_transaction_session_timeout = '1s'")
    sql(f"ALTER ROLE \"{role}\" SET statement_timeout = '5s'")
    sql(f'GRANT CREATE ON DATABASE postgres TO "{role}"')
    try:
        project.write(job_toml("billing", start="2026-01-01", lease="3s", command=["sleep", "10"]))
        params = psycopg.conninfo.conninfo_to_dict(database.conninfo)
        dsn = psycopg.conninfo.make_conninfo(
            "", **{**params, "user": role, "password": "strict-pw"}
        )
        result = project.run("--dsn", dsn, "run", "billing", "--period", "2026-01-05")
        assert result.returncode == 0, result.stdout + result.stderr
        assert "attempt 1: succeeded" in result.stdout
    finally:
        sql(f'DROP SCHEMA IF EXISTS "{project.schema}" CASCADE')
        sql(f'REVOKE CREATE ON DATABASE postgres FROM "{role}"')
        sql(f'DROP ROLE "{role}"')


def take_every_slot(database: Database) -> list[psycopg.Connection[Any]]:
    """Connections until the server refuses another: every slot taken (close them after)."""
    hogs: list[psycopg.Connection[Any]] = []
    try:
        while len(hogs) < 1000:
            hogs.append(psycopg.connect(database.conninfo, autocommit=True))
    except psycopg.OperationalError as exc:
        assert "too many clients" in str(exc) or "reserved" in str(exc)
    return hogs


def test_max_connections_exhausted(project: Project, sql: Any, database: Database) -> None:
    """Every connection slot taken: catchup waits and retries; freed in time, it succeeds;
    nothing is left running."""
    project.write(job_toml("billing", start="2026-01-01", command=["true"]))
    assert project.cli("migrate").exit_code == 0
    hogs = take_every_slot(database)
    try:
        runner = project.spawn("run", "billing", "--period", "2026-01-05")
        time.sleep(2)
        assert runner.poll() is None  # still waiting for a slot
    finally:
        for conn in hogs:
            conn.close()
    _out, err = runner.communicate(timeout=60)
    assert runner.returncode == 0, err
    assert sql("SELECT status FROM {schema}.runs") == [("succeeded",)]


def test_connect_retry_gives_up_when_its_window_ends(
    project: Project, sql: Any, database: Database
) -> None:
    """Every slot taken and never freed: catchup waits CATCHUP_CONNECT_RETRY seconds (here 2),
    then says so in one line and exits 3; nothing was written."""
    project.write(job_toml("billing", start="2026-01-01", command=["true"]))
    assert project.cli("migrate").exit_code == 0
    hogs = take_every_slot(database)
    try:
        env = {**project.env(), "CATCHUP_CONNECT_RETRY": "2"}
        started = time.monotonic()
        result = subprocess.run(
            [sys.executable, "-m", "catchup", "run", "billing", "--period", "2026-01-05"],
            env=env,
            cwd=project.path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        took = time.monotonic() - started
    finally:
        for conn in hogs:
            conn.close()
    assert result.returncode == 3, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and ("too many clients" in lines[0] or "reserved" in lines[0])
    assert took >= 1.5  # it waited for a slot before giving up
    assert sql("SELECT count(*) FROM {schema}.runs") == [(0,)]


def test_password_appears_nowhere(project: Project, sql: Any, database: Database) -> None:
    """A password in the DSN and in PGPASSWORD: in no output, error, ledger row or child argv."""
    secret = "Sup3r-s3cret-pw"
    argv_log = project.path / "argv"
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-01-01"\n'
        f'command = ["sh", "-c", "cat /proc/$$/cmdline >> {argv_log}; echo hi"]\n'
    )
    # a role of its own whose password is the secret (the embedded server requires one)
    role = f"pw_{project.schema}"
    sql(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{secret}'")
    sql(f'GRANT CREATE ON DATABASE postgres TO "{role}"')
    params = psycopg.conninfo.conninfo_to_dict(database.conninfo)
    dsn = psycopg.conninfo.make_conninfo("", **{**params, "user": role, "password": secret})
    env = {**project.env(), "PGPASSWORD": secret}
    outputs = []
    for args in (
        ["run", "billing", "--period", "2026-01-05"],
        ["scan", "--until", "2026-01-09"],
        ["jobs"],
        ["history", "billing"],
        ["doctor"],
        ["scan", "--format", "openmetrics"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "catchup", "--dsn", dsn, *args],
            env=env,
            cwd=project.path,
            capture_output=True,
            text=True,
            check=False,
        )
        outputs += [done.stdout, done.stderr]
    bad = subprocess.run(
        [sys.executable, "-m", "catchup", "--dsn", dsn.replace("port=", "port=1"), "scan"],
        env=env,
        cwd=project.path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 3
    outputs += [bad.stdout, bad.stderr]
    assert all(secret not in text for text in outputs)
    assert secret not in argv_log.read_text()
    rows = sql(
        "SELECT row_to_json(r)::text FROM {schema}.runs r "
        "UNION ALL SELECT row_to_json(h)::text FROM {schema}.history h"
    )
    assert rows and all(secret not in row for (row,) in rows)
    sql(f'DROP SCHEMA "{project.schema}" CASCADE')
    sql(f'REVOKE CREATE ON DATABASE postgres FROM "{role}"')
    sql(f'DROP ROLE "{role}"')


def faked(offset: str, args: list[str], project: Project) -> subprocess.Popen[str]:
    """catchup on a host whose clock is ``offset`` off (libfaketime, Debian's faketime)."""
    return subprocess.Popen(
        ["faketime", "-f", offset, sys.executable, "-m", "catchup", *args],
        cwd=project.path,
        env=project.env(),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_host_clocks_that_disagree(project: Project, sql: Any) -> None:
    """Runners two hours ahead and behind pick the same due period, the one the database
    clock says is due, and honour the same lease: every decision is made on the database
    clock (at any minute of the hour: a host clock would pick a period two hours off)."""
    latest_due = "SELECT date_trunc('hour', clock_timestamp()) - interval '1 hour'"
    (hour,) = sql("SELECT date_trunc('hour', clock_timestamp()) - interval '3 hours'")[0]
    go = project.path / "go"  # the job runs until the runner behind has been refused
    wait = (
        "import os, time\nt = time.monotonic()\n"
        f"while not os.path.exists({str(go)!r}) and time.monotonic() - t < 60:\n"
        "    time.sleep(0.05)\n"
    )
    project.write(
        '[jobs.export]\nschedule = "hourly"\nstart = '
        f'"{hour:%Y-%m-%dT%H:%M:%SZ}"\nlease = "5s"\n'
        f"command = {json.dumps([sys.executable, '-c', wait])}\n"
    )
    assert project.cli("migrate").exit_code == 0
    (due_before,) = sql(latest_due)[0]
    ahead = faked("+2h", ["run", "export"], project)
    wait_for(lambda: sql("SELECT count(*) FROM {schema}.runs")[0][0] == 1, what="a claim")
    claimed_at, lease_left = sql(
        "SELECT claimed_at, lease_expires_at - clock_timestamp() FROM {schema}.runs"
    )[0]
    assert timedelta(0) < lease_left <= timedelta(seconds=5)  # database clock, not +2h
    behind = faked("-2h", ["run", "export"], project)
    out_behind, _ = behind.communicate(timeout=60)
    go.touch()
    out_ahead, err = ahead.communicate(timeout=60)
    (due_after,) = sql(latest_due)[0]
    assert ahead.returncode == 0, err
    assert behind.returncode == 0
    label = out_ahead.split(" attempt")[0]
    # the due period on the database clock (either side of an hour that turned meanwhile)
    assert label in {f"export {h:%Y-%m-%dT%H:%M:%SZ}" for h in (due_before, due_after)}, label
    assert "succeeded" in out_ahead
    assert f"{label}: skipped (running elsewhere" in out_behind  # the same period
    (now,) = sql("SELECT clock_timestamp()")[0]
    assert abs((claimed_at - now).total_seconds()) < 30


def test_killed_and_paused_runners_through_a_pooler(
    project: Project, sql: Any, pgbouncer: Pooler
) -> None:
    """Through PgBouncer in transaction mode: a SIGKILLed runner is taken over as attempt 2,
    and a runner paused past its lease is fenced off."""
    pidfile = project.path / "job.pid"
    script = f'if [ "$CATCHUP_ATTEMPT" = 1 ]; then echo $$ > {pidfile}; exec sleep 600; fi'
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-01-01"\nlease = "2s"\n'
        f"command = {json.dumps(['sh', '-c', script])}\n"
    )
    via = ["--dsn", pgbouncer.dsn]

    def lease_expired() -> bool:
        rows = sql(
            "SELECT lease_expires_at < clock_timestamp() FROM {schema}.runs "
            "WHERE status = 'running'"
        )
        return bool(rows and rows[0][0])

    # killed
    killed = project.spawn(*via, "run", "billing", "--period", "2026-01-05")
    job_pid = wait_for(lambda: written_pid(pidfile), what="attempt 1's job pid")
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=30)
    wait_for(lambda: process_gone(job_pid), timeout=10, what="the job to go")
    wait_for(lease_expired, timeout=30, what="the lease to expire")
    second = project.run(*via, "run", "billing", "--period", "2026-01-05")
    assert second.returncode == 0 and "attempt 2: succeeded" in second.stdout
    # paused
    pidfile.unlink()
    paused = project.spawn(*via, "run", "billing", "--period", "2026-01-06")
    wait_for(pidfile.exists, what="attempt 1 to start")
    paused.send_signal(signal.SIGSTOP)
    try:
        wait_for(lease_expired, timeout=30, what="the lease to expire")
        taken = project.run(*via, "run", "billing", "--period", "2026-01-06")
        assert taken.returncode == 0 and "attempt 2: succeeded" in taken.stdout
    finally:
        paused.send_signal(signal.SIGCONT)
    out, _ = paused.communicate(timeout=60)
    assert paused.returncode == 1 and "attempt 1: lost" in out
    assert sql(
        "SELECT period_start::date::text, status, attempt FROM {schema}.runs ORDER BY 1"
    ) == [("2026-01-05", "succeeded", 2), ("2026-01-06", "succeeded", 2)]
