"""The scan's ``blocked`` periods of a job with keys: every key's missing range is cut where
the upstream periods it waits for are not done, as :mod:`catchup.scan.blocked` cuts an unkeyed
job's: an unkeyed upstream's periods (the same for every key), a keyed upstream's of the same
key (``key_runs``), and its own previous period of the same key. The pieces that wait are
blocked, named by what they wait for, and the keys' ranges are grouped again across keys
(``grouped``, which the scan of a keyed job uses too)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from ..config.job import Job
from ..results import JobScan, Range
from ..vocabulary import PeriodState
from .carving import UpstreamRun, carried, said_of, segments
from .targets import KeyRange

# an excluded upstream period (nobody expects it) blocks nothing
DONE = frozenset({PeriodState.succeeded, PeriodState.waived, PeriodState.excluded})

# a piece of a missing range: its state, its first period's start, its end, what it waits for
Piece = tuple[str, datetime, datetime, tuple[UpstreamRun, ...]]


def key_runs(up: Job, scan: JobScan, own: bool = False) -> dict[str, list[UpstreamRun]]:
    """A keyed upstream job's periods not done, per key, as runs: its scan's key ranges (all
    but succeeded and waived ones; a period before its scan's window counts as done). With
    ``own`` (the job waits for its own previous period) its missing ranges are left out: the
    carving carries a missing range's first period on through the rest."""
    out: dict[str, list[UpstreamRun]] = {}
    for r in scan.key_ranges:
        if r.state not in DONE and not (own and r.state == PeriodState.missing):
            run = UpstreamRun(up, r.first, r.last, up.timeline.after(r.last), r.state)
            out.setdefault(r.key, []).append(run)
    return out


def grouped(
    found: list[KeyRange] | tuple[KeyRange, ...],
) -> tuple[tuple[Range, ...], tuple[tuple[str, ...], ...]]:
    """The keys' ranges grouped across keys: one range per state and span, oldest first,
    with the keys each holds (in their order in ``found``)."""
    groups: dict[tuple[str, datetime, datetime], list[KeyRange]] = {}
    for r in found:
        groups.setdefault((r.state, r.first, r.last), []).append(r)
    ordered = sorted(groups.items(), key=lambda item: (item[0][1], item[0][0]))
    ranges = tuple(
        Range(state, a, b, sum(r.periods for r in held)) for (state, a, b), held in ordered
    )
    return ranges, tuple(tuple(r.key for r in held) for _, held in ordered)


def carved_keys(
    job: Job,
    result: JobScan,
    runs: dict[str, list[UpstreamRun]],
    uppers: dict[str, Job],
    by_key: dict[str, dict[str, list[UpstreamRun]]],
    own_dep: bool = False,
) -> JobScan:
    """``result`` (a keyed job's scan) with each key's missing periods that wait for the
    upstream ``runs`` (of unkeyed jobs, the same for every key) or for a keyed upstream's
    runs of the same key (``by_key``: upstream job -> key -> runs) as ``blocked``; a span
    many keys share is cut once when no keyed upstream has runs of the key. ``own_dep``: the
    job waits for its own previous period (of the same key), so a missing range's first period
    blocks the rest of it."""
    if not runs and not any(by_key.values()) and not own_dep:
        return result
    timeline = job.timeline
    cuts: dict[tuple[datetime, datetime], list[Piece]] = {}
    found: list[KeyRange] = []
    actives: dict[tuple[str, datetime, datetime], tuple[UpstreamRun, ...]] = {}
    moved = 0
    for r in result.key_ranges:
        if r.state != PeriodState.missing:
            found.append(r)
            continue
        own = {name: keys[r.key] for name, keys in by_key.items() if r.key in keys}
        if own:
            pieces = _pieces(job, r.first, r.last, {**runs, **own}, uppers, own_dep)
        else:
            shared = cuts.get((r.first, r.last))
            if shared is None:
                shared = _pieces(job, r.first, r.last, runs, uppers, own_dep)
                cuts[(r.first, r.last)] = shared
            pieces = shared
        for state, a, b, active in pieces:
            last = timeline.before(b) or a
            piece = KeyRange(r.key, state, a, last, timeline.count(a, b))
            found.append(piece)
            if state == PeriodState.blocked:
                moved += piece.periods
                actives[(r.key, a, last)] = active
    if not moved:
        return result
    found.sort(key=lambda k: (k.first, k.key))
    ranges, keys = grouped(found)
    counts = dict(result.counts)
    counts[PeriodState.missing] -= moved
    counts[PeriodState.blocked] = counts.get(PeriodState.blocked, 0) + moved
    blocked_by = tuple(
        (r.first, _waits(job, r, held, actives))
        for r, held in zip(ranges, keys, strict=True)
        if r.state == PeriodState.blocked
    )
    return replace(
        result,
        ranges=ranges,
        counts=counts,
        blocked_by=blocked_by,
        key_ranges=tuple(found),
        range_keys=keys,
    )


def _waits(
    job: Job,
    r: Range,
    held: tuple[str, ...],
    actives: dict[tuple[str, datetime, datetime], tuple[UpstreamRun, ...]],
) -> str:
    """What the keys ``held`` of blocked range ``r`` wait for: what they all wait for, then
    what some wait for besides, naming them (``rates 2026-03-04 (missing); globex also
    balance 2026-03-02 (exhausted)``)."""
    sets = [frozenset(actives[(key, r.first, r.last)]) for key in held]
    common = frozenset.intersection(*sets)
    parts = [said_of(job, r, tuple(sorted(common)))] if common else []
    besides: dict[frozenset[UpstreamRun], list[str]] = {}
    for key, runs in zip(held, sets, strict=True):
        if runs - common:
            besides.setdefault(runs - common, []).append(key)
    for n, (runs, named) in enumerate(besides.items()):
        if n == 3:
            parts.append(f"and {len(besides) - 3} more")
            break
        who = ", ".join(named[:3]) + (f" +{len(named) - 3}" if len(named) > 3 else "")
        parts.append(f"{who}{' also' if common else ''}: {said_of(job, r, tuple(sorted(runs)))}")
    return "; ".join(parts)


def _pieces(
    job: Job,
    first: datetime,
    last: datetime,
    runs: dict[str, list[UpstreamRun]],
    uppers: dict[str, Job],
    own: bool = False,
) -> list[Piece]:
    """The missing range ``[first, last]`` (period starts) cut into missing and blocked
    pieces, in order, each with the upstream runs it waits for."""
    lo, hi = first, job.timeline.after(last)
    out: list[Piece] = []
    cursor = lo
    pieces = segments(job, lo, hi, runs, uppers)
    for a, b, active in carried(job, lo, hi, pieces) if own else pieces:
        if a > cursor:
            out.append((PeriodState.missing, cursor, a, ()))
        out.append((PeriodState.blocked, a, b, active))
        cursor = b
    if cursor < hi:
        out.append((PeriodState.missing, cursor, hi, ()))
    return out
