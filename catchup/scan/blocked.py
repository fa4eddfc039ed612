"""The scan's states of jobs that wait for others (``after``): ``blocked`` periods (due, not
run, waiting for upstream periods that are not done), carved out of ``missing``, each blocked
range named by the upstream ranges that block it, down a chain to its root; and ``outdated``
ones (:mod:`catchup.scan.outdated`). Every job's upstream rows are read in one statement, over just
the spans its missing ranges need."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from ..config.job import Job
from ..config.upstream import Dependency, needed, ranks
from ..ledger.rows import JobRow, WindowRow
from ..results import JobScan, Range
from ..schedule import Period, Timeline
from ..schedule.exclusions import Excluded
from ..session import Session
from ..vocabulary import EXCLUDABLE, PeriodState
from .carving import UpstreamRun, carried, runs_of, said_of, segments
from .excluded import exclusions_of
from .keyblocked import carved_keys, key_runs
from .outdated import outdated_states

# an excluded upstream period (nobody expects it) blocks nothing
DONE = frozenset({PeriodState.succeeded, PeriodState.waived, PeriodState.excluded})


@dataclass(frozen=True)
class _Read:
    """One span of an upstream job's rows a downstream job's periods need."""

    job: int  # index of the downstream job
    dep: Dependency
    up: Job
    lo: datetime
    hi: datetime


def blocked_states(
    session: Session,
    jobs: list[Job],
    results: list[JobScan],
    now: datetime,
    rows: dict[str, JobRow],
    upstream: dict[str, JobScan] | None = None,
) -> list[JobScan]:
    """Every job's scan with its ``blocked`` and ``outdated`` periods (jobs with ``after``),
    upstream jobs first, so a period blocked by a blocked one names the root of the chain. An
    upstream period the scan found ``unverified`` (its job's evidence) is not done either. A
    job with keys has each key's periods blocked by what they wait for
    (:mod:`catchup.scan.keyblocked`):
    an unkeyed upstream's periods, and a keyed upstream's periods of the same key (from its
    scan here, or in ``upstream`` when it is not among ``jobs``), its own previous period's
    (of the same key) when it waits for itself; and its outdated periods key by key."""
    if not any(job.after for job in jobs):
        return results
    rank = ranks({job.name: job.after for job in session.config.jobs.values()})
    uppers = {
        dep.job: session.resolve(session.config.job(dep.job), write=False)
        for job in jobs
        for dep in job.after
    }
    reads = [
        read
        for i, job in enumerate(jobs)
        for read in _blocking_reads(i, job, results[i], uppers)
        if read.up.name in rows
    ]
    read_states = _upstream_states(session, reads, rows, now)
    unverified = {
        r.job: {
            p.start
            for range_ in r.ranges
            if range_.state == PeriodState.unverified
            for p in _periods(uppers[r.job].timeline, range_)
        }
        for r in results
        if r.job in uppers and r.counts.get(PeriodState.unverified, 0)
    }
    out = outdated_states(session, jobs, results, rows)
    known: dict[str, _Known] = {}
    scanned = {job.name: i for i, job in enumerate(jobs)}
    for i in sorted(range(len(jobs)), key=lambda n: rank.get(jobs[n].name, 0)):
        job = jobs[i]
        by_key = {
            dep.job: key_runs(uppers[dep.job], theirs, own=dep.job == job.name)
            for dep in job.after
            if job.keyed and uppers[dep.job].keyed
            if (theirs := _scan_of(dep.job, scanned, out, upstream)) is not None
        }
        found = with_blocked(
            job, out[i], now, uppers, read_states.get(i, []), known, unverified, by_key
        )
        out[i] = found
        if job.name in uppers and not job.keyed:  # a job scanned here waits for it
            said = dict(found.blocked_by)
            blocked = [r for r in found.ranges if r.state == PeriodState.blocked]
            firsts, lasts = [r.first for r in blocked], [r.last for r in blocked]
            known[job.name] = _Known(firsts, lasts, [said[t] for t in firsts])
    return out


def _upstream_states(
    session: Session, reads: list[_Read], rows: dict[str, JobRow], now: datetime
) -> dict[int, list[tuple[_Read, dict[datetime, str]]]]:
    """The states of the upstream periods each downstream job's reads cover (one statement),
    an excluded one's as ``excluded``: it blocks nothing."""
    states = session.ledger.upstream_states(
        [(rows[r.up.name].id, r.lo, r.hi, r.up.max_attempts) for r in reads], now
    )
    gone = _excluded_upstream(session, reads, rows)
    read_states: dict[int, list[tuple[_Read, dict[datetime, str]]]] = {}
    for read, read_state in zip(reads, states, strict=True):
        excluded = gone[read.up.name]
        for p in read.up.timeline.periods(read.lo, read.hi) if excluded else ():
            if read_state.get(p.start) in (None, *EXCLUDABLE) and excluded.at(p.start):
                read_state[p.start] = PeriodState.excluded
        read_states.setdefault(read.job, []).append((read, read_state))
    return read_states


def _excluded_upstream(
    session: Session, reads: list[_Read], rows: dict[str, JobRow]
) -> dict[str, Excluded]:
    """What excludes each upstream job's periods over the spans read: its ``exclude`` and
    the windows recorded for it (of every key), read in one statement."""
    windows: dict[int, list[WindowRow]] = {}
    spans = [(rows[r.up.name].id, r.lo, r.hi) for r in reads]
    for w in session.ledger.live_exclusions(spans) if spans else []:
        if w.key is None:
            windows.setdefault(w.job_id, []).append(w)
    bounds: dict[str, tuple[Job, datetime, datetime]] = {}
    for r in reads:
        _, lo, hi = bounds.get(r.up.name, (r.up, r.lo, r.hi))
        bounds[r.up.name] = (r.up, min(lo, r.lo), max(hi, r.hi))
    return {
        name: exclusions_of(up, lo, hi, windows.get(rows[name].id, []))
        for name, (up, lo, hi) in bounds.items()
    }


@dataclass(frozen=True)
class _Known:
    """One upstream job's blocked ranges, and what each waits for, found earlier in the scan."""

    firsts: list[datetime]
    lasts: list[datetime]
    said: list[str]

    def get(self, start: datetime) -> str | None:
        i = bisect_right(self.firsts, start) - 1
        return self.said[i] if i >= 0 and start <= self.lasts[i] else None


def _scan_of(
    name: str, scanned: dict[str, int], out: list[JobScan], upstream: dict[str, JobScan] | None
) -> JobScan | None:
    """Job ``name``'s scan: as carved here when it is scanned here, else as given."""
    if name in scanned:
        return out[scanned[name]]
    return (upstream or {}).get(name)


def _periods(timeline: Timeline, r: Range) -> list[Period]:
    return list(timeline.periods(r.first, timeline.after(r.last)))


def _blocking_reads(i: int, job: Job, result: JobScan, uppers: dict[str, Job]) -> list[_Read]:
    """The spans of each upstream job's rows that ``job``'s missing ranges need (one per
    range, those that meet joined): years between two gaps are never read."""
    missing = [r for r in result.ranges if r.state == PeriodState.missing]
    if not job.after or not missing:
        return []
    reads: list[_Read] = []
    for dep in job.after:
        up = uppers[dep.job]
        if job.keyed and up.keyed:
            continue  # key by key, from its scan (keychain.key_runs)
        spans: list[tuple[datetime, datetime]] = []
        for r in missing:
            first = needed(up.timeline, job.timeline.period(r.first), dep.periods)
            last = needed(up.timeline, job.timeline.period(r.last), dep.periods)
            if not first and not last:
                continue
            lo, hi = (first or last)[0].start, (last or first)[-1].end
            if spans and lo <= spans[-1][1]:
                spans[-1] = (spans[-1][0], max(hi, spans[-1][1]))
            else:
                spans.append((lo, hi))
        reads += [_Read(i, dep, up, lo, hi) for lo, hi in spans]
    return reads


def with_blocked(  # noqa: PLR0913
    job: Job,
    result: JobScan,
    now: datetime,
    uppers: dict[str, Job],
    reads: Sequence[tuple[_Read, dict[datetime, str]]],
    known: dict[str, _Known],
    unverified: dict[str, set[datetime]],
    by_key: dict[str, dict[str, list[UpstreamRun]]] | None = None,
) -> JobScan:
    """``result`` with the missing periods that wait for upstream ones not done as
    ``blocked``, and what each blocked range waits for (``blocked_by``); an upstream period
    ``known`` to be blocked itself says by what, down to the root. ``by_key``: a keyed job's
    keyed upstream jobs' runs, per key."""
    missing = [r for r in result.ranges if r.state == PeriodState.missing]
    if not job.after or not missing:
        return result
    runs = blocking_runs(job, missing, now, uppers, reads, known, unverified)
    own_dep = any(dep.job == job.name for dep in job.after)
    if job.keyed:
        return carved_keys(job, result, runs, uppers, by_key or {}, own_dep)
    return _carved(job, result, runs, uppers, own_dep)


def blocking_runs(
    job: Job,
    missing: list[Range],
    now: datetime,
    uppers: dict[str, Job],
    reads: Sequence[tuple[_Read, dict[datetime, str]]],
    known: dict[str, _Known],
    unverified: dict[str, set[datetime]],
) -> dict[str, list[UpstreamRun]]:
    """The runs of upstream periods not done that the ``missing`` ranges of ``job`` can wait
    for, per upstream job, each in one state."""
    firsts, lasts = [r.first for r in missing], [r.last for r in missing]

    def in_missing(t: datetime) -> bool:
        i = bisect_right(firsts, t) - 1
        return i >= 0 and t <= lasts[i]

    undone: dict[tuple[str, datetime], str] = {}  # upstream (job, start) -> its state
    ends: dict[tuple[str, datetime], datetime] = {}
    for read, states in reads:
        up = read.up
        theirs = known.get(up.name, _Known([], [], []))
        checked = unverified.get(up.name, set())
        for p in up.timeline.periods(read.lo, read.hi):
            state = states.get(p.start)
            if state in DONE:
                if p.start not in checked:
                    continue
                state = PeriodState.unverified
            elif state is None:
                deeper = theirs.get(p.start)
                if deeper is not None:
                    state = f"blocked: waits for {deeper}"
                elif up.name == job.name and in_missing(p.start):
                    continue  # its own previous period, in this scan's gap: carried below
                else:
                    state = "missing" if p.end + up.delay <= now else "not due"
            undone[(up.name, p.start)] = state
            ends[(up.name, p.start)] = p.end
    return runs_of(undone, ends, uppers)


def _carved(
    job: Job, result: JobScan, runs: dict[str, list[UpstreamRun]], uppers: dict[str, Job], own: bool
) -> JobScan:
    """``result`` with each missing range cut where the upstream runs its periods wait for
    change; the pieces that wait for some are ``blocked``, named by them. Range by range: no
    period is looked at one by one. ``own``: the job waits for its own previous period."""
    timeline = job.timeline
    out: list[Range] = []
    blocked_by: list[tuple[datetime, str]] = []
    moved = 0
    for range_ in result.ranges:
        if range_.state != PeriodState.missing:
            out.append(range_)
            continue
        lo, hi = range_.first, timeline.after(range_.last)
        cursor = lo
        pieces = segments(job, lo, hi, runs, uppers)
        for a, b, active in carried(job, lo, hi, pieces) if own else pieces:
            if a > cursor:
                out.append(_range(timeline, PeriodState.missing, cursor, a))
            piece = _range(timeline, PeriodState.blocked, a, b)
            out.append(piece)
            blocked_by.append((a, said_of(job, piece, active)))
            moved += piece.periods
            cursor = b
        if cursor < hi:
            out.append(_range(timeline, PeriodState.missing, cursor, hi))
    if not moved:
        return result
    counts = dict(result.counts)
    counts[PeriodState.missing] -= moved
    counts[PeriodState.blocked] = counts.get(PeriodState.blocked, 0) + moved
    return replace(result, ranges=tuple(out), counts=counts, blocked_by=tuple(blocked_by))


def _range(timeline: Timeline, state: str, a: datetime, b: datetime) -> Range:
    """The periods starting in ``[a, b)`` (both period starts) as one range."""
    return Range(state, a, timeline.before(b) or a, timeline.count(a, b))
