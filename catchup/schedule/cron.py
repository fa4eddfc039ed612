"""Cron expressions on a local clock (five fields, names, macros)."""

from __future__ import annotations

import bisect
import calendar
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache

from .steps import Wall
from .zones import ScheduleError

# -- cron ------------------------------------------------------------------------------------

_CRON_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
)
_MONTH_NAMES = {m.lower(): i for i, m in enumerate(calendar.month_abbr) if m}
_DAY_NAMES = {d.lower(): (i + 1) % 7 for i, d in enumerate(calendar.day_abbr)}
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def _cron_field(text: str, index: int, expression: str) -> frozenset[int]:  # noqa: C901
    name, lo, hi = _CRON_FIELDS[index]
    names = _MONTH_NAMES if index == 3 else _DAY_NAMES if index == 4 else {}

    def fail(why: str) -> ScheduleError:
        return ScheduleError(f"cron {expression!r}: {name} field {text!r}: {why}")

    def number(token: str) -> int:
        if token.lower() in names:
            return names[token.lower()]
        if not token.isdigit():
            like = f" or a name like {next(iter(names))}" if names else ""
            raise fail(f"{token!r} is not a number {lo}-{hi}{like}")
        value = int(token)
        if not lo <= value <= hi:
            raise fail(f"{value} is out of range {lo}-{hi}")
        return value

    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise fail("empty list item")
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) < 1:
                raise fail(f"step {step_text!r} must be a whole number of at least 1")
            step = int(step_text)
        if base == "*":
            first, last = lo, hi if index != 4 else 6
        elif "-" in base:
            a, _, b = base.partition("-")
            first, last = number(a), number(b)
            if first > last:
                raise fail(f"range {base!r} runs backwards")
        else:
            first = number(base)
            last = (hi if index != 4 else 6) if slash else first
        values.update(range(first, last + 1, step))
    if index == 4 and 7 in values:
        values = (values - {7}) | {0}  # 7 is Sunday too
    return frozenset(values)


@dataclass(frozen=True)
class Cron(Wall):
    """A five-field cron expression on the local wall clock (minute hour dom month dow).

    Day of month and day of week follow cron's rule: when both are restricted (neither starts
    with ``*``), a day matches if either does; otherwise both must.
    """

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    doms: frozenset[int] = frozenset()
    months_: frozenset[int] = frozenset()
    dows: frozenset[int] = frozenset()
    either: bool = False

    @property
    def kind(self) -> str:
        return "cron"

    @property
    def daily_or_longer(self) -> bool:
        return len(self.minutes) == 1 and len(self.hours) == 1

    @property
    def times(self) -> tuple[time, ...]:
        return _times(self.hours, self.minutes)

    def matches(self, d: date) -> bool:
        if d.month not in self.months_:
            return False
        dom = d.day in self.doms
        dow = (d.weekday() + 1) % 7 in self.dows
        return (dom or dow) if self.either else (dom and dow)

    def count_walls(self, lo: datetime, hi: datetime) -> int:
        if hi <= lo:
            return 0
        times = self.times
        if lo.date() == hi.date():
            if not self.matches(lo.date()):
                return 0
            return bisect.bisect_left(times, hi.time()) - bisect.bisect_left(times, lo.time())
        total = 0
        if self.matches(lo.date()):
            total += len(times) - bisect.bisect_left(times, lo.time())
        if self.matches(hi.date()):
            total += bisect.bisect_left(times, hi.time())
        d = lo.date() + timedelta(days=1)
        while d < hi.date():
            total += len(times) if self.matches(d) else 0
            d += timedelta(days=1)
        return total

    def walls_from(self, w: datetime) -> Iterator[datetime]:
        d = w.date()
        times = self.times
        if self.matches(d):
            i = bisect.bisect_left(times, w.time())
            for tm in times[i:]:
                yield datetime.combine(d, tm)
        while True:
            d += timedelta(days=1)
            if self.matches(d):
                for tm in times:
                    yield datetime.combine(d, tm)

    def walls_before(self, w: datetime) -> Iterator[datetime]:
        d = w.date()
        times = self.times
        if self.matches(d):
            i = bisect.bisect_left(times, w.time())
            for tm in reversed(times[:i]):
                yield datetime.combine(d, tm)
        while True:
            d -= timedelta(days=1)
            if self.matches(d):
                for tm in reversed(times):
                    yield datetime.combine(d, tm)


@lru_cache(maxsize=256)
def _times(hours: frozenset[int], minutes: frozenset[int]) -> tuple[time, ...]:
    return tuple(time(h, m) for h in sorted(hours) for m in sorted(minutes))


def parse_cron(text: str, timezone: str = "UTC") -> Cron:
    expression = " ".join(text.split())
    fields = _MACROS.get(expression.lower(), expression).split(" ")
    if len(fields) != 5:
        raise ScheduleError(
            f"cron {expression!r}: expected 5 fields (minute hour day-of-month month "
            f"day-of-week), got {len(fields)}"
        )
    sets = [_cron_field(f, i, expression) for i, f in enumerate(fields)]
    cron = Cron(
        text=expression,
        timezone=timezone,
        minutes=sets[0],
        hours=sets[1],
        doms=sets[2],
        months_=sets[3],
        dows=sets[4],
        either=not fields[2].startswith("*") and not fields[4].startswith("*"),
    )
    if not cron.either and not fields[2].startswith("*"):
        longest = {m: 29 if m == 2 else calendar.monthrange(2001, m)[1] for m in cron.months_}
        if not any(d <= longest[m] for m in cron.months_ for d in cron.doms):
            raise ScheduleError(
                f"cron {expression!r}: day of month field {fields[2]!r}: no such day in the "
                f"month field {fields[3]!r}, so it would never run"
            )
    return cron
