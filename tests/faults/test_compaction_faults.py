"""Compaction under real faults and real company: SIGKILLed in the middle of a batch (it resumes,
nothing is lost or counted twice), and two compactors racing a replay of the same job on other
processes (every count exact, the replayed periods run once and keep their detail).

Run alone with ``uv run pytest -m faults``.
"""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from fix_db import Database
from fix_ledger import fill_settled
from fix_processes import wait_for
from fix_project import Project, job_toml

pytestmark = [pytest.mark.faults, pytest.mark.slow]
ORIGIN = datetime(2024, 1, 1, tzinfo=UTC)


def hourly(project: Project, sql: Any) -> int:
    project.write(job_toml("export", schedule="hourly", start="2024-01-01", command=["true"]))
    assert project.cli("-q", "migrate").exit_code == 0
    assert project.cli("-q", "jobs").exit_code == 0  # registers the job
    ((job_id,),) = sql("SELECT id FROM {schema}.jobs WHERE name = 'export'")
    return int(job_id)


def now_text(sql: Any) -> str:
    ((now,),) = sql("SELECT clock_timestamp()")
    return str(now.isoformat())


def consistent(sql: Any) -> None:
    """Every compacted run has no attempts left, every other settled one all of its own."""
    wrong = sql(
        "SELECT r.period_start FROM {schema}.periods r"
        " LEFT JOIN LATERAL (SELECT count(*) AS n FROM {schema}.history h"
        "   WHERE h.job_id = r.job_id AND h.key = r.key AND h.period_start = r.period_start) a"
        "   ON true"
        " WHERE (r.compacted_at IS NOT NULL AND a.n > 0)"
        "    OR (r.compacted_at IS NULL AND a.n <> r.attempt)"
    )
    assert wrong == []


def test_a_compaction_killed_mid_batch_resumes_and_loses_nothing(
    project: Project, sql: Any, database: Database
) -> None:
    job_id = hourly(project, sql)
    written = fill_settled(sql, job_id, ORIGIN, 3_000)
    before = now_text(sql)
    # a person holds one run in the middle (a mark, say): the batch that reaches it waits there,
    # its transaction open, having locked the runs before it
    held = psycopg.connect(database.conninfo)
    held.execute(
        psycopg.sql.SQL(
            # (FOR UPDATE beside the OFFSET would lock every row it skips too)
            "SELECT 1 FROM {0}.runs WHERE id = (SELECT id FROM {0}.runs WHERE job_id = %s"
            " ORDER BY finished_at OFFSET 1700 LIMIT 1) FOR UPDATE"
        ).format(psycopg.sql.Identifier(project.schema)),
        [job_id],
    )
    proc = project.spawn("-q", "compact", "--until", before)
    # (pg_stat_activity's query text is cut at 1 kB, inside the statement's header comment)
    waiting = (
        f"SELECT array_agg(pid) FROM pg_stat_activity WHERE {held.info.backend_pid}"
        " = ANY(pg_blocking_pids(pid))"
    )
    wait_for(
        lambda: proc.poll() is not None or sql(waiting)[0][0] is not None,
        60,
        "the batch to wait on the held run",
    )
    assert proc.poll() is None, proc.communicate()
    ((blocked,),) = sql(waiting)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    # its backend waits on until the lock goes, then finds its client gone and rolls back
    held.rollback()
    held.close()
    gone = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)"
    wait_for(lambda: sql(gone, [blocked])[0][0] == 0, 30, "the killed batch's backend to end")
    ((compacted, counted),) = sql(
        "SELECT (SELECT count(*) FROM {schema}.periods WHERE compacted_at IS NOT NULL),"
        " (SELECT periods FROM {schema}.compaction WHERE job_id = %s)",
        [job_id],
    )
    # the batches before the held run committed (three of 500, or more smaller ones on a
    # slow server), the one that waited on it rolled back: a prefix, counted once
    assert compacted == counted and 0 < compacted <= 1_700
    prefix = sql(
        "SELECT count(*) FROM (SELECT compacted_at FROM {schema}.periods ORDER BY finished_at, id"
        " LIMIT %s) p WHERE compacted_at IS NOT NULL",
        [compacted],
    )
    assert prefix == [(compacted,)]
    consistent(sql)
    assert sql("SELECT count(*) FROM {schema}.periods")[0][0] == written
    report = json.loads(project.cli("-q", "compact", "--json", "--until", before).stdout)
    assert report["periods"] == written - compacted  # it went on from the cursor
    ((done, counted),) = sql(
        "SELECT (SELECT count(*) FROM {schema}.periods WHERE compacted_at IS NOT NULL),"
        " (SELECT periods FROM {schema}.compaction WHERE job_id = %s)",
        [job_id],
    )
    assert done == counted == written
    consistent(sql)


def test_two_compactors_racing_a_replay_count_every_period_once(project: Project, sql: Any) -> None:
    job_id = hourly(project, sql)
    # 4,000 hours, every 20th missing: 200 gaps for the replay among the settled ones
    written = fill_settled(sql, job_id, ORIGIN, 4_000, skip_every=20)
    before = now_text(sql)
    until = (ORIGIN + timedelta(hours=4_000)).isoformat()
    procs = [
        project.spawn("-q", "compact", "--json", "--until", before),
        project.spawn("-q", "replay", "--json", "--since", "2024-01-01", "--until", until),
        project.spawn("-q", "compact", "--json", "--until", before),
    ]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        outs.append(json.loads(out))
    compacted = outs[0]["periods"] + outs[2]["periods"]
    assert compacted == written  # each period compacted by one of them, none twice
    ((rows, done, counted),) = sql(
        "SELECT count(*), count(compacted_at), (SELECT periods FROM {schema}.compaction)"
        " FROM {schema}.periods"
    )
    assert (rows, done, counted) == (4_000, written, written)
    # the replayed periods ran once each, after the cutoff: their detail stays
    assert outs[1]["totals"]["succeeded"] == 200
    replayed = sql(
        "SELECT count(*), count(DISTINCT r.period_start) FROM {schema}.periods r"
        " JOIN {schema}.history h USING (job_id, key, period_start)"
        " WHERE r.compacted_at IS NULL"
    )
    assert replayed == [(200, 200)]
    consistent(sql)
    scan = json.loads(
        project.cli("-q", "scan", "--json", "--since", "2024-01-01", "--until", until).stdout
    )
    assert scan["jobs"][0]["succeeded"] == 4_000


def test_the_busy_turn_is_left_to_the_other_compactor(project: Project, sql: Any) -> None:
    """A compactor that finds another holding the job's turn leaves the job to it and says so."""
    job_id = hourly(project, sql)
    fill_settled(sql, job_id, ORIGIN, 10)
    conn = psycopg.connect(project.database.conninfo)
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtext('catchup compaction ' || %s), %s::integer)",
        [project.schema, job_id],
    )
    try:
        report = json.loads(project.cli("-q", "compact", "--json", "--until", now_text(sql)).stdout)
        assert report["jobs"][0]["busy"] is True and report["periods"] == 0
        assert (
            "another host is compacting it"
            in project.cli("-q", "compact", "--until", now_text(sql)).stdout
        )
    finally:
        conn.rollback()
        conn.close()
    assert (
        json.loads(project.cli("-q", "compact", "--json", "--until", now_text(sql)).stdout)[
            "periods"
        ]
        == 10
    )


def test_a_claim_meeting_a_batch_mid_move_is_refused_after_it(
    project: Project, sql: Any, database: Database
) -> None:
    """The window the compaction lock closes (sql/migrations/0020): a batch has deleted its runs
    rows and written their facts, and has not committed; a claim of one of those periods comes
    now. It must wait for the batch and then meet the fact, not find the row gone and run the
    period again."""
    job_id = hourly(project, sql)
    fill_settled(sql, job_id, ORIGIN, 40)
    target = ORIGIN + timedelta(hours=7)
    before = now_text(sql)
    # the batch's foreign-key check of its new facts (at the end of its statement, after the
    # move) waits for this lock on the job's row: the batch is held between move and commit
    held = psycopg.connect(database.conninfo)
    held.execute(
        psycopg.sql.SQL("SELECT 1 FROM {}.jobs WHERE id = %s FOR UPDATE").format(
            psycopg.sql.Identifier(project.schema)
        ),
        [job_id],
    )
    blocked_by = (
        "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"
        " AND backend_type = 'client backend'"
    )
    compactor = project.spawn("-q", "compact", "--until", before)
    claimer: Any = None
    try:
        wait_for(
            lambda: compactor.poll() is not None or bool(sql(blocked_by, [held.info.backend_pid])),
            60,
            "the batch to wait, its rows moved, on the held job row",
        )
        assert compactor.poll() is None, compactor.communicate()
        ((batch_pid,),) = sql(blocked_by, [held.info.backend_pid])
        moved = sql(
            "SELECT count(*) FROM {schema}.runs WHERE period_start = %s", [target]
        )  # (the batch has not committed: the row is still there for everyone else)
        assert moved == [(1,)]
        claimer = project.spawn("-q", "run", "export", "--period", target.isoformat())
        wait_for(
            lambda: claimer.poll() is not None or bool(sql(blocked_by, [batch_pid])),
            60,
            "the claim to wait for the batch",
        )
        assert claimer.poll() is None, claimer.communicate()
    finally:
        held.rollback()
        held.close()
    out, err = compactor.communicate(timeout=120)
    assert compactor.returncode == 0, err
    out, err = claimer.communicate(timeout=120)
    # refused as a succeeded period is: still one fact, in compacted, and no attempt since
    assert "ran" not in out, out + err
    assert sql(
        "SELECT status, attempt, compacted_at IS NOT NULL FROM {schema}.periods"
        " WHERE period_start = %s",
        [target],
    ) == [("succeeded", 2, True)]
    assert sql("SELECT count(*) FROM {schema}.runs WHERE period_start = %s", [target]) == [(0,)]
    assert sql("SELECT count(*) FROM {schema}.history WHERE period_start = %s", [target]) == [(0,)]
