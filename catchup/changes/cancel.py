"""``catchup cancel JOB PERIOD``: ask the runner of a running period, on whatever host, to stop
it, through the ledger; and ``catchup ps``, every period running now.

The request is a row for the running attempt (sql/migrations/0017). The attempt's heartbeat
(every third of the lease) reads it beside the renewal; its runner stops the job (SIGTERM, then
SIGKILL after ``kill_grace``; ``ctx.cancelled`` for a call) and records the attempt
``cancelled``: no failure counted, the period runnable again at once. A runner that is gone
renews nothing: once its lease has run out, the cancel records the attempt itself, fenced by
the attempt and under the row's lock, as a takeover of a stale lease would."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

from ..claims.path import BACKOFF_CAP
from ..config.job import Job
from ..errors import ConfigError
from ..ledger import FinishFields
from ..ledger.rows import CancelTarget
from ..results import Cancelled, Running
from ..schedule import Period
from ..session import Session
from ..vocabulary import AttemptStatus, EventAction, PeriodState, RunStatus

POLL_SECONDS = 0.1  # how often a waiting cancel looks at the attempt
SLACK = timedelta(seconds=5)  # beyond the lease and the grace, for the runner to record it


def running(session: Session, limit: int) -> Running:
    """Every period running now, on every host (at most ``limit`` rows, oldest claim first)."""
    rows = tuple(session.ledger.running_periods(limit))
    now = rows[0].now if rows else session.now()
    return Running(now, rows, dict(session.config.jobs))


def cancel(
    session: Session, job: Job, period: Period, *, reason: str, actor: str, wait: bool
) -> Cancelled:
    """Ask the running attempt of ``period`` to stop; with ``wait``, until it has (at most its
    lease, its grace and a few seconds more). Refused, with nothing written, when the period is
    not running."""
    job_id = session.registered_id(job.name)
    label = job.label(period.start)
    started = time.monotonic()
    with session.transaction():
        target = session.ledger.cancel_target(job_id, job.key, period.start, job.max_attempts)
        if target is None or target.status != RunStatus.running:
            state = "missing" if target is None else target.state
            name = " ".join(filter(None, (job.name, job.key, label)))
            raise ConfigError(f"{name}: not running (it is {state}); nothing to cancel")
        first, actor, reason = session.ledger.request_cancel(
            job_id, job.key, period.start, target.attempt, reason, actor
        )  # the request that stands: the first one for this attempt
        if first:
            previous = PeriodState.running if target.live else PeriodState.stale
            session.ledger.record_events(
                job_id, EventAction.cancel, [period.start], [previous], reason, actor, job.key
            )
        said = Cancelled(
            job.name, job.key, period, label, target.attempt, target.owner, "requested", first
        )
        if not target.live:
            return _gone(session, job, job_id, said, target, reason, actor)
    if not wait:
        return said
    lease_left = (target.lease_expires_at or target.now) - target.now
    deadline = started + (max(lease_left, job.lease / 3) + job.kill_grace + SLACK).total_seconds()
    while True:
        progress = session.ledger.cancel_progress(job_id, job.key, period.start, target.attempt)
        seconds = time.monotonic() - started
        if progress is None:  # the row went (a reset cannot touch a running period)
            return replace(said, outcome="lost", seconds=seconds)
        ended = progress.attempt_status
        if ended is not None and ended != AttemptStatus.running:
            return replace(said, outcome=ended, seconds=seconds)
        if progress.current_attempt != target.attempt:
            return replace(said, outcome=AttemptStatus.lost, seconds=seconds)
        if not progress.live:  # its runner is gone: nobody renews the lease any more
            with session.transaction():
                again = session.ledger.cancel_target(
                    job_id, job.key, period.start, job.max_attempts
                )
                if (
                    again is not None
                    and again.attempt == target.attempt
                    and again.status == RunStatus.running
                    and not again.live
                ):
                    return _gone(session, job, job_id, said, again, reason, actor, started)
            continue  # it ended meanwhile: the next look says how
        if time.monotonic() >= deadline:
            return replace(said, outcome=PeriodState.running, seconds=seconds)
        time.sleep(POLL_SECONDS)


def _gone(  # noqa: PLR0913
    session: Session,
    job: Job,
    job_id: int,
    said: Cancelled,
    target: CancelTarget,
    reason: str,
    actor: str,
    started: float | None = None,
) -> Cancelled:
    """The runner is gone (its lease ran out): the attempt is recorded cancelled here, in the
    transaction that holds the row's lock (so no claim takes it over meanwhile); the finish is
    fenced by the attempt, as the runner's own would be."""
    fields: FinishFields = dict(
        status=RunStatus.failed,
        history_status=AttemptStatus.cancelled,
        counts_as_failure=False,
        backoff=job.retry_backoff,
        backoff_cap=BACKOFF_CAP,
        exit_code=None,
        error=f"cancelled by {actor}: {reason} (its runner was gone: the lease had run out)",
        output_tail=None,
    )
    finished = session.ledger.finish(job_id, said.period.start, target.attempt, job.key, **fields)
    seconds = 0.0 if started is None else time.monotonic() - started
    outcome = AttemptStatus.cancelled if finished is not None else AttemptStatus.lost
    return replace(said, outcome=outcome, gone=True, seconds=seconds)
