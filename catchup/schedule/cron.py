"""Cron expressions on a local clock (five fields, names, nicknames, and the day fields' common
extensions: ``L``, ``LW``, ``nW``, ``nL``, ``n#k``, read as cronsim and Quartz read them)."""

from __future__ import annotations

import bisect
import calendar
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache

from .steps import Wall
from .zones import _LONGEST, ScheduleError

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
# Vixie cron's nicknames (crontab(5)); @reboot is refused in parse_cron.
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# The Gregorian calendar repeats, weekdays and all, every 400 years (146097 days, whole weeks).
_CYCLE_YEARS = 400
_CYCLE_DAYS = 146097
_MONTH_DAYS = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_DOM_MARK = re.compile(r"(L|LW)(?:/(\d+))?|(\d+)W", re.ASCII)
_QUARTZ_FROM_LAST = re.compile(r"L-(\d+)(W?)", re.ASCII)
_DOW_MARK = re.compile(r"(\d+)L|(\w+)#(\d+)", re.ASCII)


@dataclass(frozen=True)
class DayMark:
    """One of cron's day extensions, each naming at most one day of a month: in the day of
    month field ``L`` (the last day), ``LW`` (the last weekday, Monday to Friday) and ``nW``
    (the weekday nearest day n: a Saturday moves back to Friday, a Sunday on to Monday, never
    into another month, so 1W on a Saturday is Monday the 3rd; a month without day n has
    none); in the day of week field ``nL`` (the last weekday n of the month) and ``n#k`` (the
    k-th), weekdays numbered as cron numbers them, Sunday 0."""

    kind: str  # "L", "LW", "W" (day of month); "nL", "#" (day of week)
    n: int = 0  # the day of month (W) or the weekday (nL, #)
    k: int = 0  # which one of the month (#)

    @property
    def of_week(self) -> bool:
        return self.kind in ("nL", "#")

    def day(self, first: int, length: int) -> int | None:
        """The day this mark names in a month whose 1st is weekday ``first`` (Monday 0) and
        that has ``length`` days, or None."""
        if self.kind == "L":
            return length
        if self.kind == "LW":
            return length - max(0, (first + length - 1) % 7 - 4)  # Saturday back 1, Sunday 2
        if self.kind == "W":
            return _nearest_weekday(self.n, (first + self.n - 1) % 7, length)
        earliest = 1 + ((self.n - 1) % 7 - first) % 7  # the weekday's first day of the month
        if self.kind == "nL":
            return earliest + 7 * ((length - earliest) // 7)
        day = earliest + 7 * (self.k - 1)
        return day if day <= length else None


def _nearest_weekday(n: int, weekday: int, length: int) -> int | None:
    """``nW``: day n if a weekday; a Saturday moves back to Friday and a Sunday on to Monday,
    but not out of the month (Saturday the 1st moves on to Monday the 3rd, a Sunday that ends
    the month back to Friday); a month without day n has none."""
    if n > length:
        return None
    if weekday == 5:
        return 3 if n == 1 else n - 1
    if weekday == 6:
        return n - 2 if n == length else n + 1
    return n


@lru_cache(maxsize=1024)
def _month_days(
    doms: frozenset[int],
    dows: frozenset[int],
    either: bool,
    marks: frozenset[DayMark],
    first: int,
    length: int,
) -> frozenset[int]:
    """The days a cron's day fields pick in a month whose 1st is weekday ``first`` (Monday 0)
    and that has ``length`` days."""
    by_month = {d for d in doms if d <= length}
    by_week = {d for d in range(1, length + 1) if (first + d) % 7 in dows}
    for mark in marks:
        day = mark.day(first, length)
        if day is not None:
            (by_week if mark.of_week else by_month).add(day)
    return frozenset(by_month | by_week if either else by_month & by_week)


@lru_cache(maxsize=4096)
def _days_of(
    doms: frozenset[int],
    dows: frozenset[int],
    either: bool,
    marks: frozenset[DayMark],
    year: int,
    month: int,
) -> frozenset[int]:
    return _month_days(doms, dows, either, marks, *calendar.monthrange(year, month))


@lru_cache(maxsize=256)
def _longest_wait(
    doms: frozenset[int],
    dows: frozenset[int],
    either: bool,
    marks: frozenset[DayMark],
    months: frozenset[int],
) -> int | None:
    """The most days from one picked day to the next, over the calendar's 400-year cycle (the
    same every cycle); None when no day is ever picked."""
    first_day = last_day = None
    longest = 0
    ordinal = date(2000, 1, 1).toordinal() - 1  # the day before the month's 1st
    pattern: dict[tuple[int, int], frozenset[int]] = {}
    for year in range(2000, 2000 + _CYCLE_YEARS):
        for month in range(1, 13):
            length = _MONTH_DAYS[month] + (month == 2 and calendar.isleap(year))
            key = (ordinal % 7, length)  # the weekday of the 1st, Monday 0
            if month in months and key not in pattern:
                pattern[key] = _month_days(doms, dows, either, marks, *key)
            days = pattern[key] if month in months else frozenset()
            if days:
                if last_day is None:
                    first_day = ordinal + min(days)
                else:
                    longest = max(longest, ordinal + min(days) - last_day)
                last_day = ordinal + max(days)
            ordinal += length
    if first_day is None or last_day is None:
        return None
    return max(longest, first_day + _CYCLE_DAYS - last_day)


@dataclass(frozen=True)
class _Field:
    """A field of an expression being read: what its values and its mistakes name."""

    expression: str
    index: int
    text: str
    rrule_time: str = ""  # ";BYHOUR=…;BYMINUTE=…", for a refusal an RRULE can say instead

    def fail(self, why: str) -> ScheduleError:
        name = _CRON_FIELDS[self.index][0]
        return ScheduleError(f"cron {self.expression!r}: {name} field {self.text!r}: {why}")

    def number(self, token: str) -> int:
        _, lo, hi = _CRON_FIELDS[self.index]
        names = _MONTH_NAMES if self.index == 3 else _DAY_NAMES if self.index == 4 else {}
        if token.lower() in names:
            return names[token.lower()]
        if token == "?":
            raise self.fail("'?' is Quartz's 'no particular day': write '*'")
        if not (token.isascii() and token.isdigit()):  # not '¹', which int() refuses
            like = f" or a name like {next(iter(names))}" if names else ""
            raise self.fail(f"{token!r} is not a number {lo}-{hi}{like}")
        value = int(token)
        if not lo <= value <= hi:
            raise self.fail(f"{value} is out of range {lo}-{hi}")
        return value

    def values(self, part: str) -> range:
        """An item without marks: ``*``, ``n``, ``a-b``, each with an optional ``/step``."""
        _, lo, hi = _CRON_FIELDS[self.index]
        top = 6 if self.index == 4 else hi
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not (step_text.isascii() and step_text.isdigit()) or int(step_text) < 1:
                raise self.fail(f"step {step_text!r} must be a whole number of at least 1")
            step = int(step_text)
        if base == "*":
            return range(lo, top + 1, step)
        if "-" in base:
            a, _, b = base.partition("-")
            first, last = self.number(a), self.number(b)
            if first > last:
                raise self.fail(f"range {base!r} runs backwards")
            return range(first, last + 1, step)
        first = self.number(base)
        return range(first, (top if slash else first) + 1, step)

    def dom_mark(self, part: str) -> DayMark | None:
        """``L``, ``LW`` (a step after them changes nothing, as in cronsim) or ``nW``."""
        upper = part.upper()
        found = _DOM_MARK.fullmatch(upper)
        if found and found[1]:
            if found[2] is not None and int(found[2]) < 1:
                raise self.fail(f"step {found[2]!r} must be a whole number of at least 1")
            return DayMark(found[1])
        if found:
            return DayMark("W", self.number(found[3]))
        quartz = _QUARTZ_FROM_LAST.fullmatch(upper)
        if quartz and not quartz[2] and 1 <= int(quartz[1]) <= 30:
            rrule = f"RRULE:FREQ=MONTHLY;BYMONTHDAY=-{int(quartz[1]) + 1}{self.rrule_time}"
            same = (
                f"; {rrule!r} says the same, from a start with its time of day"
                if self.rrule_time
                else ""
            )
            raise self.fail(f"{part!r} (Quartz's n days before the last) is not supported{same}")
        if "L" in upper or "W" in upper:
            raise self.fail(
                f"{part!r} is not a day: write a number 1-31, L (the last day), LW (the last "
                "weekday) or nW (the weekday nearest day n)"
            )
        return None

    def dow_mark(self, part: str) -> DayMark | None:
        """``nL`` (n a number 0-7, as cronsim reads it) or ``n#k`` (n a number or a name)."""
        upper = part.upper()
        found = _DOW_MARK.fullmatch(upper)
        if found and found[1] is not None:
            return DayMark("nL", self.number(found[1]) % 7)
        if found:
            k = int(found[3])
            if not 1 <= k <= 5:
                raise self.fail(f"'#{k}' must be #1-#5 (for the last of the month, write nL)")
            return DayMark("#", self.number(found[2]) % 7, k)
        if upper[:-1].lower() in _DAY_NAMES and upper.endswith("L"):
            number = _DAY_NAMES[upper[:-1].lower()]
            raise self.fail(f"{part!r}: write the day as a number, {number}L")
        if "L" in upper or "#" in upper:
            raise self.fail(
                f"{part!r} is not a day: write a number 0-7, a name like mon, nL (the last "
                "weekday n of the month, 5L) or n#k (the k-th, 1#2)"
            )
        return None

    def read(self) -> tuple[frozenset[int], frozenset[DayMark]]:
        """The field's plain values, and its marks (only the day fields have any)."""
        values: set[int] = set()
        marks: set[DayMark] = set()
        for part in self.text.split(","):
            if not part:
                raise self.fail("empty list item")
            mark = None
            if self.index == 2:
                mark = self.dom_mark(part)
            elif self.index == 4:
                mark = self.dow_mark(part)
            if mark is None:
                values.update(self.values(part))
            else:
                marks.add(mark)
        if self.index == 4 and 7 in values:
            values = (values - {7}) | {0}  # 7 is Sunday too
        return frozenset(values), frozenset(marks)


@dataclass(frozen=True)
class Cron(Wall):
    """A five-field cron expression on the local wall clock (minute hour dom month dow).

    Day of month and day of week follow cron's rule: when both are restricted (neither starts
    with ``*``), a day matches if either does; otherwise both must. ``marks`` are the day
    fields' extensions (:class:`DayMark`), worked out a month at a time.
    """

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    doms: frozenset[int] = frozenset()
    months_: frozenset[int] = frozenset()
    dows: frozenset[int] = frozenset()
    either: bool = False
    marks: frozenset[DayMark] = frozenset()

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
        if self.marks:
            days = _days_of(self.doms, self.dows, self.either, self.marks, d.year, d.month)
            return d.day in days
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


def _fields(expression: str) -> list[str]:
    """The five fields, a nickname (``@daily``) written out."""
    if expression.startswith("@"):
        nickname = expression.lower()
        if nickname == "@reboot":
            raise ScheduleError(
                f"cron {expression!r}: catchup runs a job once for each period of a schedule, "
                "and @reboot (at each boot) has no periods: use a schedule like @daily"
            )
        if nickname not in _MACROS:
            raise ScheduleError(
                f"cron {expression!r}: unknown nickname: use one of {', '.join(_MACROS)}"
            )
        return _MACROS[nickname].split(" ")
    fields = expression.split(" ")
    if len(fields) != 5:
        raise ScheduleError(
            f"cron {expression!r}: expected 5 fields (minute hour day-of-month month "
            f"day-of-week), got {len(fields)}"
        )
    return fields


def _rrule_time(minutes: frozenset[int], hours: frozenset[int], months: frozenset[int]) -> str:
    """The RRULE parts for the times and months of a cron, for a refusal to name the RRULE
    that says what it meant."""
    month = "" if len(months) == 12 else f";BYMONTH={_listed(months)}"
    return f"{month};BYHOUR={_listed(hours)};BYMINUTE={_listed(minutes)}"


def _listed(values: frozenset[int]) -> str:
    return ",".join(map(str, sorted(values)))


def parse_cron(text: str, timezone: str = "UTC", *, checked: bool = True) -> Cron:
    expression = " ".join(text.split())
    fields = _fields(expression)
    minutes, hours, months = (_Field(expression, i, fields[i]).read()[0] for i in (0, 1, 3))
    # an RRULE says what an unsupported day of month means when day of week is '*'
    rrule_time = _rrule_time(minutes, hours, months) if fields[4] == "*" else ""
    doms, dom_marks = _Field(expression, 2, fields[2], rrule_time).read()
    dows, dow_marks = _Field(expression, 4, fields[4]).read()
    cron = Cron(
        text=expression,
        timezone=timezone,
        minutes=minutes,
        hours=hours,
        doms=doms,
        months_=months,
        dows=dows,
        either=not fields[2].startswith("*") and not fields[4].startswith("*"),
        marks=dom_marks | dow_marks,
    )
    if checked:
        _check_days(cron, fields)
    return cron


def _check_days(cron: Cron, fields: list[str]) -> None:
    """Refuse day fields that pick no day in the months given, or days more than 3650 days
    apart (the longest period catchup keeps)."""
    expression = cron.text
    if not cron.either and not cron.marks and not fields[2].startswith("*"):
        longest = {m: 29 if m == 2 else calendar.monthrange(2001, m)[1] for m in cron.months_}
        if not any(d <= longest[m] for m in cron.months_ for d in cron.doms):
            raise ScheduleError(
                f"cron {expression!r}: day of month field {fields[2]!r}: no such day in the "
                f"month field {fields[3]!r}, so it would never run"
            )
    weekly = cron.either and cron.dows  # a weekday in every month picked: never years apart
    if weekly or (not cron.marks and (len(cron.doms) == 31 or len(cron.dows) == 7)):
        return
    wait = _longest_wait(cron.doms, cron.dows, cron.either, cron.marks, cron.months_)
    if any(m.of_week for m in cron.marks) or fields[2].startswith("*"):
        field, other = f"day of week field {fields[4]!r}", f"day of month field {fields[2]!r}"
    else:
        field, other = f"day of month field {fields[2]!r}", f"day of week field {fields[4]!r}"
    months = f"month field {fields[3]!r}"
    if "*" in (fields[2], fields[4]):  # the other field is '*': this one picks the days
        days = f"the days it picks in {months}"
    elif cron.either:
        days = f"the days it or {other} picks in {months}"
    else:
        days = f"the days in {months} that are also {other}"
    if wait is None:
        raise ScheduleError(
            f"cron {expression!r}: {field}: {days}: there are none, so it would never run"
        )
    if wait > _LONGEST.days:
        raise ScheduleError(
            f"cron {expression!r}: {field}: {days} are up to {wait} days apart: periods are "
            "at most 3650 days long"
        )
