"""The gap detector against a brute-force computation on random ledgers, shortcut and full."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import Any

import psycopg
import pytest
from fix_db import Database
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from catchup.config.loading import Job
from catchup.ledger import Ledger
from catchup.results import Range
from catchup.scan.detector import scan_job
from catchup.schedule import RRule, Timeline, parse_schedule
from catchup.schedule.reconcile import changed

SCHEDULES = [
    "hourly",
    "daily",
    "weekly",
    "monthly",
    "every 15 minutes",
    "every 3 hours",
    "every 2 days",
    "30 2 * * *",
    "0 */5 * * 1-5",
    "0,30 9-17 * * *",
    "RRULE:FREQ=WEEKLY;BYDAY=MO,TH;BYHOUR=6",
]
ZONES = ["UTC", "UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]
FAR = datetime(2100, 1, 1, tzinfo=UTC)
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


def make_job(
    text: str,
    start: datetime,
    max_attempts: int,
    timezone: str = "UTC",
    change: tuple[str, int] | None = None,
) -> Job:
    """A job; with ``change``, its schedule changes to another at its period number k."""
    schedule = parse_schedule(text, timezone)
    timeline = Timeline.single(schedule, start)
    if change is not None:
        since = nth_start(timeline, change[1])
        new = parse_schedule(change[0], timezone)
        # as catchup.schedule.effective_from does: a rule counts from the job's start, other
        # schedules from the change (a rule bound to the change could put it off the rule's
        # grid: an impossible timeline, which hypothesis found)
        grid = new.bound(start) if isinstance(new, RRule) else new.bound(since)
        timeline = changed(timeline, new, grid.ceil(since), start)
    return Job(
        name="j",
        schedule=schedule.bound(start),
        start=start,
        timeline=timeline,
        command=("true",),
        max_attempts=max_attempts,
        timezone=timezone,
    )


def nth_start(timeline: Timeline, k: int) -> datetime:
    """The start of period k from the first (k may be negative)."""
    if k < 0:
        t = timeline.first
        for _ in range(-k):
            found = next(timeline.segments[0].schedule.desc(t), None)
            t = found if found is not None else t - timedelta(days=1)  # a rule begins at start
        return t
    return next(islice(timeline.starts(timeline.first, FAR), k, None))


def due_end(job: Job, now: datetime) -> datetime:
    """The end of the latest due period: starts from here on are not due yet."""
    latest = job.timeline.latest_due(job.delay, now)
    return latest.end if latest else job.anchor


def nth(job: Job, k: int) -> datetime:
    return nth_start(job.timeline, k)


def write_ledger(ledger: Ledger, job: Job, job_id: int, states: list[str]) -> None:
    schema = ledger.schema
    ledger.conn.execute(f"TRUNCATE {schema}.runs, {schema}.coverage, {schema}.scan_state")
    rows = []
    for k, state in enumerate(states):
        if state == "none":
            continue
        period = job.timeline.period(nth(job, k))
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
        start = nth(job, k)
        if start >= until or (since is not None and start < since):
            continue
        labelled.append((start, "missing" if state == "none" else state))
    ranges: list[list[Any]] = []
    for start, state in labelled:
        if ranges and ranges[-1][0] == state:
            ranges[-1][2] = start
            ranges[-1][3] += 1
        else:
            ranges.append([state, start, start, 1])
    return [tuple(i) for i in ranges if i[0] != "succeeded"]


def as_tuples(ranges: tuple[Range, ...]) -> list[tuple[str, datetime, datetime, int]]:
    return [(i.state, i.first, i.last, i.periods) for i in ranges]


ledgers = st.tuples(
    st.tuples(
        st.sampled_from(SCHEDULES),
        st.sampled_from(ZONES),
        st.one_of(st.none(), st.tuples(st.sampled_from(SCHEDULES), st.integers(1, 40))),
    ),
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
# A period cut short by a schedule change: its start is on the old grid, its end is not.
@example(case=(("hourly", "UTC", ("30 2 * * *", 1)), 0, ["none"] * 3, 1, None, False))
# A change to a rule, which counts from the job's start, not from the change.
@example(
    case=(
        ("30 2 * * *", "UTC", ("RRULE:FREQ=WEEKLY;BYDAY=MO,TH;BYHOUR=6", 1)),
        0,
        ["none", "none", "waived", "waived"],
        1,
        None,
        False,
    )
)
def test_scan_agrees_with_brute_force(ledger: Ledger, case: Any) -> None:
    """Shortcut and full scan both equal a period-by-period computation; so does a second scan
    that trusts the first one's coverage, one after a succeeded period is reopened, and one
    after a row inside verified coverage is deleted by hand."""
    (text, timezone, change), offset, states, max_attempts, since_k, between = case
    job = make_job(text, BASE + timedelta(hours=offset), max_attempts, timezone, change)
    job_id = ledger.register_jobs(["j"])["j"].id
    write_ledger(ledger, job, job_id, states)
    until = nth(job, len(states))
    since = None
    if since_k is not None:
        since = nth(job, since_k)
        if between:
            since += timedelta(minutes=1)
    now = ledger.now()

    def check(expected_ranges: list[Any]) -> None:
        for full in (False, True):
            result = scan_job(
                ledger,
                job,
                job_id,
                now=now,
                since=since,
                until=until,
                paused=False,
                full=full,
            )
            assert as_tuples(result.ranges) == expected_ranges, f"full={full}"
            counted = sum(result.counts.values())
            assert counted == result.expected
            assert result.expected == sum(
                1
                for k in range(len(states))
                if (since is None or nth(job, k) >= since)
                and job.timeline.after(nth(job, k)) <= now
            )

    expected_ranges = brute_force(job, states, since, min(until, due_end(job, now)))
    check(expected_ranges)
    check(expected_ranges)  # again, now with whatever coverage the first scan recorded
    # reopen the earliest succeeded period (a reset by hand) and scan again
    if "succeeded" in states:
        k = states.index("succeeded")
        ledger.conn.execute(
            f"UPDATE {ledger.schema}.runs SET status = 'failed', failures = 0 "
            "WHERE period_start = %s",
            [nth(job, k)],
        )
        states = [*states[:k], "failed", *states[k + 1 :]]
        check(brute_force(job, states, since, min(until, due_end(job, now))))


def test_coverage_is_recorded_trusted_and_forgotten_on_delete(
    ledger: Ledger, sql: Callable[..., Any]
) -> None:
    job = make_job("hourly", BASE, 3)
    job_id = ledger.register_jobs(["j"])["j"].id
    states = ["succeeded"] * 50 + ["none"] * 5 + ["succeeded"] * 45
    write_ledger(ledger, job, job_id, states)
    until = nth(job, 100)
    now = ledger.now()

    def scan() -> Any:
        return scan_job(ledger, job, job_id, now=now, since=None, until=until, paused=False)

    assert scan().counts["missing"] == 5
    coverage = sql("SELECT first, last FROM {schema}.coverage ORDER BY first")
    assert coverage == [
        (nth(job, 0), nth(job, 49)),
        (nth(job, 55), nth(job, 99)),
    ]
    (generation,) = sql("SELECT generation FROM {schema}.scan_state")[0]
    # a steady-state scan trusts it and writes nothing
    assert scan().counts["missing"] == 5
    assert sql("SELECT first, last FROM {schema}.coverage ORDER BY first") == coverage
    # a hand-made delete inside coverage drops that coverage and bumps the generation
    sql("DELETE FROM {schema}.runs WHERE period_start = %s", [nth(job, 10)])
    assert sql("SELECT first FROM {schema}.coverage ORDER BY first") == [(nth(job, 55),)]
    assert sql("SELECT generation FROM {schema}.scan_state") == [(generation + 1,)]
    result = scan()
    assert result.counts["missing"] == 6
    assert [(i.first, i.periods) for i in result.gaps] == [
        (nth(job, 10), 1),
        (nth(job, 50), 5),
    ]
    # a different start invalidates coverage instead of trusting it
    moved = replace(job, timeline=Timeline.single(job.schedule, nth(job, -24)))
    earlier = scan_job(ledger, moved, job_id, now=now, since=None, until=until, paused=False)
    assert earlier.counts["missing"] == 6 + 24
