"""The gap detector: each job's expected periods against the ledger, collapsed into ranges.

Two ways to the same answer. ``full`` is the plain detector (generate_series LEFT JOIN the
ledger, every period classified). The default reads only what can still hold gaps: the rows that
are not succeeded (a small partial index), and the holes between existing rows (the primary key)
only where no earlier scan has verified that every period has a row. Rows are never removed by
catchup, so that coverage stays true; when a person deletes rows, a trigger forgets it.
"""

from __future__ import annotations

import bisect
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import class_row

from . import sqlfiles
from .config import Job
from .errors import ConfigError
from .models import COUNTED_STATES, Calendar, Island, JobScan, ScanReport
from .schedule import Schedule, iso_utc


def window(
    job: Job, now: datetime, since: datetime | None, until: datetime | None
) -> tuple[datetime, datetime]:
    """``[first, end)``: the period starts a scan expects, both on the job's grid.

    ``first`` is the first start at or after ``since`` (and the job's start); ``end`` excludes
    periods starting at or after ``until`` and periods not yet due.
    """
    schedule, anchor = job.schedule, job.anchor
    first = anchor if since is None or since <= anchor else _ceil(schedule, anchor, since)
    latest = schedule.latest_due(anchor, job.delay, now)
    end = latest.end if latest else anchor
    if until is not None:
        end = min(end, max(anchor, _ceil(schedule, anchor, until)))
    return first, max(first, end)


def _ceil(schedule: Schedule, anchor: datetime, t: datetime) -> datetime:
    k = schedule.index(anchor, t)
    start = schedule.nth(anchor, k)
    return start if start >= t else schedule.nth(anchor, k + 1)


def signature(job: Job) -> str:
    """What coverage is valid for: the schedule's step and the first period."""
    return f"{job.schedule.sql_interval}@{iso_utc(job.anchor)}"


def _uncovered(
    schedule: Schedule,
    anchor: datetime,
    first: datetime,
    end: datetime,
    covered: list[tuple[datetime, datetime]],
) -> list[tuple[datetime, datetime]]:
    """The parts of ``[first, end)`` that no coverage range vouches for, as ``[lo, hi)``."""
    gaps = []
    cursor = first
    for lo, last in covered:
        hi = schedule.nth(anchor, schedule.index(anchor, last) + 1)
        if lo > cursor:
            gaps.append((cursor, min(lo, end)))
        cursor = max(cursor, hi)
        if cursor >= end:
            break
    if cursor < end:
        gaps.append((cursor, end))
    return [(lo, hi) for lo, hi in gaps if lo < hi]


def _present(
    schedule: Schedule, anchor: datetime, first: datetime, end: datetime, missing: list[Island]
) -> list[tuple[datetime, datetime]]:
    """Coverage for ``[first, end)``: every period but the missing ones, as (first, last)."""
    ranges = []
    cursor = first
    for hole in missing:
        if hole.first > cursor:
            ranges.append((cursor, schedule.nth(anchor, schedule.index(anchor, hole.first) - 1)))
        cursor = schedule.nth(anchor, schedule.index(anchor, hole.last) + 1)
    if cursor < end:
        ranges.append((cursor, schedule.nth(anchor, schedule.index(anchor, end) - 1)))
    return ranges


def scan_job(
    conn: psycopg.Connection[Any],
    schema: str,
    job: Job,
    job_id: int,
    *,
    now: datetime,
    since: datetime | None,
    until: datetime | None,
    paused: bool,
    full: bool = False,
) -> JobScan:
    """Classify every expected period of ``job`` in the window; see the module docstring."""
    schedule, anchor = job.schedule, job.anchor
    first, end = window(job, now, since, until)
    expected = schedule.index(anchor, end) - schedule.index(anchor, first)
    params: dict[str, Any] = {
        "job_id": job_id,
        "step": schedule.sql_interval,
        "max_attempts": job.max_attempts,
        "now": now,
        "first": first,
        "until": end,
    }
    state = None
    covered: list[tuple[datetime, datetime]] = []
    islands: list[Island] = []
    missing: list[Island] = []

    def q(name: str) -> sql.Composed:
        return sqlfiles.query(name, schema)

    # One snapshot for the coverage and the rows it vouches for.
    with conn.transaction(), conn.cursor(row_factory=class_row(Island)) as cur:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        conn.execute(q("scan_settings"))
        state = conn.execute(q("scan_state"), params).fetchone()
        if expected > 0:
            if full:
                islands = cur.execute(q("scan_full"), params).fetchall()
            else:
                if state is not None and state[0] == signature(job):
                    covered = [(a, b) for a, b in conn.execute(q("coverage"), params)]
                todo = _uncovered(schedule, anchor, first, end, covered)
                islands = cur.execute(q("scan_unfinished"), params).fetchall()
                if todo:
                    found = cur.execute(
                        q("scan_missing"),
                        {
                            **params,
                            "los": [lo for lo, _ in todo],
                            "his": [hi for _, hi in todo],
                        },
                    ).fetchall()
                    missing = [
                        Island(
                            "missing",
                            hole.first,
                            hole.last,
                            schedule.index(anchor, hole.last)
                            - schedule.index(anchor, hole.first)
                            + 1,
                        )
                        for hole in found
                    ]
                    islands = sorted([*islands, *missing], key=lambda island: island.first)
        row = conn.execute(q("last_success"), params).fetchone()
    last_success = row[0] if row else None

    counts = dict.fromkeys(COUNTED_STATES, 0)
    for island in islands:
        counts[island.state] += island.periods
    if not full:
        counts["succeeded"] = expected - sum(v for k, v in counts.items() if k != "succeeded")
    else:
        missing = [i for i in islands if i.state == "missing"]
    if expected > 0:
        present = _present(schedule, anchor, first, end, missing)
        _record_coverage(conn, schema, job, job_id, state, first, end, covered, present)
    return JobScan(
        job=job.name,
        schedule=schedule.text,
        timezone=job.timezone,
        daily_or_longer=schedule.daily_or_longer,
        paused=paused,
        first=first if expected else None,
        until=end if expected else None,
        expected=expected,
        counts=counts,
        islands=tuple(i for i in islands if i.state != "succeeded"),
        last_success=last_success,
    )


def _record_coverage(
    conn: psycopg.Connection[Any],
    schema: str,
    job: Job,
    job_id: int,
    state: tuple[Any, ...] | None,
    first: datetime,
    end: datetime,
    covered: list[tuple[datetime, datetime]],
    present: list[tuple[datetime, datetime]],
) -> None:
    """Remember which periods have rows, unless rows disappeared since the scan read them."""
    mine = signature(job)
    clipped = [(max(a, first), b) for a, b in covered if b >= first]
    if state is not None and state[0] == mine and clipped == present:
        return  # nothing new learned: a steady-state scan writes nothing
    params = {
        "job_id": job_id,
        "signature": mine,
        "first": first,
        "until": end,
        "firsts": [a for a, _ in present],
        "lasts": [b for _, b in present],
    }
    try:
        with conn.transaction():
            if state is None:
                opened = conn.execute(sqlfiles.query("open_scan_state", schema), params)
                if opened.fetchone() is None:
                    return  # created meanwhile, perhaps by a deletion: learn it next time
            else:
                current = conn.execute(sqlfiles.query("lock_scan_state", schema), params).fetchone()
                if current is None or current[1] != state[1]:
                    return  # rows were removed since the scan's snapshot
                if current[0] != mine:
                    conn.execute(sqlfiles.query("reset_coverage", schema), params)
            conn.execute(sqlfiles.query("replace_coverage", schema), params)
    except psycopg.errors.InsufficientPrivilege:
        pass  # a read-only role can scan; it just cannot remember what it learned


def scan(
    session: Any,
    jobs: list[Job],
    *,
    since: datetime | None,
    until: datetime | None,
    full: bool = False,
) -> ScanReport:
    """Scan ``jobs`` on the database clock; the report the CLI renders and the API returns."""
    if since is not None and until is not None and since >= until:
        raise ConfigError(f"--since {iso_utc(since)} is not before --until {iso_utc(until)}")
    now = session.now()
    rows = session.ledger.register_jobs(sorted(session.config.jobs))
    results = tuple(
        scan_job(
            session.conn,
            session.config.schema,
            job,
            rows[job.name].id,
            now=now,
            since=since,
            until=until,
            paused=rows[job.name].paused_at is not None,
            full=full,
        )
        for job in jobs
    )
    report_since = since or min((job.anchor for job in jobs), default=now)
    return ScanReport(generated_at=now, since=report_since, until=until or now, jobs=results)


SEVERITY = ("succeeded", "waived", "running", "missing", "stale", "failed", "exhausted")
CALENDAR_MONTHS = 3
CALENDAR_DAYS = 7


def calendar(job: Job, result: JobScan) -> Calendar:
    """The last few months (daily or longer) or days (shorter) of ``result`` as a grid."""
    schedule, anchor = job.schedule, job.anchor
    if result.first is None or result.until is None:
        return Calendar(job.name, "day", (), False)
    first, end = result.first, result.until
    starts = [i.first for i in result.islands]

    def state_of(k: int) -> str:
        start = schedule.nth(anchor, k)
        for island in reversed(result.islands[: _bisect(starts, start)]):
            if island.first <= start <= island.last:
                return island.state
            break
        return "succeeded"

    def cell(lo: datetime, hi: datetime) -> str | None:
        lo, hi = max(lo, first), min(hi, end)
        if lo >= hi:
            return None
        ks = range(
            schedule.index(anchor, lo), schedule.index(anchor, hi - timedelta(seconds=1)) + 1
        )
        return max((state_of(k) for k in ks), key=SEVERITY.index)

    rows: list[tuple[str, tuple[str | None, ...]]] = []
    if schedule.daily_or_longer:
        last_day = (end - timedelta(seconds=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        month = last_day.replace(day=1)
        months = []
        while month >= first.replace(day=1, hour=0, minute=0, second=0, microsecond=0):
            months.append(month)
            month = (month - timedelta(days=1)).replace(day=1)
        truncated = len(months) > CALENDAR_MONTHS
        for month in reversed(months[:CALENDAR_MONTHS]):
            cells = []
            for offset in range(31):
                lo = month + timedelta(days=offset)
                cells.append(cell(lo, lo + timedelta(days=1)) if lo.month == month.month else None)
            rows.append((month.strftime("%Y-%m"), tuple(cells)))
        return Calendar(job.name, "day", tuple(rows), truncated)
    last_day = (end - timedelta(seconds=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    first_day = first.replace(hour=0, minute=0, second=0, microsecond=0)
    days = (last_day - first_day).days + 1
    shown = min(days, CALENDAR_DAYS)
    for d in range(shown - 1, -1, -1):
        day = last_day - timedelta(days=d)
        cells = [cell(day + timedelta(hours=h), day + timedelta(hours=h + 1)) for h in range(24)]
        rows.append((day.strftime("%Y-%m-%d"), tuple(cells)))
    return Calendar(job.name, "hour", tuple(rows), days > shown)


def _bisect(starts: list[datetime], t: datetime) -> int:
    return bisect.bisect_right(starts, t)
