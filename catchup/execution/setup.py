"""One claimed period's execution set up: its command's argv and environment (never a
shell) or its callable's context, its lease kept while it runs."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..claims.failover import Held
from ..claims.lease import LeaseKeeper
from ..config.job import Job
from ..ledger.rows import Claim, Renewed
from ..render.text import log_prefix
from ..schedule import Period
from ..session import Session, owner_name
from .callthread import CallThread
from .output import LoggedLines
from .runner import Execution, JobContext, child_env, placeholders, run_callable, run_command


def held(job: Job, job_id: int, period: Period, claim: Claim) -> Held:
    """What the runner of ``claim`` needs to write its row again after a failover lost it."""
    claimed_at = claim.lease_expires_at - job.lease
    return Held(job_id, job.name, job.key, period, claim.attempt, owner_name(), claimed_at)


def execute(  # noqa: PLR0913
    session: Session,
    job: Job,
    job_id: int,
    period: Period,
    claim: Claim,
    interrupted: threading.Event,
    stream: bool,
    *,
    renew: Callable[[float], Renewed | None] | None = None,
    granted: float | None = None,
    calls: CallThread | None = None,
) -> Execution:
    """Run ``period`` of ``job`` as ``claim``: its command (argv, environment) or its callable
    (a :class:`JobContext`), its lease renewed while it runs (by ``renew``: a batch renews the
    periods waiting beside it too; ``granted``: when its lease was last given, before a batch's
    claim or renewal), on ``calls`` when a worker keeps a thread for its calls."""

    mine = held(job, job_id, period, claim)

    def renew_one(within: float) -> Renewed | None:
        return session.heartbeats.renew(
            job_id, period.start, claim.attempt, job.lease, within, job.key, mine
        )

    # the job's poll loop starts the keeper if need be
    keeper = LeaseKeeper(renew or renew_one, job.lease, granted)
    try:
        if job.command is not None:
            values = placeholders(job, period, claim.attempt)
            argv = [arg.format(**values) for arg in job.command]
            # What `catchup checkpoint` inside the job needs to find this ledger again; a DSN
            # given on our command line travels in the environment, never in an argv.
            extra = {"CATCHUP_SCHEMA": session.config.schema}
            if session.config.path is not None:
                extra["CATCHUP_CONFIG"] = str(session.config.path.resolve())
            if session.target.source == "--dsn":
                extra["CATCHUP_DSN"] = session.target.conninfo
            env = child_env(job, period, claim.attempt, claim.id, claim.checkpoint, extra)
            lines = logged(session, job, values["period"], claim.attempt, stream)
            return run_command(job, argv, env, keeper, interrupted, stream=stream, lines=lines)
        ctx = call_context(session, job, period, claim)
        lines = logged(session, job, ctx.period, claim.attempt, stream)
        return run_callable(job, ctx, keeper, interrupted, stream, calls=calls, lines=lines)
    finally:
        keeper.stop()


def logged(
    session: Session, job: Job, period: str, attempt: int, stream: bool
) -> LoggedLines | None:
    """Where this attempt's output is logged, line by line, to catchup's stderr: for a job
    with ``log_output`` (or every job, ``--log-output``) when its output is not streamed as it
    is (``catchup run`` streams it)."""
    if stream or not logs(session, job):
        return None
    return LoggedLines(log_prefix(job.name, job.key, period, attempt))


def logs(session: Session, job: Job) -> bool:
    """Whether ``job``'s output is logged where it is not streamed."""
    return job.log_output or session.config.log_output


def call_context(
    session: Session, job: Job, period: Period, claim: Claim, value: str | None = None
) -> JobContext:
    """What a Python ``call`` of ``period`` receives (``value``: its ``{period}``, when known);
    its checkpoints are saved fenced by the claim's attempt."""
    lock = threading.Lock()

    def save(value: str) -> bool:
        with lock:
            return session.ledger.save_checkpoint(claim.id, claim.attempt, value)

    return JobContext(
        job=job.name,
        key=job.key,
        period=value if value is not None else job.period_value(period.start),
        period_start=period.start,
        period_end=period.end,
        attempt=claim.attempt,
        run_id=claim.id,
        checkpoint=claim.checkpoint,
        _saver=save,
    )
