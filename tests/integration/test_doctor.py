"""catchup doctor: one line per finding; serious ones exit 1."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from click.testing import CliRunner
from fix_db import nothing_written
from fix_project import Project, job_toml
from fix_proxy import Pooler

from catchup.cli import cli
from catchup.maintenance.doctor import clock_finding


def setup(project: Project, **keys: Any) -> None:
    lines = ["[jobs.billing]", 'schedule = "daily"', 'start = "2026-10-01"', 'command = ["true"]']
    lines += [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    project.write("\n".join(lines) + "\n")


def test_a_healthy_setup(project: Project) -> None:
    setup(project, delay="7m")
    assert project.cli("migrate").exit_code == 0
    result = project.cli("doctor")
    assert result.exit_code == 0, result.output
    for topic in ("config", "database", "pooler", "clock", "time zones", "scheduler"):
        assert f" {topic}: " in result.stdout, topic
    assert "✓ pooler: no connection pooler" in result.stdout
    assert "✓ clock: " in result.stdout
    assert "i scheduler: no `catchup tick` recorded yet" in result.stdout


def test_jobs_due_on_the_hour(project: Project) -> None:
    setup(project)
    result = project.cli("doctor")
    assert "! schedules: billing fall due exactly on the hour" in result.stdout
    assert result.exit_code == 0  # a warning, not serious


def test_a_broken_config_is_serious(project: Project) -> None:
    setup(project, lease="0s")
    result = project.cli("doctor")
    assert result.exit_code == 1
    assert f"✗ config: {project.config}:8: jobs.billing.lease" in result.stdout


def test_an_unreachable_database_is_serious(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--dsn", "postgresql://u:secret@127.0.0.1:1/x", "doctor"], catch_exceptions=False
    )
    assert result.exit_code == 1
    assert "✗ database: cannot connect to postgresql://u@127.0.0.1:1/x" in result.stdout
    assert "secret" not in result.output


def test_a_scheduler_in_every_replica(project: Project, sql: Any) -> None:
    setup(project, delay="7m")
    assert project.cli("migrate").exit_code == 0
    for host in ("pod-a", "pod-b"):
        sql("INSERT INTO {schema}.ticks (host) VALUES (%s)", [host])
    result = project.cli("doctor")
    assert "! scheduler: ticks from 2 hosts in the same minute" in result.stdout


def test_clock_skew_is_informational() -> None:
    db_now = datetime(2026, 11, 29, 12, tzinfo=UTC)
    assert clock_finding(db_now + timedelta(seconds=1), db_now, 0.01).level == "ok"
    ahead = clock_finding(db_now + timedelta(minutes=10), db_now, 0.01)
    assert ahead.level == "info" and "600s ahead of the database clock" in ahead.text
    behind = clock_finding(db_now - timedelta(minutes=10), db_now, 0.01)
    assert "600s behind" in behind.text


def test_a_transaction_mode_pooler_is_found(project: Project, pgbouncer: Pooler) -> None:
    setup(project, delay="7m")
    result = project.cli("--dsn", pgbouncer.dsn, "doctor")
    assert result.exit_code == 0, result.output
    assert f"! pooler: a transaction-mode pooler (port {pgbouncer.port} → " in result.stdout


def test_run_and_scan_work_through_the_pooler(project: Project, pgbouncer: Pooler) -> None:
    """Prepared statements are off, locks are transaction-scoped: PgBouncer 1.18 is fine."""
    setup(project, delay="7m")
    for day in range(1, 9):
        result = project.cli(
            "--dsn", pgbouncer.dsn, "-q", "run", "billing", "--period", f"2026-10-0{day}"
        )
        assert result.exit_code == 0, result.output
    scan = project.cli("--dsn", pgbouncer.dsn, "-q", "scan", "--json", "--until", "2026-10-09")
    assert json.loads(scan.stdout)["jobs"][0]["succeeded"] == 8


def test_doctor_writes_nothing(project: Project, sql: Any) -> None:
    """On a database catchup has not used yet, doctor says so and creates nothing."""
    setup(project, delay="7m")
    result = project.cli("doctor")
    assert result.exit_code == 0, result.output
    assert "is at version 0 of" in result.stdout
    assert "refused the check" not in result.stdout  # nothing asked of tables not made yet
    assert nothing_written(project.database, project.schema)


def test_local_time_zones(project: Project, sql: Any) -> None:
    """A 02:30 Berlin job: doctor names the DST nights, and checks that the server's time zone
    database agrees with Python's for each zone (here against a direct comparison)."""
    lines = ['schedule = "30 2 * * *"', 'start = "2026-10-01"', 'command = ["true"]']
    project.write(
        "[jobs.nightly]\n" + "\n".join([*lines, 'timezone = "Europe/Berlin"']) + "\n"
        "[jobs.rabat]\n" + "\n".join([*lines, 'timezone = "Africa/Casablanca"']) + "\n"
    )
    (now,) = sql("SELECT clock_timestamp()")[0]
    result = project.cli("doctor")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    # the Berlin DST nights of the coming 400 days, found here by stepping through the hours
    berlin = ZoneInfo("Europe/Berlin")
    hour = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    nights = []
    for h in range(399 * 24):
        a, b = hour + timedelta(hours=h), hour + timedelta(hours=h + 1)
        if (ahead := b.astimezone(berlin).utcoffset()) != a.astimezone(berlin).utcoffset():
            nights.append((b.astimezone(berlin).date(), ahead == timedelta(hours=2)))
    assert len(nights) >= 2
    for day, spring in nights:
        said = "does not exist" if spring else "happens twice"
        assert f"nightly: 02:30 on {day} {said} in Europe/Berlin" in text
    assert "Europe/Berlin: the server and Python agree" in text

    probes = [now + timedelta(hours=h) for h in range(0, 400 * 24, 3)]
    walls = sql(
        "SELECT t AT TIME ZONE 'Africa/Casablanca' FROM unnest(%s::timestamptz[]) AS t",
        [probes],
    )
    zone = ZoneInfo("Africa/Casablanca")
    differs = any(
        w != t.astimezone(zone).replace(tzinfo=None) for (w,), t in zip(walls, probes, strict=False)
    )
    warned = "Africa/Casablanca: the server's time zone database disagrees" in text
    assert warned == differs
    assert ("Africa/Casablanca: the server and Python agree" in text) == (not differs)


def test_every_evidence_query_is_run_once(project: Project, sql: Any) -> None:
    """Each job's evidence query runs once: a good one is ok; a missing table, a column of the
    wrong type and an unreachable evidence_dsn are one serious line each, no password."""
    project.write(job_toml("none", command=["true"]))
    assert project.cli("-q", "migrate").exit_code == 0
    sql("CREATE TABLE {schema}.exports (day date, n integer)")
    jobs = {
        "good": f"SELECT day FROM {project.schema}.exports",
        "gone": f"SELECT day FROM {project.schema}.nowhere",
        "typed": f"SELECT n FROM {project.schema}.exports",
        "far": "SELECT day FROM exports",
    }
    body = ""
    for name, query in jobs.items():
        body += (
            f'[jobs.{name}]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
            f'evidence = "{query}"\n'
        )
        if name == "far":
            body += 'evidence_dsn = "postgresql://ro:s3cretpw@127.0.0.1:1/dw"\n'
    project.write(body)
    result = project.cli("doctor")
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stdout.splitlines() if " evidence: " in line]
    assert len(lines) == 4, lines
    assert "✓ evidence: good: the evidence query runs on the ledger's database" in lines
    (gone,) = [line for line in lines if "gone:" in line]
    assert "nowhere" in gone and "does not exist" in gone
    (typed,) = [line for line in lines if "typed:" in line]
    assert "returns int4; evidence needs a date or timestamptz column" in typed
    (far,) = [line for line in lines if "far:" in line]
    assert "cannot connect" in far and "s3cretpw" not in result.output
