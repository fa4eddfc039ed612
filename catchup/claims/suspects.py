"""Periods a failover left in doubt (issue 30, sql/migrations/0021): the ledger's server moved
to a new timeline from one whose claims were not all durable, and the new primary may lack the
old one's last claims and finishes. Every period of the old timeline that the new one does not
show settled is ``suspect``: not claimed
until its job's evidence decides it (``settle``, on the claim path: its output exists, adopted;
it does not, lost, and run as the next attempt) or a person does (``catchup mark``/``reset``).
``apply`` puts the state into a scan of a job without keys, ``apply_keyed`` into a keyed one's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

import psycopg

from ..config.job import Job
from ..errors import DatabaseError
from ..execution.setup import held
from ..ledger import Ledger
from ..ledger.rows import Claim
from ..results import JobScan, Outcome, Range
from ..scan import evidence
from ..scan.ranges import carve, merge
from ..scan.targets import KeyRange
from ..schedule import Period
from ..session import Session
from ..vocabulary import OutcomeStatus, PeriodState, RunStatus
from .failover import Failover, Held, told
from .reconnecting import through_reconnects

# the states of a period without a row (its output exists, or not): suspect when it ended by then
ABSENT_STATES = (PeriodState.missing, PeriodState.untracked)
# the states a suspect row shows in a scan before it is called suspect
ROW_STATES = (
    PeriodState.running,
    PeriodState.stale,
    PeriodState.failed,
    PeriodState.interrupted,
    PeriodState.cancelled,
    PeriodState.exhausted,
)


def apply(ledger: Ledger, job: Job, job_id: int, result: JobScan, failover: Failover) -> JobScan:
    """``result`` with its suspect periods: missing ones that ended by the time the failover was
    seen, and rows of the old timeline (running, failed) not written since."""
    if result.first is None or result.until is None:
        return result
    rows = tuple(
        s for _, s in ledger.suspect_rows(job_id, failover.seen_at, result.first, result.until)
    )
    ranges = suspected(job, list(result.ranges), failover, rows)
    return replace(result, counts=recounted(result.counts, ranges), ranges=tuple(ranges))


def apply_keyed(
    ledger: Ledger,
    job: Job,
    job_id: int,
    found: list[KeyRange],
    failover: Failover,
    first: datetime,
    until: datetime,
) -> list[KeyRange]:
    """A keyed job's ranges (each key's, not succeeded) with their suspect periods, as
    :func:`apply` finds them for a job without keys."""
    rows: dict[str, list[datetime]] = {}
    for key, start in ledger.suspect_rows(job_id, failover.seen_at, first, until):
        rows.setdefault(key, []).append(start)
    by_key: dict[str, list[Range]] = {}
    for k in found:
        by_key.setdefault(k.key, []).append(Range(k.state, k.first, k.last, k.periods))
    out: list[KeyRange] = []
    for key, ranges in by_key.items():
        for r in suspected(job, ranges, failover, tuple(rows.get(key, ()))):
            out.append(KeyRange(key, r.state, r.first, r.last, r.periods))
    return out


def suspected(
    job: Job, ranges: list[Range], failover: Failover, rows: tuple[datetime, ...]
) -> list[Range]:
    """One key's ``ranges`` (oldest first) with the absent periods that ended by the time the
    failover was seen, and the rows at ``rows``, taken out into ranges of ``suspect``."""
    timeline = job.timeline
    cut = timeline.floor(failover.seen_at)  # periods that start before it ended by then
    out: list[Range] = []
    for r in ranges:
        if r.state not in ABSENT_STATES or cut is None or r.first >= cut:
            out.append(r)
        elif r.last < cut:
            out.append(r._replace(state=PeriodState.suspect))
        else:
            ahead = timeline.before(cut)
            assert ahead is not None
            out.append(Range(PeriodState.suspect, r.first, ahead, timeline.count(r.first, cut)))
            out.append(Range(r.state, cut, r.last, timeline.count(cut, timeline.after(r.last))))
    if rows:
        for state in ROW_STATES:
            out = carve(timeline, out, state, rows, PeriodState.suspect)
        out = merge(timeline, out)
    return out


def recounted(counts: dict[str, int], ranges: list[Range]) -> dict[str, int]:
    """``counts`` with the states suspect periods come from counted again from ``ranges``."""
    out = dict(counts)
    for state in (*ABSENT_STATES, *ROW_STATES, PeriodState.suspect):
        out[state] = sum(r.periods for r in ranges if r.state == state)
    return out


def settle(session: Session, job: Job, job_id: int, period: Period, label: str) -> Outcome | bool:
    """A claim of ``period`` found nothing to do: when it is suspect, decided by the job's
    evidence (its output exists: adopted, an Outcome; it does not: lost, True: claim it again)
    or refused in words (an Outcome). False: it is not suspect."""
    ledger = session.ledger
    failover = ledger.suspect(job_id, period, job.key)
    if failover is None:
        return False
    if job.evidence is None:
        detail = (
            f"suspect: {told(failover)}, so it may have claimed or finished this period; "
            "not run: `catchup mark` it (it ran) or `catchup reset` it (run it again)"
        )
        return Outcome(job.name, period, label, OutcomeStatus.skipped, detail=detail)
    try:
        present = evidence.present(ledger, job, period)
    except (psycopg.Error, DatabaseError) as exc:
        detail = f"suspect after a failover, and {evidence.failure(exc, job)}; not run"
        return Outcome(job.name, period, label, OutcomeStatus.skipped, detail=detail)
    decision = "adopted" if present else "lost"
    note = f"suspect after the failover to timeline {failover.timeline}: " + (
        "its output exists (evidence); adopted" if present else "no output (evidence); lost"
    )
    with session.transaction():
        decided = ledger.decide_suspects(job_id, [period], decision, note, job.key)
    if not present:
        return bool(decided)
    detail = f"{note}, not run again" if decided else "decided meanwhile; not run"
    return Outcome(job.name, period, label, OutcomeStatus.skipped, detail=detail)


def recreated(session: Session, job: Job, job_id: int, period: Period, claim: Claim) -> bool:
    """Whether the row of ``claim``, which a failover lost, is written again (Ledger.recreate:
    absent, and claimed before the ledger's new timeline was seen)."""
    mine = held(job, job_id, period, claim)

    def again(reconnected: bool) -> bool:
        if reconnected:  # an answer lost: the row may be written already
            row = session.ledger.run_row(job_id, period.start, job.key)
            if row is not None:
                return row.attempt == claim.attempt and row.status == RunStatus.running
        return session.ledger.recreate(mine, job.lease) is not None

    try:
        return through_reconnects(session, again)
    except (psycopg.OperationalError, DatabaseError):
        return False


def recreated_many(
    session: Session, job_id: int, mine: Sequence[Held], lease: timedelta
) -> set[tuple[str, datetime]]:
    """:func:`recreated` of a batch's claims (``mine``, of one job): the (key, start) of each
    row a failover lost that is written again (Ledger.recreate_many)."""

    def again(reconnected: bool) -> set[tuple[str, datetime]]:
        made = set(session.ledger.recreate_many(job_id, mine, lease))
        if reconnected:  # an answer lost: rows may be written already
            for h in mine:
                row = session.ledger.run_row(job_id, h.period.start, h.key)
                if row is not None and row.attempt == h.attempt and row.status == RunStatus.running:
                    made.add((h.key, h.period.start))
        return made

    try:
        return through_reconnects(session, again)
    except (psycopg.OperationalError, DatabaseError):
        return set()
