"""Periods nobody expects: a job's ``exclude`` entries (and the named calendars they use) read,
and the spans of UTC time they exclude in a window. Pure: the zone and the window are passed in.

A period is excluded when its **start** falls in an excluded span; a period that starts before
a span and runs into it is expected as usual (a weekly period that starts on the Monday before
Christmas is not excluded by Christmas). The forms, each read on the job's local clock:

- a local date, ``"2026-12-24"``: that whole local day;
- a range of dates, ``"2026-12-24..2026-12-26"``: every day from the first to the last, both
  included;
- a range of times, ``"2026-12-01T02:00Z..2026-12-01T04:00Z"`` (``Z``, an offset, or none for
  the job's local time): ``[A, B)``, the end left out;
- a day rule, ``"RRULE:FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=25"``: every local day it names
  (counted from 1970-01-01, the start RFC 5545 needs when a rule leaves parts out);
- a cron spec, ``"* 2-3 * * 0#1"``: every local minute it matches (here 02:00 to 04:00 on each
  first Sunday), as Temporal's ``ExcludeCalendar`` matches times;
- ``"calendar:NAME"``: the entries of ``[calendars.NAME] dates``, shared by jobs.

Where a local time happens twice (the night the clocks go back), a span covers it in both
readings: ``"* 2 * * *"`` excludes both 02:00 hours, ``02:30..02:45`` both quarters of an hour;
a local time the clocks skip is the instant they jumped over it, so a span inside the gap
excludes nothing.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from .cron import Cron, parse_cron
from .rfc5545 import split, time_parts
from .rrule import RRule, parse_rrule
from .zones import ScheduleError, as_utc, to_utc, transitions

Span = tuple[datetime, datetime]  # UTC [lo, hi)

_DAY = timedelta(days=1)
_MINUTE = timedelta(minutes=1)
_MIN = datetime.min.replace(tzinfo=UTC)
_MAX = datetime.max.replace(tzinfo=UTC)
_RULE_ORIGIN = datetime(1970, 1, 1)
_FORMS = (
    "a date (2026-12-24), a range (2026-12-24..2026-12-26, or times with Z or an offset), "
    "'RRULE:FREQ=…', a cron day spec ('* * 25 12 *') or 'calendar:NAME'"
)


class ExcludeError(ScheduleError):
    """An exclude entry catchup cannot read, said in one line."""


@dataclass(frozen=True)
class Entry:
    """One excluded day, range or rule as written, and what it is called (``by``): the
    calendar it came from, or ``exclude`` for the job's own."""

    text: str
    by: str

    def spans(self, tz: ZoneInfo, lo: datetime, hi: datetime) -> Iterator[Span]:
        raise NotImplementedError


@dataclass(frozen=True)
class Days(Entry):
    """Local days from ``first`` to ``last``, both included."""

    first: date = date.min
    last: date = date.min

    def spans(self, tz: ZoneInfo, lo: datetime, hi: datetime) -> Iterator[Span]:
        end = datetime.max if self.last == date.max else datetime.combine(self.last + _DAY, time())
        yield from local_spans(datetime.combine(self.first, time()), end, tz)


@dataclass(frozen=True)
class Times(Entry):
    """``[lo, hi)``: aware instants, or naive local times."""

    lo: datetime = datetime.min
    hi: datetime = datetime.min

    def spans(self, tz: ZoneInfo, lo: datetime, hi: datetime) -> Iterator[Span]:
        if self.lo.tzinfo is not None:
            yield _utc_or_edge(self.lo), _utc_or_edge(self.hi)
        else:
            yield from local_spans(self.lo, self.hi, tz)


@dataclass(frozen=True)
class DayRule(Entry):
    """Every local day an RRULE without a time of day names."""

    rule: RRule = field(default_factory=lambda: RRule(text="RRULE:FREQ=DAILY"))

    def spans(self, tz: ZoneInfo, lo: datetime, hi: datetime) -> Iterator[Span]:
        first, end = _local_day(lo, tz) - _DAY, _local_day(hi, tz)
        for year in range(first.year, end.year + 1):
            days = _rule_days(self.rule, year)
            for day in days[bisect.bisect_left(days, first) :]:
                if day > end:
                    return
                wall = datetime.combine(day, time())
                yield from local_spans(wall, wall + _DAY, tz)


@lru_cache(maxsize=65536)
def _rule_days(rule: RRule, year: int) -> tuple[date, ...]:
    """The days of ``year`` a day rule names, expanded once (a claim asks about one period;
    a config may list many rules)."""
    days = []
    for wall in _counted_near(rule, year).walls_from(datetime(year, 1, 1)):
        if wall.year > year:
            break
        days.append(wall.date())
    return tuple(days)


@lru_cache(maxsize=4096)
def _counted_near(rule: RRule, year: int) -> RRule:
    """``rule`` counted from 1 January of ``year`` when that names the same days as from
    1970 (INTERVAL 1, and the parts RFC 5545 would take from the start the same): expanded
    from near the window, not from 1970 each time."""
    parts = split(rule.canonical[6:])
    if parts.get("INTERVAL", "1") != "1" or (parts["FREQ"] == "WEEKLY" and "BYDAY" not in parts):
        return rule
    return replace(rule, origin=datetime(max(year, 1971), 1, 1))


@dataclass(frozen=True)
class CronMatch(Entry):
    """Every local minute a cron expression matches, as runs of consecutive minutes."""

    cron: Cron = field(default_factory=lambda: parse_cron("* * * * *"))

    def spans(self, tz: ZoneInfo, lo: datetime, hi: datetime) -> Iterator[Span]:
        runs = _minute_runs(self.cron)
        day, end = _local_day(lo, tz) - _DAY, _local_day(hi, tz)
        while day <= end:
            if self.cron.matches(day):
                midnight = datetime.combine(day, time())
                for a, b in runs:
                    yield from local_spans(
                        midnight + timedelta(minutes=a), midnight + timedelta(minutes=b), tz
                    )
            day += _DAY


def _minute_runs(cron: Cron) -> list[tuple[int, int]]:
    """The minutes of a day the cron matches, as ``[a, b)`` in minutes from midnight."""
    minutes = sorted(h * 60 + m for h in cron.hours for m in cron.minutes)
    runs: list[tuple[int, int]] = []
    for m in minutes:
        if runs and runs[-1][1] == m:
            runs[-1] = (runs[-1][0], m + 1)
        else:
            runs.append((m, m + 1))
    return runs


def _local_day(t: datetime, tz: ZoneInfo) -> date:
    return as_utc(t).astimezone(tz).date()


def _utc_or_edge(t: datetime) -> datetime:
    """An aware time in UTC; one that UTC cannot hold (the first or last hours a datetime
    holds, with an offset) at the edge it passes."""
    try:
        return t.astimezone(UTC)
    except OverflowError:
        return _MIN if t.year < 2 else _MAX


def local_spans(a: datetime, b: datetime, tz: ZoneInfo) -> Iterator[Span]:
    """The instants of local times ``[a, b)``: once outside DST changes; where a local time
    happens twice, both readings (``[a, b)`` in the first and in the last); a local time the
    clocks skip is the instant they jumped over it, so a span inside the gap is empty."""
    (a1, a2), (b1, b2) = readings(a, tz), readings(b, tz)
    yield a1, b1
    if (a2, b2) != (a1, b1):
        yield a2, b2


def readings(wall: datetime, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """The first and the last instant a local time names (the same but on a night the
    clocks go back); for a time they skip, the instant they jumped, twice."""
    try:
        early = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
        late = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    except OverflowError:  # the first or last days a datetime holds
        edge = _MIN if wall.year < 2 else _MAX
        return edge, edge
    a, b = min(early, late), max(early, late)
    if wall in (a.astimezone(tz).replace(tzinfo=None), b.astimezone(tz).replace(tzinfo=None)):
        return a, b
    jumped = transitions(tz, a, b + _MINUTE)
    at = jumped[0][0] if jumped else to_utc(wall, tz)
    return at, at


# -- reading ------------------------------------------------------------------------------------


def read_entries(
    texts: Iterable[str], calendars: Mapping[str, tuple[Entry, ...]]
) -> tuple[Entry, ...]:
    """A job's ``exclude`` list read: each entry (called ``exclude '…'``), a calendar's as its
    entries (called ``calendar NAME``). Raises :class:`ExcludeError` naming the first entry it
    cannot read."""
    out: list[Entry] = []
    for text in texts:
        if text.strip().startswith("calendar:"):
            name = text.strip()[len("calendar:") :].strip()
            if name not in calendars:
                known = ", ".join(sorted(calendars)) or "none is defined"
                raise ExcludeError(
                    f"exclude entry {text!r}: no calendar {name!r} ([calendars.{name}]; "
                    f"known: {known})"
                )
            out.extend(calendars[name])
        else:
            out.append(read_entry(text))
    return tuple(out)


def read_entry(text: str, by: str | None = None) -> Entry:
    """One entry read (not a calendar reference), or :class:`ExcludeError` in one line."""
    body = " ".join(str(text).split())
    by = f"exclude {body!r}" if by is None else by
    if not body:
        raise ExcludeError(f"exclude entry {text!r} is empty: write {_FORMS}")
    if body.upper().startswith("RRULE:"):
        return _day_rule(body, by)
    if ".." in body:
        return read_range(body, by)
    if len(body.split()) == 5:
        try:
            return CronMatch(body, by, parse_cron(body))
        except ScheduleError as exc:
            raise ExcludeError(f"exclude entry {body!r}: {exc}") from None
    day = _date(body)
    if day is not None:
        return Days(body, by, day, day)
    if _time(body) is not None:
        raise ExcludeError(
            f"exclude entry {body!r}: a time alone excludes nothing: write a range, "
            f"{body}..{body[:10]}T…"
        )
    raise ExcludeError(f"exclude entry {body!r}: not {_FORMS}")


def read_range(body: str, by: str = "exclude") -> Days | Times:
    """``A..B`` of two dates (both days included) or two times (``[A, B)``)."""
    a, _, b = body.partition("..")
    a, b = a.strip(), b.strip()
    first, last = _date(a), _date(b)
    if first is not None and last is not None:
        if last < first:
            raise ExcludeError(f"range {body!r} runs backwards: its last day is before its first")
        return Days(body, by, first, last)
    lo, hi = _time(a), _time(b)
    if lo is None or hi is None:
        raise ExcludeError(
            f"range {body!r}: write two dates (2026-12-24..2026-12-26) or two times "
            f"(2026-12-01T02:00Z..2026-12-01T04:00Z)"
        )
    if (lo.tzinfo is None) != (hi.tzinfo is None):
        raise ExcludeError(f"range {body!r}: give both times an offset (or Z), or neither")
    if hi <= lo:
        raise ExcludeError(f"range {body!r} runs backwards: its end is not after its start")
    return Times(body, by, lo, hi)


def _date(text: str) -> date | None:
    if len(text) != 10:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def _time(text: str) -> datetime | None:
    if "T" not in text.upper():
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def _day_rule(body: str, by: str) -> DayRule:
    try:
        parsed = parse_rrule(body)
        parts = split(parsed.canonical[6:])
    except ScheduleError as exc:
        raise ExcludeError(f"exclude entry {body!r}: {exc}") from None
    timed = time_parts(parts)
    if timed or parts.get("FREQ") in ("HOURLY", "MINUTELY", "SECONDLY"):
        what = timed[0] if timed else f"FREQ={parts.get('FREQ')}"
        raise ExcludeError(
            f"exclude entry {body!r}: {what}: an RRULE excludes whole days; for times of day "
            f"write a cron spec, like '* 2-3 * * 0#1' (02:00 to 04:00 each first Sunday)"
        )
    rule = replace(parsed, origin=_RULE_ORIGIN)
    try:
        next(iter(rule.walls_from(_RULE_ORIGIN)))
    except (StopIteration, ValueError):
        raise ExcludeError(f"exclude entry {body!r}: the rule names no day") from None
    return DayRule(body, by, rule)


# -- what a job's entries exclude ---------------------------------------------------------------


@dataclass(frozen=True)
class Excluded:
    """Excluded spans, disjoint and sorted, each with what excluded it: a period whose start
    falls in one is excluded (:meth:`at`)."""

    los: tuple[datetime, ...] = ()
    his: tuple[datetime, ...] = ()
    bys: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.los)

    def at(self, t: datetime) -> str | None:
        """What excludes a period starting at ``t``, or None."""
        i = bisect.bisect_right(self.los, t) - 1
        return self.bys[i] if i >= 0 and t < self.his[i] else None

    def end_of(self, t: datetime) -> datetime | None:
        """Where the span ``t`` falls in ends, or None when it falls in none."""
        i = bisect.bisect_right(self.los, t) - 1
        return self.his[i] if i >= 0 and t < self.his[i] else None

    def whole(self, first: datetime, last: datetime) -> str | None:
        """What excludes every instant from ``first`` to ``last`` (both included) in one
        span, or None."""
        i = bisect.bisect_right(self.los, first) - 1
        return self.bys[i] if i >= 0 and last < self.his[i] else None

    def meeting(self, lo: datetime, hi: datetime) -> Iterator[tuple[datetime, datetime, str]]:
        """The spans that meet ``[lo, hi)``, cut to it, oldest first."""
        i = max(0, bisect.bisect_right(self.los, lo) - 1)
        while i < len(self.los) and self.los[i] < hi:
            a, b = max(self.los[i], lo), min(self.his[i], hi)
            if a < b:
                yield a, b, self.bys[i]
            i += 1

    def cut(self, lo: datetime, hi: datetime) -> Excluded:
        """These spans, cut to ``[lo, hi)``."""
        if not self.los or (self.los[0] >= lo and self.his[-1] <= hi):
            return self
        return excluded(self.meeting(lo, hi))

    def joined(self, spans: Iterable[tuple[datetime, datetime, str]]) -> Excluded:
        """These spans and ``spans`` as one :class:`Excluded` (an earlier span keeps what it
        is excluded by where two overlap)."""
        return excluded([*zip(self.los, self.his, self.bys, strict=True), *spans])


def excluded(spans: Iterable[tuple[datetime, datetime, str]]) -> Excluded:
    """Spans (lo, hi, by) made disjoint: where two overlap, the earlier one keeps its name."""
    los: list[datetime] = []
    his: list[datetime] = []
    bys: list[str] = []
    for lo, hi, by in sorted(spans, key=lambda s: (s[0], s[1])):
        if los and lo < his[-1]:
            if hi <= his[-1]:
                continue
            if by == bys[-1]:
                his[-1] = hi
                continue
            lo = his[-1]
        elif los and lo == his[-1] and by == bys[-1]:
            his[-1] = hi
            continue
        los.append(lo)
        his.append(hi)
        bys.append(by)
    return Excluded(tuple(los), tuple(his), tuple(bys))


def entry_spans(entries: tuple[Entry, ...], tz: ZoneInfo, lo: datetime, hi: datetime) -> Excluded:
    """What ``entries`` exclude of ``[lo, hi)`` on the clock of ``tz``: dates and ranges
    (the same spans whatever the window) read once and cut to it, rules expanded in it."""
    fixed, rules = _split(entries, tz)
    if not rules:
        return fixed.cut(lo, hi)
    return fixed.cut(lo, hi).joined(
        (max(a, lo), min(b, hi), entry.by)
        for entry in rules
        for a, b in entry.spans(tz, lo, hi)
        if a < hi and b > lo and a < b
    )


_SPLIT: dict[tuple[int, str], tuple[tuple[Entry, ...], Excluded, tuple[Entry, ...]]] = {}
_SPLIT_MOST = 16384  # lists kept (a config's jobs with exclude, each in its zone)


def _split(entries: tuple[Entry, ...], tz: ZoneInfo) -> tuple[Excluded, tuple[Entry, ...]]:
    """A job's entries as the spans of its dates and ranges, which no window changes (read
    once per list and zone, found again by the list's identity: a job keeps its list), and
    its rules."""
    found = _SPLIT.get((id(entries), str(tz)))
    if found is None or found[0] is not entries:
        if len(_SPLIT) >= _SPLIT_MOST:
            _SPLIT.clear()
        fixed = excluded(
            (a, b, entry.by)
            for entry in entries
            if isinstance(entry, Days | Times)
            for a, b in entry.spans(tz, _MIN, _MAX)
            if a < b
        )
        rules = tuple(e for e in entries if not isinstance(e, Days | Times))
        found = _SPLIT[(id(entries), str(tz))] = (entries, fixed, rules)
    return found[1], found[2]
