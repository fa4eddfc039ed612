"""What the ledger says, checked against what the jobs left behind (a job's ``evidence``
query): succeeded periods with no evidence are ``unverified`` (a gap), periods with evidence
and no ledger row ``untracked`` (done elsewhere: not a gap, never run). One job's failing
query is that job's error in the report; the others are checked in full.

A scan reads the evidence only where something may have changed since an earlier scan
verified it (``evidence_state``): the periods after what was verified, the holes (periods with
no row, where evidence would be untracked), and the rows that finished since. ``scan --full``
reads it all again; so does a change of the query, its database, the zone or the schedule."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import psycopg

from ..config.job import Job
from ..errors import CatchupError, first_line
from ..ledger import EvidenceQuery, Ledger
from ..ledger.rows import EvidenceState
from ..postgres import database as db
from ..results import JobScan, Range
from ..schedule import Period
from ..vocabulary import PeriodState
from .ranges import carve, group, merge

# A row that finished this long before a scan's clock may still be committing unseen by it:
# the next scan looks at it again.
MARGIN = timedelta(minutes=1)
Span = tuple[datetime, datetime]  # [lo, hi): a stretch of time to read


@dataclass(frozen=True)
class Found:
    """One job's evidence in a window, as period starts; or why it could not be read. ``state``
    is what the scan may record as verified now (None: nothing new)."""

    untracked: tuple[datetime, ...] = ()
    unverified: tuple[datetime, ...] = ()
    error: str | None = None
    state: EvidenceState | None = None


def signature(job: Job) -> str:
    """What the evidence of ``job`` depends on, but the data: a change starts over."""
    parts = (job.evidence or "", db.redact(job.evidence_dsn or ""), job.timezone)
    text = "\0".join((*parts, job.timeline.signature))
    return hashlib.sha256(text.encode()).hexdigest()


def read(  # noqa: PLR0913
    ledger: Ledger,
    job: Job,
    job_id: int,
    lo: datetime,
    hi: datetime,
    *,
    now: datetime,
    holes: Sequence[Range] = (),
    state: EvidenceState | None = None,
    full: bool = False,
) -> Found:
    """Check ``job``'s evidence for its periods in ``[lo, hi)`` against the ledger: all of it,
    or with ``state`` (an earlier scan's) only where something may have changed. ``holes`` are
    the missing periods the scan found."""
    sig = signature(job)
    timeline = job.timeline
    usable = state is not None and not full and state.signature == sig and state.verified_until > lo
    try:
        if state is not None and usable:
            until = min(state.verified_until, hi)
            ranges = [
                *ledger.evidence_changed(job_id, lo, until, state.verified_at),
                *[(max(i.first, lo), min(timeline.after(i.last), until)) for i in holes],
            ]
            ranges = _merged([(a, b) for a, b in ranges if a < b and a < until])
            if until < hi:
                ranges = _merged([*ranges, (until, hi)])
        else:
            ranges = [(lo, hi)]
        rows = _rows(ledger, job, job_id, ranges)
    except (psycopg.Error, CatchupError) as exc:
        return Found(error=failure(exc, job))
    untracked: list[datetime] = []
    unverified: list[datetime] = []
    end: datetime | None = None
    for state_name, t in rows:
        if state_name == PeriodState.unverified:
            unverified.append(t)
        elif end is None or t >= end:  # the first value in a period names it
            period = timeline.containing(t)
            if period is not None and lo <= period.start < hi:
                untracked.append(period.start)
                end = period.end
    untracked = sorted(set(untracked))
    recorded = None
    if usable or lo <= job.anchor:  # what is verified runs from the job's first period
        first_finding = min([*untracked[:1], *unverified[:1]], default=hi)
        recorded = EvidenceState(job_id, sig, min(first_finding, hi), now - MARGIN)
    return Found(tuple(untracked), tuple(unverified), state=recorded)


def _merged(spans: list[Span]) -> list[Span]:
    """Spans sorted, those that overlap or meet joined."""
    out: list[Span] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def present(ledger: Ledger, job: Job, period: Period) -> bool:
    """Whether ``job``'s evidence shows output for ``period``: a psycopg.Error or a
    CatchupError when the query cannot say."""
    assert job.evidence is not None
    if job.evidence_dsn is None:
        query = EvidenceQuery(ledger.conn, job.evidence, job.timezone, ledger.schema, job.keyed)
        with query.read_only():
            return query.present(query.kind(), period.start, period.end, job.key)
    target = db.Target(conninfo=job.evidence_dsn, source=f"jobs.{job.name}.evidence_dsn")
    with db.connect(target, application="catchup-evidence", writes=False) as conn:
        query = EvidenceQuery(conn, job.evidence, job.timezone, ledger.schema, job.keyed)
        with query.read_only():
            return query.present(query.kind(), period.start, period.end, job.key)


@dataclass(frozen=True)
class FoundKeys:
    """A keyed job's evidence in a window: (key, period start) untracked and unverified; or
    why it could not be read."""

    untracked: tuple[tuple[str, datetime], ...] = ()
    unverified: tuple[tuple[str, datetime], ...] = ()
    error: str | None = None


def read_keys(
    ledger: Ledger, job: Job, job_id: int, lo: datetime, hi: datetime, keys: Sequence[str]
) -> FoundKeys:
    """Check a keyed job's evidence (its query's rows: the key, the date) for the periods of
    ``keys`` in ``[lo, hi)`` against the ledger, key by key. Read whole each scan: what was
    verified of a keyed job's evidence is not kept."""
    assert job.evidence is not None
    try:
        if job.evidence_dsn is None:
            query = EvidenceQuery(ledger.conn, job.evidence, job.timezone, ledger.schema, True)
            with query.read_only():
                rows = ledger.evidence_check_keys(
                    job_id, lo, hi, keys, query=query, kind=query.kind()
                )
        else:
            where = f"jobs.{job.name}.evidence_dsn"
            target = db.Target(conninfo=job.evidence_dsn, source=where)
            with db.connect(target, application="catchup-evidence", writes=False) as conn:
                query = EvidenceQuery(conn, job.evidence, job.timezone, ledger.schema, True)
                with query.read_only():
                    pairs = query.pairs(query.kind(), lo, hi)
            with ledger.transaction():
                rows = ledger.evidence_check_keys(job_id, lo, hi, keys, pairs=pairs)
    except (psycopg.Error, CatchupError) as exc:
        if isinstance(exc, psycopg.OperationalError) and ledger.conn.broken:
            raise
        return FoundKeys(error=failure(exc, job))
    untracked: set[tuple[str, datetime]] = set()
    unverified: list[tuple[str, datetime]] = []
    for state_name, key, t in rows:
        if state_name == PeriodState.unverified:
            unverified.append((key, t))
        elif (period := job.timeline.containing(t)) is not None and lo <= period.start < hi:
            untracked.add((key, period.start))
    return FoundKeys(tuple(sorted(untracked)), tuple(unverified))


def failure(exc: psycopg.Error | CatchupError, job: Job) -> str:
    """What went wrong with ``job``'s evidence query, in one line without a password."""
    text = first_line(exc) if isinstance(exc, psycopg.Error) else str(exc)
    return f"evidence query: {db.scrub(text, job.evidence_dsn or '')}"


def _rows(ledger: Ledger, job: Job, job_id: int, spans: list[Span]) -> list[tuple[str, datetime]]:
    assert job.evidence is not None
    if not spans:
        return []
    if job.evidence_dsn is None:
        query = EvidenceQuery(ledger.conn, job.evidence, job.timezone, ledger.schema)
        with query.read_only():
            return ledger.evidence_check(job_id, spans, query=query, kind=query.kind())
    target = db.Target(conninfo=job.evidence_dsn, source=f"jobs.{job.name}.evidence_dsn")
    with db.connect(target, application="catchup-evidence", writes=False) as conn:
        query = EvidenceQuery(conn, job.evidence, job.timezone, ledger.schema)
        with query.read_only():
            values = query.values(query.kind(), spans)
    with ledger.transaction():
        return ledger.evidence_check(job_id, spans, values=values)


def apply(result: JobScan, job: Job, found: Found) -> JobScan:
    """``result`` with the evidence's states: unverified periods out of succeeded, untracked
    ones out of missing."""
    if found.error is not None:
        return replace(result, evidence=True, evidence_error=found.error)
    timeline = job.timeline
    counts = dict(result.counts)
    ranges: list[Range] = list(result.ranges)
    if found.untracked:
        ranges = carve(
            timeline, ranges, PeriodState.missing, found.untracked, PeriodState.untracked
        )
        moved = sum(i.periods for i in ranges if i.state == PeriodState.untracked)
        counts[PeriodState.missing] -= moved
        counts[PeriodState.untracked] += moved
    if found.unverified:
        rows = [(str(PeriodState.unverified), t) for t in found.unverified]
        ranges = merge(timeline, [*ranges, *group(timeline, rows)])
        counts[PeriodState.succeeded] -= len(found.unverified)
        counts[PeriodState.unverified] += len(found.unverified)
    return replace(result, evidence=True, counts=counts, ranges=tuple(ranges))
