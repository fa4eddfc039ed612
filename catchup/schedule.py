"""Period arithmetic: pure functions of a schedule, an anchor and ``now``; no I/O, no clock."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dateutil.relativedelta import relativedelta

_EPOCH_MONDAY = datetime(1970, 1, 5, tzinfo=UTC)  # a Monday, for weekly alignment
_EVERY = re.compile(
    r"^every\s+(?:(\d+)\s+)?(minute|minutes|hour|hours|day|days|week|weeks)$", re.IGNORECASE
)
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}


class ScheduleError(ValueError):
    """A schedule expression that cannot be parsed."""


@dataclass(frozen=True)
class Period:
    """A half-open UTC interval ``[start, end)``, identified by its start."""

    start: datetime
    end: datetime


@dataclass(frozen=True)
class Schedule:
    """A fixed step in UTC (``seconds``) or a number of calendar months (``months``).

    ``aligned`` schedules (hourly, daily, weekly, monthly) have their boundaries on the UTC
    calendar; ``every N …`` schedules count their steps from the job's start.
    """

    text: str
    seconds: int = 0
    months: int = 0
    aligned: bool = True

    @property
    def step(self) -> timedelta | relativedelta:
        if self.months:
            return relativedelta(months=self.months)
        return timedelta(seconds=self.seconds)

    @property
    def sql_interval(self) -> str:
        """The step as a PostgreSQL interval literal, for ``generate_series``."""
        if self.months:
            return f"{self.months} months"
        return f"{self.seconds} seconds"

    @property
    def daily_or_longer(self) -> bool:
        return bool(self.months) or self.seconds % 86400 == 0

    def anchor(self, start: datetime) -> datetime:
        """The start of the first period: the first boundary at or after ``start``."""
        start = as_utc(start)
        if not self.aligned:
            return start
        if self.months:
            first = start.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
            return first if first == start else first + relativedelta(months=1)
        origin = (
            _EPOCH_MONDAY if self.seconds % (7 * 86400) == 0 else datetime(1970, 1, 1, tzinfo=UTC)
        )
        step = timedelta(seconds=self.seconds)
        k = -((origin - start) // step)  # ceiling division
        return origin + k * step

    def nth(self, anchor: datetime, k: int) -> datetime:
        """The start of period ``k`` counted from ``anchor`` (k may be negative)."""
        if self.months:
            return anchor + relativedelta(months=self.months * k)
        return anchor + k * timedelta(seconds=self.seconds)

    def index(self, anchor: datetime, t: datetime) -> int:
        """The number of the period containing ``t`` (negative before the anchor)."""
        t = as_utc(t)
        if self.months:
            months = (t.year - anchor.year) * 12 + (t.month - anchor.month)
            k = months // self.months
            # anchor is midnight on the 1st, so whole months decide, but correct for safety
            while self.nth(anchor, k) > t:
                k -= 1
            while self.nth(anchor, k + 1) <= t:
                k += 1
            return k
        return (t - anchor) // timedelta(seconds=self.seconds)

    def period(self, anchor: datetime, k: int) -> Period:
        return Period(self.nth(anchor, k), self.nth(anchor, k + 1))

    def containing(self, anchor: datetime, t: datetime) -> Period:
        return self.period(anchor, self.index(anchor, t))

    def is_boundary(self, anchor: datetime, t: datetime) -> bool:
        return self.nth(anchor, self.index(anchor, t)) == as_utc(t)

    def latest_due(self, anchor: datetime, delay: timedelta, now: datetime) -> Period | None:
        """The newest period whose ``end + delay <= now``; None before the first is due."""
        k = self.index(anchor, as_utc(now) - delay) - 1
        if k < 0:
            return None
        return self.period(anchor, k)

    def count_until(self, anchor: datetime, until: datetime) -> int:
        """How many periods start in ``[anchor, until)``."""
        if until <= anchor:
            return 0
        k = self.index(anchor, until)
        return k + 1 if self.nth(anchor, k) < until else k

    def periods(self, anchor: datetime, since: datetime, until: datetime) -> list[Period]:
        """Every period whose start lies in ``[since, until)`` and not before the anchor."""
        k = max(0, self.index(anchor, since))
        if self.nth(anchor, k) < as_utc(since):
            k += 1
        found = []
        while (p := self.period(anchor, k)).start < until:
            found.append(p)
            k += 1
        return found


def as_utc(t: datetime) -> datetime:
    if t.tzinfo is None:
        raise ValueError(f"naive datetime {t!r}: catchup keeps every time in UTC")
    return t.astimezone(UTC)


def parse_schedule(text: str) -> Schedule:
    """``hourly``, ``daily``, ``weekly``, ``monthly`` or ``every N minutes|hours|days|weeks``."""
    words = " ".join(text.split()).lower()
    simple = {
        "hourly": Schedule(text, seconds=3600),
        "daily": Schedule(text, seconds=86400),
        "weekly": Schedule(text, seconds=7 * 86400),
        "monthly": Schedule(text, months=1),
    }
    if words in simple:
        return simple[words]
    match = _EVERY.match(words)
    if match:
        count = int(match.group(1) or 1)
        unit = match.group(2).rstrip("s")
        if count < 1:
            raise ScheduleError(f"schedule {text!r}: the count must be at least 1")
        return Schedule(text, seconds=count * _UNIT_SECONDS[unit], aligned=False)
    raise ScheduleError(
        f"unknown schedule {text!r}: expected hourly, daily, weekly, monthly "
        "or 'every N minutes|hours|days|weeks'"
    )


def period_label(schedule: Schedule, start: datetime) -> str:
    """``{period}``: a date for daily-or-longer schedules, else an ISO 8601 UTC time."""
    start = as_utc(start)
    if schedule.daily_or_longer and start.time() == datetime.min.time():
        return start.date().isoformat()
    return iso_utc(start)


def iso_utc(t: datetime) -> str:
    return as_utc(t).strftime("%Y-%m-%dT%H:%M:%SZ")
