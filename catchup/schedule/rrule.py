"""RFC 5545 RRULEs on a local clock, counted from the job's start."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from itertools import islice, pairwise

from dateutil.rrule import rrule, rrulestr

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


def parse_rrule(text: str, timezone: str = "UTC") -> RRule:  # noqa: C901
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
