"""A job's evidence: the ledger checked against what the job left behind. A succeeded period
with no evidence is unverified (a gap); evidence with no ledger row is untracked (not a gap).
Real tables, in the ledger's database and in another one."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest
from fix_db import Database, nothing_written
from fix_project import Project, job_toml
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from catchup import Catchup, Outcome, make_job


def ledger(project: Project) -> None:
    """Make the ledger's schema (where the tests keep their evidence tables too)."""
    project.write(job_toml("none", command=["true"]))
    assert project.cli("-q", "migrate").exit_code == 0


def scan(project: Project, *args: str) -> tuple[int, dict[str, Any]]:
    result = project.cli("scan", "--json", *args)
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}


def test_hourly_timestamptz_evidence_finds_unverified_and_untracked(
    project: Project, sql: Any
) -> None:
    """Hours 0-5: 0-2 ran in catchup, but only hour 0 left rows (1 and 2 are unverified; hour
    1's one row is filtered out by the query itself); hour 3 has rows but no run (untracked,
    not a gap, and its rows do not vouch for hour 2 before it); 4 and 5 have neither
    (missing)."""
    ledger(project)
    sql("CREATE TABLE {schema}.exports (at timestamptz, note text)")
    evidence = f"SELECT at FROM {project.schema}.exports WHERE note NOT LIKE '%%skip%%'"
    project.write(job_toml("export", "hourly", command=["true"], evidence=evidence))
    for hour in (0, 1, 2):
        ran = project.cli("-q", "run", "export", "--period", f"2026-10-01T0{hour}:00:00Z")
        assert ran.exit_code == 0, ran.output
    t0 = datetime(2026, 10, 1, tzinfo=UTC)
    for hour, minute in ((0, 5), (0, 40), (3, 0), (3, 30)):
        sql(
            "INSERT INTO {schema}.exports VALUES (%s, 'row')",
            [t0 + timedelta(hours=hour, minutes=minute)],
        )
    sql("INSERT INTO {schema}.exports VALUES (%s, 'skip')", [t0 + timedelta(hours=1)])
    code, report = scan(project, "--until", "2026-10-01T06:00:00Z")
    assert code == 1
    (job,) = report["jobs"]
    counts = {k: job[k] for k in ("expected", "succeeded", "missing", "unverified", "untracked")}
    assert counts == {
        "expected": 6,
        "succeeded": 1,
        "missing": 2,
        "unverified": 2,
        "untracked": 1,
    }
    assert [(g["status"], g["first"], g["periods"]) for g in job["gaps"]] == [
        ("unverified", "2026-10-01T01:00:00Z", 2),
        ("missing", "2026-10-01T04:00:00Z", 2),
    ]
    table = project.cli("scan", "--until", "2026-10-01T06:00:00Z", env={"COLUMNS": "200"})
    assert "unverified" in table.output and "untracked" in table.output
    metrics = project.cli("scan", "--format", "openmetrics", "--until", "2026-10-01T06:00:00Z")
    assert 'catchup_unverified_periods{job="export"} 2' in metrics.output
    assert 'catchup_untracked_periods{job="export"} 1' in metrics.output


def test_an_evidence_query_with_a_percent_sign_is_read_as_written(
    project: Project, sql: Any
) -> None:
    """An evidence query's ``%`` (here modulo) reaches the server as written, in the probe of
    its column as in its read (the probe failed: ``operator does not exist``)."""
    ledger(project)
    sql("CREATE TABLE {schema}.exports (at timestamptz, n int)")
    evidence = f"SELECT at FROM {project.schema}.exports WHERE n % 2 = 0"
    project.write(job_toml("export", "hourly", command=["true"], evidence=evidence))
    for hour in (0, 1):
        ran = project.cli("-q", "run", "export", "--period", f"2026-10-01T0{hour}:00:00Z")
        assert ran.exit_code == 0, ran.output
    sql(
        "INSERT INTO {schema}.exports VALUES"
        " ('2026-10-01T00:30:00Z', 2), ('2026-10-01T01:30:00Z', 3)"
    )
    code, report = scan(project, "--until", "2026-10-01T02:00:00Z")
    (job,) = report["jobs"]
    assert (code, job["succeeded"], job["unverified"]) == (1, 1, 1), json.dumps(job)


@pytest.mark.parametrize(
    ("zone", "first"),
    [("Europe/Berlin", date(2026, 10, 23)), ("America/New_York", date(2026, 10, 30))],
)
def test_a_date_column_is_local_midnight_across_a_dst_change(
    project: Project, sql: Any, zone: str, first: date
) -> None:
    """A daily job over the night its clocks go back (a 25-hour day on the third day): each
    date names its own local day; none spills into its neighbour (west of UTC, a UTC
    midnight would be the evening before)."""
    days = [(first + timedelta(days=n)).isoformat() for n in range(4)]
    ledger(project)
    sql("CREATE TABLE {schema}.billed (day date)")
    evidence = f"SELECT day FROM {project.schema}.billed"
    project.write(
        job_toml("billing", start=days[0], timezone=zone, command=["true"], evidence=evidence)
    )
    for day in days[1:]:
        assert project.cli("-q", "run", "billing", "--period", day).exit_code == 0
    # output for the first day (before catchup), the third and fourth; none for the second
    for day in (days[0], days[2], days[3]):
        sql("INSERT INTO {schema}.billed VALUES (%s)", [day])
    until = (first + timedelta(days=4)).isoformat()
    code, report = scan(project, "--since", days[0], "--until", until)
    (job,) = report["jobs"]
    assert code == 1
    assert (job["expected"], job["succeeded"], job["unverified"], job["untracked"]) == (4, 2, 1, 1)
    assert [(g["status"], g["first_label"]) for g in job["gaps"]] == [("unverified", days[1])]


@pytest.mark.superuser
def test_evidence_in_another_database_through_evidence_dsn(
    project: Project, database: Database, sql: Any
) -> None:
    name = f"ev_{project.schema}"
    with psycopg.connect(database.conninfo, autocommit=True) as admin:
        admin.execute(
            psycopg.sql.SQL("DROP DATABASE IF EXISTS {}").format(psycopg.sql.Identifier(name))
        )
        admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    try:
        dsn = make_conninfo("", **{**conninfo_to_dict(database.conninfo), "dbname": name})
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute("CREATE TABLE exports (day date)")
        project.write(
            job_toml(
                "export", command=["true"], evidence="SELECT day FROM exports", evidence_dsn=dsn
            )
        )
        assert project.cli("-q", "run", "export", "--period", "2026-10-01").exit_code == 0
        assert project.cli("-q", "run", "export", "--period", "2026-10-02").exit_code == 0
        with psycopg.connect(dsn, autocommit=True) as other:
            other.execute("INSERT INTO exports VALUES ('2026-10-01'), ('2026-10-03')")
        code, report = scan(project, "--until", "2026-10-05")
        (job,) = report["jobs"]
        assert code == 1
        states = {k: job[k] for k in ("succeeded", "unverified", "untracked", "missing")}
        assert states == {"succeeded": 1, "unverified": 1, "untracked": 1, "missing": 1}
        password = str(conninfo_to_dict(dsn).get("password") or "")
        table = project.cli("scan", "--until", "2026-10-05")
        assert not password or password not in table.output
    finally:
        with psycopg.connect(database.conninfo, autocommit=True) as admin:
            admin.execute(
                psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    psycopg.sql.Identifier(name)
                )
            )


def test_one_failing_evidence_query_does_not_hide_the_others(project: Project, sql: Any) -> None:
    ledger(project)
    sql("CREATE TABLE {schema}.good (day date)")
    sql("INSERT INTO {schema}.good VALUES ('2026-10-01')")
    jobs = ""
    for name, query in (
        ("alpha", f"SELECT day FROM {project.schema}.good"),
        ("broken", f"SELECT day FROM {project.schema}.no_such_table"),
        ("gamma", f"SELECT day FROM {project.schema}.good"),
    ):
        jobs += job_toml(name, command=["true"], evidence=query)
    project.write(jobs)
    code, report = scan(project, "--until", "2026-10-03")
    assert code == 3
    by_name = {job["job"]: job for job in report["jobs"]}
    assert "no_such_table" in by_name["broken"]["error"]
    for name in ("alpha", "gamma"):
        assert "error" not in by_name[name]
        assert (by_name[name]["untracked"], by_name[name]["missing"]) == (1, 1)
    table = project.cli("scan", "--until", "2026-10-03")
    assert table.exit_code == 3
    assert "broken: evidence query:" in table.output and "no_such_table" in table.output


def test_bad_evidence_config_is_one_line_with_its_place(project: Project) -> None:
    cases = {
        'evidence = "DELETE FROM exports"': "jobs.x.evidence: must be one read-only SELECT",
        'evidence = "SELECT 1; DROP TABLE x"': "jobs.x.evidence: must be one read-only SELECT",
        "verify = true": "jobs.x.verify: needs evidence",
        'evidence_dsn = "postgresql://u:hunter2@h/db"': "jobs.x.evidence_dsn: needs evidence",
        'evidence = "SELECT 1"\nverify = "yes"': "jobs.x.verify: expected true or false",
    }
    for line, message in cases.items():
        project.write(job_toml("x", command=["true"]) + f"{line}\n")
        result = project.cli("scan")
        assert result.exit_code == 2, (line, result.output)
        (out,) = result.stderr.strip().splitlines()
        assert message in out and "catchup.toml:" in out and "hunter2" not in out


def test_onboarding_a_job_that_ran_from_cron(project: Project, sql: Any) -> None:
    """The old cron job exported October 1-3 before catchup: those days are untracked, not
    gaps. run, tick and replay never run them; adopt records them (audited) and the scan is
    clean; only the days nobody did are run."""
    ledger(project)
    sql("CREATE TABLE {schema}.exports (day date)")
    sql(
        "INSERT INTO {schema}.exports"
        " SELECT generate_series('2026-10-01'::date, '2026-10-03', '1 day')"
    )
    log = project.path / "ran"
    evidence = f"SELECT day FROM {project.schema}.exports"
    command = ["sh", "-c", f"echo $CATCHUP_PERIOD >> {log}"]
    project.write(job_toml("export", command=command, evidence=evidence))
    code, report = scan(project, "--until", "2026-10-06")
    (job,) = report["jobs"]
    assert (code, job["untracked"], job["missing"]) == (1, 3, 2)
    assert [(g["status"], g["first_label"]) for g in job["gaps"]] == [("missing", "2026-10-04")]

    ran = project.cli("run", "export", "--period", "2026-10-02")
    assert ran.exit_code == 0 and "untracked: its output exists" in ran.output
    assert not log.exists()
    dry = project.cli("replay", "--since", "2026-10-01", "--until", "2026-10-06", "--dry-run")
    assert "2026-10-04" in dry.output and "2026-10-01" not in dry.output
    assert "3 untracked period(s) left alone" in dry.output

    adopted = project.cli(
        "adopt", "export", "--since", "2026-10-01", "--reason", "ran from cron before catchup"
    )
    assert adopted.exit_code == 0, adopted.output
    assert "export: adopted 3 untracked period(s), 2026-10-01 .. 2026-10-03" in adopted.output
    assert sql("SELECT period_start::date::text, status FROM {schema}.runs ORDER BY 1") == [
        ("2026-10-01", "waived"),
        ("2026-10-02", "waived"),
        ("2026-10-03", "waived"),
    ]
    history = project.cli("history", "export")
    assert "adopt" in history.output and "ran from cron before catchup" in history.output
    again = project.cli("adopt", "export", "--reason", "twice")
    assert "export: nothing untracked to adopt" in again.output

    replayed = project.cli("-q", "replay", "--since", "2026-10-01", "--until", "2026-10-06")
    assert replayed.exit_code == 0, replayed.output
    assert log.read_text().split() == ["2026-10-04", "2026-10-05"]
    code, report = scan(project, "--until", "2026-10-06")
    (job,) = report["jobs"]
    # the two days catchup ran left no export rows: unverified, the rest clean
    assert (job["waived"], job["untracked"], job["missing"], job["unverified"]) == (3, 0, 0, 2)

    forced = project.cli("-q", "run", "export", "--period", "2026-10-05")
    assert "already succeeded" in forced.output


def test_run_ignore_evidence_runs_an_untracked_period(project: Project, sql: Any) -> None:
    ledger(project)
    sql("CREATE TABLE {schema}.exports (day date)")
    sql("INSERT INTO {schema}.exports VALUES ('2026-10-02')")
    evidence = f"SELECT day FROM {project.schema}.exports"
    project.write(job_toml("export", command=["true"], evidence=evidence))
    skipped = project.cli("run", "export", "--period", "2026-10-02", "--json")
    assert json.loads(skipped.stdout)["status"] == "skipped"
    ran = project.cli("run", "export", "--period", "2026-10-02", "--ignore-evidence")
    assert ran.exit_code == 0 and "attempt 1: succeeded" in ran.output


def test_verify_fails_a_success_that_left_nothing(
    project: Project, sql: Any, database: Database
) -> None:
    """verify = true: the job exits 0 but writes no row. Each attempt is failed with "no
    evidence for <label>", retried with backoff, and exhausted after max_attempts; a run that
    writes its row succeeds."""
    ledger(project)
    sql("CREATE TABLE {schema}.exports (day date)")
    evidence = f"SELECT day FROM {project.schema}.exports"
    project.write(
        job_toml(
            "export",
            command=["true"],
            max_attempts=2,
            retry_backoff="0s",
            verify=True,
            evidence=evidence,
        )
    )
    first = project.cli("run", "export", "--period", "2026-10-01")
    assert first.exit_code == 1
    assert "no evidence for 2026-10-01" in first.output
    second = project.cli("run", "export", "--period", "2026-10-01")
    assert second.exit_code == 1 and "no attempts left (2/2)" in second.output
    assert sql("SELECT status, attempt, failures, exit_code FROM {schema}.runs") == [
        ("failed", 2, 2, 0)
    ]
    code, report = scan(project, "--until", "2026-10-02")
    assert code == 1
    assert [g["status"] for g in report["jobs"][0]["gaps"]] == ["exhausted"]
    # a job that does write its output succeeds
    job = make_job(
        "export",
        "daily",
        "2026-10-01",
        call=lambda ctx: sql("INSERT INTO {schema}.exports VALUES (%s)", [ctx.period]),
        verify=True,
        evidence=f"SELECT day FROM {project.schema}.exports",
    )
    # the same project (the config's) redefines its job in code: one job, one definition
    with Catchup(
        jobs=[job],
        dsn=database.conninfo,
        schema=project.schema,
        project=str(project.config.resolve()),
    ) as app:
        outcome = app.run("export", "2026-10-02")
    assert isinstance(outcome, Outcome) and outcome.status == "succeeded", outcome


def test_replay_unverified_runs_them_again_audited(project: Project, sql: Any) -> None:
    ledger(project)
    sql("CREATE TABLE {schema}.exports (day date)")
    log = project.path / "ran"
    evidence = f"SELECT day FROM {project.schema}.exports"
    command = ["sh", "-c", f"echo $CATCHUP_PERIOD $CATCHUP_ATTEMPT >> {log}"]
    project.write(job_toml("export", command=command, evidence=evidence))
    for day in ("2026-10-01", "2026-10-02"):
        assert project.cli("-q", "run", "export", "--period", day).exit_code == 0
    sql("INSERT INTO {schema}.exports VALUES ('2026-10-01')")  # 2026-10-02 left nothing
    window = ("--since", "2026-10-01", "--until", "2026-10-03")
    plain = project.cli("-q", "replay", *window)
    assert plain.exit_code == 0 and log.read_text().split("\n")[:-1] == [
        "2026-10-01 1",
        "2026-10-02 1",
    ]
    refused = project.cli("replay", *window, "--unverified")
    assert refused.exit_code == 2 and "--unverified needs --reason" in refused.stderr
    again = project.cli("-q", "replay", *window, "--unverified", "--reason", "export was empty")
    assert again.exit_code == 0, again.output
    assert log.read_text().split("\n")[-2] == "2026-10-02 2"
    history = project.cli("history", "export")
    assert "reset" in history.output and "export was empty" in history.output


def test_a_later_scan_reads_only_what_may_have_changed_and_misses_nothing(
    project: Project, sql: Any
) -> None:
    """A scan records what it verified; the next reads the evidence only after that, in the
    holes, and for rows that finished since. A period run again without output, evidence
    that appears in a hole, and a new day are all found; scan --full reads everything."""
    ledger(project)
    sql("CREATE TABLE {schema}.exports (day date)")
    evidence = f"SELECT day FROM {project.schema}.exports"
    project.write(job_toml("export", command=["true"], evidence=evidence))
    days = [f"2026-10-0{n}" for n in range(1, 8)]
    for day in days[:6]:
        if day != "2026-10-04":  # a hole: nobody ran the 4th
            assert project.cli("-q", "run", "export", "--period", day).exit_code == 0
            sql("INSERT INTO {schema}.exports VALUES (%s)", [day])

    def states(until: str, *flags: str) -> dict[str, Any]:
        _, report = scan(project, "--until", until, *flags)
        (job,) = report["jobs"]
        return {g["first_label"]: g["status"] for g in job["gaps"]} | {
            "untracked": job["untracked"]
        }

    assert states("2026-10-07") == {"2026-10-04": "missing", "untracked": 0}
    (verified,) = sql("SELECT verified_until FROM {schema}.evidence_state")
    assert verified[0].date().isoformat() == "2026-10-07"
    # the 2nd is run again and leaves nothing; the old cron fills the hole; a new day comes
    assert project.cli("-q", "reset", "export", "2026-10-02", "--reason", "again").exit_code == 0
    sql("DELETE FROM {schema}.exports WHERE day = '2026-10-02'")
    assert project.cli("-q", "run", "export", "--period", "2026-10-02").exit_code == 0
    sql("INSERT INTO {schema}.exports VALUES ('2026-10-04')")
    assert project.cli("-q", "run", "export", "--period", "2026-10-07").exit_code == 0
    assert states("2026-10-08") == {
        "2026-10-02": "unverified",
        "2026-10-07": "unverified",
        "untracked": 1,
    }
    # evidence deleted under a period verified before: a full scan reads it all again
    sql("DELETE FROM {schema}.exports WHERE day = '2026-10-05'")
    assert states("2026-10-08", "--full")["2026-10-05"] == "unverified"


def test_tick_leaves_a_period_whose_output_exists_alone(project: Project, sql: Any) -> None:
    """The old cron job is still running beside catchup: it already exported the newest due
    day, so tick checks the evidence before its claim and does not run it."""
    (today,) = sql("SELECT date_trunc('day', clock_timestamp())")[0]
    ledger(project)
    sql("CREATE TABLE {schema}.exports (day date)")
    yesterday = (today - timedelta(days=1)).date()
    sql("INSERT INTO {schema}.exports VALUES (%s)", [yesterday])
    evidence = f"SELECT day FROM {project.schema}.exports"
    start = str((today - timedelta(days=3)).date())
    project.write(
        job_toml("export", start=start, catchup="latest", command=["true"], evidence=evidence)
    )
    result = project.cli("tick", "--json")
    assert result.exit_code == 0, result.output
    (period,) = json.loads(result.stdout)["periods"]
    assert (period["label"], period["status"]) == (yesterday.isoformat(), "skipped")
    assert period["detail"].startswith("untracked: its output exists")
    assert sql("SELECT count(*) FROM {schema}.runs") == [(0,)]


def test_adopt_without_evidence_touches_no_database(project: Project, sql: Any) -> None:
    project.write(job_toml("x", command=["true"]))
    result = project.cli("adopt", "x", "--reason", "onboarding")
    assert result.exit_code == 2
    assert result.stderr.strip() == "catchup: x has no evidence query: nothing shows what ran"
    assert nothing_written(project.database, project.schema)


def test_why_of_an_untracked_period_says_it_was_done_elsewhere(project: Project, sql: Any) -> None:
    """A period with output and no ledger row: why says untracked (not a gap), and that
    adopt records it; the period next to it, with neither, is missing."""
    ledger(project)
    sql("CREATE TABLE {schema}.exports (at timestamptz)")
    evidence = f"SELECT at FROM {project.schema}.exports"
    project.write(job_toml("export", "hourly", command=["true"], evidence=evidence))
    sql("INSERT INTO {schema}.exports VALUES ('2026-10-01T03:20:00Z')")
    result = project.cli("why", "export", "2026-10-01T03:00:00Z", "--json")
    why = json.loads(result.stdout)
    assert why["state"] == "untracked"
    assert why["commands"] == [
        "catchup adopt export --since 2026-10-01T03:00:00Z --until 2026-10-01T04:00:00Z "
        '--reason "…"'
    ]
    beside = json.loads(project.cli("why", "export", "2026-10-01T04:00:00Z", "--json").stdout)
    assert beside["state"] == "missing"
