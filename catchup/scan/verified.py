"""What scans verified of each key of a job with keys: the ranges of period starts that have a
row each (``job_keys.verified``). Rows are never removed by catchup (a trigger forgets a key's
ranges when a person removes one of its rows), so a later scan looks for holes only in the
stretches of each key's expected periods outside them: the holes it found last time, and the
periods that became due since. Pure: the window's period starts and ends are passed in.

A key's last range may follow the job's horizon (``scan_state.keys_horizon``): recorded
unbounded, it reaches wherever the horizon is. A scan that finds a row for every key's newest
periods moves the horizon, one row, and writes only the keys with a hole there: a later scan of
keys that did not change writes nothing per key."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, NamedTuple

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


Stored = tuple[tuple[Span, ...], bool]  # a key's ranges, and whether the last follows the horizon

# a scan that finds more than this share of the keys expected in the window's newest period
# without a row there (a tick about to run them) keeps the horizon at that period's start:
# moving it would write every such key's ranges, which the next scan would write again
HOLED_SHARE = 0.1


def next_horizon(
    keys: Sequence[KeyRow],
    holes: Holes,
    starts: Sequence[datetime],
    ends: Sequence[datetime],
    horizon: datetime | None,
    settled: int = 0,
) -> datetime | None:
    """Where the job's horizon moves after a scan of the window ``starts``..``end``: to its
    end, or to its newest period's start when many keys have no row there yet; nowhere when
    the window starts after the horizon (the periods between were not looked at), and never
    back. ``settled``: how many keys not among ``keys`` are expected in the newest period
    (each with a row there)."""
    if not starts or (horizon is not None and (starts[0] > horizon or ends[-1] <= horizon)):
        return horizon
    newest = len(starts) - 1
    expected, holed = settled, 0
    for row in keys:
        lo, hi = expected_range(row, starts, ends)
        if lo <= newest < hi:
            expected += 1
            holed += any(a <= newest < b for a, b in holes.get(row.key, ()))
    moved = starts[newest] if holed > expected * HOLED_SHARE else ends[-1]
    return moved if horizon is None else max(horizon, moved)


def stored(spans: Sequence[Span], reach: datetime | None) -> Stored:
    """``spans`` as recorded: cut at ``reach`` (the horizon), the last one unbounded when it
    reaches it (it follows the horizon as it moves)."""
    if reach is None:
        return tuple(spans), False
    cut = tuple((a, min(b, reach)) for a, b in spans if a < reach)
    return cut, bool(cut) and cut[-1][1] >= reach


Holes = dict[str, list[tuple[int, int]]]  # per key, [i, j) of the window's periods with no row


def hole_indexes(found: Sequence[KeyRange], starts: Sequence[datetime]) -> Holes:
    """Per key, ``[i, j)`` of the window's periods its missing ranges hold."""
    holes: Holes = {}
    for r in found:
        if r.state == PeriodState.missing:
            i = bisect.bisect_left(starts, r.first)
            holes.setdefault(r.key, []).append((i, bisect.bisect_left(starts, r.last) + 1))
    return holes


class Read(NamedTuple):
    """What a scan read of a job's scan state: whether the ranges recorded hold for its
    schedules, and the job's horizon."""

    valid: bool
    horizon: datetime | None = None
    moves: bool = True  # the scan looked at every key of the job: it may move the horizon
    settled: int = 0  # keys not read (settled), expected in the window's newest period


def verified_now(
    keys: Sequence[KeyRow],
    read: Read,
    checked: Sequence[Stretch],
    found: Sequence[KeyRange],
    starts: Sequence[datetime],
    ends: Sequence[datetime],
    end: datetime,
) -> tuple[Iterator[tuple[KeyRow, Stored]], datetime | None]:
    """Per key whose recorded ranges change: all of them now, made as they are taken (a
    first scan of a million keys writes them in chunks, never all held); and where the
    horizon moves. ``checked`` are the stretches the scan looked for holes in (in the order
    of ``keys``), ``found`` its ranges (the missing ones are the holes); what it checked and
    found no hole in has a row every period. A key whose ranges reached the horizon and still
    do is not written: the horizon moves."""
    holes = hole_indexes(found, starts)
    horizon = read.horizon if read.valid else None
    moved = (
        next_horizon(keys, holes, starts, ends, horizon, read.settled) if read.moves else horizon
    )
    window = (starts, ends, end)
    return _changed(keys, (read.valid, horizon is None), checked, holes, window, moved), moved


def _grown(stretches: list[Stretch], holes: Sequence[tuple[int, int]], at: Any) -> list[Span]:
    """What ``stretches`` (one key's) hold outside the key's ``holes``: period starts with a
    row each."""
    out: list[Span] = []
    for _, i0, i1 in stretches:
        cur = i0
        for a, b in sorted(holes):
            a, b = max(a, i0), min(b, i1)
            if a >= b:
                continue
            if a > cur:
                out.append((at(cur), at(a)))
            cur = max(cur, b)
        if cur < i1:
            out.append((at(cur), at(i1)))
    return out


def _changed(
    keys: Sequence[KeyRow],
    read: tuple[bool, bool],
    checked: Sequence[Stretch],
    holes: Holes,
    window: tuple[Sequence[datetime], Sequence[datetime], datetime],
    moved: datetime | None,
) -> Iterator[tuple[KeyRow, Stored]]:
    """:func:`verified_now`'s keys, one at a time (``read``: whether the ranges recorded
    hold, and whether no scan judged the keys yet: no horizon)."""
    valid, unjudged = read
    starts, ends, end = window
    n = len(starts)

    def at(i: int) -> datetime:
        return starts[i] if i < n else end

    stretches = iter(checked)
    pending = next(stretches, None)
    for row in keys:
        mine: list[Stretch] = []
        while pending is not None and pending[0] == row.key:
            mine.append(pending)
            pending = next(stretches, None)
        before = merged(row.verified or ()) if valid else ()
        now = merged([*before, *_grown(mine, holes.get(row.key, ()), at)]) if mine else before
        _, hi = expected_range(row, starts, ends)
        reach = moved if moved is None or hi >= n else min(moved, at(hi))
        after = stored(now, reach)
        # a first read's key, never judged (one that follows a horizon was: from there on)
        presumed = row.follows and unjudged
        if presumed or canonical(*after) != canonical(before, valid and row.follows):
            yield row, after


def canonical(spans: Sequence[Span], follows: bool) -> tuple[tuple[datetime, datetime | None], ...]:
    """Ranges as the ledger holds them: the last one's end left open when it follows the
    horizon (wherever the horizon was when they were read)."""
    out: list[tuple[datetime, datetime | None]] = list(spans)
    if follows and out:
        out[-1] = (out[-1][0], None)
    return tuple(out)
