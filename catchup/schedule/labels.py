"""The names of periods: ``{period}`` for a job's command, and the one label people see."""

from __future__ import annotations

from datetime import datetime, time

from .steps import Schedule, Wall
from .zones import as_utc, is_utc, iso_utc, to_utc, to_wall, zone

# -- labels ---


def period_label(schedule: Schedule, start: datetime) -> str:
    """``{period}``: the (local) date for daily-or-longer schedules starting at midnight, else
    an ISO 8601 UTC time."""
    start = as_utc(start)
    if schedule.daily_or_longer:
        tz = zone(schedule.timezone)
        midnight = datetime.combine(to_wall(start, tz).date(), time(0))
        if midnight == to_wall(start, tz):
            return midnight.date().isoformat()
        # a midnight the clocks skip (America/Santiago, 2026-09-06) starts its day later: the
        # period is still that local day's
        if (
            isinstance(schedule, Wall)
            and to_utc(midnight, tz) == start
            and next(schedule.walls_from(midnight), None) == midnight
        ):
            return midnight.date().isoformat()
    return iso_utc(start)


def human_label(schedule: Schedule, start: datetime) -> str:
    """The one name people see for a period: :func:`period_label`, and where that is a UTC time
    of a job with a zone, the local time beside it (``2026-10-31T13:00:00Z (14:00 CET)``; the
    local date too when it differs from the UTC one)."""
    label = period_label(schedule, start)
    if is_utc(schedule.timezone) or len(label) == 10:
        return label
    start = as_utc(start)
    local = start.astimezone(zone(schedule.timezone))
    shown = f"{local:%H:%M %Z}" if local.date() == start.date() else f"{local:%Y-%m-%d %H:%M %Z}"
    return f"{label} ({shown})"
