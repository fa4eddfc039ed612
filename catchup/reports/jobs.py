"""Read-only reports over the ledger that are not a scan: the jobs overview (``catchup jobs``)
and the ledger's jobs a config does not name."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..config.job import Job
from ..ledger.rows import Unconfigured
from ..results import JobLine
from ..scan.detector import prepare, scan_jobs
from ..scan.targets import KeysFailure, keys_failed
from ..session import Session
from ..vocabulary import PeriodState


def overview(session: Session, jobs: list[Job]) -> tuple[list[JobLine], tuple[KeysFailure, ...]]:
    """``catchup jobs``: per job, how many of its due periods are done, on the database clock
    (its ``expected`` leaves out the excluded ones, which scan counts among its expected),
    and the keyed jobs whose keys query failed (counted on the keys read last). The counts are
    the scan's (one set of statements for every job), so `jobs` and `scan` never disagree."""
    ready = prepare(session, jobs)
    now, resolved, rows = ready.now, ready.jobs, ready.rows
    results = scan_jobs(session.ledger, ready.targets, now=now, since=None, until=None)
    lines = []
    for job, result in zip(resolved, results, strict=True):
        latest = job.timeline.latest_due(job.delay, now)
        until = latest.end if latest else job.anchor
        counts = result.counts
        lines.append(
            JobLine(
                job=job.name,
                schedule=job.schedule.text,
                first_period=job.label(job.anchor),
                last_success=job.label(result.last_success) if result.last_success else None,
                next_due=_next_due(job, until),
                expected=result.expected - counts[PeriodState.excluded],
                done=counts[PeriodState.succeeded] + counts[PeriodState.waived],
                running=counts[PeriodState.running],
                failed=counts[PeriodState.failed],
                exhausted=counts[PeriodState.exhausted],
                interrupted=counts[PeriodState.interrupted],
                cancelled=counts[PeriodState.cancelled],
                timezone=job.timezone,
                paused=rows[job.name].paused_at is not None,
                first_start=job.anchor,
                last_success_start=result.last_success,
                paused_keys=result.paused_keys if job.keyed else None,
            )
        )
    return lines, keys_failed(ready.targets)


def unconfigured(
    session: Session,
) -> tuple[tuple[Unconfigured, ...], tuple[tuple[str, str], ...]]:
    """The ledger's jobs the config does not name (nobody retired them), and the configured
    jobs new to the ledger whose schedule is one of theirs: (new name, old name), a rename the
    config did not say, whose periods would all run again under the new name: held
    (:mod:`catchup.changes.held`)."""
    gone, held = session.unconfigured()
    return tuple(gone), held


def _next_due(job: Job, start: datetime) -> datetime:
    """When the next period from ``start`` that its job's ``exclude`` leaves expected falls
    due: excluded spans jumped over whole (within a year; past that, the period at
    ``start``)."""
    gone = job.excluded(start, start + timedelta(days=400))
    at = start
    for _ in range(10_000):
        end = gone.end_of(at)
        if end is None:
            return job.timeline.period(at).end + job.delay
        at = job.timeline.ceil(end)
    return job.timeline.period(start).end + job.delay
