"""Time zones and the one DST rule (PostgreSQL's), the half-open period, and the formats of
instants and lengths: the base every schedule kind stands on."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

# Imports inside functions: at first use: only a zone nobody knows needs suggestions.

_EPOCH = datetime(1970, 1, 1)
_EPOCH_MONDAY = datetime(1970, 1, 5)  # a Monday, for weekly alignment
_EVERY = re.compile(
    r"every\s+(?:(\d+)\s+)?(minute|minutes|hour|hours|day|days|week|weeks)", re.IGNORECASE
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


_UNKNOWN_TO_POSTGRESQL = frozenset({"localtime", "posixrules"})


@lru_cache(maxsize=1)
def _known() -> frozenset[str]:
    return frozenset(available_timezones())


@lru_cache(maxsize=64)
def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; a :class:`ScheduleError` naming it when unknown."""
    # only the IANA names both Python and PostgreSQL know: ZoneInfo also opens files of the
    # system's zoneinfo folder (posixrules, localtime, right/…, posix/…) that PostgreSQL's
    # time zone list lacks, and every statement with such a zone would fail
    try:
        if name in _known() and name not in _UNKNOWN_TO_POSTGRESQL:
            return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        pass
    import difflib

    hint = difflib.get_close_matches(name, sorted(_known() - _UNKNOWN_TO_POSTGRESQL), n=1)
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


# -- formats ----------------------------------------------------------------------------------


def as_utc(t: datetime) -> datetime:
    if t.tzinfo is UTC:
        return t
    if t.tzinfo is None:
        raise ValueError(f"naive datetime {t!r}: catchup keeps every time in UTC")
    return t.astimezone(UTC)


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
