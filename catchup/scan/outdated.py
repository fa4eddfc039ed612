"""The scan's ``outdated`` periods: succeeded, but an upstream period they waited for (their
job's ``after``) ran again after they finished (a ``reset`` and re-run, ``replay
--unverified``). Only the upstream rows that ran again are read (rare, through their own
index: one statement for every job), and the rows of the periods they touch."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from ..config.job import Job
from ..config.upstream import Dependency, needed
from ..ledger.rows import JobRow
from ..results import JobScan
from ..schedule import Timeline
from ..session import Session
from ..vocabulary import PeriodState
from .keyblocked import grouped
from .ranges import group, merge
from .targets import KeyRange


def with_outdated(
    session: Session, job: Job, result: JobScan, rows: dict[str, JobRow] | None = None
) -> JobScan:
    """``result`` with the succeeded periods an upstream re-run made stale as ``outdated``."""
    rows = rows if rows is not None else session.job_rows(write=False)
    return outdated_states(session, [job], [result], rows)[0]


def outdated_states(  # noqa: C901
    session: Session, jobs: list[Job], results: list[JobScan], rows: dict[str, JobRow]
) -> list[JobScan]:
    """Each job's scan with the succeeded periods an upstream re-run made stale as
    ``outdated``: an upstream period they need succeeded again (a later attempt) after they
    finished. Reads only the upstream rows that ran again (rare: one statement for every job,
    through their own index), and the rows of the periods they touch."""
    asks: list[tuple[int, Dependency, Job]] = []
    spans: list[tuple[int, datetime, datetime]] = []
    for i, (job, result) in enumerate(zip(jobs, results, strict=True)):
        if not job.after or result.first is None or result.until is None:
            continue
        if not result.counts.get(PeriodState.succeeded, 0) or job.name not in rows:
            continue
        for dep in job.after:
            up = session.resolve(session.config.job(dep.job), write=False)
            if up.name not in rows:
                continue
            # upstream periods a period in [first, until) can need start a period before it
            before = up.timeline.floor(result.first)
            span_lo = up.timeline.before(before) if before is not None else None
            asks.append((i, dep, up))
            spans.append((rows[up.name].id, span_lo or up.timeline.first, result.until))
    if not spans:
        return list(results)
    # job -> (key, period start) -> latest re-run; key "" for every key (an unkeyed upstream)
    touched: dict[int, dict[tuple[str, datetime], datetime]] = {}
    for (i, dep, up), again in zip(asks, session.ledger.rerun_runs(spans), strict=True):
        timeline, lo, hi = jobs[i].timeline, results[i].first, results[i].until
        assert lo is not None and hi is not None
        for start, end, finished, key in again:
            # the downstream periods that need it: those overlapping it, or (previous) the
            # ones it is the latest before
            if dep.periods == "overlapping":
                first = timeline.floor(start) or timeline.first
                near = list(timeline.periods(first, end))
            else:
                nxt = timeline.ceil(end)
                near = [timeline.period(nxt)] if nxt < hi else []
            for period in near:
                if lo <= period.start < hi and any(
                    q.start == start for q in needed(up.timeline, period, dep.periods)
                ):
                    mine = touched.setdefault(i, {})
                    at = (key, period.start)
                    mine[at] = max(finished, mine.get(at, finished))
    out = list(results)
    for i, latest in touched.items():
        job_id = rows[jobs[i].name].id
        if jobs[i].keyed:
            out[i] = _outdated_keys(session, jobs[i], job_id, out[i], latest)
            continue
        starts = sorted(t for _, t in latest)
        done = session.ledger.succeeded_runs(job_id, starts)
        stale = sorted(t for t, (ran, _) in done.items() if ran < latest[("", t)])
        if stale:
            out[i] = _outdated(jobs[i].timeline, out[i], stale)
    return out


def _outdated_keys(
    session: Session,
    job: Job,
    job_id: int,
    result: JobScan,
    latest: dict[tuple[str, datetime], datetime],
) -> JobScan:
    """A keyed job's scan with each key's succeeded periods that finished before an upstream
    period they need ran again (an unkeyed upstream's: every key; a keyed one's: its own key)
    as ``outdated``."""

    starts = sorted({t for _, t in latest})
    keys = list(job.selected_keys) or None
    stale: dict[str, list[datetime]] = {}
    for key, start, ran in session.ledger.succeeded_key_runs(job_id, starts, keys):
        again = max(latest.get(("", start), ran), latest.get((key, start), ran))
        if ran < again:
            stale.setdefault(key, []).append(start)
    if not stale:
        return result
    found = list(result.key_ranges)
    for key, marked in stale.items():
        for r in group(job.timeline, [(PeriodState.outdated, t) for t in marked]):
            found.append(KeyRange(key, r.state, r.first, r.last, r.periods))
    found.sort(key=lambda r: (r.first, r.key))
    moved = sum(len(marked) for marked in stale.values())
    counts = dict(result.counts)
    counts[PeriodState.succeeded] -= moved
    counts[PeriodState.outdated] = counts.get(PeriodState.outdated, 0) + moved
    ranges, range_keys = grouped(found)
    return replace(
        result, counts=counts, ranges=ranges, key_ranges=tuple(found), range_keys=range_keys
    )


def _outdated(timeline: Timeline, result: JobScan, marked: list[datetime]) -> JobScan:
    counts = dict(result.counts)
    counts[PeriodState.succeeded] -= len(marked)
    counts[PeriodState.outdated] = counts.get(PeriodState.outdated, 0) + len(marked)
    ranges = merge(timeline, [*result.ranges, *group(timeline, [("outdated", t) for t in marked])])
    return replace(result, counts=counts, ranges=tuple(ranges))
