"""The scan's ``excluded`` periods: a gap whose start falls in a day, range or rule its job's
``exclude`` names (:mod:`catchup.schedule.exclusions`), or in a window recorded afterwards
(``catchup exclude``, in the ledger), is nobody's to run. Applied to every job's scan after
its states are known, range by range: no period is looked at one by one.

Only a gap with no outcome that stands is excluded (:data:`catchup.vocabulary.EXCLUDABLE`):
a period that succeeded stays succeeded when a window is recorded over it, one that runs
keeps running. An exclusion a config change takes away makes its periods gaps again at the
next scan: nothing about them was written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime

from ..config.job import Job
from ..ledger import Ledger
from ..ledger.rows import WindowRow
from ..results import JobScan, Range
from ..schedule import Timeline
from ..schedule.exclusions import Excluded
from ..vocabulary import EXCLUDABLE, PeriodState
from .keyblocked import grouped
from .targets import KeyRange, ScanTarget

Cut = tuple[str, datetime, datetime, int, str | None]  # state, first, last, periods, by


def with_excluded(
    ledger: Ledger, targets: Sequence[ScanTarget], results: list[JobScan]
) -> list[JobScan]:
    """Every scan with its excluded periods: the windows of all the jobs read in one
    statement, over just each job's scanned window."""
    spans = [
        (t.job_id, r.first, r.until)
        for t, r in zip(targets, results, strict=True)
        if r.first is not None and r.until is not None and t.job_id > 0
    ]
    windows: dict[int, list[WindowRow]] = {}
    for row in ledger.live_exclusions(spans):
        windows.setdefault(row.job_id, []).append(row)
    return [
        excluded_in(t.job, r, windows.get(t.job_id, []))
        for t, r in zip(targets, results, strict=True)
    ]


def excluded_in(job: Job, result: JobScan, windows: list[WindowRow]) -> JobScan:
    """``result`` with its gaps that ``job``'s exclusions or ``windows`` take over, excluded."""
    if result.first is None or result.until is None or (not job.exclude and not windows):
        return result
    lo, hi = result.first, result.until
    base = exclusions_of(job, lo, hi, [w for w in windows if w.key is None])
    if job.keyed or result.key_ranges:
        return _keyed(job, result, base, [w for w in windows if w.key is not None])
    return _unkeyed(job.timeline, result, base)


def _unkeyed(timeline: Timeline, result: JobScan, base: Excluded) -> JobScan:
    """A job without keys' scan, in one pass over its ranges (a range one span takes whole,
    the usual case, without any period arithmetic)."""
    ranges: list[Range] = []
    said: list[tuple[datetime, str]] = []
    moved: dict[str, int] = {}
    for r in result.ranges:
        if r.state not in EXCLUDABLE:
            ranges.append(r)
            continue
        whole = base.whole(r.first, r.last)
        pieces = [(PeriodState.excluded, *r[1:], whole)] if whole else carve(timeline, (r,), base)
        for state, first, last, periods, by in pieces:
            ranges.append(Range(state, first, last, periods))
            if by is not None:
                said.append((first, by))
                moved[r.state] = moved.get(r.state, 0) + periods
    if not moved:
        return result
    counts = dict(result.counts)
    for state, n in moved.items():
        counts[state] -= n
        counts[PeriodState.excluded] = counts.get(PeriodState.excluded, 0) + n
    return replace(result, counts=counts, ranges=tuple(ranges), excluded_by=tuple(said))


def exclusions_of(job: Job, lo: datetime, hi: datetime, windows: Iterable[WindowRow]) -> Excluded:
    """What excludes ``job``'s periods in ``[lo, hi)``: its ``exclude`` and ``windows``."""
    meeting = [(max(w.lo, lo), min(w.hi, hi), w.by) for w in windows if w.lo < hi and w.hi > lo]
    return job.excluded(lo, hi).joined(meeting) if meeting else job.excluded(lo, hi)


def carve(timeline: Timeline, ranges: Iterable[Range], excluded: Excluded) -> Iterable[Cut]:
    """``ranges`` (oldest first) cut where ``excluded`` takes over their periods: each piece
    as (state, first, last, periods, what excluded it)."""
    for r in ranges:
        if r.state not in EXCLUDABLE or not excluded:
            yield (r.state, r.first, r.last, r.periods, None)
            continue
        whole = excluded.whole(r.first, r.last)
        if whole is not None:  # the usual case: nobody ran the periods of a window
            yield (PeriodState.excluded, r.first, r.last, r.periods, whole)
            continue
        end = timeline.after(r.last)
        cursor = r.first
        for a, b, by in excluded.meeting(r.first, end):
            first = timeline.ceil(a)
            if first >= b or first > r.last:
                continue
            if first > cursor:
                yield _piece(timeline, r.state, cursor, first, None)
            yield _piece(timeline, PeriodState.excluded, first, b, by)
            cursor = timeline.ceil(b)
        if cursor <= r.last:
            yield _piece(timeline, r.state, cursor, end, None)


def _piece(timeline: Timeline, state: str, a: datetime, b: datetime, by: str | None) -> Cut:
    """The periods starting in ``[a, b)`` (``a`` a period start) as one piece."""
    return (state, a, timeline.before(b) or a, timeline.count(a, b), by)


def _counted(
    result: JobScan, old: list[tuple[str, int]], cuts: list[Cut], ranges: tuple[Range, ...]
) -> JobScan:
    """``result`` with ``ranges``, and its counts moved from ``old`` pieces (state, periods)
    to excluded as ``cuts`` say."""
    moved: dict[str, int] = {}
    for state, periods in old:
        moved[state] = moved.get(state, 0) + periods
    for c in cuts:
        moved[c[0]] = moved.get(c[0], 0) - c[3]
    taken = sum(n for state, n in moved.items() if state != PeriodState.excluded)
    if not taken:
        return result
    counts = dict(result.counts)
    for state, n in moved.items():
        counts[state] = counts.get(state, 0) - n
    by = tuple((c[1], c[4]) for c in cuts if c[0] == PeriodState.excluded and c[4] is not None)
    return replace(result, counts=counts, ranges=ranges, excluded_by=by)


def _keyed(job: Job, result: JobScan, base: Excluded, own: list[WindowRow]) -> JobScan:
    """A keyed job's scan, key range by key range: a key's own windows join the others."""
    lo, hi = result.first, result.until
    assert lo is not None and hi is not None
    by_key: dict[str, Excluded] = {}
    for w in own:
        assert w.key is not None
        by_key.setdefault(w.key, base)
        by_key[w.key] = by_key[w.key].joined([(max(w.lo, lo), min(w.hi, hi), w.by)])
    timeline = job.timeline
    cuts: list[tuple[str, Cut]] = []
    for k in result.key_ranges:
        one = [Range(k.state, k.first, k.last, k.periods)]
        cuts += [(k.key, c) for c in carve(timeline, one, by_key.get(k.key, base))]
    found = [KeyRange(key, *c[:4]) for key, c in cuts]
    if found == list(result.key_ranges):
        return result
    ranges, keys = grouped(found)
    said = {(c[1], c[4]) for _, c in cuts if c[0] == PeriodState.excluded and c[4] is not None}
    old = [(k.state, k.periods) for k in result.key_ranges]
    counted = _counted(result, old, [c for _, c in cuts], ranges)
    return replace(
        counted,
        ranges=ranges,
        key_ranges=tuple(found),
        range_keys=keys,
        excluded_by=tuple(sorted(said)),
    )
