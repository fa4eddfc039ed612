"""A scan result as a heat map for people: one cell per local day (rows are months) or per
local hour (rows are days), each holding the worst state of the periods it touches (and, for a
job with keys, how many of its keys have a gap there)."""

from __future__ import annotations

import bisect
import calendar as calendar_module
from datetime import datetime, time, timedelta
from typing import Literal

from ..config.job import Job
from ..results import Calendar, JobScan
from ..schedule import to_utc, to_wall, zone
from ..vocabulary import PeriodState

SEVERITY: tuple[PeriodState, ...] = tuple(PeriodState)  # mildest first
CALENDAR_MONTHS = 3
CALENDAR_DAYS = 7


def calendar(job: Job, result: JobScan) -> Calendar:
    """The last few months (daily or longer) or days (shorter) of ``result`` as a grid, laid
    out on the job's local calendar (UTC unless it has a time zone)."""
    timeline = job.timeline
    tz = zone(job.timezone)
    if result.first is None or result.until is None:
        return Calendar(job.name, "day", (), False, job.timezone)
    first, end = result.first, result.until
    starts = [i.first for i in result.ranges]

    def state_of(start: datetime) -> str:
        for range_ in reversed(result.ranges[: _bisect(starts, start)]):
            if range_.first <= start <= range_.last:
                return range_.state
            break
        return PeriodState.succeeded

    def cell(lo_wall: datetime, hi_wall: datetime) -> str | None:
        """The worst state of the periods that start in a local interval."""
        lo, hi = max(to_utc(lo_wall, tz), first), min(to_utc(hi_wall, tz), end)
        if lo >= hi:
            return None
        states = [state_of(s) for s in timeline.starts(lo, hi)]
        return max(states, key=SEVERITY.index) if states else None

    last_day = datetime.combine(to_wall(end - timedelta(seconds=1), tz).date(), time(0))
    first_day = datetime.combine(to_wall(first, tz).date(), time(0))
    # each row's cells as local intervals [lo, hi)
    grid: list[tuple[str, list[tuple[datetime, datetime]]]] = []
    if job.schedule.daily_or_longer:
        unit: Literal["day", "hour"] = "day"
        month = last_day.replace(day=1)
        months = []
        while month >= first_day.replace(day=1):
            months.append(month)
            month = (month - timedelta(days=1)).replace(day=1)
        truncated = len(months) > CALENDAR_MONTHS
        for month in reversed(months[:CALENDAR_MONTHS]):
            days_in = calendar_module.monthrange(month.year, month.month)[1]
            spans = [
                (month + timedelta(days=d), month + timedelta(days=d + 1)) for d in range(days_in)
            ]
            grid.append((month.strftime("%Y-%m"), spans))
    else:
        unit = "hour"
        days = (last_day - first_day).days + 1
        shown = min(days, CALENDAR_DAYS)
        truncated = days > shown
        for d in range(shown - 1, -1, -1):
            day = last_day - timedelta(days=d)
            spans = [(day + timedelta(hours=h), day + timedelta(hours=h + 1)) for h in range(24)]
            grid.append((day.strftime("%Y-%m-%d"), spans))
    rows = tuple((label, tuple(cell(lo, hi) for lo, hi in spans)) for label, spans in grid)
    if not result.keys:
        return Calendar(job.name, unit, rows, truncated, job.timezone)
    counts, named = _key_gaps(job, result, grid)
    return Calendar(job.name, unit, rows, truncated, job.timezone, result.keys, counts, named)


def _key_gaps(
    job: Job, result: JobScan, grid: list[tuple[str, list[tuple[datetime, datetime]]]]
) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[str, ...], ...]]:
    """How many keys have a period in a gap in each cell of ``grid`` (a keyed job's), and the
    key when there is one ('' else)."""
    tz = zone(job.timezone)
    timeline = job.timeline
    cells = [(to_utc(lo, tz), to_utc(hi, tz)) for _, spans in grid for lo, hi in spans]
    if not cells:
        return (), ()
    los = [lo for lo, _ in cells]
    held: list[set[str]] = [set() for _ in cells]
    shown_lo, shown_hi = cells[0][0], cells[-1][1]
    for r in result.key_ranges:
        if not PeriodState(r.state).is_gap or r.last < shown_lo or r.first >= shown_hi:
            continue
        lo, hi = max(r.first, shown_lo), min(timeline.after(r.last), shown_hi)
        for start in timeline.starts(lo, hi):
            n = bisect.bisect_right(los, start) - 1
            if n >= 0 and start < cells[n][1]:
                held[n].add(r.key)
    out: list[tuple[int, ...]] = []
    named: list[tuple[str, ...]] = []
    at = 0
    for _, spans in grid:
        out.append(tuple(len(held[at + i]) for i in range(len(spans))))
        row = held[at : at + len(spans)]
        named.append(tuple(next(iter(h)) if len(h) == 1 else "" for h in row))
        at += len(spans)
    return tuple(out), tuple(named)


def _bisect(starts: list[datetime], t: datetime) -> int:
    return bisect.bisect_right(starts, t)
