"""Compacted facts in their own table (sql/migrations/0020): a ledger the release before left,
its periods compacted inside runs, migrates and moves them without counting them again; a
compacted period can still be marked, is named as succeeded by cancel, and counts as done for
a downstream job's `after`."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import psycopg
import psycopg.sql
import pytest
from fix_catalog import CATALOG, catalog
from fix_db import Database, drop_schema
from fix_ledger import fill_settled
from fix_project import Project, job_toml

from catchup.ledger import Ledger, sqlfiles

ORIGIN = datetime(2024, 1, 1, tzinfo=UTC)
WINDOW = ("--since", "2024-01-01", "--until", "2024-01-05")


def db_now(sql: Any) -> str:
    ((now,),) = sql("SELECT clock_timestamp()")
    return str(now.isoformat())


def scan(project: Project, *window: str) -> dict[str, Any]:
    result = project.cli("-q", "scan", "--json", *window)
    assert result.exit_code in (0, 1), result.output
    scanned: dict[str, Any] = json.loads(result.stdout)
    return {
        job["job"]: {k: job[k] for k in ("succeeded", "missing", "failed")}
        for job in scanned["jobs"]
    }


@pytest.mark.superuser
def test_a_ledger_compacted_by_the_release_before_moves_its_facts_once(
    project: Project, sql: Any, database: Database
) -> None:
    project.write(job_toml("export", schedule="hourly", start="2024-01-01", command=["true"]))
    conn = psycopg.connect(database.conninfo, autocommit=True)
    try:
        old = Ledger(conn, project.schema)
        assert old.migrate(through=19)[-1].startswith("0019")
        ((job_id,),) = [(row.id,) for row in old.register_jobs(["export"]).values()]
        written = fill_settled(sql, job_id, ORIGIN, 96, skip_every=10)
        # compacted as that release compacts: the fact in runs, the detail gone, counted
        sql(
            "UPDATE {schema}.runs SET compacted_at = clock_timestamp() - interval '2 days',"
            " owner = NULL, output_tail = NULL"
        )
        sql("DELETE FROM {schema}.history")
        sql(
            "INSERT INTO {schema}.compaction (job_id, through_at, through_id, periods, attempts)"
            " VALUES (%s, clock_timestamp() - interval '2 days', 0, %s, %s)",
            [job_id, written, 2 * written],
        )
        assert "0020_compacted" in old.migrate()
        fresh = f"{project.schema}_fresh"
        Ledger(conn, fresh).migrate()
        try:
            got, want = catalog(conn, project.schema), catalog(conn, fresh)
            assert all(got[what] == want[what] for what in CATALOG)
        finally:
            drop_schema(database.conninfo, fresh)
    finally:
        conn.close()
    before = scan(project, *WINDOW)  # (the facts still in runs)
    assert before["export"]["succeeded"] == written
    report = json.loads(project.cli("-q", "compact", "--json", "--until", db_now(sql)).stdout)
    assert report["periods"] == 0  # moved, not compacted a second time
    assert sql("SELECT periods FROM {schema}.compaction") == [(written,)]
    assert sql("SELECT count(*) FROM {schema}.runs") == [(0,)]
    assert sql(
        "SELECT count(*), min(compacted_on) = (clock_timestamp() - interval '2 days')::date"
        " FROM {schema}.compacted"
    ) == [(written, True)]
    assert scan(project, *WINDOW) == before
    ran = project.cli("-q", "run", "export", "--period", "2024-01-01T05:00:00Z")
    assert ran.exit_code == 0 and "ran" not in ran.stdout, ran.stdout
    assert sql("SELECT count(*) FROM {schema}.history") == [(0,)]


def test_a_compacted_period_can_be_marked_and_is_not_running_to_cancel(
    project: Project, sql: Any
) -> None:
    project.write(job_toml("export", start="2026-03-01", command=["true"]))
    assert (
        project.cli("-q", "replay", "--since", "2026-03-01", "--until", "2026-03-04").exit_code == 0
    )
    project.cli("-q", "compact", "--until", db_now(sql))
    assert sql("SELECT count(*) FROM {schema}.compacted") == [(3,)]
    cancel = project.cli("-q", "cancel", "export", "2026-03-02", "--reason", "x")
    assert cancel.exit_code == 2 and "not running (it is succeeded)" in cancel.output, cancel.output
    marked = project.cli("-q", "mark", "export", "2026-03-02", "--skip", "--reason", "refunded")
    assert marked.exit_code == 0, marked.output
    ((status, note),) = sql(
        "SELECT status, error FROM {schema}.periods WHERE period_start = '2026-03-02Z'"
    )
    assert status == "waived" and note.endswith(": refunded"), note
    assert sql("SELECT count(*) FROM {schema}.compacted") == [(2,)]


def test_a_downstream_job_runs_after_its_compacted_upstream(project: Project, sql: Any) -> None:
    upstream = job_toml("export", start="2026-03-01", command=["true"])
    project.write(upstream)
    assert (
        project.cli("-q", "replay", "--since", "2026-03-01", "--until", "2026-03-04").exit_code == 0
    )
    project.cli("-q", "compact", "--until", db_now(sql))
    assert sql("SELECT count(*) FROM {schema}.runs") == [(0,)]
    project.write(
        upstream + job_toml("billing", start="2026-03-01", command=["true"], after=["export"])
    )
    ran = project.cli(
        "-q", "replay", "--job", "billing", "--since", "2026-03-01", "--until", "2026-03-04"
    )
    assert ran.exit_code == 0, ran.output
    assert sql(
        "SELECT count(*) FROM {schema}.runs r JOIN {schema}.jobs j ON j.id = r.job_id"
        " WHERE j.name = 'billing' AND r.status = 'succeeded'"
    ) == [(3,)]


def test_a_periods_row_is_read_through_each_tables_primary_key(
    project: Project, sql: Any, database: Database
) -> None:
    # the view is runs and compacted as one: a lookup of one period must reach each table by
    # its primary key (a cast of job_id in either branch would make it read the whole table:
    # 150 s for a full scan of 8.76 million compacted periods, every `run` of a done one too)
    project.write(job_toml("export", start="2026-03-01", command=["true"]))
    replayed = project.cli("-q", "replay", "--since", "2026-03-01", "--until", "2026-03-04")
    assert replayed.exit_code == 0, replayed.output
    project.cli("-q", "compact", "--until", db_now(sql))
    ((job_id,),) = sql("SELECT id FROM {schema}.jobs WHERE name = 'export'")
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")  # on tables this small a scan would win
        params = {"job_id": job_id, "key": "", "period_start": datetime(2026, 3, 2, tzinfo=UTC)}
        explain = psycopg.sql.SQL("EXPLAIN (FORMAT JSON) ") + sqlfiles.query(
            "run_row", project.schema
        )
        ((document,),) = conn.execute(explain, params).fetchall()
    scans = {}
    todo = [document[0]["Plan"]]
    while todo:
        node = todo.pop()
        todo += node.get("Plans", [])
        if "Relation Name" in node:
            scans[node["Relation Name"]] = (node.get("Index Name"), node.get("Index Cond", ""))
    for table in ("runs", "compacted"):
        index, condition = scans[table]
        # the job's own entries, not the whole index filtered
        assert index == f"{table}_pkey" and "job_id =" in condition, scans
