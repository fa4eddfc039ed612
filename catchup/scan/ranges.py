"""Runs of consecutive periods in one state ("ranges"), on a job's timeline: the pure part of
the gap detector (:mod:`catchup.scan.detector`): grouping rows, joining runs found in different
pieces,
and which parts of a window coverage does or does not vouch for."""

from __future__ import annotations

from datetime import datetime

from ..results import Range
from ..schedule import Timeline


def uncovered(
    timeline: Timeline,
    first: datetime,
    end: datetime,
    covered: list[tuple[datetime, datetime]],
) -> list[tuple[datetime, datetime]]:
    """The parts of ``[first, end)`` that no coverage range vouches for, as ``[lo, hi)``."""
    gaps = []
    cursor = first
    for lo, last in covered:
        hi = timeline.after(last)
        if lo > cursor:
            gaps.append((cursor, min(lo, end)))
        cursor = max(cursor, hi)
        if cursor >= end:
            break
    if cursor < end:
        gaps.append((cursor, end))
    return [(lo, hi) for lo, hi in gaps if lo < hi]


def present_ranges(
    timeline: Timeline, first: datetime, end: datetime, missing: list[Range]
) -> list[tuple[datetime, datetime]]:
    """Coverage for ``[first, end)``: every period but the missing ones, as (first, last)."""
    ranges = []
    cursor = first
    for hole in missing:
        if hole.first > cursor:
            ranges.append((cursor, before(timeline, hole.first)))
        cursor = timeline.after(hole.last)
    if cursor < end:
        ranges.append((cursor, before(timeline, end)))
    return ranges


def before(timeline: Timeline, t: datetime) -> datetime:
    found = timeline.before(t)
    assert found is not None
    return found


def merge(timeline: Timeline, ranges: list[Range]) -> list[Range]:
    """Sort runs of one state, joining those that meet (found in different pieces)."""
    merged: list[Range] = []
    for range_ in sorted(ranges, key=lambda i: i.first):
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.state == range_.state
            and last.last < range_.first
            and timeline.after(last.last) == range_.first
        ):
            merged[-1] = Range(last.state, last.first, range_.last, last.periods + range_.periods)
        else:
            merged.append(range_)
    return merged


def group(timeline: Timeline, rows: list[tuple[str, datetime]]) -> list[Range]:
    """Rows (state, period start), oldest first, as runs of consecutive periods in one state.
    Rows that are not period starts of the timeline (left by an edited start) are ignored."""
    ranges: list[Range] = []
    for state, start in rows:
        if not timeline.is_boundary(start):
            continue
        last = ranges[-1] if ranges else None
        if last and last.state == state and timeline.after(last.last) == start:
            ranges[-1] = Range(state, last.first, start, last.periods + 1)
        else:
            ranges.append(Range(state, start, start, 1))
    return ranges


def carve(
    timeline: Timeline,
    ranges: list[Range],
    within: str,
    starts: tuple[datetime, ...],
    state: str,
) -> list[Range]:
    """``ranges`` (oldest first) with the periods at ``starts`` that lie in a range in state
    ``within`` taken out of it into ranges of ``state`` (consecutive ones joined); starts
    elsewhere are ignored."""
    marked = group(timeline, [(state, s) for s in sorted(starts)])
    out: list[Range] = []
    i = 0
    for range_ in ranges:
        while i < len(marked) and marked[i].first < range_.first:
            i += 1  # not inside any range in ``within``
        if range_.state != within:
            out.append(range_)
            continue
        cursor = range_.first
        while i < len(marked) and marked[i].first <= range_.last:
            run = marked[i]
            if run.first > cursor:
                out.append(Range(within, cursor, before(timeline, run.first), 0))
            last = min(run.last, range_.last)
            out.append(
                Range(state, run.first, last, timeline.count(run.first, timeline.after(last)))
            )
            cursor = timeline.after(last)
            i += 1
        if cursor <= range_.last:
            out.append(Range(within, cursor, range_.last, 0))
    # the pieces left in ``within`` get their counts now that they are cut
    return [Range(s, a, b, n or timeline.count(a, timeline.after(b))) for s, a, b, n in out]
