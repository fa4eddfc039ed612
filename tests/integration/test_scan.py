"""The gap detector against a brute-force computation on random ledgers, shortcut and full."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catchup.config import Job
from catchup.ledger import Ledger
from catchup.models import Island
from catchup.scan import scan_job
from catchup.schedule import parse_schedule

from conftest import Database

SCHEDULES = [
    "hourly",
    "daily",
    "weekly",
    "monthly",
    "every 15 minutes",
    "every 3 hours",
    "every 2 days",
]
ROW_STATES = ["none", "succeeded", "waived", "running", "stale", "failed", "exhausted"]
BASE = datetime(2025, 3, 1, tzinfo=UTC)


@pytest.fixture
def ledger(database: Database, schema: str) -> Iterator[Ledger]:
    conn = psycopg.connect(database.conninfo, autocommit=True)
    # A session zone behind UTC: monthly periods must still be UTC months.
    conn.execute("SET TimeZone = 'America/New_York'")
    ledger = Ledger(conn, schema)
    ledger.migrate()
    yield ledger
    conn.close()


def make_job(text: str, start: datetime, max_attempts: int) -> Job:
    schedule = parse_schedule(text)
    return Job(
        name="j",
        schedule=schedule,
        start=start,
        anchor=schedule.anchor(start),
        command=("true",),
        max_attempts=max_attempts,
    )


def write_ledger(ledger: Ledger, job: Job, job_id: int, states: list[str]) -> None:
    schema = ledger.schema
    ledger.conn.execute(f"TRUNCATE {schema}.runs, {schema}.coverage, {schema}.scan_state")
    rows = []
    for k, state in enumerate(states):
        if state == "none":
            continue
        period = job.schedule.period(job.anchor, k)
        status = {"stale": "running", "exhausted": "failed"}.get(state, state)
        failures = job.max_attempts if state == "exhausted" else 0
        lease = timedelta(hours=1) if state == "running" else timedelta(hours=-1)
        rows.append((job_id, period.start, period.end, status, failures + 1, failures, lease))
    with ledger.conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {ledger.schema}.runs (job_id, period_start, period_end, status, "
            "attempt, failures, lease_expires_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, clock_timestamp() + %s)",
            rows,
        )


def brute_force(
    job: Job, states: list[str], since: datetime | None, until: datetime
) -> list[tuple[str, datetime, datetime, int]]:
    """Every expected period, one by one, then runs of one state: the slow obvious way."""
    labelled = []
    for k, state in enumerate(states):
        start = job.schedule.nth(job.anchor, k)
        if start >= until or (since is not None and start < since):
            continue
        labelled.append((start, "missing" if state == "none" else state))
    islands: list[list[Any]] = []
    for start, state in labelled:
        if islands and islands[-1][0] == state:
            islands[-1][2] = start
            islands[-1][3] += 1
        else:
            islands.append([state, start, start, 1])
    return [tuple(i) for i in islands if i[0] != "succeeded"]  # type: ignore[misc]


def as_tuples(islands: tuple[Island, ...]) -> list[tuple[str, datetime, datetime, int]]:
    return [(i.state, i.first, i.last, i.periods) for i in islands]


ledgers = st.tuples(
    st.sampled_from(SCHEDULES),
    st.integers(0, 500),  # start offset in hours
    st.lists(st.sampled_from(ROW_STATES), min_size=0, max_size=60),
    st.integers(1, 3),  # max_attempts
    st.one_of(st.none(), st.integers(-3, 62)),  # --since, as a period number
    st.booleans(),  # --since between two boundaries
)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=ledgers)
def test_scan_agrees_with_brute_force(ledger: Ledger, case: Any) -> None:
    """Shortcut and full scan both equal a period-by-period computation; so does a second scan
    that trusts the first one's coverage, one after a succeeded period is reopened, and one
    after a row inside verified coverage is deleted by hand."""
    text, offset, states, max_attempts, since_k, between = case
    job = make_job(text, BASE + timedelta(hours=offset), max_attempts)
    job_id = ledger.register_jobs(["j"])["j"].id
    write_ledger(ledger, job, job_id, states)
    until = job.schedule.nth(job.anchor, len(states))
    since = None
    if since_k is not None:
        since = job.schedule.nth(job.anchor, since_k)
        if between:
            since += timedelta(minutes=1)
    now = ledger.now()

    def check(expected_islands: list[Any]) -> None:
        for full in (False, True):
            result = scan_job(
                ledger.conn,
                ledger.schema,
                job,
                job_id,
                now=now,
                since=since,
                until=until,
                paused=False,
                full=full,
            )
            assert as_tuples(result.islands) == expected_islands, f"full={full}"
            counted = sum(result.counts.values())
            assert counted == result.expected
            assert result.expected == sum(
                1
                for k in range(len(states))
                if since is None or job.schedule.nth(job.anchor, k) >= since
            )

    expected_islands = brute_force(job, states, since, until)
    check(expected_islands)
    check(expected_islands)  # again, now with whatever coverage the first scan recorded
    # reopen the earliest succeeded period (a reset by hand) and scan again
    if "succeeded" in states:
        k = states.index("succeeded")
        ledger.conn.execute(
            f"UPDATE {ledger.schema}.runs SET status = 'failed', failures = 0 "
            "WHERE period_start = %s",
            [job.schedule.nth(job.anchor, k)],
        )
        states = [*states[:k], "failed", *states[k + 1 :]]
        check(brute_force(job, states, since, until))


def test_coverage_is_recorded_trusted_and_forgotten_on_delete(
    ledger: Ledger, sql: Callable[..., Any]
) -> None:
    job = make_job("hourly", BASE, 3)
    job_id = ledger.register_jobs(["j"])["j"].id
    states = ["succeeded"] * 50 + ["none"] * 5 + ["succeeded"] * 45
    write_ledger(ledger, job, job_id, states)
    until = job.schedule.nth(job.anchor, 100)
    now = ledger.now()

    def scan() -> Any:
        return scan_job(
            ledger.conn, ledger.schema, job, job_id, now=now, since=None, until=until, paused=False
        )

    assert scan().counts["missing"] == 5
    nth = job.schedule.nth
    coverage = sql("SELECT first, last FROM {schema}.coverage ORDER BY first")
    assert coverage == [
        (nth(job.anchor, 0), nth(job.anchor, 49)),
        (nth(job.anchor, 55), nth(job.anchor, 99)),
    ]
    (generation,) = sql("SELECT generation FROM {schema}.scan_state")[0]
    # a steady-state scan trusts it and writes nothing
    assert scan().counts["missing"] == 5
    assert sql("SELECT first, last FROM {schema}.coverage ORDER BY first") == coverage
    # a hand-made delete inside coverage drops that coverage and bumps the generation
    sql("DELETE FROM {schema}.runs WHERE period_start = %s", [nth(job.anchor, 10)])
    assert sql("SELECT first FROM {schema}.coverage ORDER BY first") == [(nth(job.anchor, 55),)]
    assert sql("SELECT generation FROM {schema}.scan_state") == [(generation + 1,)]
    result = scan()
    assert result.counts["missing"] == 6
    assert [(i.first, i.periods) for i in result.gaps] == [
        (nth(job.anchor, 10), 1),
        (nth(job.anchor, 50), 5),
    ]
    # a different start invalidates coverage instead of trusting it
    moved = replace(job, anchor=nth(job.anchor, -24))
    earlier = scan_job(
        ledger.conn, ledger.schema, moved, job_id, now=now, since=None, until=until, paused=False
    )
    assert earlier.counts["missing"] == 6 + 24
