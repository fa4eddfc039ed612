"""What scans verified of each key of a job with keys: the ranges of period starts that have a
row each (``job_keys.verified``). Rows are never removed by catchup (a trigger forgets a key's
ranges when a person removes one of its rows), so a later scan looks for holes only in the
stretches of each key's expected periods outside them: the holes it found last time, and the
periods that became due since. Pure: the window's period starts and ends are passed in."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import datetime

from ..vocabulary import PeriodState
from .targets import KeyRange, KeyRow

Span = tuple[datetime, datetime]  # [lo, hi) of period starts
Stretch = tuple[str, int, int]  # a key, and [i0, i1) of 0-based period indexes in the window


def expected_range(
    key: KeyRow, starts: Sequence[datetime], ends: Sequence[datetime]
) -> tuple[int, int]:
    """``[lo, hi)``: the indexes of the window's periods the key is expected to have (those
    ending after it is expected, starting before it is gone)."""
    lo = bisect.bisect_right(ends, key.expected_from)
    hi = len(starts) if key.gone_at is None else bisect.bisect_left(starts, key.gone_at)
    return lo, max(lo, hi)


def unverified(
    keys: Sequence[KeyRow], starts: Sequence[datetime], ends: Sequence[datetime], valid: bool
) -> list[Stretch]:
    """Per key, the stretches of its expected periods in the window outside what was verified
    (``valid``: the recorded ranges hold for these schedules; else all of them)."""
    out: list[Stretch] = []
    for key in keys:
        lo, hi = expected_range(key, starts, ends)
        cur = lo
        for a, b in (key.verified or ()) if valid else ():
            i, j = max(bisect.bisect_left(starts, a), lo), min(bisect.bisect_left(starts, b), hi)
            if i >= j:
                continue
            if i > cur:
                out.append((key.key, cur, i))
            cur = max(cur, j)
        if cur < hi:
            out.append((key.key, cur, hi))
    return out


def merged(spans: Sequence[Span]) -> tuple[Span, ...]:
    """``spans`` sorted, those that overlap or meet joined."""
    out: list[Span] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return tuple(out)


def verified_now(
    keys: Sequence[KeyRow],
    valid: bool,
    checked: Sequence[Stretch],
    found: Sequence[KeyRange],
    starts: Sequence[datetime],
    end: datetime,
) -> list[tuple[str, tuple[Span, ...]]]:
    """Per key whose verified ranges grew: all of them now. ``checked`` are the stretches the
    scan looked for holes in, ``found`` its ranges (the missing ones are the holes); what it
    checked and found no hole in has a row every period."""
    n = len(starts)

    def at(i: int) -> datetime:
        return starts[i] if i < n else end

    holes: dict[str, list[tuple[int, int]]] = {}
    for r in found:
        if r.state == PeriodState.missing:
            i = bisect.bisect_left(starts, r.first)
            holes.setdefault(r.key, []).append((i, bisect.bisect_left(starts, r.last) + 1))
    grown: dict[str, list[Span]] = {}
    for key, i0, i1 in checked:
        cur = i0
        for a, b in sorted(holes.get(key, ())):
            a, b = max(a, i0), min(b, i1)
            if a >= b:
                continue
            if a > cur:
                grown.setdefault(key, []).append((at(cur), at(a)))
            cur = max(cur, b)
        if cur < i1:
            grown.setdefault(key, []).append((at(cur), at(i1)))
    out = []
    for row in keys:
        if row.key not in grown:
            continue
        before = merged(row.verified or ()) if valid else ()
        now = merged([*before, *grown[row.key]])
        if now != before:
            out.append((row.key, now))
    return out
