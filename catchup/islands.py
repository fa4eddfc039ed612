"""Runs of consecutive periods in one state ("islands"), on a job's timeline: the pure part of
the gap detector (:mod:`catchup.scan`): grouping rows, joining runs found in different pieces,
and which parts of a window coverage does or does not vouch for."""

from __future__ import annotations

from datetime import datetime

from .models import Island
from .schedule import Timeline


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
    timeline: Timeline, first: datetime, end: datetime, missing: list[Island]
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


def merge(timeline: Timeline, islands: list[Island]) -> list[Island]:
    """Sort runs of one state, joining those that meet (found in different pieces)."""
    merged: list[Island] = []
    for island in sorted(islands, key=lambda i: i.first):
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.state == island.state
            and last.last < island.first
            and timeline.after(last.last) == island.first
        ):
            merged[-1] = Island(last.state, last.first, island.last, last.periods + island.periods)
        else:
            merged.append(island)
    return merged


def group(timeline: Timeline, rows: list[tuple[str, datetime]]) -> list[Island]:
    """Rows (state, period start), oldest first, as runs of consecutive periods in one state.
    Rows that are not period starts of the timeline (left by an edited start) are ignored."""
    islands: list[Island] = []
    for state, start in rows:
        if not timeline.is_boundary(start):
            continue
        last = islands[-1] if islands else None
        if last and last.state == state and timeline.after(last.last) == start:
            islands[-1] = Island(state, last.first, start, last.periods + 1)
        else:
            islands.append(Island(state, start, start, 1))
    return islands


def carve(
    timeline: Timeline,
    islands: list[Island],
    within: str,
    starts: tuple[datetime, ...],
    state: str,
) -> list[Island]:
    """``islands`` (oldest first) with the periods at ``starts`` that lie in an island in state
    ``within`` taken out of it into islands of ``state`` (consecutive ones joined); starts
    elsewhere are ignored."""
    marked = group(timeline, [(state, s) for s in sorted(starts)])
    out: list[Island] = []
    i = 0
    for island in islands:
        while i < len(marked) and marked[i].first < island.first:
            i += 1  # not inside any island in ``within``
        if island.state != within:
            out.append(island)
            continue
        cursor = island.first
        while i < len(marked) and marked[i].first <= island.last:
            run = marked[i]
            if run.first > cursor:
                out.append(Island(within, cursor, before(timeline, run.first), 0))
            last = min(run.last, island.last)
            out.append(
                Island(state, run.first, last, timeline.count(run.first, timeline.after(last)))
            )
            cursor = timeline.after(last)
            i += 1
        if cursor <= island.last:
            out.append(Island(within, cursor, island.last, 0))
    # the pieces left in ``within`` get their counts now that they are cut
    return [Island(s, a, b, n or timeline.count(a, timeline.after(b))) for s, a, b, n in out]
