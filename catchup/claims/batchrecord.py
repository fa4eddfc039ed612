"""What a batch records of each of its periods and tells the caller: the finish's fields, the
outcome (as the single claim path words it), and the best-effort record of a lost lease."""

from __future__ import annotations

from dataclasses import replace

import psycopg

from ..config.job import Job
from ..errors import DatabaseError
from ..execution.runner import Execution
from ..ledger import FinishFields
from ..ledger.rows import Finished
from ..results import Outcome, Planned
from ..session import Session
from ..vocabulary import AttemptStatus, Ended, OutcomeStatus, RunStatus
from .path import BACKOFF_CAP, described, finish_fields, last_lines

# what releasing a claimed period that never started records: an interrupted attempt,
# claimable again at once, no failure counted
RELEASED = "interrupted before it started: catchup was asked to stop"
EXPIRED = "its lease ran out before it started (claimed with others)"


def failed(execution: Execution) -> bool:
    return execution.ended != Ended.exited or execution.error is not None


def fields(job: Job, execution: Execution | str) -> FinishFields:
    if isinstance(execution, Execution):
        return finish_fields(job, execution)
    return dict(
        status=RunStatus.failed,
        history_status=AttemptStatus.interrupted,
        counts_as_failure=False,
        backoff=job.retry_backoff,
        backoff_cap=BACKOFF_CAP,
        exit_code=None,
        error=execution,
        output_tail=None,
    )


def outcome_of(
    item: Planned,
    status: OutcomeStatus,
    *,
    attempt: int | None = None,
    detail: str = "",
    exit_code: int | None = None,
    seconds: float | None = None,
    label: str | None = None,
) -> Outcome:
    job, period = item.job, item.period
    label = label or job.label(period.start)
    return Outcome(
        job.name, period, label, status, attempt, detail, exit_code, seconds, key=job.key
    )


def told(
    item: Planned,
    attempt: int,
    execution: Execution | str,
    finished: Finished | None,
    label: str | None = None,
) -> Outcome:
    if not isinstance(execution, Execution):
        why = "stopped" if execution == RELEASED else "its lease ran out"
        return outcome_of(
            item,
            OutcomeStatus.interrupted,
            attempt=attempt,
            detail=f"{why} before it started; left for a retry",
            label=label,
        )
    base = outcome_of(
        item,
        OutcomeStatus.succeeded,
        attempt=attempt,
        exit_code=execution.exit_code,
        seconds=execution.seconds,
        label=label,
    )
    if execution.ended == Ended.lost:
        detail = f"{execution.error}; the job was stopped, nothing recorded"
        outcome = replace(base, status=OutcomeStatus.lost, detail=detail)
    else:
        outcome = described(base, item.job, execution, finished)
    if outcome.status in (OutcomeStatus.failed, OutcomeStatus.lost) and execution.output_tail:
        outcome = replace(outcome, output=last_lines(execution.output_tail))
    return outcome


def lose(session: Session, job_id: int, item: Planned, attempt: int, execution: Execution) -> None:
    """Best effort, as the single path does: the attempt's history says it lost its lease."""
    try:
        if session.conn.broken or session.conn.closed:
            session.reconnect()
        error = execution.error or "lost"
        session.ledger.lose(job_id, item.period.start, attempt, error, item.job.key)
    except (psycopg.OperationalError, DatabaseError):
        pass  # the row's lease runs out and the next claim says so
