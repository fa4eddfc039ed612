"""The scan's states of jobs that wait for others (``after``): ``blocked`` periods (due, not
run, waiting for upstream periods that are not done), carved out of ``missing``; and
``outdated`` ones (succeeded, but an upstream period they waited for ran again after they
finished), out of ``succeeded``. Read from the ledger's rows of the upstream jobs over exactly
the span the periods need."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from .job import Job
from .models import JobRow, JobScan, Range
from .ranges import carve, group, merge
from .schedule import Period, Timeline
from .session import Session
from .upstream import needed, ranks
from .vocabulary import PeriodState

DONE = frozenset({PeriodState.succeeded, PeriodState.waived})


def chained_states(
    session: Session,
    jobs: list[Job],
    results: list[JobScan],
    now: datetime,
    rows: dict[str, JobRow],
) -> list[JobScan]:
    """Every job's scan with its ``blocked`` and ``outdated`` periods (jobs with ``after``),
    upstream jobs first, so a period blocked by a blocked one names the root of the chain."""
    rank = ranks({job.name: job.after for job in session.config.jobs.values()})
    out = list(results)
    known: dict[str, dict[datetime, str]] = {}
    for i in sorted(range(len(jobs)), key=lambda n: rank.get(jobs[n].name, 0)):
        job = jobs[i]
        found = with_blocked(session, job, results[i], now, rows, known)
        out[i] = with_outdated(session, job, found, rows)
        reasons = known.setdefault(job.name, {})
        for r in found.ranges:
            if (said := found.waits(r)) is not None:
                for period in job.timeline.periods(r.first, job.timeline.after(r.last)):
                    reasons[period.start] = said
    return out


def with_blocked(
    session: Session,
    job: Job,
    result: JobScan,
    now: datetime,
    rows: dict[str, JobRow] | None = None,
    known: dict[str, dict[datetime, str]] | None = None,
) -> JobScan:
    """``result`` with the missing periods that wait for upstream ones not done as
    ``blocked``, and what each blocked range waits for (``blocked_by``); an upstream period
    ``known`` to be blocked itself says by what, down to the root."""
    missing = [r for r in result.ranges if r.state == PeriodState.missing]
    if not job.after or not missing:
        return result
    timeline = job.timeline
    undone: dict[tuple[str, datetime], str] = {}  # upstream (job, start) -> its state
    uppers: dict[str, Job] = {}
    for dep in job.after:
        up = session.resolve(session.config.job(dep.job), write=False)
        uppers[up.name] = up
        first = needed(up.timeline, timeline.period(missing[0].first), dep.periods)
        last = needed(up.timeline, timeline.period(missing[-1].last), dep.periods)
        if not first and not last:
            continue
        lo, hi = (first or last)[0].start, (last or first)[-1].end
        rows = rows if rows is not None else session.job_rows(write=False)
        row = rows.get(up.name)
        states = (
            {}
            if row is None
            else session.ledger.upstream_states(row.id, lo, hi, up.max_attempts, now)
        )
        for p in up.timeline.periods(lo, hi):
            state = states.get(p.start)
            if state in DONE:
                continue
            if state is None:
                deeper = (known or {}).get(up.name, {}).get(p.start)
                if deeper is not None:
                    state = f"blocked: waits for {deeper}"
                else:
                    state = "missing" if p.end + up.delay <= now else "not due"
            undone[(up.name, p.start)] = state
    if not undone:
        return result
    starts: list[datetime] = []
    waits: dict[datetime, list[tuple[Job, Period, str]]] = {}
    for range_ in missing:
        for period in timeline.periods(range_.first, timeline.after(range_.last)):
            found = [
                (uppers[dep.job], q, undone[(dep.job, q.start)])
                for dep in job.after
                for q in needed(uppers[dep.job].timeline, period, dep.periods)
                if (dep.job, q.start) in undone
            ]
            if found:
                starts.append(period.start)
                waits[period.start] = found
    if not starts:
        return result
    ranges = carve(timeline, list(result.ranges), PeriodState.missing, tuple(starts), "blocked")
    ranges = _split_by_reason(timeline, ranges, {t: waiting_for(w) for t, w in waits.items()})
    counts = dict(result.counts)
    counts[PeriodState.missing] -= len(starts)
    counts[PeriodState.blocked] = counts.get(PeriodState.blocked, 0) + len(starts)
    blocked_by = tuple(
        (r.first, waiting_for(waits[r.first])) for r in ranges if r.state == PeriodState.blocked
    )
    return replace(
        result,
        ranges=tuple(ranges),
        counts=counts,
        blocked_by=blocked_by,
    )


def _split_by_reason(
    timeline: Timeline, ranges: list[Range], reasons: dict[datetime, str]
) -> list[Range]:
    """Blocked ranges cut where what their periods wait for changes: each range names one."""
    out: list[Range] = []
    for r in ranges:
        if r.state != PeriodState.blocked:
            out.append(r)
            continue
        first, said, n = r.first, reasons[r.first], 0
        for period in timeline.periods(r.first, timeline.after(r.last)):
            if reasons[period.start] != said:
                out.append(Range(r.state, first, timeline.before(period.start) or first, n))
                first, said, n = period.start, reasons[period.start], 0
            n += 1
        out.append(Range(r.state, first, r.last, n))
    return out


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


def with_outdated(
    session: Session, job: Job, result: JobScan, rows: dict[str, JobRow] | None = None
) -> JobScan:
    """``result`` with the succeeded periods an upstream re-run made stale as ``outdated``: an
    upstream period they need succeeded again (a later attempt) after they finished. Reads
    only the upstream periods that ran again (rare), and the rows of the periods they touch."""
    if not job.after or result.first is None or result.until is None:
        return result
    if result.counts.get(PeriodState.succeeded, 0) == 0:
        return result
    rows = rows if rows is not None else session.job_rows(write=False)
    mine = rows.get(job.name)
    if mine is None:
        return result
    timeline = job.timeline
    lo, hi = result.first, result.until
    stale: set[datetime] = set()
    for dep in job.after:
        up = session.resolve(session.config.job(dep.job), write=False)
        row = rows.get(up.name)
        if row is None:
            continue
        # upstream periods a period in [lo, hi) can need start a period before lo at most
        before = up.timeline.floor(lo)
        span_lo = up.timeline.before(before) if before is not None else None
        again = session.ledger.rerun_runs(row.id, span_lo or up.timeline.first, hi)
        for start, end, finished in again:
            # the downstream periods that need it: those overlapping it, or (previous) the
            # ones it is the latest before
            if dep.periods == "overlapping":
                first = timeline.floor(start) or timeline.first
                touched = list(timeline.periods(first, end))
            else:
                nxt = timeline.ceil(end)
                touched = [timeline.period(nxt)] if nxt < hi else []
            for period in touched:
                if not lo <= period.start < hi:
                    continue
                if any(q.start == start for q in needed(up.timeline, period, dep.periods)):
                    done = session.ledger.succeeded_runs(mine.id, period.start, period.end)
                    ran = done.get(period.start)
                    if ran is not None and ran[0] < finished:
                        stale.add(period.start)
    if not stale:
        return result
    marked = sorted(stale)
    counts = dict(result.counts)
    counts[PeriodState.succeeded] -= len(marked)
    counts[PeriodState.outdated] = counts.get(PeriodState.outdated, 0) + len(marked)
    ranges = merge(timeline, [*result.ranges, *group(timeline, [("outdated", t) for t in marked])])
    return replace(result, counts=counts, ranges=tuple(ranges))
