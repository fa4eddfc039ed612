"""Jobs that wait for each other (``after``), through the command line on a real ledger: a
Berlin billing day waits for the 23 or 25 export hours inside it, a blocked period is not
claimed and says by what, a replay runs upstream before downstream (checked from the ledger's
own timestamps), and a reset racing a claim never lets the claim through."""

from __future__ import annotations

import json
import subprocess
from datetime import timedelta
from typing import Any

import psycopg
import psycopg.sql
import pytest
from fix_db import Database
from fix_processes import wait_for
from fix_project import Project, job_toml

from catchup import Catchup
from catchup.render.jobpage import job_page
from catchup.render.web import Site, home

# export: hourly (UTC); billing: the Berlin day, after every export hour inside it
CHAIN = job_toml("export", "hourly", "2026-03-01", command=["true"]) + job_toml(
    "billing", "daily", "2026-03-01", timezone="Europe/Berlin", command=["true"], after=["export"]
)


def run(project: Project, *args: str) -> dict[str, Any]:
    result = project.cli("-q", *args, "--json")
    assert result.stdout.strip(), result.output
    return {"code": result.exit_code, **json.loads(result.stdout)}


@pytest.mark.parametrize(
    ("day", "first", "last", "hours"),
    [
        ("2026-03-29", "2026-03-28T23:00:00Z", "2026-03-29T21:00:00Z", 23),
        ("2026-10-25", "2026-10-24T22:00:00Z", "2026-10-25T22:00:00Z", 25),
    ],
)
def test_a_berlin_day_waits_for_every_export_hour_inside_it(
    project: Project, sql: Any, day: str, first: str, last: str, hours: int
) -> None:
    project.write(CHAIN)
    blocked = project.cli("run", "billing", "--period", day)
    assert blocked.exit_code == 1
    assert f"waiting for export {first} .. {last} (missing)" in blocked.output
    assert sql("SELECT count(*) FROM {schema}.runs") == [(0,)]  # nothing claimed
    replayed = run(project, "replay", "--job", "export", "--since", first, "--until", last)
    assert replayed["totals"]["succeeded"] == hours - 1  # --until is exclusive: the last is left
    still = project.cli("run", "billing", "--period", day)
    assert still.exit_code == 1 and f"waiting for export {last} (missing)" in still.output
    assert project.cli("-q", "run", "export", "--period", last).exit_code == 0
    done = run(project, "run", "billing", "--period", day)
    assert (done["code"], done["status"]) == (0, "succeeded")


def test_a_failed_upstream_hour_blocks_its_day_and_only_that(project: Project) -> None:
    project.write(
        job_toml(
            "export",
            "hourly",
            "2026-03-01",
            command=["sh", "-c", "test $0 != 03", "{period_start:%H}"],
            max_attempts=1,
        )
        + job_toml("billing", "daily", "2026-03-01", command=["true"], after=["export"])
    )
    replayed = run(project, "replay", "--since", "2026-03-02", "--until", "2026-03-05")
    by_job: dict[str, list[tuple[str, str]]] = {}
    for p in replayed["periods"]:
        by_job.setdefault(p["job"], []).append((p["label"], p["status"]))
    assert [s for _, s in by_job["export"]].count("failed") == 3  # 03:00 of each day
    assert by_job["billing"] == [
        ("2026-03-02", "blocked"),
        ("2026-03-03", "blocked"),
        ("2026-03-04", "blocked"),
    ]
    assert replayed["totals"]["blocked"] == 3
    detail = next(p["detail"] for p in replayed["periods"] if p["job"] == "billing")
    assert "waiting for export 2026-03-02T03:00:00Z (exhausted)" in detail


def test_a_replay_runs_upstream_before_downstream_on_the_ledger_clock(
    project: Project, sql: Any
) -> None:
    """Four days of an outage, two workers: every billing attempt started after every export
    hour it needs had finished, by the ledger's own timestamps."""
    project.write(
        job_toml("export", "hourly", "2026-03-01", command=["true"])
        + job_toml("billing", "daily", "2026-03-01", command=["true"], after=["export"])
        + job_toml(
            "balance",
            "daily",
            "2026-03-01",
            command=["true"],
            after=["billing", {"job": "balance", "periods": "previous"}],
        )
    )
    replayed = run(
        project, "replay", "--since", "2026-03-01", "--until", "2026-03-05", "--workers", "2"
    )
    assert replayed["code"] == 0
    assert replayed["totals"]["succeeded"] == 4 * 24 + 4 + 4
    assert replayed["totals"]["blocked"] == 0
    late = sql(
        """
        SELECT d.name, h.period_start, u.name, r.period_start
        FROM {schema}.history h JOIN {schema}.jobs d ON d.id = h.job_id
        JOIN {schema}.runs r ON r.period_start < h.period_start + interval '1 day'
             AND r.period_end > h.period_start
        JOIN {schema}.jobs u ON u.id = r.job_id
        WHERE (d.name, u.name) IN (('billing', 'export'), ('balance', 'billing'))
          AND NOT r.finished_at <= h.started_at
        """
    )
    assert late == []
    previous = sql(
        """
        SELECT h.period_start FROM {schema}.history h JOIN {schema}.jobs d ON d.id = h.job_id
        JOIN {schema}.runs r ON r.job_id = h.job_id
             AND r.period_start = h.period_start - interval '1 day'
        WHERE d.name = 'balance' AND NOT r.finished_at <= h.started_at
        """
    )
    assert previous == []


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_a_reset_racing_a_claim_never_lets_it_through(project: Project, sql: Any) -> None:
    """A reset of the export hour is under way (its UPDATE not yet committed) while a process
    claims the billing day that needs it: the claim's check waits for the reset, sees the hour
    not done, and claims nothing. Without the check's row lock it would read the hour as
    succeeded and claim. Four times, each on a day of its own."""
    project.write(
        job_toml("export", "hourly", "2026-03-01", command=["true"])
        + job_toml("billing", "daily", "2026-03-01", command=["true"], after=["export"])
    )
    for n in range(4):
        day, following = f"2026-03-0{n + 2}", f"2026-03-0{n + 3}"
        done = project.cli("-q", "replay", "--job", "export", "--since", day, "--until", following)
        assert done.exit_code == 0, done.output
        hour = f"{day}T12:00:00Z"
        with psycopg.connect(project.database.conninfo) as reset:  # one open transaction
            reset.execute(
                psycopg.sql.SQL(
                    "UPDATE {}.runs SET status = 'failed' WHERE period_start = %s"
                    " AND job_id = (SELECT id FROM {}.jobs WHERE name = 'export')"
                ).format(
                    psycopg.sql.Identifier(project.schema), psycopg.sql.Identifier(project.schema)
                ),
                [hour],
            )
            claimer = project.spawn("-q", "run", "billing", "--period", day)

            def waiting_or_gone(claimer: subprocess.Popen[str] = claimer) -> bool:
                if claimer.poll() is not None:
                    return True
                return bool(
                    sql(
                        "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                        " AND query LIKE '%%upstream%%FOR SHARE%%'"
                    )
                )

            wait_for(waiting_or_gone, timeout=60, what="the claim to wait for the reset")
            reset.commit()
        out, err = claimer.communicate(timeout=120)
        assert claimer.returncode == 1, (n, out, err)
        assert f"waiting for export {hour} (failed)" in out + err
        billing = sql(
            "SELECT count(*) FROM {schema}.runs r JOIN {schema}.jobs j ON j.id = r.job_id"
            " WHERE j.name = 'billing'"
        )
        assert billing == [(0,)]


def test_a_chain_in_code_runs_in_order(project: Project) -> None:
    """The same through the Python API: make_job(after=…), and tick plans upstream first."""
    from catchup import Catchup, make_job

    seen: list[str] = []
    export = make_job(
        "export", "daily", "2026-03-01", call=lambda ctx: seen.append(f"export {ctx.period}")
    )
    billing = make_job(
        "billing",
        "daily",
        "2026-03-01",
        call=lambda ctx: seen.append(f"billing {ctx.period}"),
        after=["export"],
    )
    with Catchup(
        jobs=[billing, export], dsn=project.database.conninfo, schema=project.schema
    ) as app:
        batch = app.replay(since="2026-03-01", until="2026-03-04")
    assert batch.totals["succeeded"] == 6
    assert seen == [
        "export 2026-03-01",
        "billing 2026-03-01",
        "export 2026-03-02",
        "billing 2026-03-02",
        "export 2026-03-03",
        "billing 2026-03-03",
    ]


def test_a_blocked_period_is_one_line_and_writes_nothing(project: Project, sql: Any) -> None:
    project.write(CHAIN)
    out = subprocess.run(
        project.command("-q", "run", "billing", "--period", "2026-03-05"),
        cwd=project.path,
        env=project.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1
    lines = out.stdout.strip().splitlines() + out.stderr.strip().splitlines()
    assert len(lines) == 1 and "waiting for export" in lines[0] and "Traceback" not in out.stderr
    assert sql("SELECT count(*) FROM {schema}.runs") == [(0,)]


def test_the_scan_reports_exactly_the_day_a_failed_hour_blocks(
    project: Project, database: Database
) -> None:
    """Hour 03:00 of March 3 fails for good: March 3 is blocked (a gap, exit 1) and says by
    what, in the tables, JSON, Markdown, OpenMetrics and the status page; March 2 and 4 are not."""
    fails = ["sh", "-c", 'test "$0" != 2026-03-03T03:00:00Z', "{period}"]
    project.write(
        job_toml("export", "hourly", "2026-03-02", command=fails, max_attempts=1)
        + job_toml("billing", "daily", "2026-03-02", command=["true"], after=["export"])
    )
    replayed = run(project, "replay", "--since", "2026-03-02", "--until", "2026-03-05")
    assert replayed["totals"]["blocked"] == 1 and replayed["totals"]["failed"] == 1
    result = project.cli("-q", "scan", "--until", "2026-03-05", "--json")
    assert result.exit_code == 1
    billing = next(j for j in json.loads(result.stdout)["jobs"] if j["job"] == "billing")
    assert (billing["succeeded"], billing["blocked"], billing["missing"]) == (2, 1, 0)
    (gap,) = billing["gaps"]
    assert (gap["status"], gap["first_label"]) == ("blocked", "2026-03-03")
    assert gap["blocked_by"] == "export 2026-03-03T03:00:00Z (exhausted)"
    table = project.cli("-q", "scan", "--until", "2026-03-05")
    assert "billing 2026-03-03 waits for export 2026-03-03T03:00:00Z (exhausted)" in table.output
    metrics = project.cli("-q", "scan", "--until", "2026-03-05", "--format", "openmetrics")
    assert 'catchup_blocked_periods{job="billing"} 1' in metrics.output
    markdown = project.cli("-q", "scan", "--until", "2026-03-05", "--format", "markdown")
    assert "| job | state | first | last | periods | waits for |" in markdown.output
    assert (
        "| billing | blocked | 2026-03-03 | 2026-03-03 | 1 | "
        "export 2026-03-03T03:00:00Z (exhausted) |" in markdown.output
    )
    # the status page (catchup serve) draws the same report: the blocked day, what it waits
    # for, and its glyph in the calendar
    with Catchup(project.config, dsn=database.conninfo) as app:
        report = app.scan(until="2026-03-05", calendars=True)
    for page in (home(report, None, Site("t", 5)), job_page(report, None, Site("t", 5), "billing")):
        flat = " ".join((page or "").split())
        assert "waits for export 2026-03-03T03:00:00Z (exhausted)" in flat
        assert "blocked" in flat and "⊘" in flat


def test_why_follows_a_chain_of_blocks_to_its_root(project: Project) -> None:
    """balance waits for billing, which waits for an export hour that failed for good: why
    says so down the chain, and what would move it."""
    fails = ["sh", "-c", 'test "$0" != 2026-03-03T03:00:00Z', "{period}"]
    project.write(
        job_toml("export", "hourly", "2026-03-03", command=fails, max_attempts=1)
        + job_toml("billing", "daily", "2026-03-03", command=["true"], after=["export"])
        + job_toml("balance", "daily", "2026-03-03", command=["true"], after=["billing"])
    )
    assert project.cli("-q", "replay", "--since", "2026-03-03", "--until", "2026-03-04").exit_code
    result = project.cli("-q", "why", "balance", "2026-03-03", "--json")
    assert result.exit_code == 0, result.output
    why = json.loads(result.stdout)
    assert why["state"] == "blocked"
    (billing,) = why["upstream"]
    assert (billing["job"], billing["state"]) == ("billing", "blocked")
    (export,) = billing["upstream"]
    assert (export["job"], export["label"], export["state"]) == (
        "export",
        "2026-03-03T03:00:00Z",
        "exhausted",
    )
    assert "exited with 1" in export["said"][0]
    assert why["commands"][0] == (
        "catchup replay --job balance --since 2026-03-03T00:00:00Z --until 2026-03-04T00:00:00Z"
    )
    assert any("--retry-exhausted" in c for c in why["commands"])
    text = project.cli("-q", "why", "balance", "2026-03-03")
    assert "export 2026-03-03T03:00:00Z: exhausted" in text.output
    done = json.loads(project.cli("-q", "why", "export", "2026-03-03T02:00:00Z", "--json").stdout)
    assert done["state"] == "succeeded" and done["commands"][0].startswith("catchup reset export")


def test_why_of_a_period_to_come_says_when_it_is_due(project: Project, sql: Any) -> None:
    project.write(job_toml("billing", "daily", "2026-03-01", command=["true"]))
    (today,) = sql("SELECT (now() AT TIME ZONE 'UTC')::date + 5")[0]
    result = json.loads(project.cli("-q", "why", "billing", str(today), "--json").stdout)
    assert result["state"] == "not due"
    assert result["said"][0].startswith(
        f"not due yet: due at {today + timedelta(days=1)}T00:00:00Z"
    )
    bad = project.cli("-q", "why", "billing", "2026-03-01T05:00:00Z")
    assert bad.exit_code == 2 and "not a period start" in bad.output


def test_an_upstream_rerun_makes_its_downstream_outdated_and_replay_runs_it_once(
    project: Project, sql: Any
) -> None:
    project.write(
        job_toml("export", "daily", "2026-03-01", command=["true"])
        + job_toml("billing", "daily", "2026-03-01", command=["true"], after=["export"])
    )
    assert (
        project.cli("-q", "replay", "--since", "2026-03-01", "--until", "2026-03-04").exit_code == 0
    )
    assert project.cli("-q", "scan", "--until", "2026-03-04").exit_code == 0
    # the export of the 2nd is reset and run again: billing's 2nd used the old one
    reset = project.cli("-q", "reset", "export", "2026-03-02", "--reason", "bad rates")
    assert reset.exit_code == 0, reset.output
    assert project.cli("-q", "run", "export", "--period", "2026-03-02").exit_code == 0
    scanned = project.cli("-q", "scan", "--until", "2026-03-04", "--json")
    assert scanned.exit_code == 1
    billing = next(j for j in json.loads(scanned.stdout)["jobs"] if j["job"] == "billing")
    assert (billing["succeeded"], billing["outdated"]) == (2, 1)
    assert [(g["status"], g["first_label"]) for g in billing["gaps"]] == [
        ("outdated", "2026-03-02")
    ]
    why = run(project, "why", "billing", "2026-03-02")
    assert why["state"] == "outdated"
    assert "before export 2026-03-02 succeeded again at" in why["said"][0]
    assert why["commands"] == [
        "catchup replay --job billing --since 2026-03-02 --until 2026-03-03T00:00:00Z "
        '--outdated --reason "…"'
    ]
    assert run(project, "why", "billing", "2026-03-01")["state"] == "succeeded"
    window = ("--since", "2026-03-01", "--until", "2026-03-04")
    refused = project.cli("-q", "replay", "--since", "2026-03-01", "--outdated")
    assert refused.exit_code == 2 and "--reason" in refused.output
    rerun = run(project, "replay", *window, "--outdated", "--reason", "export re-run")
    assert [(p["job"], p["label"], p["status"]) for p in rerun["periods"]] == [
        ("billing", "2026-03-02", "succeeded")
    ]
    assert project.cli("-q", "scan", "--until", "2026-03-04").exit_code == 0
    again = run(project, "replay", *window, "--outdated", "--reason", "once more")
    assert again["periods"] == []  # runs once: it is no longer outdated
    audited = sql(
        "SELECT e.reason FROM {schema}.events e JOIN {schema}.jobs j ON j.id = e.job_id"
        " WHERE j.name = 'billing' AND e.action = 'reset'"
    )
    assert audited == [("export re-run",)]


def test_replay_of_a_downstream_job_plans_the_upstream_periods_it_needs(project: Project) -> None:
    """replay --job billing for two Berlin days also runs the 48 export hours they need (from
    23:00 UTC the day before), first, and says so; --no-upstream leaves them blocked."""
    project.write(CHAIN)
    # a dry run on a ledger that has never seen the jobs plans their upstream periods too
    fresh = project.cli(
        "-q",
        "replay",
        "--job",
        "billing",
        "--since",
        "2026-03-10",
        "--until",
        "2026-03-12",
        "--dry-run",
        "--json",
    )
    assert json.loads(fresh.stdout)["upstream"] == {"export": 48}
    lone = run(
        project,
        "replay",
        "--job",
        "billing",
        "--since",
        "2026-03-10",
        "--until",
        "2026-03-12",
        "--no-upstream",
    )
    assert [p["status"] for p in lone["periods"]] == ["blocked", "blocked"]
    assert "upstream" not in lone
    planned = run(
        project, "replay", "--job", "billing", "--since", "2026-03-10", "--until", "2026-03-12"
    )
    assert planned["upstream"] == {"export": 48}
    order = [(p["job"], p["start"]) for p in planned["periods"]]
    assert order[0] == ("export", "2026-03-09T23:00:00Z")
    assert [o for o in order if o[0] == "billing"] == [
        ("billing", "2026-03-09T23:00:00Z"),
        ("billing", "2026-03-10T23:00:00Z"),
    ]
    assert planned["totals"]["succeeded"] == 50 and planned["totals"]["blocked"] == 0
    assert order.index(("billing", "2026-03-09T23:00:00Z")) > order.index(
        ("export", "2026-03-10T22:00:00Z")
    )
    said = project.cli(
        "-q",
        "replay",
        "--job",
        "billing",
        "--since",
        "2026-03-12",
        "--until",
        "2026-03-13",
        "--dry-run",
    )
    assert "would also run 24 period(s) of export that the planned ones wait for" in said.output


def test_explain_shows_what_each_period_waits_for_and_doctor_the_graph(project: Project) -> None:
    project.write(CHAIN)
    explained = project.cli("-q", "explain", "billing", "--since", "2026-03-29", "--limit", "2")
    assert explained.exit_code == 0, explained.output
    flat = " ".join(explained.output.split())
    assert "waits for export 2026-03-28T23:00:00Z .. 2026-03-29T21:00:00Z (23)" in flat
    assert "waits for export 2026-03-29T22:00:00Z .. 2026-03-30T21:00:00Z (24)" in flat
    doctor = project.cli("doctor")
    assert "graph: billing waits for export" in doctor.output


def test_when_outdated_rerun_lets_tick_run_it_again_by_itself(project: Project, sql: Any) -> None:
    (today,) = sql("SELECT (now() AT TIME ZONE 'UTC')::date - 3")[0]
    start = str(today)
    project.write(
        job_toml("export", "daily", start, command=["true"])
        + job_toml(
            "billing", "daily", start, command=["true"], after=["export"], when_outdated="rerun"
        )
    )
    assert project.cli("-q", "tick").exit_code == 0
    assert project.cli("-q", "reset", "export", start, "--reason", "late data").exit_code == 0
    ticked = run(project, "tick")  # export's first day runs again: billing's is outdated now
    ran = [(p["job"], p["label"]) for p in ticked["periods"] if p["status"] == "succeeded"]
    assert ran == [("export", start)]
    # the next tick sees it and runs it again, reset first (audited)
    again = run(project, "tick")
    assert [(p["job"], p["label"], p["status"]) for p in again["periods"]] == [
        ("billing", start, "succeeded")
    ]
    assert run(project, "tick")["periods"] == []  # once
    audited = sql(
        "SELECT e.actor FROM {schema}.events e JOIN {schema}.jobs j ON j.id = e.job_id"
        " WHERE j.name = 'billing' AND e.action = 'reset'"
    )
    assert audited == [("catchup tick",)]


def test_a_chain_of_blocks_is_reported_down_to_its_root(project: Project) -> None:
    fails = ["sh", "-c", 'test "$0" != 2026-03-03T03:00:00Z', "{period}"]
    project.write(
        job_toml("export", "hourly", "2026-03-03", command=fails, max_attempts=1)
        + job_toml("billing", "daily", "2026-03-03", command=["true"], after=["export"])
        + job_toml("balance", "daily", "2026-03-03", command=["true"], after=["billing"])
    )
    project.cli("-q", "replay", "--since", "2026-03-03", "--until", "2026-03-04")
    report = json.loads(project.cli("-q", "scan", "--until", "2026-03-04", "--json").stdout)
    balance = next(j for j in report["jobs"] if j["job"] == "balance")
    (gap,) = balance["gaps"]
    assert gap["blocked_by"] == (
        "billing 2026-03-03 (blocked: waits for export 2026-03-03T03:00:00Z (exhausted))"
    )


def test_an_outage_blocks_one_range_that_names_the_upstream_range(project: Project) -> None:
    """Five days of export missing: billing's five days are one blocked range, named by the
    upstream range that blocks it (not five ranges of one day each)."""
    project.write(
        job_toml("export", "daily", "2026-03-01", command=["true"])
        + job_toml("billing", "daily", "2026-03-01", command=["true"], after=["export"])
    )
    done = run(project, "replay", "--since", "2026-03-01", "--until", "2026-03-03")
    assert done["totals"]["succeeded"] == 4  # two days of each, in order
    report = json.loads(project.cli("-q", "scan", "--until", "2026-03-08", "--json").stdout)
    by_job = {j["job"]: j for j in report["jobs"]}
    assert [(g["status"], g["first_label"], g["periods"]) for g in by_job["billing"]["gaps"]] == [
        ("blocked", "2026-03-03", 5)
    ]
    assert by_job["billing"]["gaps"][0]["blocked_by"] == "export 2026-03-03 .. 2026-03-07 (missing)"
    assert (by_job["billing"]["blocked"], by_job["billing"]["missing"]) == (5, 0)


def test_a_running_balance_names_the_failed_day_it_waits_for_every_day_after(
    project: Project,
) -> None:
    """balance D needs billing D and balance D-1: billing fails on March 3, so balance is
    blocked from March 3 on, one range naming that billing day (the root), never 'missing'."""
    fails = ["sh", "-c", 'test "$0" != 2026-03-03', "{period}"]
    project.write(
        job_toml("billing", "daily", "2026-03-01", command=fails, max_attempts=1)
        + job_toml(
            "balance",
            "daily",
            "2026-03-01",
            command=["true"],
            after=["billing", {"job": "balance", "periods": "previous"}],
        )
    )
    run(project, "replay", "--since", "2026-03-01", "--until", "2026-03-06")
    report = json.loads(project.cli("-q", "scan", "--until", "2026-03-06", "--json").stdout)
    balance = next(j for j in report["jobs"] if j["job"] == "balance")
    assert [(g["status"], g["first_label"], g["periods"]) for g in balance["gaps"]] == [
        ("blocked", "2026-03-03", 3)
    ]
    assert balance["gaps"][0]["blocked_by"] == "billing 2026-03-03 (exhausted)"


def test_an_unverified_upstream_period_blocks_like_a_gap(project: Project, sql: Any) -> None:
    """export has an evidence query: its March 2 succeeded in the ledger but left nothing
    behind (unverified). billing March 2 is not claimed and says so, in run and in scan;
    once the output is there, it runs."""
    project.write(job_toml("none", command=["true"]))
    assert project.cli("-q", "migrate").exit_code == 0
    sql("CREATE TABLE {schema}.exports (at timestamptz)")
    evidence = f"SELECT at FROM {project.schema}.exports"
    project.write(
        job_toml("export", "daily", "2026-03-01", command=["true"], evidence=evidence)
        + job_toml("billing", "daily", "2026-03-01", command=["true"], after=["export"])
    )
    window = ("--since", "2026-03-01", "--until", "2026-03-03")
    assert run(project, "replay", "--job", "export", *window)["totals"]["succeeded"] == 2
    sql("INSERT INTO {schema}.exports VALUES ('2026-03-01T05:00:00Z')")  # March 2 left none
    assert run(project, "run", "billing", "--period", "2026-03-01")["status"] == "succeeded"
    blocked = project.cli("run", "billing", "--period", "2026-03-02")
    assert blocked.exit_code == 1
    assert "waiting for export 2026-03-02 (unverified)" in blocked.output
    assert sql("SELECT count(*) FROM {schema}.runs") == [(3,)]  # two exports, one billing
    report = json.loads(project.cli("-q", "scan", "--until", "2026-03-03", "--json").stdout)
    billing = next(j for j in report["jobs"] if j["job"] == "billing")
    assert [(g["status"], g["first_label"]) for g in billing["gaps"]] == [("blocked", "2026-03-02")]
    assert billing["gaps"][0]["blocked_by"] == "export 2026-03-02 (unverified)"
    sql("INSERT INTO {schema}.exports VALUES ('2026-03-02T05:00:00Z')")
    assert run(project, "run", "billing", "--period", "2026-03-02")["status"] == "succeeded"


def test_a_running_balance_never_run_waits_for_its_first_day(project: Project) -> None:
    """billing ran, balance never did: its first day waits for nothing and is missing; every
    later day waits for the one before, so for that first day: one blocked range naming it."""
    project.write(
        job_toml("billing", "daily", "2026-03-01", command=["true"])
        + job_toml(
            "balance",
            "daily",
            "2026-03-01",
            command=["true"],
            after=["billing", {"job": "balance", "periods": "previous"}],
        )
    )
    run(project, "replay", "--job", "billing", "--since", "2026-03-01", "--until", "2026-03-05")
    report = json.loads(project.cli("-q", "scan", "--until", "2026-03-05", "--json").stdout)
    balance = next(j for j in report["jobs"] if j["job"] == "balance")
    assert [(g["status"], g["first_label"], g["periods"]) for g in balance["gaps"]] == [
        ("missing", "2026-03-01", 1),
        ("blocked", "2026-03-02", 3),
    ]
    assert balance["gaps"][1]["blocked_by"] == "balance 2026-03-01 (missing)"
