"""The gap detector: each job's expected periods against the ledger, collapsed into ranges.

Two ways to the same answer. ``full`` is the plain detector (generate_series LEFT JOIN the
ledger, every period classified). The default reads only what can still hold gaps: the rows that
are not succeeded (a small partial index), and the holes between existing rows (the primary key)
only where no earlier scan has verified that every period has a row. Rows are never removed by
catchup, so that coverage stays true; when a person deletes rows, a trigger forgets it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

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


@dataclass(frozen=True)
class Target:
    """One job to scan: its config, its ledger id, whether it is paused."""

    job: Job
    job_id: int
    paused: bool


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
    """Scan one job; see :func:`scan_jobs`."""
    (result,) = scan_jobs(
        conn, schema, [Target(job, job_id, paused)], now=now, since=since, until=until, full=full
    )
    return result


def scan_jobs(
    conn: psycopg.Connection[Any],
    schema: str,
    targets: list[Target],
    *,
    now: datetime,
    since: datetime | None,
    until: datetime | None,
    full: bool = False,
    record: bool = True,
) -> list[JobScan]:
    """Classify every expected period of each job in its window, all in one snapshot and a
    handful of statements whatever the number of jobs; see the module docstring."""
    windows = {t.job_id: window(t.job, now, since, until) for t in targets}
    expected = {
        t.job_id: t.job.schedule.index(t.job.anchor, windows[t.job_id][1])
        - t.job.schedule.index(t.job.anchor, windows[t.job_id][0])
        for t in targets
    }
    active = [t for t in targets if expected[t.job_id] > 0]
    by_id = {t.job_id: t for t in targets}
    arrays: dict[str, Any] = {
        "job_ids": [t.job_id for t in active],
        "firsts": [windows[t.job_id][0] for t in active],
        "untils": [windows[t.job_id][1] for t in active],
        "steps": [t.job.schedule.sql_interval for t in active],
        "max_attempts": [t.job.max_attempts for t in active],
        "now": now,
    }
    states: dict[int, tuple[str, int]] = {}
    covered: dict[int, list[tuple[datetime, datetime]]] = {t.job_id: [] for t in targets}
    islands: dict[int, list[Island]] = {t.job_id: [] for t in targets}
    missing: dict[int, list[Island]] = {t.job_id: [] for t in targets}
    last_success: dict[int, datetime | None] = {}

    def q(name: str) -> sql.Composed:
        return sqlfiles.query(name, schema)

    # One snapshot for the coverage and the rows it vouches for.
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        conn.execute(q("scan_settings"))
        for job_id, sig, generation in conn.execute(q("scan_state"), arrays):
            states[job_id] = (sig, generation)
        if active and full:
            for t in active:
                first, end = windows[t.job_id]
                rows = conn.execute(
                    q("scan_full"),
                    {
                        "job_id": t.job_id,
                        "first": first,
                        "until": end,
                        "now": now,
                        "step": t.job.schedule.sql_interval,
                        "max_attempts": t.job.max_attempts,
                    },
                )
                islands[t.job_id] = [Island(*row[1:]) for row in rows]
        elif active:
            for job_id, first, last in conn.execute(q("coverage"), arrays):
                if states.get(job_id, ("", 0))[0] == signature(by_id[job_id].job):
                    covered[job_id].append((first, last))
            # Possibly millions of rows: read them in batches through a server-side cursor, and
            # let a one-period island share one datetime for its first and last.
            with conn.cursor(name="catchup_scan_unfinished", binary=True) as cur:
                cur.itersize = 20_000
                cur.execute(q("scan_unfinished"), arrays)
                while batch := cur.fetchmany(cur.itersize):
                    for job_id, state, first, last, count in batch:
                        islands[job_id].append(
                            Island(state, first, first if count == 1 else last, count)
                        )
            todo = [
                (t, lo, hi)
                for t in active
                for lo, hi in _uncovered(
                    t.job.schedule, t.job.anchor, *windows[t.job_id], covered[t.job_id]
                )
            ]
            if todo:
                rows = conn.execute(
                    q("scan_missing"),
                    {
                        "job_ids": [t.job_id for t, _, _ in todo],
                        "los": [lo for _, lo, _ in todo],
                        "his": [hi for _, _, hi in todo],
                        "steps": [t.job.schedule.sql_interval for t, _, _ in todo],
                    },
                )
                for job_id, first, last in rows:
                    schedule, anchor = by_id[job_id].job.schedule, by_id[job_id].job.anchor
                    count = schedule.index(anchor, last) - schedule.index(anchor, first) + 1
                    missing[job_id].append(Island("missing", first, last, count))
        for job_id, success in conn.execute(
            q("last_success"), {"job_ids": [t.job_id for t in targets]}
        ):
            last_success[job_id] = success

    results = []
    for t in targets:
        job, job_id = t.job, t.job_id
        first, end = windows[job_id]
        found = islands[job_id]
        if not full:
            found = sorted([*found, *missing[job_id]], key=lambda i: i.first)
        counts = dict.fromkeys(COUNTED_STATES, 0)
        for item in found:
            counts[item.state] += item.periods
        if full:
            holes = [i for i in found if i.state == "missing"]
        else:
            holes = missing[job_id]
            counts["succeeded"] = expected[job_id] - sum(
                v for k, v in counts.items() if k != "succeeded"
            )
        if expected[job_id] > 0 and record:
            present = _present(job.schedule, job.anchor, first, end, holes)
            _record_coverage(
                conn, schema, job, job_id, states.get(job_id), first, end, covered[job_id], present
            )
        results.append(
            JobScan(
                job=job.name,
                schedule=job.schedule.text,
                timezone=job.timezone,
                daily_or_longer=job.schedule.daily_or_longer,
                paused=t.paused,
                first=first if expected[job_id] else None,
                until=end if expected[job_id] else None,
                expected=expected[job_id],
                counts=counts,
                islands=tuple(i for i in found if i.state != "succeeded"),
                last_success=last_success.get(job_id),
            )
        )
    return results


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
    targets = [Target(job, rows[job.name].id, rows[job.name].paused_at is not None) for job in jobs]
    results = scan_jobs(
        session.conn, session.config.schema, targets, now=now, since=since, until=until, full=full
    )
    report_since = since or min((job.anchor for job in jobs), default=now)
    return ScanReport(generated_at=now, since=report_since, until=until or now, jobs=tuple(results))


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
