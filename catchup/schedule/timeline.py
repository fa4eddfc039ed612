"""A job's timeline: every schedule it has had, each from where it took effect."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from .steps import Fixed, Schedule
from .zones import _TICK, Period, as_utc, iso_utc

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
        """Every period whose start lies in ``[a, b)`` (a segment's last period ends where the
        next segment begins). Fixed steps are plain additions: a replay plans millions."""
        a = max(as_utc(a), self.first)
        for i, seg in enumerate(self.segments):
            lo = a if seg.since is None else max(a, seg.since)
            limit = self._limit(i)
            hi = b if limit is None else min(b, limit)
            if lo >= hi:
                continue
            schedule = seg.schedule
            if not isinstance(schedule, Fixed):
                for start in schedule.starts(lo, hi):
                    yield self.period(start)
                continue
            step = timedelta(seconds=schedule.seconds)
            start = schedule.ceil(lo)
            while start < hi:
                end = start + step
                yield Period(start, end if limit is None or end <= limit else limit)
                start = end

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
