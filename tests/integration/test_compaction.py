"""Compaction: a settled period's detail goes, its fact stays, and the claim path never takes it
again; scan's answer does not move; a reset brings the period back; a dry run changes nothing;
two compactors and a replay racing leave every count exact. Dates are explicit past windows
(the compacting cutoff is the database's clock), so nothing here depends on the day it runs."""

from __future__ import annotations

import contextlib
import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from fix_catalog import CATALOG, catalog
from fix_db import Database, drop_schema, ledger_contents
from fix_ledger import fill_settled
from fix_project import Project, job_toml
from test_serve import get
from test_serve_period import serve

from catchup.ledger import Ledger

BILLING = job_toml(
    "billing",
    start="2026-03-01",
    # the 4th fails its first attempt; the rest succeed
    command=[
        "sh",
        "-c",
        "echo billed $CATCHUP_PERIOD; test $CATCHUP_PERIOD != 2026-03-04 -o $CATCHUP_ATTEMPT -ge 2",
    ],
    max_attempts=3,
    retry_backoff="0s",
)
BROKEN = job_toml("broken", start="2026-03-01", command=["false"], max_attempts=1)
WINDOW = ("--since", "2026-03-01", "--until", "2026-03-11")


def db_now(sql: Any) -> datetime:
    ((now,),) = sql("SELECT clock_timestamp()")
    assert isinstance(now, datetime)
    return now


def facts(sql: Any) -> dict[tuple[str, str, datetime], tuple[Any, ...]]:
    """What compaction must keep of each run: its status, attempt, failures, end and finish."""
    rows = sql(
        "SELECT j.name, r.key, r.period_start, r.status, r.attempt, r.failures, r.period_end,"
        " r.finished_at, r.interrupted FROM {schema}.periods r"
        " JOIN {schema}.jobs j ON j.id = r.job_id"
    )
    return {(name, key, start): tuple(rest) for name, key, start, *rest in rows}


def scan_jobs(project: Project, *window: str) -> list[dict[str, Any]]:
    result = project.cli("-q", "scan", "--json", *window)
    assert result.exit_code in (0, 1), result.output
    jobs: list[dict[str, Any]] = json.loads(result.stdout)["jobs"]
    return jobs


def compact(project: Project, *args: str) -> dict[str, Any]:
    result = project.cli("-q", "compact", "--json", *args)
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def build(project: Project) -> None:
    project.write(BILLING + BROKEN)
    for _ in range(2):  # the second replay retries the 4th
        project.cli("-q", "replay", "--job", "billing", *WINDOW)
    assert project.cli("-q", "run", "broken", "--period", "2026-03-02").exit_code == 1
    marked = project.cli("-q", "mark", "billing", "2026-03-11", "--skip", "--reason", "holiday")
    assert marked.exit_code == 0, marked.output


def test_compaction_keeps_each_periods_fact_and_drops_its_detail(
    project: Project, sql: Any
) -> None:
    build(project)
    window = ("--since", "2026-03-01", "--until", "2026-03-13")
    scanned = scan_jobs(project, *window)
    kept = facts(sql)
    firsts = dict(
        sql(
            "SELECT period_start, min(started_at) FROM {schema}.history h"
            " JOIN {schema}.jobs j ON j.id = h.job_id WHERE j.name = 'billing' GROUP BY 1"
        )
    )
    report = compact(project, "--until", db_now(sql).isoformat())
    by_job = {j["job"]: j for j in report["jobs"]}
    # ten succeeded (eleven attempts: the 4th took two) and one waived (no attempt)
    assert (by_job["billing"]["periods"], by_job["billing"]["attempts"]) == (11, 11)
    assert (by_job["broken"]["periods"], by_job["broken"]["attempts"]) == (0, 0)
    assert facts(sql) == kept
    assert scan_jobs(project, *window) == scanned
    left = sql(
        "SELECT j.name, count(*) FROM {schema}.history h JOIN {schema}.jobs j ON j.id = h.job_id"
        " GROUP BY 1"
    )
    assert left == [("broken", 1)]  # a failed period keeps its detail: someone must fix it
    rows = sql(
        "SELECT period_start, status, claimed_at, owner, output_tail, error, compacted_at"
        " FROM {schema}.periods r JOIN {schema}.jobs j ON j.id = r.job_id WHERE j.name = 'billing'"
    )
    assert len(rows) == 11
    for start, status, claimed, owner, tail, error, compacted in rows:
        assert compacted is not None and owner is None and tail is None
        if status == "waived":
            assert error is not None and error.endswith("holiday")  # who waived it and why
        else:
            assert claimed == firsts[start]  # the first claim, not the last
    # never claimed again, by any path
    again = project.cli("-q", "run", "billing", "--period", "2026-03-04")
    assert again.exit_code == 0 and "already succeeded" in again.stdout, again.stdout
    compacted = ("--since", "2026-03-01", "--until", "2026-03-12")
    replayed = project.cli("-q", "replay", "--json", *compacted, "--job", "billing")
    assert json.loads(replayed.stdout)["totals"]["planned"] == 0, replayed.stdout
    assert sql(
        "SELECT count(*) FROM {schema}.history h JOIN {schema}.jobs j"
        " ON j.id = h.job_id WHERE j.name = 'billing'"
    ) == [(0,)]
    # history says where the detail went
    said = project.cli("-q", "history", "billing", "--period", "2026-03-04")
    assert "detail compacted on" in said.stdout and "succeeded at attempt 2" in said.stdout
    record = json.loads(
        project.cli("-q", "history", "billing", "--period", "2026-03-04", "--json").stdout
    )["compacted"]
    assert record["attempts"] == 2 and record["status"] == "succeeded"
    # and a second compaction finds nothing more
    assert compact(project, "--until", db_now(sql).isoformat())["periods"] == 0


def test_a_dry_run_counts_what_would_go_and_changes_nothing(project: Project, sql: Any) -> None:
    build(project)
    before = db_now(sql).isoformat()
    contents = ledger_contents(sql, project.schema)
    plan = compact(project, "--until", before, "--dry-run")
    assert ledger_contents(sql, project.schema) == contents
    billing = next(j for j in plan["jobs"] if j["job"] == "billing")
    assert (billing["periods"], billing["attempts"]) == (11, 11) and billing["bytes"] > 0
    done = compact(project, "--until", before)
    assert (done["periods"], done["attempts"]) == (plan["periods"], plan["attempts"])


def test_a_reset_after_compaction_runs_the_period_again(project: Project, sql: Any) -> None:
    build(project)
    compact(project, "--until", db_now(sql).isoformat())
    reset = project.cli("-q", "reset", "billing", "2026-03-02", "--reason", "rebill")
    assert reset.exit_code == 0, reset.output
    assert sql(
        "SELECT status, compacted_at FROM {schema}.periods WHERE period_start = '2026-03-02Z'"
        " AND job_id = (SELECT id FROM {schema}.jobs WHERE name = 'billing')"
    ) == [("failed", None)]
    ran = project.cli("-q", "run", "billing", "--period", "2026-03-02")
    assert ran.exit_code == 0 and "succeeded" in ran.stdout, ran.stdout
    attempts = json.loads(
        project.cli("-q", "history", "billing", "--period", "2026-03-02", "--json").stdout
    )
    assert [a["attempt"] for a in attempts["attempts"]] == [2]  # a new fencing token
    assert attempts["compacted"] is None
    assert [c["action"] for c in attempts["changes"]] == ["reset"]
    # its page: one attempt kept, numbered 2, says attempt 1's detail was compacted
    with contextlib.contextmanager(serve)(project) as base:
        status, _, page = get(base + "/jobs/billing/2026-03-02")
    assert status == 200, page
    assert "<h2>Attempts: 1 kept, 1 before them compacted</h2>" in page
    assert "The detail of 1 earlier attempt(s) was compacted" in page and "Attempt 2:" in page


def test_tick_compacts_a_slice_when_keep_detail_is_set(project: Project, sql: Any) -> None:
    build(project)
    project.write('[ledger]\nkeep_detail = "2d"\n\n' + BILLING + BROKEN)
    # the runs ended three days ago, as far as the ledger knows
    sql("UPDATE {schema}.runs SET finished_at = finished_at - interval '3 days'")
    assert project.cli("-q", "tick", "--job", "broken").exit_code in (0, 1)
    compacted = sql(
        "SELECT j.name, count(r.compacted_at) FROM {schema}.periods r"
        " JOIN {schema}.jobs j ON j.id = r.job_id GROUP BY 1 ORDER BY 1"
    )
    assert compacted == [("billing", 0), ("broken", 0)]  # only the jobs it ticked
    ticked = project.cli("-q", "tick", "--job", "billing")
    assert ticked.exit_code in (0, 1)
    ((n,),) = sql(
        "SELECT count(*) FROM {schema}.periods r JOIN {schema}.jobs j ON j.id = r.job_id"
        " WHERE j.name = 'billing' AND r.compacted_at IS NOT NULL"
    )
    assert n == 11
    summary = next(line for line in ticked.stdout.splitlines() if line.startswith("tick: "))
    assert summary.endswith("; compacted 11 old period(s)")  # its summary says
    assert (
        json.loads(project.cli("-q", "tick", "--json", "--job", "billing").stdout)["totals"].get(
            "compacted"
        )
        is None
    )  # nothing left: nothing said


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--until", "2199-01-01"), "is after the database's clock"),
        (("--until", "yesterday-ish"), "--until"),
        ((), "nothing says what is old"),
    ],
)
def test_a_compaction_it_cannot_do_is_one_line_and_writes_nothing(
    project: Project, sql: Any, args: tuple[str, ...], said: str
) -> None:
    build(project)
    contents = ledger_contents(sql, project.schema)
    result = project.cli("-q", "compact", *args)
    assert result.exit_code == 2, result.output
    assert said in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert ledger_contents(sql, project.schema) == contents


# -- random ledgers ------------------------------------------------------------------------

STATUSES = ["succeeded"] * 6 + ["failed"] * 2 + ["waived", "running", None]


def random_ledger(sql: Any, job_id: int, rng: random.Random, now: datetime, n: int) -> None:
    """``n`` daily periods from 2022-01-01, each missing, succeeded, failed (some exhausted),
    waived or running (some leases expired), with their attempts' history, finished at random
    times of the past."""
    origin = datetime(2022, 1, 1, tzinfo=UTC)
    runs, history = [], []
    for i in range(n):
        status = rng.choice(STATUSES)
        if status is None:
            continue
        start = origin + timedelta(days=i)
        attempt = 0 if status == "waived" else rng.randint(1, 3)
        failures = {"failed": attempt, "succeeded": attempt - 1}.get(status, 0)
        finished = (
            None if status == "running" else now - timedelta(seconds=rng.randint(60, 40_000_000))
        )
        lease = now + timedelta(minutes=5 if rng.random() < 0.5 else -5)
        runs.append(
            (
                job_id,
                start,
                start + timedelta(days=1),
                status,
                attempt,
                failures,
                f"host:{i}",
                now - timedelta(days=600),
                finished,
                lease if status == "running" else None,
                now - timedelta(days=1) if status == "failed" else None,
                "x" * rng.randint(0, 300),
                f"cp{i}" if rng.random() < 0.2 else None,
            )
        )
        for a in range(1, attempt + 1):
            last = a == attempt
            state = status if last and status != "waived" else "failed"
            history.append(
                (
                    job_id,
                    start,
                    a,
                    "running" if state == "running" else state,
                    f"host:{i}",
                    now - timedelta(days=600 - a),
                    None if state == "running" else finished,
                    "tail " * rng.randint(0, 50),
                )
            )
    sql(
        "INSERT INTO {schema}.runs (job_id, period_start, period_end, status, attempt, failures,"
        " owner, claimed_at, finished_at, lease_expires_at, retry_after, output_tail, checkpoint)"
        " SELECT * FROM unnest(%s::bigint[], %s::timestamptz[], %s::timestamptz[], %s::text[],"
        " %s::int[], %s::int[], %s::text[], %s::timestamptz[], %s::timestamptz[],"
        " %s::timestamptz[], %s::timestamptz[], %s::text[], %s::text[])",
        [list(column) for column in zip(*runs, strict=True)],
    )
    sql(
        "INSERT INTO {schema}.history (job_id, period_start, attempt, status, owner, started_at,"
        " finished_at, output_tail) SELECT * FROM unnest(%s::bigint[], %s::timestamptz[],"
        " %s::int[], %s::text[], %s::text[], %s::timestamptz[], %s::timestamptz[], %s::text[])",
        [list(column) for column in zip(*history, strict=True)],
    )


def claimable(sql: Any, schema: str, job_id: int) -> set[datetime]:
    """Every period of the job the strongest claim (backoff ignored, exhausted retried) would
    take now, each tried in a transaction rolled back."""
    taken = set()
    for start, end in sql("SELECT period_start, period_end FROM {schema}.periods"):
        sql("BEGIN")
        rows = sql(
            "SELECT count(*) FROM {schema}.claim_period(%s, %s, '', %s, %s, 'probe',"
            " '1 minute', 3, true, false, true, true)",
            [schema, job_id, start, end],
        )
        sql("ROLLBACK")
        if rows and rows[0][0]:
            taken.add(start)
    return taken


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_compaction_never_changes_the_scan_nor_makes_a_period_claimable(
    project: Project, sql: Any, seed: int
) -> None:
    rng = random.Random(seed)
    project.write(job_toml("daily", start="2022-01-01", command=["true"], max_attempts=3))
    window = ("--since", "2022-01-01", "--until", "2026-01-01")
    scan_jobs(project, *window)  # registers the job
    ((job_id,),) = sql("SELECT id FROM {schema}.jobs WHERE name = 'daily'")
    now = db_now(sql)
    random_ledger(sql, job_id, rng, now, 900)
    scanned = scan_jobs(project, *window)
    kept = facts(sql)
    could = claimable(sql, project.schema, job_id)
    assert could  # failed and stale periods: the claim takes them, before and after
    # two random cutoffs, then everything (more runs than a batch holds)
    cutoffs = sorted(now - timedelta(seconds=rng.randint(0, 40_000_000)) for _ in range(2))
    cutoffs.append(now)
    for cut in cutoffs:
        compact(project, "--until", cut.isoformat())
        assert scan_jobs(project, *window) == scanned
        assert facts(sql) == kept
        assert claimable(sql, project.schema, job_id) == could
        # exactly the settled runs that ended before the cutoff, each without its attempts
        wrong = sql(
            "SELECT period_start FROM {schema}.periods r WHERE (r.compacted_at IS NOT NULL)"
            " <> (r.status IN ('succeeded', 'waived') AND coalesce(r.finished_at < %s, false))"
            " OR (r.compacted_at IS NOT NULL AND EXISTS (SELECT 1 FROM {schema}.history h"
            " WHERE h.job_id = r.job_id AND h.period_start = r.period_start))"
            " OR (r.compacted_at IS NULL AND r.attempt > 0 AND NOT EXISTS (SELECT 1"
            " FROM {schema}.history h WHERE h.job_id = r.job_id"
            " AND h.period_start = r.period_start))",
            [cut],
        )
        assert wrong == []
    ((compacted,),) = sql("SELECT count(*) FROM {schema}.periods WHERE compacted_at IS NOT NULL")
    assert compacted > 500


def test_doctor_says_how_big_the_ledger_is_and_how_far_compaction_is_behind(
    project: Project, sql: Any
) -> None:
    build(project)
    project.write('[ledger]\nkeep_detail = "2d"\n\n' + BILLING + BROKEN)
    sql("UPDATE {schema}.runs SET finished_at = finished_at - interval '5 days'")
    said = project.cli("doctor").stdout
    assert "ledger: " in said and " in all (" in said, said
    assert "billing: detail of runs that ended" in said and "days past keep_detail" in said
    compact(project)
    said = project.cli("doctor").stdout
    assert "compaction keeps up" in said and "days past keep_detail" not in said, said


@pytest.mark.superuser
def test_a_ledger_of_the_last_release_migrates_with_its_runs_and_compacts(
    project: Project, sql: Any, database: Database
) -> None:
    """A ledger as the release before compaction left it (migration 15), runs in it, reaches
    the schema of a fresh one, and its old runs compact."""
    project.write(job_toml("export", schedule="hourly", start="2024-01-01", command=["true"]))
    conn = psycopg.connect(database.conninfo, autocommit=True)
    try:
        old = Ledger(conn, project.schema)
        assert old.migrate(through=15)[-1].startswith("0015")
        ((job_id,),) = [(row.id,) for row in old.register_jobs(["export"]).values()]
        written = fill_settled(sql, job_id, datetime(2024, 1, 1, tzinfo=UTC), 2_000)
        assert old.migrate()[0].startswith("0016")
        fresh = f"{project.schema}_fresh"
        Ledger(conn, fresh).migrate()
        try:
            got, want = catalog(conn, project.schema), catalog(conn, fresh)
            assert all(got[what] == want[what] for what in CATALOG)
        finally:
            drop_schema(database.conninfo, fresh)
    finally:
        conn.close()
    assert compact(project, "--until", db_now(sql).isoformat())["periods"] == written


def test_a_first_scan_counts_a_keyed_jobs_compacted_periods_as_done(
    project: Project, sql: Any
) -> None:
    """A first scan judges a first read's keys by their periods' rows, compacted ones among
    them (counted apart from runs): a key whose every period succeeded, its detail compacted
    since, is complete, and its row is not written again."""
    keys = "SELECT k FROM (VALUES ('acme'), ('globex')) AS v (k)"
    project.write(job_toml("invoice", start="2026-03-01", keys=keys, command=["true"]))
    window = ("--since", "2026-03-01", "--until", "2026-03-05")
    replayed = project.cli("-q", "replay", *window)
    assert replayed.exit_code == 0, replayed.output
    compact(project, "--until", db_now(sql).isoformat())
    assert sql("SELECT count(*) FROM {schema}.runs") == [(0,)]
    assert sql("SELECT count(*) FROM {schema}.compacted") == [(8,)]
    # the keys read again as a first read: presumed complete until a scan judges them
    sql("DELETE FROM {schema}.job_keys")
    sql("DELETE FROM {schema}.scan_state")
    read = project.cli("-q", "keys", "invoice")
    assert read.exit_code == 0, read.output
    before = sql("SELECT key, xmin::text, upper_inf(verified) FROM {schema}.job_keys ORDER BY 1")
    assert before == [("acme", before[0][1], True), ("globex", before[1][1], True)]
    (job,) = scan_jobs(project, *window)
    assert (job["succeeded"], job["missing"], job["failed"]) == (8, 0, 0)
    assert sql("SELECT key, xmin::text, upper_inf(verified) FROM {schema}.job_keys ORDER BY 1") == (
        before
    )
    # the horizon at the window's end: the newest day's rows, compacted, counted too
    end = datetime(2026, 3, 5, tzinfo=UTC)
    assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(end,)]
