"""Schedule expressions (``daily``, ``every 15 minutes``, cron, ``RRULE:``) into schedules."""

from __future__ import annotations

from datetime import UTC

from .cron import parse_cron
from .rrule import parse_rrule
from .steps import Fixed, Schedule, WallStep
from .zones import (
    _EPOCH,
    _EPOCH_MONDAY,
    _EVERY,
    _LONGEST,
    _UNIT_SECONDS,
    ScheduleError,
    is_utc,
    zone,
)

# -- parsing ---------------------------------------------------------------------------------


def parse_schedule(text: str, timezone: str = "UTC", *, recorded: bool = False) -> Schedule:
    """``hourly``, ``daily``, ``weekly``, ``monthly``, ``every N minutes|hours|days|weeks``, a
    five-field cron expression (or ``@daily`` …), or ``RRULE:…``; evaluated in ``timezone``.

    Unbound: schedules that count from the job's start get it through :meth:`Schedule.bound`.
    ``recorded``: a schedule from the ledger's history, which an older catchup accepted: read
    without the refusals added since (a rule RFC 5545 forbids, a cron day years apart).
    """
    zone(timezone)
    words = " ".join(text.split()).lower()
    utc = is_utc(timezone)
    if words.startswith("rrule"):
        return parse_rrule(text, timezone, checked=not recorded)
    if words[:1] in ("@", "*") or words[:1].isdigit():
        return parse_cron(text, timezone, checked=not recorded)
    if words == "hourly":
        return Fixed(text, timezone, seconds=3600)
    if words in ("daily", "weekly"):
        days = 1 if words == "daily" else 7
        origin = _EPOCH if days == 1 else _EPOCH_MONDAY
        if utc:
            return Fixed(text, timezone, seconds=days * 86400, origin=origin.replace(tzinfo=UTC))
        return WallStep(text, timezone, days=days, origin=origin)
    if words == "monthly":
        return WallStep(text, timezone, months=1)
    match = _EVERY.fullmatch(words)
    if match:
        count = int(match.group(1) or 1)
        unit = match.group(2).rstrip("s")
        if count < 1:
            raise ScheduleError(f"schedule {text!r}: the count must be at least 1")
        if count * _UNIT_SECONDS[unit] > _LONGEST.total_seconds():
            raise ScheduleError(f"schedule {text[:60]!r}: periods are at most 3650 days long")
        if unit in ("day", "week") and not utc:
            days = count * (7 if unit == "week" else 1)
            return WallStep(text, timezone, days=days, counts_from_start=True)
        return Fixed(text, timezone, seconds=count * _UNIT_SECONDS[unit], counts_from_start=True)
    raise ScheduleError(
        f"unknown schedule {text!r}: expected hourly, daily, weekly, monthly, "
        "'every N minutes|hours|days|weeks', a cron expression like '30 2 * * *' or 'RRULE:…'"
    )
