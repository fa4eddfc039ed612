"""The scan's ``blocked`` periods of a job with keys that waits for jobs without keys (``after
= ["export"]``): every key's missing range is cut where the upstream periods it waits for are
not done, as :mod:`catchup.chained` cuts an unkeyed job's, and the pieces that wait are
blocked, named by what they wait for. The keys' ranges are grouped again across keys."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from .carving import UpstreamRun, said_of, segments
from .job import Job
from .models import JobScan, Range
from .targets import KeyRange
from .vocabulary import PeriodState

if TYPE_CHECKING:
    from .config import Config

Piece = tuple[
    str, datetime, datetime, tuple[UpstreamRun, ...]
]  # state, first start, end, waits for


def gated_by_unkeyed(job: Job, config: Config) -> bool:
    """``job`` has keys and waits only for jobs without keys (not for itself): the scan can
    say which of its periods are blocked (a keyed upstream gates key by key at the claim)."""
    return (
        job.keyed
        and bool(job.after)
        and all(dep.job != job.name and not config.job(dep.job).keyed for dep in job.after)
    )


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
    job: Job, result: JobScan, runs: dict[str, list[UpstreamRun]], uppers: dict[str, Job]
) -> JobScan:
    """``result`` (a keyed job's scan) with each key's missing periods that wait for the
    upstream ``runs`` as ``blocked``; a span many keys share is cut once."""
    if not runs:
        return result
    timeline = job.timeline
    cuts: dict[tuple[datetime, datetime], list[Piece]] = {}
    found: list[KeyRange] = []
    waits: dict[tuple[datetime, datetime], str] = {}
    moved = 0
    for r in result.key_ranges:
        if r.state != PeriodState.missing:
            found.append(r)
            continue
        pieces = cuts.get((r.first, r.last))
        if pieces is None:
            pieces = cuts[(r.first, r.last)] = _pieces(job, r.first, r.last, runs, uppers)
        for state, a, b, active in pieces:
            last = timeline.before(b) or a
            piece = KeyRange(r.key, state, a, last, timeline.count(a, b))
            found.append(piece)
            if state == PeriodState.blocked:
                moved += piece.periods
                if (a, last) not in waits:
                    waits[(a, last)] = said_of(job, Range(state, a, last, piece.periods), active)
    if not moved:
        return result
    found.sort(key=lambda k: (k.first, k.key))
    ranges, keys = grouped(found)
    counts = dict(result.counts)
    counts[PeriodState.missing] -= moved
    counts[PeriodState.blocked] = counts.get(PeriodState.blocked, 0) + moved
    blocked_by = tuple(
        (r.first, waits[(r.first, r.last)]) for r in ranges if r.state == PeriodState.blocked
    )
    return replace(
        result,
        ranges=ranges,
        counts=counts,
        blocked_by=blocked_by,
        key_ranges=tuple(found),
        range_keys=keys,
    )


def _pieces(
    job: Job,
    first: datetime,
    last: datetime,
    runs: dict[str, list[UpstreamRun]],
    uppers: dict[str, Job],
) -> list[Piece]:
    """The missing range ``[first, last]`` (period starts) cut into missing and blocked
    pieces, in order, each with the upstream runs it waits for."""
    lo, hi = first, job.timeline.after(last)
    out: list[Piece] = []
    cursor = lo
    for a, b, active in segments(job, lo, hi, runs, uppers):
        if a > cursor:
            out.append((PeriodState.missing, cursor, a, ()))
        out.append((PeriodState.blocked, a, b, active))
        cursor = b
    if cursor < hi:
        out.append((PeriodState.missing, cursor, hi, ()))
    return out
