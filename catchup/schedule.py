"""Period arithmetic: pure functions of a schedule, a time zone and ``now``; no I/O, no clock.

A schedule is a sequence of boundaries (UTC instants); a period runs from one boundary to the
next. Two families:

- **elapsed time** (:class:`Fixed`): ``hourly``, ``every N minutes|hours``, and in UTC also
  ``daily``, ``weekly`` and ``every N days|weeks``: boundaries ``origin + k * step``. SQL can do
  this arithmetic itself.
- **wall clock** (:class:`Calendar`, :class:`Cron`, :class:`RRule`): the schedule is evaluated on
  the job's local clock and each local time is turned into a UTC instant by :func:`to_utc`.

The one DST rule (:func:`to_utc`) is PostgreSQL's own: a local time the clocks skip is read with
the offset from before the change (02:30 on a spring-forward night in Berlin lands at 03:30
CEST, the gap's length later), and a local time that happens twice means the second one (after
the clocks went back). Local times that land on the same instant count once, so a DST change
never makes two periods out of one or none out of one.
"""

from __future__ import annotations

import bisect
import calendar
import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from itertools import islice, pairwise, takewhile
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from dateutil.relativedelta import relativedelta
from dateutil.rrule import rrule, rrulestr

_EPOCH = datetime(1970, 1, 1)
_EPOCH_MONDAY = datetime(1970, 1, 5)  # a Monday, for weekly alignment
_EVERY = re.compile(
    r"^every\s+(?:(\d+)\s+)?(minute|minutes|hour|hours|day|days|week|weeks)$", re.IGNORECASE
)
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
# Every kind of schedule has periods of one minute at least and ten years at most.
_SHORTEST = timedelta(minutes=1)
_LONGEST = timedelta(days=3650)
# Every UTC offset in the time zone database lies within these bounds (UTC-12 … UTC+14, with
# room for historical local mean times): a local time w is an instant within w ± _SLACK.
_SLACK = timedelta(hours=16)
_TICK = timedelta(microseconds=1)
UTC_NAMES = frozenset({"UTC", "Etc/UTC", "Etc/UCT", "UCT", "Etc/Universal", "Universal", "Zulu"})


class ScheduleError(ValueError):
    """A schedule expression or time zone that cannot be used."""


@dataclass(frozen=True)
class Period:
    """A half-open UTC interval ``[start, end)``, identified by its start."""

    start: datetime
    end: datetime


# -- time zones ------------------------------------------------------------------------------


@lru_cache(maxsize=64)
def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; a :class:`ScheduleError` naming it when unknown."""
    try:
        if name and not name.startswith(("/", ".")) and ".." not in name:
            return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        pass
    import difflib

    hint = difflib.get_close_matches(name, sorted(available_timezones()), n=1)
    also = f" (did you mean {hint[0]!r}?)" if hint else ""
    raise ScheduleError(f"unknown time zone {name!r}{also}; use an IANA name like Europe/Berlin")


def is_utc(name: str) -> bool:
    return name in UTC_NAMES


def to_utc(wall: datetime, tz: ZoneInfo) -> datetime:
    """The instant a local wall-clock time means: the later of its two readings.

    Outside DST changes both readings agree. In a spring-forward gap the later reading is the
    one with the offset from before the change (the time moves forward by the gap's length); in
    a fall-back overlap it is the second occurrence. This is what PostgreSQL does with
    ``timestamp AT TIME ZONE``, so generators on both sides agree.
    """
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    return max(first, second)


def to_wall(t: datetime, tz: ZoneInfo) -> datetime:
    """The local wall-clock time of an instant, without tzinfo."""
    return t.astimezone(tz).replace(tzinfo=None)


def written_wall(t: datetime, tz: ZoneInfo, written: datetime | None) -> datetime:
    """The local time ``t`` was written as: ``written`` when that names ``t``, else ``t``'s own
    wall time. They differ for a time written inside a DST gap (``start = "2026-09-06"`` where
    that midnight is skipped): it names the instant the gap's length later, but a schedule
    counted from it keeps the written time for every later period."""
    if written is not None and to_utc(written, tz) == as_utc(t):
        return written
    return to_wall(as_utc(t), tz)


def transitions(tz: ZoneInfo, lo: datetime, hi: datetime) -> list[tuple[datetime, timedelta]]:
    """The offset changes of ``tz`` in ``[lo, hi)``: (instant, new offset minus old offset)."""
    found: list[tuple[datetime, timedelta]] = []

    def offset(t: datetime) -> timedelta:
        value = t.astimezone(tz).utcoffset()
        assert value is not None
        return value

    step = timedelta(hours=6)
    t = lo - timedelta(seconds=1)  # a change at lo itself is inside
    before = offset(t)
    while t < hi:
        nxt = min(t + step, hi)
        after = offset(nxt)
        if after != before:
            a, b = t, nxt  # bisect to the second
            while b - a > timedelta(seconds=1):
                mid = a + (b - a) / 2
                mid = mid.replace(microsecond=0)
                if mid <= a:
                    break
                if offset(mid) == before:
                    a = mid
                else:
                    b = mid
            if lo <= b < hi:  # a change at hi belongs to what starts there
                found.append((b, after - before))
            before = after
        t = nxt
    return found


# -- schedules -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """A sequence of period boundaries. ``text`` is what the config said, ``timezone`` where it
    is evaluated. Subclasses give the boundaries; everything else follows from them."""

    text: str
    timezone: str = "UTC"

    # What SQL may compute itself: a fixed step added under ``TimeZone = 'UTC'``, or None.
    @property
    def step_sql(self) -> str | None:
        return None

    @property
    def daily_or_longer(self) -> bool:
        return False

    @property
    def kind(self) -> str:
        return "fixed"

    @property
    def canonical(self) -> str:
        """The schedule as the ledger records it: changes of this (or of the zone) are changes."""
        return " ".join(self.text.split()).lower()

    def bound(self, origin: datetime, written: datetime | None = None) -> Schedule:
        """The schedule counted from ``origin`` (for schedules that count from the start);
        ``written`` is the local time ``origin`` was written as, if known (see
        :func:`written_wall`)."""
        return self

    def asc(self, a: datetime) -> Iterator[datetime]:
        """Every boundary at or after ``a``, ascending."""
        raise NotImplementedError

    def desc(self, b: datetime) -> Iterator[datetime]:
        """Every boundary before ``b``, descending."""
        raise NotImplementedError

    def ceil(self, t: datetime) -> datetime:
        return next(self.asc(as_utc(t)))

    def after(self, t: datetime) -> datetime:
        return next(self.asc(as_utc(t) + _TICK))

    def floor(self, t: datetime) -> datetime:
        return next(self.desc(as_utc(t) + _TICK))

    def before(self, t: datetime) -> datetime:
        return next(self.desc(as_utc(t)))

    def starts(self, a: datetime, b: datetime) -> Iterator[datetime]:
        """The boundaries in ``[a, b)``."""
        b = as_utc(b)
        return takewhile(lambda s: s < b, self.asc(as_utc(a)))

    def count(self, a: datetime, b: datetime) -> int:
        return sum(1 for _ in self.starts(a, b))

    def typical(self) -> timedelta:
        """The shortest of a sample of period lengths, for bounds like spread's."""
        sample = list(islice(self.asc(datetime(2026, 1, 5, tzinfo=UTC)), 64))
        return min(b - a for a, b in pairwise(sample))


@dataclass(frozen=True)
class Fixed(Schedule):
    """Boundaries every ``seconds`` from ``origin`` (elapsed time; SQL can add the step)."""

    seconds: int = 3600
    origin: datetime = field(default=datetime(1970, 1, 1, tzinfo=UTC))
    counts_from_start: bool = False

    @property
    def step_sql(self) -> str:
        return f"{self.seconds} seconds"

    @property
    def daily_or_longer(self) -> bool:
        return self.seconds % 86400 == 0

    def bound(self, origin: datetime, written: datetime | None = None) -> Schedule:
        if self.counts_from_start:
            return replace(self, origin=as_utc(origin))
        if not is_utc(self.timezone) and not self.daily_or_longer:
            # hourly on a local clock: on the local hour at the start, then elapsed hours
            hour = to_wall(as_utc(origin), zone(self.timezone)).replace(
                minute=0, second=0, microsecond=0
            )
            return replace(self, origin=to_utc(hour, zone(self.timezone)))
        return self

    def _k(self, t: datetime) -> int:
        return (as_utc(t) - self.origin) // timedelta(seconds=self.seconds)

    def _at(self, k: int) -> datetime:
        return self.origin + k * timedelta(seconds=self.seconds)

    # Plain arithmetic: these run once per gap in a scan.

    def floor(self, t: datetime) -> datetime:
        return self._at(self._k(t))

    def before(self, t: datetime) -> datetime:
        return self.floor(as_utc(t) - _TICK)

    def ceil(self, t: datetime) -> datetime:
        t = as_utc(t)
        start = self.floor(t)
        return start if start == t else start + timedelta(seconds=self.seconds)

    def after(self, t: datetime) -> datetime:
        return self.floor(t) + timedelta(seconds=self.seconds)

    def asc(self, a: datetime) -> Iterator[datetime]:
        k = self._k(a)
        if self._at(k) < a:
            k += 1
        while True:
            yield self._at(k)
            k += 1

    def desc(self, b: datetime) -> Iterator[datetime]:
        k = self._k(b)
        if self._at(k) >= b:
            k -= 1
        while True:
            yield self._at(k)
            k -= 1

    def count(self, a: datetime, b: datetime) -> int:
        if b <= a:
            return 0
        lo, hi = self._k(a - _TICK), self._k(b - _TICK)
        return max(0, hi - lo)

    def typical(self) -> timedelta:
        return timedelta(seconds=self.seconds)


@dataclass(frozen=True)
class Wall(Schedule):
    """A schedule evaluated on the local wall clock: subclasses list local times in order."""

    def walls_from(self, w: datetime) -> Iterator[datetime]:
        """Local times at or after ``w`` (naive), ascending."""
        raise NotImplementedError

    def walls_before(self, w: datetime) -> Iterator[datetime]:
        """Local times before ``w`` (naive), descending."""
        raise NotImplementedError

    def count_walls(self, lo: datetime, hi: datetime) -> int:
        """How many local times lie in ``[lo, hi)`` (naive)."""
        return sum(1 for _ in takewhile(lambda w: w < hi, self.walls_from(lo)))

    # Away from DST changes the offset is steady and local times map one to one: the neighbours
    # of an instant are found on the local clock directly, without the general ordering above.

    def _steady_offset(self, t: datetime) -> timedelta | None:
        """The UTC offset around ``t`` when no DST change lies within a day of it (looked at
        every 6 hours: changes are months apart)."""
        tz = zone(self.timezone)
        offsets = {(t + k * timedelta(hours=6)).astimezone(tz).utcoffset() for k in range(-4, 5)}
        if len(offsets) != 1:
            return None
        (offset,) = offsets
        return offset

    def _near(self, t: datetime, found: datetime | None) -> datetime | None:
        """``found`` if it lies within 12 hours of ``t`` (so at least 12 hours from any DST
        change, farther than any skipped or repeated stretch), else None: use the slow path."""
        if found is None or abs(found - t) >= timedelta(hours=12):
            return None
        return found

    def ceil(self, t: datetime) -> datetime:
        t = as_utc(t)
        offset = self._steady_offset(t)
        if offset is not None:
            w = next(self.walls_from((t + offset).replace(tzinfo=None)), None)
            quick = self._near(t, None if w is None else (w - offset).replace(tzinfo=UTC))
            if quick is not None:
                return quick
        return next(self.asc(t))

    def after(self, t: datetime) -> datetime:
        return self.ceil(as_utc(t) + _TICK)

    def floor(self, t: datetime) -> datetime:
        t = as_utc(t)
        offset = self._steady_offset(t)
        if offset is not None:
            w = next(self.walls_before((t + offset + _TICK).replace(tzinfo=None)), None)
            quick = self._near(t, None if w is None else (w - offset).replace(tzinfo=UTC))
            if quick is not None:
                return quick
        return next(self.desc(as_utc(t) + _TICK))

    def before(self, t: datetime) -> datetime:
        return self.floor(as_utc(t) - _TICK)

    def count(self, a: datetime, b: datetime) -> int:
        """Boundaries in ``[a, b)``: counted on the local clock where the offset is steady, one
        by one only within a day of each DST change."""
        a, b = as_utc(a), as_utc(b)
        if b <= a:
            return 0
        tz = zone(self.timezone)

        def steady(x: datetime, y: datetime) -> int:
            offset = x.astimezone(tz).utcoffset() or timedelta(0)
            return self.count_walls(
                (x + offset).replace(tzinfo=None), (y + offset).replace(tzinfo=None)
            )

        if is_utc(self.timezone):
            return steady(a, b)
        total, cursor = 0, a
        for at, _ in transitions(tz, a - timedelta(days=1), b + timedelta(days=1)):
            lo, hi = max(cursor, at - timedelta(days=1)), min(b, at + timedelta(days=1))
            if lo > cursor:
                total += steady(cursor, lo)
            if hi > lo:
                total += sum(1 for _ in self.starts(lo, hi))
            cursor = max(cursor, hi)
        if cursor < b:
            total += steady(cursor, b)
        return total

    def asc(self, a: datetime) -> Iterator[datetime]:
        a = as_utc(a)
        tz = zone(self.timezone)
        if is_utc(self.timezone):
            for w in self.walls_from(a.replace(tzinfo=None)):
                yield w.replace(tzinfo=UTC)
            return
        # Local times map to instants within ±_SLACK and in order except inside a DST gap, so
        # hold instants until no later local time can map before them, then release them.
        pending: list[datetime] = []
        last: datetime | None = None
        for w in self.walls_from(a.replace(tzinfo=None) - _SLACK):
            heapq.heappush(pending, to_utc(w, tz))
            settled = (w - _SLACK).replace(tzinfo=UTC)
            while pending and pending[0] < settled:
                t = heapq.heappop(pending)
                if t >= a and t != last:
                    last = t
                    yield t

    def desc(self, b: datetime) -> Iterator[datetime]:
        b = as_utc(b)
        tz = zone(self.timezone)
        if is_utc(self.timezone):
            for w in self.walls_before(b.replace(tzinfo=None)):
                yield w.replace(tzinfo=UTC)
            return
        pending: list[tuple[float, datetime]] = []
        last: datetime | None = None
        for w in self.walls_before(b.replace(tzinfo=None) + _SLACK):
            t = to_utc(w, tz)
            heapq.heappush(pending, (-t.timestamp(), t))
            settled = (w + _SLACK).replace(tzinfo=UTC)
            while pending and pending[0][1] > settled:
                t = heapq.heappop(pending)[1]
                if t < b and t != last:
                    last = t
                    yield t
        while pending:  # the walls ran out (a rule's first occurrence): the rest are settled
            t = heapq.heappop(pending)[1]
            if t < b and t != last:
                last = t
                yield t


@dataclass(frozen=True)
class Calendar(Wall):
    """Every ``days`` local days or ``months`` calendar months from a local origin."""

    days: int = 0
    months: int = 0
    origin: datetime = _EPOCH  # naive local time
    counts_from_start: bool = False

    @property
    def kind(self) -> str:
        return "calendar"

    @property
    def daily_or_longer(self) -> bool:
        return True

    @property
    def step_sql(self) -> str | None:
        # Calendar months in UTC: the SQL side adds them under TimeZone = 'UTC'.
        return f"{self.months} months" if self.months and is_utc(self.timezone) else None

    @property
    def interval_sql(self) -> str:
        return f"{self.months} months" if self.months else f"{self.days} days"

    def bound(self, origin: datetime, written: datetime | None = None) -> Schedule:
        if not self.counts_from_start:
            return self
        return replace(self, origin=written_wall(origin, zone(self.timezone), written))

    def local(self, k: int) -> datetime:
        if self.months:
            return self.origin + relativedelta(months=self.months * k)
        return self.origin + timedelta(days=self.days * k)

    def _k(self, w: datetime) -> int:
        """A k with local(k) <= w < local(k + 1)."""
        if self.months:
            k = ((w.year - self.origin.year) * 12 + w.month - self.origin.month) // self.months
        else:
            k = (w - self.origin) // timedelta(days=self.days)
        while self.local(k) > w:
            k -= 1
        while self.local(k + 1) <= w:
            k += 1
        return k

    def count_walls(self, lo: datetime, hi: datetime) -> int:
        if hi <= lo:
            return 0
        first = self._k(lo) + (self.local(self._k(lo)) < lo)
        last = self._k(hi) + (self.local(self._k(hi)) < hi)
        return last - first

    def k_of(self, t: datetime) -> int:
        """The number of the boundary ``t`` (or of the last one before it), from the origin."""
        return self._k(to_wall(as_utc(t), zone(self.timezone)))

    def walls_from(self, w: datetime) -> Iterator[datetime]:
        k = self._k(w)
        if self.local(k) < w:
            k += 1
        while True:
            yield self.local(k)
            k += 1

    def walls_before(self, w: datetime) -> Iterator[datetime]:
        k = self._k(w)
        if self.local(k) >= w:
            k -= 1
        while True:
            yield self.local(k)
            k -= 1


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


def _cron_field(text: str, index: int, expression: str) -> frozenset[int]:
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


# -- RRULE -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RRule(Wall):
    """An RFC 5545 ``RRULE:`` on the local wall clock, counted from the job's start."""

    origin: datetime = _EPOCH  # naive local DTSTART

    @property
    def kind(self) -> str:
        return "rrule"

    @property
    def canonical(self) -> str:
        return self.text.strip().upper()

    @property
    def daily_or_longer(self) -> bool:
        """At most one occurrence a day: a long frequency, one hour and one minute at most."""
        text = self.canonical
        freq = re.search(r"FREQ=(\w+)", text)
        several = re.search(r"BY(HOUR|MINUTE|SECOND)=[^;]*,", text)
        long = freq is not None and freq.group(1) in ("DAILY", "WEEKLY", "MONTHLY", "YEARLY")
        return long and several is None

    def bound(self, origin: datetime, written: datetime | None = None) -> Schedule:
        return replace(self, origin=written_wall(origin, zone(self.timezone), written))

    @property
    def rule(self) -> rrule:
        return _rule(self.canonical, self.origin)

    def walls_from(self, w: datetime) -> Iterator[datetime]:
        return self.rule.xafter(w, inc=True)

    def walls_before(self, w: datetime) -> Iterator[datetime]:
        rule = self.rule
        while (w_ := rule.before(w, inc=False)) is not None:
            yield w_
            w = w_


@lru_cache(maxsize=64)
def _rule(text: str, origin: datetime) -> rrule:
    result = rrulestr(text, dtstart=origin, cache=True)
    assert isinstance(result, rrule)
    return result


def parse_rrule(text: str, timezone: str = "UTC") -> RRule:
    body = text.strip()
    shown = " ".join(body.split())
    if "\n" in body or not body.upper().startswith("RRULE:"):
        raise ScheduleError(f"schedule {shown!r}: write one rule as 'RRULE:FREQ=…' (no DTSTART)")
    parts = {p.partition("=")[0] for p in body[6:].upper().split(";") if p}
    for key in ("COUNT", "UNTIL"):
        if key in parts:
            raise ScheduleError(
                f"RRULE {shown!r}: {key} is not supported: a job's periods never end "
                "(remove the job when it is done)"
            )
    if "DTSTART" in parts:
        raise ScheduleError(f"RRULE {shown!r}: DTSTART comes from the job's start, not the rule")
    if any("=" not in p for p in body[6:].split(";") if p.strip()):
        raise ScheduleError(
            f"RRULE {shown[:80]!r}: expected KEY=VALUE parts separated by ';', "
            "like RRULE:FREQ=DAILY;BYHOUR=2"
        )
    if "BYSECOND" in parts or re.search(r"FREQ=SECONDLY", body, re.IGNORECASE):
        raise ScheduleError(f"RRULE {shown!r}: periods are at least one minute long")
    try:
        rule = rrulestr(body, dtstart=datetime(2026, 1, 1))
    except (ValueError, TypeError, OverflowError) as exc:
        raise ScheduleError(f"RRULE {shown[:80]!r}: {exc}") from None
    if not isinstance(rule, rrule) or rule.after(datetime(2026, 1, 1), inc=True) is None:
        raise ScheduleError(f"RRULE {shown!r}: the rule never occurs")
    try:
        sample = list(islice(rule.xafter(datetime(2026, 1, 1), inc=True), 64))
    except (ValueError, OverflowError):
        sample = []
    if len(sample) < 2:
        raise ScheduleError(f"RRULE {shown!r}: it must occur again within 3650 days")
    gaps = [b - a for a, b in pairwise(sample)]
    if min(gaps) < _SHORTEST:
        raise ScheduleError(f"RRULE {shown!r}: periods are at least one minute long")
    if max(gaps) > _LONGEST:
        raise ScheduleError(f"RRULE {shown!r}: periods are at most 3650 days long")
    return RRule(text=shown, timezone=timezone)


# -- parsing ---------------------------------------------------------------------------------


def parse_schedule(text: str, timezone: str = "UTC") -> Schedule:
    """``hourly``, ``daily``, ``weekly``, ``monthly``, ``every N minutes|hours|days|weeks``, a
    five-field cron expression (or ``@daily`` …), or ``RRULE:…``; evaluated in ``timezone``.

    Unbound: schedules that count from the job's start get it through :meth:`Schedule.bound`.
    """
    zone(timezone)
    words = " ".join(text.split()).lower()
    utc = is_utc(timezone)
    if words.startswith("rrule"):
        return parse_rrule(text, timezone)
    if words[:1] in ("@", "*") or words[:1].isdigit():
        return parse_cron(text, timezone)
    if words == "hourly":
        return Fixed(text, timezone, seconds=3600)
    if words in ("daily", "weekly"):
        days = 1 if words == "daily" else 7
        origin = _EPOCH if days == 1 else _EPOCH_MONDAY
        if utc:
            return Fixed(text, timezone, seconds=days * 86400, origin=origin.replace(tzinfo=UTC))
        return Calendar(text, timezone, days=days, origin=origin)
    if words == "monthly":
        return Calendar(text, timezone, months=1)
    match = _EVERY.match(words)
    if match:
        count = int(match.group(1) or 1)
        unit = match.group(2).rstrip("s")
        if count < 1:
            raise ScheduleError(f"schedule {text!r}: the count must be at least 1")
        if count * _UNIT_SECONDS[unit] > _LONGEST.total_seconds():
            raise ScheduleError(f"schedule {text[:60]!r}: periods are at most 3650 days long")
        if unit in ("day", "week") and not utc:
            days = count * (7 if unit == "week" else 1)
            return Calendar(text, timezone, days=days, counts_from_start=True)
        return Fixed(text, timezone, seconds=count * _UNIT_SECONDS[unit], counts_from_start=True)
    raise ScheduleError(
        f"unknown schedule {text!r}: expected hourly, daily, weekly, monthly, "
        "'every N minutes|hours|days|weeks', a cron expression like '30 2 * * *' or 'RRULE:…'"
    )


# -- a job's timeline ------------------------------------------------------------------------


@dataclass(frozen=True)
class Segment:
    """A schedule in force from ``since`` (None for the first: all time before the next)."""

    since: datetime | None
    schedule: Schedule


@dataclass(frozen=True)
class Timeline:
    """A job's boundaries: its schedules in force one after another, from its first period.

    A schedule change at ``since`` takes effect on a boundary of the new schedule, and the last
    period of the old schedule ends there (it may be shorter than the others).
    """

    segments: tuple[Segment, ...]
    first: datetime

    @classmethod
    def single(
        cls, schedule: Schedule, start: datetime, written: datetime | None = None
    ) -> Timeline:
        """``schedule`` from the job's ``start``; ``written`` is the local time the start was
        written as (it differs from the instant's own inside a DST gap)."""
        bound = schedule.bound(start, written)
        return cls((Segment(None, bound),), bound.ceil(start))

    @property
    def current(self) -> Schedule:
        return self.segments[-1].schedule

    def _at(self, t: datetime) -> int:
        if len(self.segments) == 1:
            return 0
        i = 0
        for j, seg in enumerate(self.segments):
            if seg.since is not None and seg.since <= t:
                i = j
        return i

    def _limit(self, i: int) -> datetime | None:
        return self.segments[i + 1].since if i + 1 < len(self.segments) else None

    def schedule_at(self, t: datetime) -> Schedule:
        return self.segments[self._at(as_utc(t))].schedule

    def ceil(self, t: datetime) -> datetime:
        t = max(as_utc(t), self.first)
        i = self._at(t)
        found = self.segments[i].schedule.ceil(t)
        limit = self._limit(i)
        return limit if limit is not None and found > limit else found

    def after(self, t: datetime) -> datetime:
        t = as_utc(t)
        if t < self.first:
            return self.first
        i = self._at(t)
        found = self.segments[i].schedule.after(t)
        limit = self._limit(i)
        return limit if limit is not None and found > limit else found

    def floor(self, t: datetime) -> datetime | None:
        t = as_utc(t)
        if t < self.first:
            return None
        return self.segments[self._at(t)].schedule.floor(t)

    def before(self, t: datetime) -> datetime | None:
        return self.floor(as_utc(t) - _TICK)

    def is_boundary(self, t: datetime) -> bool:
        return self.floor(t) == as_utc(t)

    def period(self, start: datetime) -> Period:
        return Period(start, self.after(start))

    def containing(self, t: datetime) -> Period | None:
        start = self.floor(t)
        return None if start is None else self.period(start)

    def latest_due(self, delay: timedelta, now: datetime) -> Period | None:
        """The newest period whose ``end + delay <= now``; None before the first is due."""
        current = self.floor(as_utc(now) - delay)
        if current is None:
            return None
        previous = self.before(current)
        return None if previous is None else Period(previous, current)

    def pieces(self, a: datetime, b: datetime) -> Iterator[tuple[Schedule, datetime, datetime]]:
        """``[a, b)`` cut where the schedule changes: (schedule, lo, hi), starts in ``[lo, hi)``."""
        a = max(as_utc(a), self.first)
        for i, seg in enumerate(self.segments):
            lo = a if seg.since is None else max(a, seg.since)
            limit = self._limit(i)
            hi = b if limit is None else min(b, limit)
            if lo < hi:
                yield seg.schedule, lo, hi

    def starts(self, a: datetime, b: datetime) -> Iterator[datetime]:
        for schedule, lo, hi in self.pieces(a, b):
            yield from schedule.starts(lo, hi)

    def periods(self, a: datetime, b: datetime) -> Iterator[Period]:
        """Every period whose start lies in ``[a, b)``."""
        for start in self.starts(a, b):
            yield self.period(start)

    def count(self, a: datetime, b: datetime) -> int:
        return sum(schedule.count(lo, hi) for schedule, lo, hi in self.pieces(a, b))

    @property
    def signature(self) -> str:
        """What a scan's verified coverage is valid for: every schedule and where it starts."""
        parts = [iso_utc(self.first)]
        for seg in self.segments:
            since = iso_utc(seg.since) if seg.since else "-"
            parts.append(f"{since}={seg.schedule.canonical}@{seg.schedule.timezone}")
        return ";".join(parts)


def _bind(
    schedule: Schedule, since: datetime, start: datetime, written: datetime | None
) -> Schedule:
    """A rule is counted from the job's start (its DTSTART); schedules that count steps from
    the start count them from where they take effect."""
    if isinstance(schedule, RRule):
        return schedule.bound(start, written)
    return schedule.bound(since)


def effective_from(
    timeline: Timeline,
    new: Schedule,
    seen: datetime,
    start: datetime,
    written: datetime | None = None,
) -> datetime:
    """When a schedule change noticed at ``seen`` takes effect: the first boundary of the new
    schedule at or after the end of the period in progress under the old one. Periods before it
    keep the old schedule, so a change never creates periods in the past."""
    current = timeline.floor(seen)
    if current is None:
        return timeline.first  # not started yet: the new schedule applies from the start
    end = timeline.after(current)
    return _bind(new, end, start, written).ceil(end)


def changed(
    timeline: Timeline,
    new: Schedule,
    since: datetime,
    start: datetime,
    written: datetime | None = None,
) -> Timeline:
    """``timeline`` with ``new`` in force from ``since`` (later segments dropped). A rule is
    counted from the job's start; schedules that count steps count them from ``since``."""
    if since <= timeline.first:
        return Timeline.single(new, start, written)
    kept = tuple(s for s in timeline.segments if s.since is None or s.since < since)
    return Timeline((*kept, Segment(since, _bind(new, since, start, written))), timeline.first)


@dataclass(frozen=True)
class Recorded:
    """A schedule as the ledger keeps it (see sql/migrations/0005_schedules.sql)."""

    since: datetime
    schedule: str
    timezone: str


@dataclass(frozen=True)
class Plan:
    """What the ledger should record so that it agrees with the configured schedule."""

    timeline: Timeline
    add: Recorded | None = None  # a row to insert
    drop_after: datetime | None = None  # first delete the rows with since after this
    previous: Recorded | None = None  # the schedule being replaced, for the audit trail

    @property
    def writes(self) -> bool:
        return self.add is not None or self.drop_after is not None


def timeline_from(
    recorded: list[Recorded], start: datetime, written: datetime | None = None
) -> Timeline:
    """The timeline the ledger's rows describe, for a job configured to start at ``start``
    (written as the local time ``written``)."""
    first = parse_schedule(recorded[0].schedule, recorded[0].timezone)
    timeline = Timeline.single(first, start, written)
    for row in recorded[1:]:
        new = parse_schedule(row.schedule, row.timezone)
        timeline = changed(timeline, new, row.since, start, written)
    return timeline


_BEGINNING = datetime(1, 1, 1, tzinfo=UTC)


def plan(
    schedule: Schedule,
    start: datetime,
    recorded: list[Recorded],
    now: datetime,
    written: datetime | None = None,
) -> Plan:
    """Compare the configured ``schedule`` with the ledger's rows at ``now`` (``start`` written
    as the local time ``written``).

    Nothing recorded: record it. The schedule in force matches: use the ledger's timeline
    (dropping a pending change the config no longer asks for). Otherwise a change: it takes
    effect where :func:`effective_from` says, replacing any change still pending; before the
    job's first period it simply replaces the schedule.
    """
    key = (schedule.canonical, schedule.timezone)
    mine = Recorded(now, *key)
    if not recorded:
        return Plan(Timeline.single(schedule, start, written), add=mine)
    in_force = [r for i, r in enumerate(recorded) if i == 0 or r.since <= now]
    pending = recorded[len(in_force) :]
    current = timeline_from(in_force, start, written)
    last = in_force[-1]
    if (last.schedule, last.timezone) == key:
        return Plan(current, drop_after=now if pending else None)
    if len(pending) == 1 and (pending[0].schedule, pending[0].timezone) == key:
        return Plan(timeline_from(recorded, start, written))
    if current.floor(now) is None:  # no period has begun: nothing to keep
        replaced = Timeline.single(schedule, start, written)
        return Plan(replaced, add=mine, drop_after=_BEGINNING, previous=last)
    since = effective_from(current, schedule, now, start, written)
    return Plan(
        changed(current, schedule, since, start, written),
        add=Recorded(since, *key),
        drop_after=now if pending else None,
        previous=last,
    )


# -- labels ----------------------------------------------------------------------------------


def as_utc(t: datetime) -> datetime:
    if t.tzinfo is UTC:
        return t
    if t.tzinfo is None:
        raise ValueError(f"naive datetime {t!r}: catchup keeps every time in UTC")
    return t.astimezone(UTC)


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


def span(length: float | timedelta) -> str:
    """A length of time, exact, the one way catchup writes one: ``90s``, ``1h30m``, ``23h30m``,
    ``25h``, ``7d``, ``6d23h``. Days only from two days up, so a 25-hour day reads ``25h``;
    fractions of a second only in spans under a minute."""
    seconds = length.total_seconds() if isinstance(length, timedelta) else float(length)
    sign, seconds = ("-" if seconds < 0 else ""), abs(seconds)
    if seconds < 60 and seconds != int(seconds):
        return f"{sign}{seconds:g}s"
    whole = round(seconds)
    days, rest = divmod(whole, 86400) if whole >= 2 * 86400 else (0, whole)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{v}{u}" for v, u in ((days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")) if v]
    return sign + ("".join(parts) or "0s")


def iso_utc(t: datetime) -> str:
    return as_utc(t).strftime("%Y-%m-%dT%H:%M:%SZ")
