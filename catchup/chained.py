"""The scan's states of jobs that wait for others (``after``): ``blocked`` periods (due, not
run, waiting for upstream periods that are not done), carved out of ``missing``, each blocked
range named by the upstream ranges that block it, down a chain to its root; and ``outdated``
ones (:mod:`catchup.outdated`). Every job's upstream rows are read in one statement, over just
the spans its missing ranges need."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from .job import Job
from .models import JobRow, JobScan, Range
from .outdated import outdated_states
from .schedule import Period, Timeline
from .session import Session
from .upstream import Dependency, needed, ranks
from .vocabulary import PeriodState

DONE = frozenset({PeriodState.succeeded, PeriodState.waived})


@dataclass(frozen=True)
class _Read:
    """One span of an upstream job's rows a downstream job's periods need."""

    job: int  # index of the downstream job
    dep: Dependency
    up: Job
    lo: datetime
    hi: datetime


def chained_states(
    session: Session,
    jobs: list[Job],
    results: list[JobScan],
    now: datetime,
    rows: dict[str, JobRow],
) -> list[JobScan]:
    """Every job's scan with its ``blocked`` and ``outdated`` periods (jobs with ``after``),
    upstream jobs first, so a period blocked by a blocked one names the root of the chain. An
    upstream period the scan found ``unverified`` (its job's evidence) is not done either. A
    job with keys is left as scanned (its claims wait key by key; its scan does not say so)."""
    if not any(job.after for job in jobs):
        return results
    if any(job.keyed for job in jobs):
        plain = [i for i, job in enumerate(jobs) if not job.keyed]
        done = chained_states(
            session, [jobs[i] for i in plain], [results[i] for i in plain], now, rows
        )
        out = list(results)
        for i, result in zip(plain, done, strict=True):
            out[i] = result
        return out
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
    states = session.ledger.upstream_states(
        [(rows[r.up.name].id, r.lo, r.hi, r.up.max_attempts) for r in reads], now
    )
    read_states: dict[int, list[tuple[_Read, dict[datetime, str]]]] = {}
    for read, read_state in zip(reads, states, strict=True):
        read_states.setdefault(read.job, []).append((read, read_state))
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
    for i in sorted(range(len(jobs)), key=lambda n: rank.get(jobs[n].name, 0)):
        job = jobs[i]
        found = with_blocked(job, out[i], now, uppers, read_states.get(i, []), known, unverified)
        out[i] = found
        if job.name in uppers:  # a job scanned here waits for it
            said = dict(found.blocked_by)
            blocked = [r for r in found.ranges if r.state == PeriodState.blocked]
            firsts, lasts = [r.first for r in blocked], [r.last for r in blocked]
            known[job.name] = _Known(firsts, lasts, [said[t] for t in firsts])
    return out


@dataclass(frozen=True)
class _Known:
    """One upstream job's blocked ranges, and what each waits for, found earlier in the scan."""

    firsts: list[datetime]
    lasts: list[datetime]
    said: list[str]

    def get(self, start: datetime) -> str | None:
        i = bisect_right(self.firsts, start) - 1
        return self.said[i] if i >= 0 and start <= self.lasts[i] else None


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


def with_blocked(
    job: Job,
    result: JobScan,
    now: datetime,
    uppers: dict[str, Job],
    reads: Sequence[tuple[_Read, dict[datetime, str]]],
    known: dict[str, _Known],
    unverified: dict[str, set[datetime]],
) -> JobScan:
    """``result`` with the missing periods that wait for upstream ones not done as
    ``blocked``, and what each blocked range waits for (``blocked_by``); an upstream period
    ``known`` to be blocked itself says by what, down to the root."""
    missing = [r for r in result.ranges if r.state == PeriodState.missing]
    if not job.after or not missing:
        return result
    own_dep = any(dep.job == job.name for dep in job.after)
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
    return _carved(job, result, _runs(undone, ends, uppers), uppers, own_dep)


@dataclass(frozen=True, order=True)
class _Run:
    """Consecutive undone periods of one upstream job, all in one state."""

    up: Job = field(compare=False)
    first: datetime  # the first period's start
    last: datetime  # the last period's start
    end: datetime  # the last period's end
    state: str
    name: str = ""  # the upstream job's (orders and tells runs apart)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.up.name)


def _carved(
    job: Job, result: JobScan, runs: dict[str, list[_Run]], uppers: dict[str, Job], own: bool
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
        pieces = _segments(job, lo, hi, runs, uppers)
        for a, b, active in _carried(job, lo, hi, pieces) if own else pieces:
            if a > cursor:
                out.append(_range(timeline, PeriodState.missing, cursor, a))
            piece = _range(timeline, PeriodState.blocked, a, b)
            out.append(piece)
            blocked_by.append((a, _said(job, piece, active)))
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


def _segments(
    job: Job, lo: datetime, hi: datetime, runs: dict[str, list[_Run]], uppers: dict[str, Job]
) -> list[tuple[datetime, datetime, tuple[_Run, ...]]]:
    """``[lo, hi)`` (period starts of ``job``) cut where the upstream runs its periods wait
    for change: ``(a, b, runs)`` for each piece that waits for some, in order."""
    timeline = job.timeline
    events: list[tuple[datetime, int, _Run]] = []
    for dep in job.after:
        up = uppers[dep.job].timeline
        for run in runs.get(dep.job, []):
            if dep.periods == "overlapping":  # the periods that overlap the run
                a = timeline.floor(run.first) or timeline.first
                b = timeline.ceil(run.end)
            else:  # the periods whose latest upstream period before them is in the run
                a = timeline.ceil(up.after(run.first))
                b = timeline.ceil(up.after(run.end))
            a, b = max(a, lo), min(b, hi)
            if a < b:
                events += [(a, 1, run), (b, -1, run)]
    events.sort(key=lambda e: e[0])
    pieces: list[tuple[datetime, datetime, tuple[_Run, ...]]] = []
    active: dict[_Run, int] = {}
    i = 0
    while i < len(events):
        at = events[i][0]
        while i < len(events) and events[i][0] == at:
            _, step, run = events[i]
            active[run] = active.get(run, 0) + step
            if not active[run]:
                del active[run]
            i += 1
        if i < len(events) and active:
            nxt = events[i][0]
            now = tuple(sorted(active))
            if pieces and pieces[-1][1] == at and pieces[-1][2] == now:
                pieces[-1] = (pieces[-1][0], nxt, now)
            else:
                pieces.append((at, nxt, now))
    return pieces


def _carried(
    job: Job, lo: datetime, hi: datetime, pieces: list[tuple[datetime, datetime, tuple[_Run, ...]]]
) -> list[tuple[datetime, datetime, tuple[_Run, ...]]]:
    """``pieces`` of the missing range ``[lo, hi)`` of a job that waits for its own previous
    period: each period after the first waits for the one before it, so for everything that
    one waits for. From the first blocked period on (or the second, which waits for a first
    that waits for nothing) the rest of the range is blocked, by what each period and those
    before it wait for: a run of them is one range naming the root, never a nested text."""
    carried: tuple[_Run, ...] = ()
    cursor = lo
    if not pieces or pieces[0][0] > lo:
        cursor = job.timeline.after(lo)
        carried = (_Run(job, lo, lo, cursor, "missing"),)
    out: list[tuple[datetime, datetime, tuple[_Run, ...]]] = []
    for a, b, active in [*pieces, (hi, hi, ())]:
        if b <= cursor and a < hi:
            continue
        if cursor < a:  # waits for nothing itself: for what the one before it waits for
            out.append((cursor, a, carried))
        if a < b:
            carried = tuple(sorted({*carried, *active}))
            out.append((max(a, cursor), b, carried))
        cursor = max(cursor, b)
    merged: list[tuple[datetime, datetime, tuple[_Run, ...]]] = []
    for a, b, runs in out:
        if merged and merged[-1][1] == a and merged[-1][2] == runs:
            merged[-1] = (merged[-1][0], b, runs)
        else:
            merged.append((a, b, runs))
    return merged


def _runs(
    undone: dict[tuple[str, datetime], str],
    ends: dict[tuple[str, datetime], datetime],
    uppers: dict[str, Job],
) -> dict[str, list[_Run]]:
    """``undone`` periods (upstream job, start) -> state, as runs per upstream job, in order."""
    spans: dict[str, list[list[Any]]] = {}  # name -> [first, last, end, state]
    for key in sorted(undone):
        name, start = key
        state, found = undone[key], spans.setdefault(name, [])
        if found and found[-1][3] == state and found[-1][2] == start:
            found[-1][1], found[-1][2] = start, ends[key]
        else:
            found.append([start, start, ends[key], state])
    return {name: [_Run(uppers[name], *span) for span in found] for name, found in spans.items()}


def _said(job: Job, r: Range, runs: tuple[_Run, ...]) -> str:
    """What blocked range ``r`` waits for: each run, cut to the periods the range can need
    (a run that reaches past it is named as far as it concerns it)."""
    lo, hi = r.first, job.timeline.after(r.last)
    parts: list[str] = []
    for run in sorted(runs, key=lambda u: (u.name, u.first)):
        timeline = run.up.timeline
        first = max(run.first, timeline.floor(lo) or run.first)
        last = min(run.last, timeline.before(hi) or run.last)
        if first > last or run.up.name == job.name:
            first, last = run.first, run.last  # its own, or only what a previous one needs
        when = run.up.label(first)
        if first != last:
            when = f"{when} .. {run.up.label(last)}"
        parts.append(f"{run.up.name} {when} ({run.state})")
    return ", ".join(parts[:3]) + (f" and {len(parts) - 3} more" if len(parts) > 3 else "")


def waiting_for(found: list[tuple[Job, Period, str]]) -> str:
    """``export 2026-11-25T03:00:00Z .. 2026-11-25T05:00:00Z (failed)``: what the first period
    of a blocked range waits for, as ranges of one upstream job and state."""
    runs: list[tuple[Job, str, datetime, datetime]] = []
    for up, period, state in sorted(found, key=lambda f: (f[0].name, f[1].start)):
        last = runs[-1] if runs else None
        if (
            last
            and last[0].name == up.name
            and last[1] == state
            and up.timeline.after(last[3]) == period.start
        ):
            runs[-1] = (up, state, last[2], period.start)
        else:
            runs.append((up, state, period.start, period.start))
    parts = [
        f"{up.name} {up.label(lo) if lo == hi else f'{up.label(lo)} .. {up.label(hi)}'} ({state})"
        for up, state, lo, hi in runs
    ]
    return ", ".join(parts[:3]) + (f" and {len(parts) - 3} more" if len(parts) > 3 else "")
