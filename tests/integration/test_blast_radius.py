"""One job's fault stays its own. A keyed job's keys query that fails (a table renamed away, a
timeout, rows that are refused, a `keys_dsn` that cannot log in) fails that job alone: the
other jobs of `tick`, `scan` and the scheduler go on, the keyed job goes on with the keys it
read last (or runs nothing), one line says so, and the exit code is 3 (a database error) or 2
(what it returned is refused), never 1. And a keys or evidence query that changes its
session's state (read-only by default, a statement timeout, a search path, an advisory lock)
changes nothing after it: the claims of every job that follow succeed."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from fix_db import Database, nothing_written, schema_made
from fix_processes import wait_for
from fix_project import Project, job_toml
from psycopg.conninfo import make_conninfo

from catchup.ledger.evidence import EvidenceQuery
from catchup.ledger.keys import read_keys
from catchup.postgres import database as db

MISSING = 'SELECT id FROM "{schema}".tenants'  # a table a migration renamed away


def start(sql: Any) -> str:
    """Three days before the database clock's day: three due periods, whatever the date."""
    ((now,),) = sql("SELECT date_trunc('day', clock_timestamp(), 'UTC')")
    return f"{now - timedelta(days=3):%Y-%m-%d}"


def configure(project: Project, sql: Any, keys: str, **export: object) -> None:
    first = start(sql)
    project.write(
        job_toml("export", "daily", first, catchup="all", command=["true"], **export)
        + job_toml("billing", "daily", first, catchup="all", keys=keys, command=["true", "{key}"])
    )


def ran(sql: Any, job: str) -> list[str]:
    rows = sql(
        "SELECT r.key FROM {schema}.runs r JOIN {schema}.jobs j ON j.id = r.job_id"
        " WHERE j.name = %s AND r.status = 'succeeded' ORDER BY r.key, r.period_start",
        [job],
    )
    return [key for (key,) in rows]


def said(stderr: str, text: str) -> list[str]:
    return [line for line in stderr.splitlines() if text in line]


def test_a_failing_keys_query_fails_its_job_alone_and_tick_runs_the_others(
    project: Project, sql: Any, schema: str
) -> None:
    configure(project, sql, MISSING.format(schema=schema))
    result = project.run("-q", "tick")
    assert result.returncode == 3, result.stderr  # a database error; never 1 (gaps, failures)
    (line,) = said(result.stderr, "billing")
    assert "jobs.billing.keys: the keys query failed:" in line and "tenants" in line
    assert "nothing of it ran (unstartable)" in line
    assert "Traceback" not in result.stderr
    assert ran(sql, "export") == ["", "", ""]  # the unkeyed job ran its three periods
    assert ran(sql, "billing") == []  # nothing claimed, no attempt counted
    assert sql("SELECT count(*) FROM {schema}.job_keys") == [(0,)]


def test_the_keyed_job_goes_on_with_the_keys_it_read_last(
    project: Project, sql: Any, schema: str
) -> None:
    schema_made(sql, schema)  # where the team keeps its tenants, here
    sql("CREATE TABLE {schema}.tenants (id text)")
    sql("INSERT INTO {schema}.tenants VALUES ('acme'), ('globex')")
    configure(project, sql, MISSING.format(schema=schema))
    assert project.run("-q", "keys", "billing").returncode == 0  # the keys read, recorded
    sql("ALTER TABLE {schema}.tenants RENAME TO customers")  # a migration renames it away
    result = project.run("-q", "tick")
    assert result.returncode == 3, result.stderr
    (line,) = said(result.stderr, "billing")
    assert "billing went on with the 2 keys it read last" in line
    assert ran(sql, "billing") == ["acme"] * 3 + ["globex"] * 3
    assert len(ran(sql, "export")) == 3
    gone = sql("SELECT count(*) FROM {schema}.job_keys WHERE gone_at IS NOT NULL")
    assert gone == [(0,)]  # a failed read is no read: no key is gone
    why = project.run("why", "billing", start(sql))  # explained on the keys it read last
    assert why.returncode == 0 and "2" in why.stdout, why.stdout + why.stderr


def test_keys_that_are_refused_exit_2_and_the_others_run(project: Project, sql: Any) -> None:
    configure(project, sql, "SELECT 'acme' UNION ALL SELECT 'acme'")
    result = project.run("-q", "tick", "--json")
    assert result.returncode == 2, result.stderr
    (line,) = said(result.stderr, "billing")
    assert "the key 'acme' is returned twice" in line
    assert json.loads(result.stdout)["keys_failed"] == [
        {
            "job": "billing",
            "error": "jobs.billing.keys: the key 'acme' is returned twice",
            "keys": 0,
        }
    ]
    assert len(ran(sql, "export")) == 3


def test_an_unreachable_keys_dsn_fails_its_job_alone(project: Project, sql: Any) -> None:
    first = start(sql)
    dsn = "postgresql://app:hunter2@127.0.0.1:1/tenants"  # nothing listens there
    project.write(
        job_toml("export", "daily", first, catchup="all", command=["true"])
        + job_toml("billing", "daily", first, keys="SELECT 'acme'", keys_dsn=dsn, command=["true"])
    )
    result = project.run("-q", "tick")
    assert result.returncode == 3, result.stderr
    (line,) = said(result.stderr, "billing")
    assert "(from jobs.billing.keys_dsn)" in line and "hunter2" not in result.stderr
    assert len(ran(sql, "export")) == 3


def test_scan_reports_the_others_gaps_and_exits_3_not_1(
    project: Project, sql: Any, schema: str
) -> None:
    configure(project, sql, MISSING.format(schema=schema))
    result = project.run("-q", "scan", "--json")
    assert result.returncode == 3, result.stderr
    assert len(said(result.stderr, "jobs.billing.keys: the keys query failed")) == 1
    document = json.loads(result.stdout)
    by_job = {job["job"]: job for job in document["jobs"]}
    assert by_job["export"]["missing"] == 3 and by_job["export"]["gaps"]
    assert "tenants" in by_job["billing"]["keys_error"]
    # a scan runs nothing: it says on which keys it scanned the job, not that nothing ran
    (line,) = said(result.stderr, "billing")
    assert line.endswith("billing has no keys read before: none of its periods is known"), line


def test_a_scan_whose_keys_query_failed_never_says_no_gaps(
    project: Project, sql: Any, schema: str
) -> None:
    """billing's keys query failing beside a job with nothing due: the table names the failure
    and never says "no gaps" (what billing's keys would show is not known), and exits 3 (it
    said "no gaps", exit 3)."""
    first = start(sql)
    ((later,),) = sql("SELECT date_trunc('day', clock_timestamp(), 'UTC') + interval '2 days'")
    project.write(
        job_toml("billing", "daily", first, command=["true"], keys=MISSING.format(schema=schema))
        + job_toml("export", "daily", f"{later:%Y-%m-%d}", command=["true"])
    )
    result = project.run("scan")
    assert result.returncode == 3, result.stderr
    lines = result.stdout.splitlines()
    assert "no gaps" not in lines, result.stdout
    assert "no gaps on the keys known; not read now: billing" in lines, result.stdout
    assert any(line.startswith("jobs.billing.keys: the keys query failed") for line in lines)


def test_the_scheduler_says_it_and_keeps_leading_and_its_page_and_metrics_show_it(
    project: Project, sql: Any, schema: str
) -> None:
    configure(project, sql, MISSING.format(schema=schema))
    log = project.path / "scheduler.err"
    url = f"http://127.0.0.1:{free_port()}/"
    with log.open("w") as err:
        proc = subprocess.Popen(
            project.command("scheduler", "--lease", "3s", "--serve", url[7:-1], "--refresh", "1s"),
            cwd=project.path,
            env=project.env(),
            text=True,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:

        def seen() -> bool:
            assert proc.poll() is None, log.read_text()  # it never exits on a job's error
            # said once the tick ran (and the schema exists): then export's three runs
            return "keys query failed" in log.read_text() and len(ran(sql, "export")) == 3

        wait_for(seen, timeout=60, what="export run, billing's keys said")
        metrics = wait_for(lambda: fetch(url + "metrics", 'keys_read_failed{job="billing"} 1'))
        assert 'catchup_keys_read_failed{job="export"} 0.0' in metrics
        page = fetch(url, "keys query failed")
        assert "keys query failed: billing" in page
        # billing's row says what failed, not that its evidence query did (it has none)
        assert "jobs.billing.keys: the keys query failed" in page
        assert "its evidence query" not in page
        job_page = fetch(url + "jobs/billing", "keys query failed")
        assert "jobs.billing.keys: the keys query failed" in job_page
        assert "(no keys read before: none of its periods is known)" in job_page
        assert "billing: keys query failed" in job_page and "no gaps" not in job_page
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0, log.read_text()
    assert len(said(log.read_text(), "jobs.billing.keys: the keys query failed")) >= 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fetch(url: str, wanted: str) -> str:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            text: str = answer.read().decode()
    except OSError:
        return ""
    return text if wanted in text else ""


POISONS = {
    "read-only": "set_config('default_transaction_read_only', 'on', false)",
    "timeout": "set_config('statement_timeout', '1ms', false)",
    "search_path": "set_config('search_path', 'nowhere', false)",
    "advisory lock": "pg_advisory_lock(4242)::text || 'x'",
    "zone": "set_config('TimeZone', 'Pacific/Apia', false)",
}


@pytest.mark.parametrize("poison", list(POISONS), ids=list(POISONS))
def test_a_keys_query_that_sets_session_state_changes_nothing_after_it(
    project: Project, sql: Any, poison: str
) -> None:
    keys = f"SELECT k FROM (VALUES ('a')) v(k) WHERE {POISONS[poison]} <> ''"
    configure(project, sql, keys)
    result = project.run("-q", "tick")
    assert result.returncode == 0, result.stderr
    assert len(ran(sql, "export")) == 3 and ran(sql, "billing") == ["a"] * 3


@pytest.mark.parametrize("poison", list(POISONS), ids=list(POISONS))
def test_an_evidence_query_that_sets_session_state_changes_nothing_after_it(
    project: Project, sql: Any, poison: str
) -> None:
    # in a subquery's list, so it runs whatever the bounds catchup puts around the query
    evidence = f"SELECT d FROM (SELECT date '2000-01-01' AS d, {POISONS[poison]} AS s) AS v"
    configure(project, sql, "SELECT 'a'", evidence=evidence)
    result = project.run("-q", "tick")
    assert result.returncode == 0, result.stderr
    assert len(ran(sql, "export")) == 3 and ran(sql, "billing") == ["a"] * 3


def session_state(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    row = conn.execute(
        "SELECT current_setting('TimeZone'), current_setting('default_transaction_read_only'),"
        " current_setting('statement_timeout'), current_setting('search_path'),"
        " (SELECT count(*) FROM pg_cursors),"
        " (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
        "  AND pid = pg_backend_pid())"
    ).fetchone()
    assert row is not None
    return tuple(row)


def test_the_connection_is_as_it_was_after_a_keys_or_evidence_query(
    database: Database, sql: Any, schema: str
) -> None:
    """On a connection as catchup opens it (put in UTC, here over a role's zone): every
    setting, cursor and lock the user's SQL left is gone, and it is in UTC again."""
    schema_made(sql, schema)
    sql(
        "CREATE FUNCTION {schema}.held() RETURNS text LANGUAGE plpgsql AS $$"
        " DECLARE c refcursor := 'held'; BEGIN OPEN c FOR SELECT 1; RETURN 'a'; END $$"
    )
    poisons = " || ".join(f"({p})" for p in POISONS.values())
    keys = f'SELECT "{schema}".held() WHERE ({poisons}) IS NOT NULL'
    evidence = f"SELECT date '2000-01-01' WHERE ({poisons}) IS NOT NULL"
    zoned = make_conninfo(database.conninfo, options="-c TimeZone=America/Los_Angeles")
    with db.connect(db.Target(zoned, "test")) as conn:
        before = session_state(conn)
        assert before[0] == "UTC"
        read, dated = read_keys(conn, keys, "UTC", schema)
        assert (list(read), dated) == ([("a", None)], False)
        assert session_state(conn) == before
        query = EvidenceQuery(conn, evidence, "UTC", schema)
        with query.read_only():
            lo = datetime.fromisoformat("2000-01-01T00:00:00+00:00")
            assert query.present(query.kind(), lo, lo + timedelta(days=1))
        assert session_state(conn) == before


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_doctor_runs_each_keys_query_and_names_every_failure(
    project: Project, sql: Any, schema: str
) -> None:
    first = start(sql)
    project.write(
        job_toml("billing", "daily", first, keys=MISSING.format(schema=schema), command=["true"])
        + job_toml(
            "payouts",
            "daily",
            first,
            keys="SELECT 'acme'",
            keys_dsn="postgresql://app:hunter2@127.0.0.1:1/tenants",
            command=["true"],
        )
        + job_toml("invoices", "daily", first, keys="SELECT 'acme'", command=["true"])
    )
    result = project.run("doctor")
    assert result.returncode == 1, result.stdout + result.stderr
    out = result.stdout
    assert "billing: jobs.billing.keys: the keys query failed:" in out and "tenants" in out
    assert "payouts: jobs.payouts.keys: cannot connect to" in out and "hunter2" not in out
    assert "(from jobs.payouts.keys_dsn)" in out
    assert "invoices: the keys query returns 1 key(s) on the ledger's database" in out


def test_a_keys_query_cannot_lift_its_own_timeout(
    database: Database, sql: Any, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A function the planner runs while it plans (falsely immutable) sets statement_timeout
    to 0 as each statement is planned, which lifts the server's bound on it: the cancel this
    process sends when the bound has passed still ends it, and says so."""
    import catchup.ledger.keys as keys_module

    monkeypatch.setattr(keys_module, "KEYS_TIMEOUT", 0.5)
    schema_made(sql, schema)
    sql(
        "CREATE FUNCTION {schema}.lift() RETURNS text IMMUTABLE LANGUAGE plpgsql AS $$"
        " BEGIN PERFORM set_config('statement_timeout', '0', false); RETURN 'x'; END $$"
    )
    keys = f"SELECT 'a' WHERE \"{schema}\".lift() IS NOT NULL AND pg_sleep(2) IS NOT NULL"
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.QueryCanceled, match=r"ran longer than 0\.5 s"):
            read_keys(conn, keys, "UTC", schema)
        assert conn.execute("SELECT 1").fetchone() == (1,)  # no cancel left to land later
        assert conn.execute("SHOW statement_timeout").fetchone() == ("0",)  # as it was


def test_a_scheduler_whose_every_job_fails_its_keys_keeps_leading(
    project: Project, sql: Any, schema: str
) -> None:
    """Nothing it could run (the one job's keys fail, none read before): it says so at the
    tick and stays up, leading (its next tick when a period falls due, or the config changes)."""
    project.write(
        job_toml(
            "billing", "daily", start(sql), keys=MISSING.format(schema=schema), command=["true"]
        )
    )
    log = project.path / "scheduler.err"
    with log.open("w") as err:
        proc = subprocess.Popen(
            project.command("scheduler", "--lease", "3s"),
            cwd=project.path,
            env=project.env(),
            text=True,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:

        def said() -> bool:
            assert proc.poll() is None, log.read_text()
            return "jobs.billing.keys: the keys query failed" in log.read_text()

        wait_for(said, timeout=60, what="the keys failure said at the tick")
        assert proc.poll() is None, log.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0, log.read_text()
    assert "leading" in log.read_text()


def test_run_of_one_key_goes_on_with_the_keys_it_read_last(
    project: Project, sql: Any, schema: str
) -> None:
    """``run billing --key acme`` while the keys query fails: acme's period runs, as a tick's
    would, on the keys read last; the failure is said in one line and the exit is the query's."""
    schema_made(sql, schema)
    sql("CREATE TABLE {schema}.tenants (id text)")
    sql("INSERT INTO {schema}.tenants VALUES ('acme'), ('globex')")
    configure(project, sql, MISSING.format(schema=schema))
    assert project.run("-q", "keys", "billing").returncode == 0  # the keys read, recorded
    sql("ALTER TABLE {schema}.tenants RENAME TO customers")
    result = project.run("run", "billing", "--key", "acme", "--json")
    assert result.returncode == 3, result.stderr
    (line,) = said(result.stderr, "billing")
    assert "billing went on with the 2 keys it read last" in line
    assert json.loads(result.stdout)["status"] == "succeeded"
    assert json.loads(result.stdout)["keys_failed"]["keys"] == 2
    assert ran(sql, "billing") == ["acme"]
    assert "Traceback" not in result.stderr


def test_run_of_one_key_with_no_keys_read_before_is_unstartable_and_writes_nothing(
    project: Project, sql: Any, schema: str
) -> None:
    configure(project, sql, MISSING.format(schema=schema))
    assert project.run("-q", "tick", "--job", "export").returncode == 0  # the ledger exists
    result = project.run("run", "billing", "--key", "acme")
    assert result.returncode == 2, result.stderr  # acme is no key it knows
    (line,) = said(result.stderr, "billing")
    assert "billing has no key 'acme' (its keys read last: none)" in line
    assert "jobs.billing.keys: the keys query failed:" in line  # why it may not know a new one
    assert ran(sql, "billing") == []
    assert sql("SELECT count(*) FROM {schema}.job_keys") == [(0,)]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("tick",),
        ("scan",),
        ("replay", "--since", "2020-01-01"),
        ("run", "billing"),
        ("keys", "billing"),
        ("jobs",),
        ("why", "billing", "2020-01-01"),
    ],
)
def test_a_config_whose_every_keys_query_fails_makes_no_ledger(
    project: Project, sql: Any, schema: str, database: Database, args: tuple[str, ...]
) -> None:
    """The first command of a config whose one job is keyed, its keys query failing: the
    failure in one line, its exit code, and nothing written: not even the schema."""
    project.write(
        job_toml(
            "billing", "daily", start(sql), keys=MISSING.format(schema=schema), command=["true"]
        )
    )
    assert nothing_written(database, schema)
    result = project.run(*args)
    assert result.returncode == 3, result.stdout + result.stderr
    (line,) = said(result.stderr, "billing")
    assert "jobs.billing.keys: the keys query failed:" in line and "Traceback" not in result.stderr
    assert nothing_written(database, schema)


def test_jobs_says_a_failing_keys_query_and_lists_every_job(
    project: Project, sql: Any, schema: str
) -> None:
    """`jobs` of a config whose keyed job's keys query fails: every job listed (the keyed one
    on the keys read last), the failure said in one line, exit 3, never a silent 0."""
    configure(project, sql, MISSING.format(schema=schema))
    assert project.run("-q", "tick", "--job", "export").returncode == 0
    result = project.run("jobs", "--json")
    assert result.returncode == 3, result.stderr
    assert [line["job"] for line in json.loads(result.stdout)] == ["export", "billing"]
    (line,) = said(result.stderr, "billing")
    assert "jobs.billing.keys: the keys query failed:" in line
    assert "none of its periods is known" in line
