"""Schedules as sequences of boundaries: :class:`Fixed` steps of elapsed time, and
:class:`Wall` schedules read on a local clock, of which :class:`WallStep` (daily, weekly,
monthly, every N days in a zone) is the simplest."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import cached_property
from itertools import islice, pairwise, takewhile

from dateutil.relativedelta import relativedelta

from .zones import (
    _EPOCH,
    _SLACK,
    _TICK,
    as_utc,
    is_utc,
    to_utc,
    to_wall,
    transitions,
    written_wall,
    zone,
)

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

    def refusal(self, date_only: bool = False) -> str | None:
        """Why this schedule, counted from its start (``date_only``: a start written as a date),
        cannot be a job's, or None. Only a rule's answer depends on the start."""
        return None

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

    @cached_property
    def _step(self) -> timedelta:
        return timedelta(seconds=self.seconds)

    def _k(self, t: datetime) -> int:
        return (as_utc(t) - self.origin) // self._step

    def _at(self, k: int) -> datetime:
        return self.origin + k * self._step

    # Plain arithmetic: these run once per gap in a scan.

    def floor(self, t: datetime) -> datetime:
        return self._at(self._k(t))

    def before(self, t: datetime) -> datetime:
        return self.floor(as_utc(t) - _TICK)

    def ceil(self, t: datetime) -> datetime:
        t = as_utc(t)
        start = self.floor(t)
        return start if start == t else start + self._step

    def after(self, t: datetime) -> datetime:
        return self.floor(t) + self._step

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
class WallStep(Wall):
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
        # WallStep months in UTC: the SQL side adds them under TimeZone = 'UTC'.
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
