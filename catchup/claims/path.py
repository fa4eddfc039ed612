"""The claim path of one period: pick it, claim it, run it under its lease, record how it
ended (fenced by its attempt), and hand the next period over with the finish."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import NamedTuple

import psycopg

from ..config.job import Job
from ..errors import CatchupError, ConfigError, DatabaseError, Unconfirmed
from ..execution.callthread import CallThread
from ..execution.runner import Execution
from ..execution.setup import execute
from ..ledger import ClaimRequest, FinishFields
from ..ledger.rows import Blocked, Claim, Finished
from ..results import ORDINARY, UNCLAIMED, ClaimRules, HandOff, Outcome, Unclaimed
from ..scan import evidence
from ..schedule import Period, iso_utc
from ..session import Session, owner_name
from ..vocabulary import AttemptStatus, Ended, OutcomeStatus, RunStatus
from . import suspects
from .reconnecting import (
    claim_surely,
    finish_surely,
    finish_then_claim_surely,
    through_reconnects,
)
from .refusal import blocked_by, excluded_by, unverified_upstream, why_not

# Backoff doubles per failure up to this (claims.sql: finish); a longer retry_backoff wins.
BACKOFF_CAP = timedelta(hours=6)


def choose_period(job: Job, now: datetime, requested: datetime | None) -> Period | None:
    """The requested period, checked, or the latest due one; None when nothing is due yet."""
    timeline = job.timeline
    if requested is None:
        return timeline.latest_due(job.delay, now)
    period = job.period_starting(requested)
    due = period.end + job.delay
    if due > now:
        raise ConfigError(
            f"{job.name}: period {job.label(period.start)} is not due until "
            f"{iso_utc(due)} (database clock: {iso_utc(now)})"
        )
    return period


@dataclass(frozen=True)
class Handed:
    """The next period a worker runs, claimed in the transaction that recorded its last one
    (``claim`` None: that claim found nothing to do)."""

    job: Job
    period: Period
    claim: HandOff


def run_period(
    session: Session,
    job: Job,
    period: Period,
    *,
    interrupted: threading.Event | None = None,
    stream: bool = True,
    rules: ClaimRules = ORDINARY,
) -> Outcome:
    """Claim ``period`` and run it; or say why not (done, running elsewhere, backing off, its
    output exists already). ``rules`` reach further for a replay a person asked for."""
    outcome, _ = run_chained(
        session, job, period, interrupted=interrupted, stream=stream, rules=rules
    )
    return keyed(outcome, job)


def keyed(outcome: Outcome, job: Job) -> Outcome:
    """``outcome`` naming the key of ``job``'s period, for a job with keys."""
    return replace(outcome, key=job.key) if job.key else outcome


@dataclass(frozen=True)
class ClaimWithFinish:
    """The worker's next period, claimed in the same transaction as this period's finish."""

    job: Job
    period: Period
    request: ClaimRequest


# What follows a period on a worker with a backlog: its next period claimed with this finish,
# handed over unclaimed (a job with evidence or upstream jobs is claimed the ordinary way), or
# nothing (no next period, or this one did not succeed).
Following = ClaimWithFinish | Handed | None


def run_chained(  # noqa: PLR0913
    session: Session,
    job: Job,
    period: Period,
    *,
    interrupted: threading.Event | None = None,
    stream: bool = True,
    rules: ClaimRules = ORDINARY,
    claimed: HandOff = UNCLAIMED,
    next_period: Callable[[], tuple[Job, Period] | None] | None = None,
    calls: CallThread | None = None,
) -> tuple[Outcome, Handed | None]:
    """:func:`run_period` for a worker with a backlog, in three stages: :func:`_gate` (may it
    run: a claim, or the outcome that says why not), the run, and :func:`_record_and_hand_over`.
    ``claimed`` is the claim handed over by the previous period, if any. When the period
    succeeds, ``next_period()`` names the worker's next period, and its claim goes to the ledger
    in the same transaction as this finish (one round trip, one commit); it comes back as the
    :class:`Handed` (unclaimed, for a job with an evidence query: that is read before its claim).

    A job's evidence is checked before the claim: a period with output and no ledger row
    (untracked: done elsewhere) is not run, unless ``rules.ignore_evidence``. With ``verify``, a run
    that exits 0 without evidence for its period is failed."""
    job_id = session.registered_id(job.name)
    label = job.label(period.start)
    claim = _gate(session, job, job_id, period, label, rules, claimed)
    if isinstance(claim, Outcome):
        return claim, None
    interrupted = interrupted or threading.Event()
    execution = execute(session, job, job_id, period, claim, interrupted, stream, calls=calls)
    if job.verify and execution.ended == Ended.exited and execution.error is None:
        execution = _verified(session, job, period, label, execution)
    following = None
    if next_period is not None and execution.ended == Ended.exited and execution.error is None:
        if not interrupted.is_set():
            following = _following(session, next_period(), rules)
    chained = following.request if isinstance(following, ClaimWithFinish) else None
    outcome, claim_next = _record(session, job, job_id, period, label, claim, execution, chained)
    if (
        not stream
        and outcome.status in (OutcomeStatus.failed, OutcomeStatus.lost)
        and execution.output_tail
    ):
        # tick and replay do not stream a job's output: a failure shows how it ended
        outcome = replace(outcome, output=last_lines(execution.output_tail))
    if isinstance(following, ClaimWithFinish):
        return outcome, Handed(following.job, following.period, claim_next)
    return outcome, following


def _gate(
    session: Session,
    job: Job,
    job_id: int,
    period: Period,
    label: str,
    rules: ClaimRules,
    claimed: HandOff,
) -> Claim | Outcome:
    """The claim to run ``period`` under (``claimed``, handed over, or one taken now), or the
    outcome that says why it does not run: the job cannot start, the period is excluded or
    untracked, waits for upstream periods, is suspect and not decided lost, or the claim found
    nothing."""
    if (why := session.cannot_start(job)) is not None:
        # a bad deploy is not an attempt: nothing is claimed (a claim handed over with the
        # previous finish is given back), so no period is used up by it
        if isinstance(claimed, Claim):
            release(session, job, period, claimed)
        detail = f"{why}; not claimed, no attempt counted"
        return Outcome(job.name, period, label, OutcomeStatus.unstartable, detail=detail)
    if isinstance(claimed, Unclaimed):
        by = None if rules.include_excluded else excluded_now(session, job, job_id, period)
        if by is not None:
            detail = f"excluded by {by}; not claimed"
            return Outcome(job.name, period, label, OutcomeStatus.skipped, detail=detail)
        # its reads (evidence, upstream, a suspect's failover) survive a restart as the claim
        # does: asked again on a new connection (a claim taken returns at once, nothing after)
        claim = through_reconnects(
            session, lambda _: _claim_now(session, job, job_id, period, label, rules)
        )
        if isinstance(claim, Outcome):
            return claim
    else:
        claim = claimed
    if isinstance(claim, Blocked):
        detail = blocked_by(session, job, period, claim)
        return Outcome(job.name, period, label, OutcomeStatus.blocked, detail=detail)
    if claim is None:
        detail, blocked = why_not(session, job, job_id, period)
        return Outcome(
            job.name, period, label, OutcomeStatus.skipped, detail=detail, blocked=blocked
        )
    return claim


def _claim_now(
    session: Session, job: Job, job_id: int, period: Period, label: str, rules: ClaimRules
) -> Claim | Blocked | Outcome | None:
    """A claim taken now (nothing was handed over): refused for an untracked period or one
    whose upstream periods are not verified, and a suspect period settled by its evidence
    (decided lost: claimed as its next attempt)."""
    if job.evidence is not None and not rules.ignore_evidence:
        if (refusal := _untracked(session, job, job_id, period, label)) is not None:
            return refusal
    if job.after and (waits := unverified_upstream(session, job, period)):
        return waits
    try:
        claim = claim_surely(session, _request(session, job, period, rules))
    except Unconfirmed as exc:  # durable_claims: claimed on the primary only
        return Outcome(job.name, period, label, OutcomeStatus.error, detail=str(exc))
    if claim is None:
        settled = suspects.settle(session, job, job_id, period, label)
        if isinstance(settled, Outcome):
            return settled
        if settled:  # decided lost by its evidence: claimed as its next attempt
            again = claim_surely(session, _request(session, job, period, rules))
            claim = again if isinstance(again, Claim) else None
    return claim


def _following(
    session: Session, nxt: tuple[Job, Period] | None, rules: ClaimRules
) -> ClaimWithFinish | Handed | None:
    """What follows a period that succeeded: the worker's next period claimed with its finish,
    or handed over unclaimed: a job with evidence reads it before its claim, one with upstream
    jobs checks them in its claim's transaction, and one that cannot start claims nothing."""
    if nxt is None:
        return None
    next_job, after = nxt
    if next_job.evidence is None and not next_job.after and session.cannot_start(next_job) is None:
        return ClaimWithFinish(next_job, after, _request(session, next_job, after, rules))
    return Handed(next_job, after, UNCLAIMED)


def last_lines(tail: str, lines: int = 8, chars: int = 2000) -> str:
    """The end of an output tail, as a failure line shows it (``history --period`` has more)."""
    kept = tail.rstrip("\n").splitlines()[-lines:]
    return "\n".join(kept)[-chars:]


def _untracked(
    session: Session, job: Job, job_id: int, period: Period, label: str
) -> Outcome | None:
    """The outcome that refuses ``period`` when its output exists and the ledger has no row
    (or when the evidence query cannot say); None when it may be claimed."""
    try:
        if session.ledger.run_row(job_id, period.start, job.key) is not None:
            return None  # the ledger knows it: the claim decides
        if not evidence.present(session.ledger, job, period):
            return None
        if session.ledger.suspect(job_id, period, job.key) is not None:
            return None  # a failover's: its claim is refused, and the evidence decides it
    except (psycopg.Error, CatchupError) as exc:
        if isinstance(exc, psycopg.OperationalError) and session.conn.broken:
            raise
        detail = f"{evidence.failure(exc, job)}; not run"
        return Outcome(job.name, period, label, OutcomeStatus.error, detail=detail)
    return Outcome(
        job.name,
        period,
        label,
        OutcomeStatus.skipped,
        detail="untracked: its output exists (evidence) but the ledger has no run; "
        "catchup adopt records it, run --ignore-evidence runs it",
    )


def _verified(
    session: Session, job: Job, period: Period, label: str, execution: Execution
) -> Execution:
    """``execution`` failed when the job exited 0 but its evidence shows no output."""
    try:
        if evidence.present(session.ledger, job, period):
            return execution
        error = f"no evidence for {label}"
    except (psycopg.Error, CatchupError) as exc:  # a broken connection: the finish reconnects
        error = f"exited 0, but {evidence.failure(exc, job)}"
    return replace(execution, error=error)


def release(session: Session, job: Job, period: Period, claim: Claim) -> Outcome:
    """Give back a handed claim that will not run now (the worker was asked to stop): recorded
    as an interrupted attempt, claimable again at once, no failure counted."""
    finish_surely(
        session,
        session.registered_id(job.name),
        period.start,
        claim.attempt,
        job.key,
        status=RunStatus.failed,
        history_status=AttemptStatus.interrupted,
        counts_as_failure=False,
        backoff=job.retry_backoff,
        backoff_cap=BACKOFF_CAP,
        exit_code=None,
        error="interrupted before it started: catchup was asked to stop",
        output_tail=None,
    )
    return Outcome(
        job.name,
        period,
        job.label(period.start),
        OutcomeStatus.interrupted,
        claim.attempt,
        detail="stopped before it started; left for a retry",
        key=job.key,
    )


def excluded_now(session: Session, job: Job, job_id: int, period: Period) -> str | None:
    """What excludes ``period`` (:func:`excluded_by`), read through reconnects as the claim
    that follows is."""
    return through_reconnects(session, lambda _: excluded_by(session.ledger, job, job_id, period))


def _request(session: Session, job: Job, period: Period, rules: ClaimRules) -> ClaimRequest:
    """The claim of ``period``, with the upstream periods it waits for: those a window
    recorded afterwards excludes wait for nothing (their job's ``exclude``: session.needs)."""
    needs = session.needs(job, period)
    asked = [
        (session.registered_id(up.name), job.key if up.keyed else "", p.start) for up, p in needs
    ]
    gone = (
        through_reconnects(session, lambda _: session.ledger.excluded_among(asked))
        if asked
        else set()
    )
    waits = [need for i, need in enumerate(needs) if i not in gone]
    return ClaimRequest(
        job_id=session.registered_id(job.name),
        needs=tuple((session.registered_id(up.name), p.start, up.max_attempts) for up, p in waits),
        period=period,
        owner=owner_name(),
        lease=job.lease,
        max_attempts=job.max_attempts,
        allow_overlap=job.overlap == "allow",
        ignore_backoff=rules.ignore_backoff,
        retry_exhausted=rules.retry_exhausted,
        key=job.key,
        whole_job=job.whole_job_overlap,
        need_keys=tuple(job.key if up.keyed else "" for up, _ in waits),
    )


def _record(  # noqa: PLR0913
    session: Session,
    job: Job,
    job_id: int,
    period: Period,
    label: str,
    claim: Claim,
    execution: Execution,
    next_request: ClaimRequest | None = None,
) -> tuple[Outcome, HandOff]:
    """Record the execution; with ``next_request``, claim that period in the same transaction and
    return its claim beside the outcome."""
    base = Outcome(
        job.name,
        period,
        label,
        OutcomeStatus.succeeded,
        claim.attempt,
        exit_code=execution.exit_code,
        seconds=execution.seconds,
    )
    if execution.ended == Ended.lost:
        try:
            if session.conn.broken or session.conn.closed:
                session.reconnect()
            error = execution.error or "lost"
            session.ledger.lose(job_id, period.start, claim.attempt, error, job.key)
        except (psycopg.OperationalError, DatabaseError):
            pass  # best effort: the row's lease runs out and the next claim says so
        detail = f"{execution.error}; the job was stopped, nothing recorded"
        return replace(base, status=OutcomeStatus.lost, detail=detail), None
    fields = finish_fields(job, execution)
    next_claim: HandOff = UNCLAIMED
    if next_request is None:
        finished = finish_surely(session, job_id, period.start, claim.attempt, job.key, **fields)
    else:
        finished, next_claim = finish_then_claim_surely(
            session, job_id, period.start, claim.attempt, next_request, fields, job.key
        )
    if finished is None and suspects.recreated(session, job, job_id, period, claim):
        # a failover lost the claim: the row is written again and the outcome recorded
        finished = finish_surely(session, job_id, period.start, claim.attempt, job.key, **fields)
    return described(base, job, execution, finished), next_claim


class Verdict(NamedTuple):
    """How an execution that kept its lease is recorded (the run's status, the attempt's,
    whether it counts a failure) and what its outcome says."""

    status: RunStatus
    attempt: AttemptStatus
    counts_as_failure: bool
    outcome: OutcomeStatus


SUCCEEDED = Verdict(RunStatus.succeeded, AttemptStatus.succeeded, False, OutcomeStatus.succeeded)
# How an execution that did not succeed ended → its verdict, the one table of them. A person's
# cancel and an interruption count no failure: the period is runnable again at once. A lost one
# records nothing (its lease is gone; `lose` says so in its history).
VERDICTS: dict[Ended, Verdict] = {
    Ended.exited: Verdict(RunStatus.failed, AttemptStatus.failed, True, OutcomeStatus.failed),
    Ended.timeout: Verdict(RunStatus.failed, AttemptStatus.failed, True, OutcomeStatus.failed),
    Ended.lost: Verdict(RunStatus.failed, AttemptStatus.failed, True, OutcomeStatus.lost),
    Ended.interrupted: Verdict(
        RunStatus.failed, AttemptStatus.interrupted, False, OutcomeStatus.interrupted
    ),
    Ended.cancelled: Verdict(
        RunStatus.failed, AttemptStatus.cancelled, False, OutcomeStatus.cancelled
    ),
}


def verdict(execution: Execution) -> Verdict:
    """A run that exited 0 without an error succeeded; any other ends as the table says."""
    if execution.ended == Ended.exited and execution.error is None:
        return SUCCEEDED
    return VERDICTS[execution.ended]


def finish_fields(job: Job, execution: Execution) -> FinishFields:
    """What the ledger records of ``execution`` (it did not lose its lease)."""
    said = verdict(execution)
    return dict(
        status=said.status,
        history_status=said.attempt,
        counts_as_failure=said.counts_as_failure,
        backoff=job.retry_backoff,
        backoff_cap=BACKOFF_CAP,
        exit_code=execution.exit_code,
        error=execution.error,
        output_tail=execution.output_tail or None,
    )


def described(base: Outcome, job: Job, execution: Execution, finished: Finished | None) -> Outcome:
    """The outcome of an execution the ledger was asked to record (``finished``: what it
    recorded, or None when another attempt fenced this one off)."""
    if finished is None:
        return replace(
            base,
            status=OutcomeStatus.lost,
            detail="fenced off: another attempt took this period over; "
            "this attempt's result was not recorded",
        )
    said = verdict(execution)
    if said is SUCCEEDED:
        return base
    if said.outcome == OutcomeStatus.cancelled:
        detail = f"{execution.error}; the job was stopped, runnable again"
        return replace(base, status=OutcomeStatus.cancelled, detail=detail)
    if said.outcome == OutcomeStatus.interrupted:
        return replace(base, status=OutcomeStatus.interrupted, detail="stopped; left for a retry")
    if finished.failures >= job.max_attempts:
        detail = f"{execution.error}; no attempts left ({finished.failures}/{job.max_attempts})"
    elif finished.retry_after is not None:
        detail = f"{execution.error}; retry after {iso_utc(finished.retry_after)}"
    else:
        detail = execution.error or "failed"
    return replace(base, status=OutcomeStatus.failed, detail=detail)
