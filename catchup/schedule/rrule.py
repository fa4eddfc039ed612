"""RFC 5545 RRULEs on a local clock, counted from the job's start, read as RFC 5545 and libical
read them. python-dateutil expands them, corrected around the places it reads a rule
differently (:mod:`catchup.schedule.rfc5545` holds the reading):

- the parts RFC 5545 takes from DTSTART are written into the rule from the job's start first
  (``FREQ=YEARLY;BYMONTHDAY=29`` from a 29 February is every 29 February, not every 29th);
- BYSETPOS counts over the whole interval ``start`` falls in: dateutil is given the first day
  of that week, month or year as DTSTART, and instances before ``start`` are dropped;
- with BYWEEKNO, only days of the weeks named are kept (dateutil finds a 53rd week in some
  years that have 52), and INTERVAL counts week-numbering years: every year is expanded, and
  the instances of every INTERVAL-th week-numbering year from ``start``'s are kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from itertools import islice, pairwise, takewhile

from dateutil.rrule import rrule, rrulestr

from .rfc5545 import (
    RuleError,
    implied,
    interval_start,
    joined,
    refusal,
    split,
    time_parts,
    week_number,
    week_one,
    week_start,
    week_year,
)
from .steps import Schedule, Wall
from .zones import _EPOCH, _LONGEST, _SHORTEST, ScheduleError, written_wall, zone

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
        parts = split(self.canonical[6:])
        several = any("," in parts.get(part, "") for part in ("BYHOUR", "BYMINUTE"))
        return parts.get("FREQ") in ("DAILY", "WEEKLY", "MONTHLY", "YEARLY") and not several

    def bound(self, origin: datetime, written: datetime | None = None) -> Schedule:
        return replace(self, origin=written_wall(origin, zone(self.timezone), written))

    def walls_from(self, w: datetime) -> Iterator[datetime]:
        return _expansion(self.canonical, self.origin).walls_from(w)

    def walls_before(self, w: datetime) -> Iterator[datetime]:
        return _expansion(self.canonical, self.origin).walls_before(w)

    def refusal(self, date_only: bool = False) -> str | None:
        """Why the rule, counted from this start, cannot be a job's schedule, or None."""
        shown = f"RRULE {self.text!r}"
        timed = time_parts(split(self.canonical[6:]))
        if date_only and timed:
            return (
                f"{shown}: {timed[0]} names a time of day, and RFC 5545 ignores it when the "
                f'start is a date: write the start with its time, like start = "'
                f'{self.origin:%Y-%m-%dT%H:%M}"'
            )
        try:
            walls = self.walls_from(self.origin)
        except ValueError:  # dateutil: no BYHOUR or BYMINUTE is reached in steps of INTERVAL
            return f"{shown}: it never occurs counted from the start, {self.origin:%Y-%m-%d %H:%M}"
        return _length_refusal(shown, walls, self.origin)


def _length_refusal(shown: str, walls: Iterator[datetime], origin: datetime) -> str | None:
    horizon = origin + 4 * _LONGEST
    sample = list(islice(takewhile(lambda w: w < horizon, walls), 64))
    if not sample or sample[0] - origin > _LONGEST:
        return f"{shown}: it does not occur within 3650 days of the start"
    if len(sample) < 2:
        return f"{shown}: it must occur again within 3650 days"
    gaps = [b - a for a, b in pairwise(sample)]
    if min(gaps) < _SHORTEST:
        return f"{shown}: periods are at least one minute long"
    if max(gaps) > _LONGEST:
        return f"{shown}: periods are at most 3650 days long"
    return None


class _Expansion:
    """The rule's local times from ``start``, as RFC 5545 reads them (see the module)."""

    def __init__(self, text: str, start: datetime) -> None:
        parts = split(text[6:])
        full = implied(parts, start)
        self.start = start
        self.weeks = {int(n) for n in parts["BYWEEKNO"].split(",")} if "BYWEEKNO" in parts else None
        self.every = int(parts.get("INTERVAL", "1")) if "BYWEEKNO" in parts else 1
        self.wkst = week_start(parts)
        if self.every > 1:
            full["INTERVAL"] = "1"
        rule = rrulestr(joined(full), dtstart=interval_start(parts, start), cache=True)
        assert isinstance(rule, rrule)
        self.rule = rule
        self.year = self._first_year()

    def _first_year(self) -> int:
        """The week-numbering year INTERVAL counts from: the one ``start`` falls in when it has
        an instance from ``start`` on, else (as libical has it) ``start``'s calendar year."""
        year = week_year(self.start.date(), self.wkst)
        if self.every == 1 or year == self.start.year:
            return year
        found = self.rule.after(self.start, inc=True)
        return (
            year
            if found is not None and found.date() < week_one(year + 1, self.wkst)
            else self.start.year
        )

    def _kept(self, w: datetime) -> bool:
        """In one of BYWEEKNO's weeks (dateutil counts a 53rd week in some years that have 52),
        of a week-numbering year INTERVAL counts."""
        if self.weeks is None:
            return True
        if self.weeks.isdisjoint(week_number(w.date(), self.wkst)):
            return False
        return (week_year(w.date(), self.wkst) - self.year) % self.every == 0

    def walls_from(self, w: datetime) -> Iterator[datetime]:
        for found in self.rule.xafter(max(w, self.start), inc=True):
            if self._kept(found):
                yield found

    def walls_before(self, w: datetime) -> Iterator[datetime]:
        rule = self.rule
        while (found := rule.before(w, inc=False)) is not None and found >= self.start:
            if self._kept(found):
                yield found
            w = found


@lru_cache(maxsize=64)
def _expansion(text: str, start: datetime) -> _Expansion:
    return _Expansion(text, start)


def parse_rrule(text: str, timezone: str = "UTC", *, checked: bool = True) -> RRule:
    """A rule as catchup reads it, or a :class:`ScheduleError` saying why not in one line; the
    rule's length of period is checked once it is counted from a start (:meth:`RRule.refusal`).
    Not ``checked``: a rule from the ledger's history, only read."""
    body = text.strip()
    shown = " ".join(body.split())
    if "\n" in body or not body.upper().startswith("RRULE:"):
        raise ScheduleError(f"schedule {shown!r}: write one rule as 'RRULE:FREQ=…' (no DTSTART)")
    try:
        parts = split(body[6:])
    except RuleError as exc:
        raise ScheduleError(f"RRULE {shown[:80]!r}: {exc}") from None
    said = (_unsupported(parts) or refusal(parts)) if checked else None
    if said is not None:
        raise ScheduleError(f"RRULE {shown[:120]!r}: {said}")
    try:  # every value dateutil takes (whether it occurs is checked from the job's start)
        rrulestr(joined({**parts, "INTERVAL": "1"}), dtstart=datetime(2026, 1, 1))
    except (ValueError, TypeError, OverflowError) as exc:
        raise ScheduleError(f"RRULE {shown[:80]!r}: {exc}") from None
    return RRule(text=shown, timezone=timezone)


def _unsupported(parts: dict[str, str]) -> str | None:
    for key in ("COUNT", "UNTIL"):
        if key in parts:
            return (
                f"{key} is not supported: a job's periods never end "
                "(remove the job when it is done)"
            )
    if "DTSTART" in parts:
        return "DTSTART comes from the job's start, not the rule"
    if "BYSECOND" in parts or parts.get("FREQ") == "SECONDLY":
        return "periods are at least one minute long"
    if "RSCALE" in parts or "SKIP" in parts:
        return "RSCALE and SKIP (RFC 7529) are not supported: catchup reads Gregorian rules"
    if "BYSETPOS" in parts and "BYWEEKNO" in parts:
        return (
            "BYSETPOS with BYWEEKNO is read differently by calendar programs: list the days "
            "you mean with BYWEEKNO and BYDAY"
        )
    return None
