"""The gap detector: each job's expected periods against the ledger, collapsed into ranges,
and the report around them. :func:`prepare` is every scan's preamble (the window checked, the
jobs resolved and registered, their keys read); :func:`scan_jobs` picks the strategy per job
(:mod:`catchup.scan.unkeyed` for jobs without keys, :mod:`catchup.scan.keyed` for those with);
:func:`scan` adds the states that need other jobs (``blocked``, ``outdated``), the pulse and
the calendars.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any

from ..config.job import Job
from ..ledger import Ledger
from ..ledger.rows import JobRow
from ..results import JobScan, ScanReport
from ..scheduler.pulse import read_pulse
from ..session import Session
from . import prejudge
from .blocked import blocked_states
from .calendars import calendar
from .excluded import with_excluded
from .keyed import read_each, scan_keyed, with_keys
from .targets import ScanTarget as ScanTarget
from .unkeyed import scan_unkeyed
from .window import Moment, bound, check_window


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
    scanned_from: prejudge.From | None = None,
) -> Prepared:
    """The window checked, ``jobs`` resolved and registered (only with ``write``), their targets
    (``scanned_from``: where the command's scan of a job starts when it has a window of its
    own, a tick's; None there: not scanned)."""
    check_window(jobs, since, until)
    sources: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    judging, now = None, None
    if any(job.keyed for job in jobs):
        # first reads judged beside the reads and their record, on a connection of their own,
        # for the window the scan will have: both at one time (a period that fell due while a
        # million keys were read would make them differ)
        now = session.now()
        if write:
            judging = prejudge.start(session, jobs, since, until, now, scanned_from)
        sources = read_each(session, jobs)  # before anything is written; each fails alone
    resolved = session.resolve_all(jobs, write=write)
    now = now or session.now()
    rows = session.job_rows(write=write)
    targets = targets_for(resolved, rows)
    if any(job.keyed for job in jobs):
        targets = with_keys(session.ledger, targets, now, write, *sources)
    if judging is not None:
        taking = judging.take
        targets = [replace(t, prejudged=partial(taking, t.job.name)) for t in targets]
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


def scan_jobs(
    ledger: Ledger,
    targets: list[ScanTarget],
    *,
    now: datetime,
    since: Moment | None,
    until: Moment | None,
    full: bool = False,
    record: bool = True,
) -> list[JobScan]:
    """Classify every expected period of each job in its window, in the order of ``targets``:
    a job with keys by :func:`catchup.scan.keyed.scan_keyed` (each key's periods), the others
    together by :func:`catchup.scan.unkeyed.scan_unkeyed` (a handful of statements whatever
    the number of jobs). A job's window is cut where its schedule changed. Its gaps that its
    ``exclude`` or a window recorded afterwards take over are excluded
    (:mod:`catchup.scan.excluded`)."""
    plain = [t for t in targets if not t.job.keyed]
    done = iter(
        scan_unkeyed(ledger, plain, now=now, since=since, until=until, full=full, record=record)
    )
    results = [
        _scan_keyed(ledger, t, now, since, until, record) if t.job.keyed else next(done)
        for t in targets
    ]
    return with_excluded(ledger, targets, results)


def _scan_keyed(
    ledger: Ledger,
    t: ScanTarget,
    now: datetime,
    since: Moment | None,
    until: Moment | None,
    record: bool,
) -> JobScan:
    """A keyed job's scan; one whose keys query failed is scanned on the keys it read last,
    and says so in its row."""
    result = scan_keyed(
        ledger,
        t.job,
        t.job_id,
        list(t.keys),
        now=now,
        since=t.since or since,
        until=until,
        paused=t.paused,
        record=record,
        all_keys=t.all_keys,
        deferred=t.deferred,
        prejudged=t.prejudged,
    )
    failed = t.keys_failed
    return result if failed is None else replace(result, keys_error=failed.error)


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
    results = blocked_states(session, jobs, results, now, ready.rows, upstream)
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
        metric_keys=session.config.serve.metric_keys,
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
