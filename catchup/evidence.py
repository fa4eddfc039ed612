"""What the ledger says, checked against what the jobs left behind (a job's ``evidence``
query): succeeded periods with no evidence are ``unverified`` (a gap), periods with evidence
and no ledger row ``untracked`` (done elsewhere: not a gap, never run). One job's failing
query is that job's error in the report; the others are checked in full."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

import psycopg

from . import db
from .errors import CatchupError, first_line
from .islands import carve, group, merge
from .job import Job
from .ledger import EvidenceQuery, Ledger
from .models import Island, JobScan
from .schedule import Period
from .vocabulary import PeriodState


@dataclass(frozen=True)
class Found:
    """One job's evidence in a window, as period starts; or why it could not be read."""

    untracked: tuple[datetime, ...] = ()
    unverified: tuple[datetime, ...] = ()
    error: str | None = None


def read(ledger: Ledger, job: Job, job_id: int, lo: datetime, hi: datetime) -> Found:
    """Run ``job``'s evidence query for ``[lo, hi)`` and check it against the ledger."""
    try:
        rows = _rows(ledger, job, job_id, lo, hi)
    except (psycopg.Error, CatchupError) as exc:
        return Found(error=failure(exc, job))
    untracked: list[datetime] = []
    unverified: list[datetime] = []
    timeline = job.timeline
    end: datetime | None = None
    for state, t in rows:
        if state == PeriodState.unverified:
            unverified.append(t)
        elif end is None or t >= end:  # the first value in a period names it
            period = timeline.containing(t)
            if period is not None and lo <= period.start < hi:
                untracked.append(period.start)
                end = period.end
    return Found(tuple(sorted(set(untracked))), tuple(unverified))


def present(ledger: Ledger, job: Job, period: Period) -> bool:
    """Whether ``job``'s evidence shows output for ``period``: a psycopg.Error or a
    CatchupError when the query cannot say."""
    assert job.evidence is not None
    if job.evidence_dsn is None:
        query = EvidenceQuery(ledger.conn, job.evidence, job.timezone, ledger.schema)
        with query.read_only():
            return query.present(query.kind(), period.start, period.end)
    target = db.Target(conninfo=job.evidence_dsn, source=f"jobs.{job.name}.evidence_dsn")
    with db.connect(target, application="catchup-evidence") as conn:
        query = EvidenceQuery(conn, job.evidence, job.timezone, ledger.schema)
        with query.read_only():
            return query.present(query.kind(), period.start, period.end)


def failure(exc: psycopg.Error | CatchupError, job: Job) -> str:
    """What went wrong with ``job``'s evidence query, in one line without a password."""
    text = first_line(exc) if isinstance(exc, psycopg.Error) else str(exc)
    return f"evidence query: {db.scrub(text, job.evidence_dsn or '')}"


def _rows(
    ledger: Ledger, job: Job, job_id: int, lo: datetime, hi: datetime
) -> list[tuple[str, datetime]]:
    assert job.evidence is not None
    if job.evidence_dsn is None:
        query = EvidenceQuery(ledger.conn, job.evidence, job.timezone, ledger.schema)
        with query.read_only():
            return ledger.evidence_check(job_id, lo, hi, query=query, kind=query.kind())
    target = db.Target(conninfo=job.evidence_dsn, source=f"jobs.{job.name}.evidence_dsn")
    with db.connect(target, application="catchup-evidence") as conn:
        query = EvidenceQuery(conn, job.evidence, job.timezone, ledger.schema)
        with query.read_only():
            values = query.values(query.kind(), lo, hi)
    with ledger.transaction():
        return ledger.evidence_check(job_id, lo, hi, values=values)


def apply(result: JobScan, job: Job, found: Found) -> JobScan:
    """``result`` with the evidence's states: unverified periods out of succeeded, untracked
    ones out of missing."""
    if found.error is not None:
        return replace(result, evidence=True, evidence_error=found.error)
    timeline = job.timeline
    counts = dict(result.counts)
    islands: list[Island] = list(result.islands)
    if found.untracked:
        islands = carve(
            timeline, islands, PeriodState.missing, found.untracked, PeriodState.untracked
        )
        moved = sum(i.periods for i in islands if i.state == PeriodState.untracked)
        counts[PeriodState.missing] -= moved
        counts[PeriodState.untracked] += moved
    if found.unverified:
        rows = [(str(PeriodState.unverified), t) for t in found.unverified]
        islands = merge(timeline, [*islands, *group(timeline, rows)])
        counts[PeriodState.succeeded] -= len(found.unverified)
        counts[PeriodState.unverified] += len(found.unverified)
    return replace(result, evidence=True, counts=counts, islands=tuple(islands))
