"""A scan result as a heat map for people: one cell per local day (rows are months) or per
local hour (rows are days), each holding the worst state of the periods it touches."""

from __future__ import annotations

import bisect
import calendar as calendar_module
from datetime import datetime, time, timedelta

from .job import Job
from .models import Calendar, JobScan
from .schedule import to_utc, to_wall, zone
from .vocabulary import PeriodState

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
    rows: list[tuple[str, tuple[str | None, ...]]] = []
    if job.schedule.daily_or_longer:
        month = last_day.replace(day=1)
        months = []
        while month >= first_day.replace(day=1):
            months.append(month)
            month = (month - timedelta(days=1)).replace(day=1)
        truncated = len(months) > CALENDAR_MONTHS
        for month in reversed(months[:CALENDAR_MONTHS]):
            cells = []
            for offset in range(calendar_module.monthrange(month.year, month.month)[1]):
                lo = month + timedelta(days=offset)
                cells.append(cell(lo, lo + timedelta(days=1)))
            rows.append((month.strftime("%Y-%m"), tuple(cells)))
        return Calendar(job.name, "day", tuple(rows), truncated, job.timezone)
    days = (last_day - first_day).days + 1
    shown = min(days, CALENDAR_DAYS)
    for d in range(shown - 1, -1, -1):
        day = last_day - timedelta(days=d)
        cells = [cell(day + timedelta(hours=h), day + timedelta(hours=h + 1)) for h in range(24)]
        rows.append((day.strftime("%Y-%m-%d"), tuple(cells)))
    return Calendar(job.name, "hour", tuple(rows), days > shown, job.timezone)


def _bisect(starts: list[datetime], t: datetime) -> int:
    return bisect.bisect_right(starts, t)
