"""The gap detector: each job's expected periods against the ledger, collapsed into ranges.

Two ways to the same answer. ``full`` is the plain detector (generate_series LEFT JOIN the
ledger, every period classified). The default reads only what can still hold gaps: the rows that
are not succeeded (a small partial index), and the holes between existing rows (the primary key)
only where no earlier scan has verified that every period has a row. Rows are never removed by
catchup, so that coverage stays true; when a person deletes rows, a trigger forgets it.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..claims import suspects
from ..config.job import Job
from ..ledger import Ledger
from ..ledger.scans import Pieces, Windows
from ..models import COUNTED_STATES, JobRow, JobScan, Range, ScanReport
from ..schedule import Fixed, Schedule, WallStep
from ..scheduler.pulse import read_pulse
from ..session import Session
from ..vocabulary import PeriodState
from . import evidence
from .coverage import record_coverage, signature
from .ranges import group, merge, present_ranges, uncovered
from .targets import ScanTarget as ScanTarget
from .window import Moment, bound, check_window, window

LISTED_BATCH = 50_000  # period starts sent per statement when Python lists them
FIRST = operator.itemgetter(1)  # Range.first, without a Python call per range


@dataclass(frozen=True)
class Prepared:
    """The preamble of every scan (scan, replay, jobs, adopt): the window checked, the jobs
    resolved to the timelines the ledger records and registered (unless read-only), and the
    database clock read once."""

    now: datetime
    jobs: list[Job]
    rows: dict[str, JobRow]
    targets: list[ScanTarget]


def prepare(
    session: Session,
    jobs: list[Job],
    since: Moment | None = None,
    until: Moment | None = None,
    *,
    write: bool = True,
) -> Prepared:
    """The window checked, ``jobs`` resolved and registered (only with ``write``), their targets."""
    check_window(jobs, since, until)
    sources: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    if any(job.keyed for job in jobs):
        from .keyed import read_each

        sources = read_each(session, jobs)  # before anything is written; failures each its own
    resolved = session.resolve_all(jobs, write=write)
    now = session.now()
    rows = session.job_rows(write=write)
    targets = targets_for(resolved, rows)
    if any(job.keyed for job in jobs):
        from .keyed import with_keys

        targets = with_keys(session.ledger, targets, now, write, *sources)
    return Prepared(now, resolved, rows, targets)


def targets_for(jobs: list[Job], rows: dict[str, JobRow]) -> list[ScanTarget]:
    """What to scan of ``jobs``, with their ledger ``rows``. A job the ledger has no row for
    yet (a read-only scan, a dry run) gets an id of its own below zero, which no row has."""
    return [
        ScanTarget(
            job,
            rows[job.name].id if job.name in rows else -n,
            job.name in rows and rows[job.name].paused_at is not None,
        )
        for n, job in enumerate(jobs, start=1)
    ]


def scan_job(  # noqa: PLR0913
    ledger: Ledger,
    job: Job,
    job_id: int,
    *,
    now: datetime,
    since: Moment | None,
    until: Moment | None,
    paused: bool,
    full: bool = False,
) -> JobScan:
    """Scan one job; see :func:`scan_jobs`."""
    (result,) = scan_jobs(
        ledger, [ScanTarget(job, job_id, paused)], now=now, since=since, until=until, full=full
    )
    return result


def scan_jobs(  # noqa: C901, PLR0915
    ledger: Ledger,
    targets: list[ScanTarget],
    *,
    now: datetime,
    since: Moment | None,
    until: Moment | None,
    full: bool = False,
    record: bool = True,
) -> list[JobScan]:
    """Classify every expected period of each job in its window, all in one snapshot and a
    handful of statements whatever the number of jobs; see the module docstring.

    A job's window is cut where its schedule changed. Pieces with a fixed step are computed in
    SQL (``period + step``); pieces of wall-clock schedules get their period starts from the
    schedule (generated in SQL for calendar schedules by ``--full``, listed by Python
    otherwise). A job with keys is scanned by :func:`catchup.scan.keyed.scan_keyed`."""
    if any(t.job.keyed for t in targets):
        from .keyed import scan_with_keys

        return scan_with_keys(ledger, targets, now, since, until, full, record, scan_jobs)
    windows = {t.job_id: window(t.job, now, t.since or since, until) for t in targets}
    expected = {t.job_id: t.job.timeline.count(*windows[t.job_id]) for t in targets}
    active = [t for t in targets if expected[t.job_id] > 0]
    by_id = {t.job_id: t for t in targets}
    pieces = {t.job_id: list(t.job.timeline.pieces(*windows[t.job_id])) for t in active}
    stepped = [(t, p) for t in active for p in pieces[t.job_id] if p[0].step_sql]
    walled = [(t, p) for t in active for p in pieces[t.job_id] if not p[0].step_sql]
    arrays: Windows = {
        "job_ids": [t.job_id for t in active],
        "firsts": [windows[t.job_id][0] for t in active],
        "untils": [windows[t.job_id][1] for t in active],
        "now": now,
    }
    covered: dict[int, list[tuple[datetime, datetime]]] = {t.job_id: [] for t in targets}
    ranges: dict[int, list[Range]] = {t.job_id: [] for t in targets}
    missing: dict[int, list[Range]] = {t.job_id: [] for t in targets}

    def piece_arrays(
        chosen: list[tuple[ScanTarget, tuple[Schedule, datetime, datetime]]],
    ) -> Pieces:
        return {
            "job_ids": [t.job_id for t, _ in chosen],
            "firsts": [lo for _, (_, lo, _) in chosen],
            "untils": [hi for _, (_, _, hi) in chosen],
            "steps": [s.step_sql for _, (s, _, _) in chosen],
            "max_attempts": [t.job.max_attempts for t, _ in chosen],
            "now": now,
        }

    # One snapshot for the coverage and the rows it vouches for.
    with ledger.scan_snapshot():
        states = ledger.scan_states(arrays["job_ids"])
        if active and full:
            for t, (schedule, lo, hi) in [*stepped, *walled]:
                ranges[t.job_id].extend(ledger.full_piece(*_full_query(t, schedule, lo, hi, now)))
        elif active:
            for job_id, first, last in ledger.coverage(arrays):
                if states.get(job_id, ("", 0))[0] == signature(by_id[job_id].job):
                    covered[job_id].append((first, last))
            if stepped:
                ledger.unfinished_ranges(piece_arrays(stepped), ranges)
            if walled:
                rows_by_job: dict[int, list[tuple[str, datetime]]] = {}
                for job_id, state, start in ledger.unfinished_rows(piece_arrays(walled)):
                    rows_by_job.setdefault(job_id, []).append((state, start))
                for job_id, listed in rows_by_job.items():
                    ranges[job_id].extend(group(by_id[job_id].job.timeline, listed))
            todo = [
                (t, piece)
                for t in active
                for lo, hi in uncovered(t.job.timeline, *windows[t.job_id], covered[t.job_id])
                for piece in t.job.timeline.pieces(lo, hi)
            ]
            todo_stepped = [(t, p) for t, p in todo if p[0].step_sql]
            todo_walled = [(t, p) for t, p in todo if not p[0].step_sql]
            if todo_stepped:
                chosen = piece_arrays(todo_stepped)
                rows = ledger.missing_ranges(
                    {
                        "job_ids": chosen["job_ids"],
                        "los": chosen["firsts"],
                        "his": chosen["untils"],
                        "steps": chosen["steps"],
                        "lasts": [s.before(hi) for _, (s, _, hi) in todo_stepped],
                    },
                )
                kinds: dict[int, set[Schedule]] = {}
                for t, (s, _, _) in todo_stepped:
                    kinds.setdefault(t.job_id, set()).add(s)
                for job_id, first, last in rows:
                    (step, *others) = kinds[job_id]
                    if not others and isinstance(step, Fixed):  # one grid: plain arithmetic
                        count = (last - first) // timedelta(seconds=step.seconds) + 1
                    else:
                        timeline = by_id[job_id].job.timeline
                        count = timeline.count(first, timeline.after(last))
                    missing[job_id].append(Range(PeriodState.missing, first, last, count))
            # Listed starts go in batches; runs cut between batches are joined by _merge.
            job_ids: list[int] = []
            numbers: list[int] = []
            starts: list[datetime] = []

            def flush() -> None:
                rows = ledger.listed_missing(
                    {"job_ids": job_ids, "pieces": numbers, "starts": starts}
                )
                for job_id, first, last, count in rows:
                    missing[job_id].append(Range(PeriodState.missing, first, last, count))
                job_ids.clear()
                numbers.clear()
                starts.clear()

            for n, (t, (schedule, lo, hi)) in enumerate(todo_walled):
                for start in schedule.starts(lo, hi):
                    job_ids.append(t.job_id)
                    numbers.append(n)
                    starts.append(start)
                    if len(starts) >= LISTED_BATCH:
                        flush()
            if starts:
                flush()
        last_success = ledger.last_successes([t.job_id for t in targets])

    evidenced = [t.job_id for t in active if t.job.evidence is not None and t.job_id > 0]
    checked = ledger.evidence_states(evidenced) if evidenced else {}
    results = []
    for t in targets:
        job, job_id = t.job, t.job_id
        first, end = windows[job_id]
        timeline = job.timeline
        # Runs from one statement over one piece are whole already; only runs from different
        # pieces (a schedule change) or from batches of listed starts can meet.
        cut = len(pieces.get(job_id, ())) > 1 or any(
            not s.step_sql for s, _, _ in pieces.get(job_id, ())
        )

        if cut:
            found = merge(timeline, ranges[job_id])
            holes = merge(timeline, missing[job_id])
            if not full:
                found = merge(timeline, [*found, *holes])
        else:  # each list comes ordered from its statement
            found, holes = ranges[job_id], missing[job_id]
            if not full:
                found = sorted([*found, *holes], key=FIRST)
        counts: dict[str, int] = dict.fromkeys(COUNTED_STATES, 0)
        for item in found:
            counts[item.state] += item.periods  # the text is the PeriodState's value
        if full:
            holes = [i for i in found if i.state == PeriodState.missing]
        else:
            counts[PeriodState.succeeded] = expected[job_id] - sum(
                v for k, v in counts.items() if k != PeriodState.succeeded
            )
        if expected[job_id] > 0 and record:
            present = present_ranges(timeline, first, end, holes)
            record_coverage(
                ledger, job, job_id, states.get(job_id), first, end, covered[job_id], present
            )
        results.append(
            JobScan(
                job=job.name,
                schedule=job.schedule.text,
                timezone=job.timezone,
                daily_or_longer=job.schedule.daily_or_longer,
                paused=t.paused,
                first=first if expected[job_id] else None,
                until=end if expected[job_id] else None,
                expected=expected[job_id],
                counts=counts,
                # only the plain detector (full) reads succeeded runs; the shortcut never does
                ranges=tuple(i for i in found if i.state != PeriodState.succeeded)
                if full
                else tuple(found),
                last_success=last_success.get(job_id),
                labeler=job.label,
            )
        )
        if job.evidence is not None and expected[job_id] > 0:
            holes_now = [i for i in results[-1].ranges if i.state == PeriodState.missing]
            seen = evidence.read(
                ledger,
                job,
                job_id,
                first,
                end,
                now=now,
                holes=holes_now,
                state=checked.get(job_id),
                full=full,
            )
            results[-1] = evidence.apply(results[-1], job, seen)
            if record and seen.state is not None:
                ledger.record_evidence_state(seen.state)
    if results and (failover := ledger.failover()) is not None:
        results = [
            suspects.apply(ledger, t.job, t.job_id, r, failover)
            for t, r in zip(targets, results, strict=True)
        ]
    return results


def _full_query(
    t: ScanTarget, schedule: Schedule, lo: datetime, hi: datetime, now: datetime
) -> tuple[str, dict[str, Any]]:
    """The plain detector's statement for one piece of a job's window."""
    params: dict[str, Any] = {
        "job_id": t.job_id,
        "now": now,
        "max_attempts": t.job.max_attempts,
    }
    if schedule.step_sql:
        last = schedule.before(hi)  # hi may be cut short of the grid by a schedule change
        return "scan_full", {**params, "first": lo, "last": last, "step": schedule.step_sql}
    if isinstance(schedule, WallStep):
        return "scan_full_calendar", {
            **params,
            "origin": schedule.origin,
            "step": schedule.interval_sql,
            "k0": schedule.k_of(lo),
            "n": schedule.count(lo, hi),
            "tz": schedule.timezone,
        }
    return "scan_full_listed", {**params, "starts": list(schedule.starts(lo, hi))}


def scan(  # noqa: PLR0913
    session: Session,
    jobs: list[Job],
    *,
    since: Moment | None,
    until: Moment | None,
    full: bool = False,
    calendars: bool = False,
    pulse: bool = False,
    read_only: bool = False,
) -> ScanReport:
    """Scan ``jobs`` on the database clock: the report the CLI renders and the API returns,
    with the scheduler's pulse (``pulse``) and a calendar per job (``calendars``). ``read_only``
    writes nothing at all (``catchup serve``): no job rows, no coverage, no evidence state."""
    from .blocked import chained_states
    from .calendars import calendar

    ready = prepare(session, jobs, since, until, write=not read_only)
    now, jobs, targets = ready.now, ready.jobs, ready.targets
    results = scan_jobs(
        session.ledger,
        targets,
        now=now,
        since=since,
        until=until,
        full=full,
        record=not read_only,
    )
    upstream = _keyed_upstream(session, jobs, now, since, until)
    results = chained_states(session, jobs, results, now, ready.rows, upstream)
    firsts = [bound(since, job) or job.anchor for job in jobs]
    ends = [bound(until, job) or now for job in jobs]
    last = max(ends, default=now)
    return ScanReport(
        generated_at=now,
        # a job whose first period is still ahead adds nothing: the window never runs backwards
        since=min(min(firsts, default=now), last),
        until=last,
        jobs=tuple(results),
        pulse=read_pulse(session, jobs) if pulse else None,
        failover=session.ledger.failover(),
        keys_failed=tuple(t.keys_failed for t in targets if t.keys_failed is not None),
        calendars=tuple(calendar(job, r) for job, r in zip(jobs, results, strict=True))
        if calendars
        else (),
    )


def _keyed_upstream(
    session: Session, jobs: list[Job], now: datetime, since: Moment | None, until: Moment | None
) -> dict[str, JobScan]:
    """The scans, read-only, of the keyed jobs that keyed ``jobs`` wait for and that are not
    among them: a key's period is blocked by the upstream period of its own key."""
    names = {job.name for job in jobs}
    wanted = sorted(
        {
            dep.job
            for job in jobs
            if job.keyed
            for dep in job.after
            if dep.job not in names and session.config.job(dep.job).keyed
        }
    )
    if not wanted:
        return {}
    ready = prepare(session, [session.config.job(n) for n in wanted], since, until, write=False)
    found = scan_jobs(
        session.ledger, ready.targets, now=now, since=since, until=until, full=False, record=False
    )
    return {r.job: r for r in found}
