"""The library the CLI stands on: open the ledger, pick a period, run it through the claim path."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import psycopg

from . import db, evidence
from .errors import CatchupError, ConfigError, DatabaseError
from .heartbeat import HeartbeatLine
from .job import Config, Job
from .ledger import ClaimRequest, FinishFields, Ledger
from .models import Claim, Finished, JobRow, Outcome
from .reconcile import reconcile
from .runner import (
    Execution,
    JobContext,
    LeaseKeeper,
    cannot_start,
    child_env,
    placeholders,
    run_callable,
    run_command,
)
from .schedule import Period, ScheduleError, Timeline, iso_utc
from .vocabulary import AttemptStatus, Ended, RunStatus, Status

# Backoff doubles per failure up to this (sql/queries.sql: finish); longer retry_backoff wins.
BACKOFF_CAP = timedelta(hours=6)
FINISH_RETRY_SECONDS = 120.0


def owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Session:
    """An open ledger for one config: a connection, the schema made current, job ids known."""

    def __init__(self, config: Config, target: db.Target, *, prepare: bool = True) -> None:
        self.config = config
        self.target = target
        self.conn = db.connect(target)
        self.ledger = Ledger(self.conn, config.schema)
        try:
            if prepare:
                self.ledger.ensure_schema()
        except psycopg.Error as exc:
            self.conn.close()
            raise DatabaseError(f"cannot prepare schema {config.schema!r}: {exc}") from None
        self._job_ids: dict[str, int] = {}
        self._timelines: dict[str, Timeline] = {}
        self._renamed = False
        self._startable: set[str] = set()  # jobs whose program or module was found
        # where leases are renewed: this session's own line, or one a pool of workers shares
        self.heartbeats = HeartbeatLine(target, config.schema)
        self._own_heartbeats = True

    def share_heartbeats(self, line: HeartbeatLine) -> None:
        """Renew leases on ``line`` (one connection for all of a pool's workers)."""
        self.heartbeats.close()
        self.heartbeats, self._own_heartbeats = line, False

    def job_id(self, name: str) -> int:
        if name not in self._job_ids:
            self._sync()
        return self._job_ids[name]

    def resolve(self, job: Job, *, write: bool = True) -> Job:
        """``job`` with the timeline the ledger records for it: every schedule it has had.
        With ``write=False`` nothing is recorded (the timeline is what would be)."""
        if job.name not in self._timelines:
            self._sync(write=write)
        return replace(job, timeline=self._timelines[job.name])

    def resolve_all(self, jobs: list[Job], *, write: bool = True) -> list[Job]:
        return [self.resolve(job, write=write) for job in jobs]

    def cannot_start(self, job: Job) -> str | None:
        """:func:`catchup.runner.cannot_start`, asked once per job while it can start (a
        backlog of periods checks its program or import once, not per period)."""
        if job.name in self._startable:
            return None
        why = cannot_start(job)
        if why is None:
            self._startable.add(job.name)
        return why

    def job_rows(self, *, write: bool = True) -> dict[str, JobRow]:
        """Every configured job's ledger row, by its configured name: registered when
        ``write`` (after the renames ``renamed_from`` asks for); else as they would be (a job
        renamed from a name the ledger still has reads that job's row)."""
        names = sorted(self.config.jobs)
        rows = self.ledger.job_rows(names)
        olds = self.config.renames
        for old, row in self.ledger.job_rows(list(olds)).items() if olds else ():
            rows.setdefault(olds[old], replace(row, name=olds[old]))
        self._check_definitions(rows)  # before anything is written
        if not write:
            return rows
        self._rename()
        registered = self.ledger.register_jobs(names)
        self._record_definitions(registered)
        return registered

    def _check_definitions(self, rows: dict[str, JobRow]) -> None:
        """One job, one definition: a job the ledger records as another project's, defined
        differently there, is refused (naming both), whatever this command was to do."""
        clashes = definition_clashes(self.config, rows)
        if clashes:
            raise ConfigError(clashes)

    def _record_definitions(self, rows: dict[str, JobRow]) -> None:
        """Record this project as the one that defines its jobs where no other does, and a
        changed definition of its own; steady state writes nothing."""
        mine = self.config.registrant
        for name, row in rows.items():
            job = self.config.jobs[name]
            if row.project == mine and row.definition == job.definition:
                continue
            if row.project not in (None, mine):
                continue  # another project's, defined alike (checked): it stays theirs
            if not self.ledger.record_definition(row.id, mine, job.definition):
                # another project took it in the meantime: refused as if it had been first
                self._check_definitions(self.ledger.job_rows([name]))

    def _rename(self) -> None:
        """``renamed_from``: a job the ledger still has under its old name takes the new one,
        keeping its id and all recorded for it (audited); once per session."""
        if self._renamed:
            return
        self._renamed = True
        asked = self.config.renames
        if not asked:
            return
        for old in self.ledger.job_rows(list(asked)):
            new = asked[old]
            where = str(self.config.path) if self.config.path else "code"
            why = self.ledger.rename_job(
                old, new, f"renamed_from in {where}", f"config, seen by {owner_name()}"
            )
            if why is not None:
                raise ConfigError(f"jobs.{new}.renamed_from: cannot rename {old} to {new}: {why}")

    def _sync(self, *, write: bool = True) -> None:
        """Register the configured jobs and record schedule or start changes (see
        :func:`catchup.reconcile.reconcile`); steady state is two reads and no writes."""
        rows = self.job_rows(write=write)
        ids = {n: r.id for n, r in rows.items()}
        stored = self.ledger.schedules(list(ids.values()))
        now = self.now()
        for name, job in self.config.jobs.items():
            job_id = ids.get(name, -1)
            start, recorded = stored.get(job_id, (None, []))
            try:
                chosen = reconcile(job.schedule, job.start, recorded, now, job.start_wall)
            except ScheduleError as exc:  # a row written by another version of catchup
                raise ConfigError(
                    f"{name}: the ledger's schedule history cannot be read here: {exc}"
                ) from None
            if write and (chosen.writes or start != job.start):
                chosen = self.ledger.record_schedule(
                    job_id,
                    lambda rows, at, j=job: reconcile(j.schedule, j.start, rows, at, j.start_wall),
                    job.start,
                    f"config, seen by {owner_name()}",
                )
            self._timelines[name] = chosen.timeline
        if write:
            self._job_ids = ids

    def now(self) -> datetime:
        return self.ledger.now()

    def transaction(self) -> AbstractContextManager[Any]:
        return self.ledger.transaction()

    def reconnect(self) -> None:
        """A new connection after the old one broke (server restart, cut connection)."""
        try:
            self.conn.close()
        except psycopg.Error:
            pass
        self.conn = db.connect(self.target)
        self.ledger = Ledger(self.conn, self.config.schema)

    def close(self) -> None:
        if self._own_heartbeats:
            self.heartbeats.close()
        self.conn.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def definition_clashes(config: Config, rows: dict[str, JobRow]) -> list[str]:
    """A line per configured job that the ledger records as defined, differently, by a
    project other than ``config``'s: what each says, and the ways out."""
    mine = config.registrant
    said = []
    for name, row in sorted(rows.items()):
        job = config.jobs.get(name)
        if job is None or row.project in (None, mine) or row.definition == job.definition:
            continue
        said.append(
            f"jobs.{name}: this ledger's {name} is defined by another project, {row.project} "
            f"({describe_definition(row.definition)}); this one, {mine}, defines it as "
            f"{describe_definition(job.definition)}; they differ in "
            f"{', '.join(differences(row.definition, job.definition))}. One job has one "
            "definition: rename one of them, or give this config [project] name = "
            f"{json.dumps(row.project)} if it is that project"
        )
    return said


def describe_definition(definition: dict[str, object] | None) -> str:
    """A job's definition as a line says it: ``daily (UTC) from 2026-10-01T00:00:00Z, runs
    ./bill.sh`` (a command's program, never its arguments)."""
    if not definition:
        return "not recorded"
    return (
        f"{definition.get('schedule')} ({definition.get('timezone')}) from "
        f"{definition.get('start')}, runs {definition.get('runs')}"
    )


def differences(a: dict[str, object] | None, b: dict[str, object]) -> list[str]:
    """The parts of two definitions that differ, as people name them."""
    parts = {
        "schedule": "schedule",
        "timezone": "time zone",
        "start": "start",
        "runs_sha256": "what it runs",
    }
    return [said for key, said in parts.items() if (a or {}).get(key) != b.get(key)]


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


class Unclaimed:
    """``claimed`` not given: claim the period first."""


UNCLAIMED = Unclaimed()


@dataclass(frozen=True)
class Handed:
    """The next period a worker runs, claimed in the transaction that recorded its last one
    (``claim`` None: that claim found nothing to do)."""

    job: Job
    period: Period
    claim: Claim | Unclaimed | None


def run_period(
    session: Session,
    job: Job,
    period: Period,
    *,
    interrupted: threading.Event | None = None,
    stream: bool = True,
    ignore_backoff: bool = False,
    retry_exhausted: bool = False,
    ignore_evidence: bool = False,
) -> Outcome:
    """Claim ``period`` and run it; or say why not (done, running elsewhere, backing off, its
    output exists already).

    ``ignore_backoff`` and ``retry_exhausted`` are for a replay a person asked for: a failed
    period is retried at once, and with the second even when it has no attempts left."""
    outcome, _ = run_chained(
        session,
        job,
        period,
        interrupted=interrupted,
        stream=stream,
        ignore_backoff=ignore_backoff,
        retry_exhausted=retry_exhausted,
        ignore_evidence=ignore_evidence,
    )
    return outcome


def run_chained(
    session: Session,
    job: Job,
    period: Period,
    *,
    interrupted: threading.Event | None = None,
    stream: bool = True,
    ignore_backoff: bool = False,
    retry_exhausted: bool = False,
    claimed: Claim | Unclaimed | None = UNCLAIMED,
    then: Callable[[], tuple[Job, Period] | None] | None = None,
    ignore_evidence: bool = False,
) -> tuple[Outcome, Handed | None]:
    """:func:`run_period` for a worker with a backlog. ``claimed`` is the claim handed over by
    the previous period, if any. When the period succeeds, ``then()`` names the worker's next
    period, and its claim goes to the ledger in the same transaction as this finish (one round
    trip, one commit); it comes back as the :class:`Handed` (unclaimed, for a job with an
    evidence query: that is read before its claim).

    A job's evidence is checked before the claim: a period with output and no ledger row
    (untracked: done elsewhere) is not run, unless ``ignore_evidence``. With ``verify``, a run
    that exits 0 without evidence for its period is failed."""
    job_id = session.job_id(job.name)
    label = job.label(period.start)
    if (why := session.cannot_start(job)) is not None:
        # a bad deploy is not an attempt: nothing is claimed (a claim handed over with the
        # previous finish is given back), so no period is used up by it
        if isinstance(claimed, Claim):
            release(session, job, period, claimed)
        detail = f"{why}; not claimed, no attempt counted"
        return Outcome(job.name, period, label, Status.unstartable, detail=detail), None
    if isinstance(claimed, Unclaimed):
        if job.evidence is not None and not ignore_evidence:
            if (refusal := _untracked(session, job, job_id, period, label)) is not None:
                return refusal, None
        claim = _claim_surely(
            session, _request(session, job, period, ignore_backoff, retry_exhausted)
        )
    else:
        claim = claimed
    if claim is None:
        detail, blocked = _why_not(session, job, job_id, period)
        outcome = Outcome(job.name, period, label, Status.skipped, detail=detail, blocked=blocked)
        return outcome, None
    interrupted = interrupted or threading.Event()
    execution = _execute(session, job, job_id, period, claim, interrupted, stream)
    if job.verify and execution.ended == Ended.exited and execution.error is None:
        execution = _verified(session, job, period, label, execution)
    chained = None
    handed: Handed | None = None
    if then is not None and execution.ended == Ended.exited and execution.error is None:
        if not interrupted.is_set() and (following := then()) is not None:
            next_job, next_period = following
            if next_job.evidence is None and session.cannot_start(next_job) is None:
                chained = _request(session, next_job, next_period, ignore_backoff, retry_exhausted)
            else:
                handed = Handed(next_job, next_period, UNCLAIMED)
    outcome, claim_next = _record(session, job, job_id, period, label, claim, execution, chained)
    if not stream and outcome.status in (Status.failed, Status.lost) and execution.output_tail:
        # tick and replay do not stream a job's output: a failure shows how it ended
        outcome = replace(outcome, output=last_lines(execution.output_tail))
    if chained is None:
        return outcome, handed
    return outcome, Handed(next_job, next_period, claim_next)


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
        if session.ledger.run_row(job_id, period.start) is not None:
            return None  # the ledger knows it: the claim decides
        if not evidence.present(session.ledger, job, period):
            return None
    except (psycopg.Error, CatchupError) as exc:
        if isinstance(exc, psycopg.OperationalError) and session.conn.broken:
            raise
        detail = f"{evidence.failure(exc, job)}; not run"
        return Outcome(job.name, period, label, Status.error, detail=detail)
    return Outcome(
        job.name,
        period,
        label,
        Status.skipped,
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
    _finish_surely(
        session,
        session.job_id(job.name),
        period.start,
        claim.attempt,
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
        Status.interrupted,
        claim.attempt,
        detail="stopped before it started; left for a retry",
    )


def _request(
    session: Session, job: Job, period: Period, ignore_backoff: bool, retry_exhausted: bool
) -> ClaimRequest:
    return ClaimRequest(
        job_id=session.job_id(job.name),
        period=period,
        owner=owner_name(),
        lease=job.lease,
        max_attempts=job.max_attempts,
        allow_overlap=job.overlap == "allow",
        ignore_backoff=ignore_backoff,
        retry_exhausted=retry_exhausted,
    )


def _execute(
    session: Session,
    job: Job,
    job_id: int,
    period: Period,
    claim: Claim,
    interrupted: threading.Event,
    stream: bool,
) -> Execution:
    def renew(within: float) -> datetime | None:
        return session.heartbeats.renew(job_id, period.start, claim.attempt, job.lease, within)

    keeper = LeaseKeeper(renew, job.lease)  # the job's poll loop starts it if need be
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
            return run_command(job, argv, env, keeper, interrupted, stream=stream)
        lock = threading.Lock()

        def save(value: str) -> bool:
            with lock:
                return session.ledger.save_checkpoint(claim.id, claim.attempt, value)

        ctx = JobContext(
            job=job.name,
            period=job.period_value(period.start),
            period_start=period.start,
            period_end=period.end,
            attempt=claim.attempt,
            run_id=claim.id,
            checkpoint=claim.checkpoint,
            _saver=save,
        )
        return run_callable(job, ctx, keeper, interrupted, stream=stream)
    finally:
        keeper.stop()


def _record(
    session: Session,
    job: Job,
    job_id: int,
    period: Period,
    label: str,
    claim: Claim,
    execution: Execution,
    then: ClaimRequest | None = None,
) -> tuple[Outcome, Claim | Unclaimed | None]:
    """Record the execution; with ``then``, claim that period in the same transaction and
    return its claim beside the outcome."""
    base = Outcome(
        job.name,
        period,
        label,
        Status.succeeded,
        claim.attempt,
        exit_code=execution.exit_code,
        seconds=execution.seconds,
    )
    if execution.ended == Ended.lost:
        try:
            if session.conn.broken or session.conn.closed:
                session.reconnect()
            session.ledger.lose(job_id, period.start, claim.attempt, execution.error or "lost")
        except (psycopg.OperationalError, DatabaseError):
            pass  # best effort: the row's lease runs out and the next claim says so
        detail = f"{execution.error}; the job was stopped, nothing recorded"
        return replace(base, status=Status.lost, detail=detail), None
    succeeded = execution.ended == Ended.exited and execution.error is None
    interrupted = execution.ended == Ended.interrupted
    fields: FinishFields = dict(
        status=RunStatus.succeeded if succeeded else RunStatus.failed,
        history_status=AttemptStatus.succeeded
        if succeeded
        else AttemptStatus.interrupted
        if interrupted
        else AttemptStatus.failed,
        counts_as_failure=not (succeeded or interrupted),
        backoff=job.retry_backoff,
        backoff_cap=BACKOFF_CAP,
        exit_code=execution.exit_code,
        error=execution.error,
        output_tail=execution.output_tail or None,
    )
    next_claim: Claim | Unclaimed | None = UNCLAIMED
    if then is None:
        finished = _finish_surely(session, job_id, period.start, claim.attempt, **fields)
    else:
        finished, next_claim = _finish_then_claim_surely(
            session, job_id, period.start, claim.attempt, then, fields
        )
    return _described(base, job, execution, finished, succeeded, interrupted), next_claim


def _described(
    base: Outcome,
    job: Job,
    execution: Execution,
    finished: Finished | None,
    succeeded: bool,
    interrupted: bool,
) -> Outcome:
    if finished is None:
        return replace(
            base,
            status=Status.lost,
            detail="fenced off: another attempt took this period over; "
            "this attempt's result was not recorded",
        )
    if succeeded:
        return base
    if interrupted:
        return replace(base, status=Status.interrupted, detail="stopped; left for a retry")
    if finished.failures >= job.max_attempts:
        detail = f"{execution.error}; no attempts left ({finished.failures}/{job.max_attempts})"
    elif finished.retry_after is not None:
        detail = f"{execution.error}; retry after {iso_utc(finished.retry_after)}"
    else:
        detail = execution.error or "failed"
    return replace(base, status=Status.failed, detail=detail)


def _through_reconnects[T](session: Session, action: Callable[[bool], T]) -> T:
    """Run ``action``; when the connection breaks, reconnect with backoff (for at most
    FINISH_RETRY_SECONDS) and run it again, telling it that it runs after a reconnect, so it
    can read back what an earlier try may have committed."""
    delay = 0.2
    deadline = time.monotonic() + FINISH_RETRY_SECONDS
    lost = False
    while True:
        try:
            if lost or session.conn.broken or session.conn.closed:
                session.reconnect()
                lost = True
            return action(lost)
        except (psycopg.OperationalError, DatabaseError):
            if time.monotonic() + delay > deadline:
                raise
            lost = True
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def _claim_surely(session: Session, request: ClaimRequest) -> Claim | None:
    """Claim; after a reconnect, a claim that committed after all (the row is ours and
    running) is adopted rather than left to expire."""
    r = request

    def claim(reconnected: bool) -> Claim | None:
        if reconnected and (adopted := session.ledger.adopt(r.job_id, r.period.start, r.owner)):
            return adopted
        return session.ledger.claim(
            r.job_id,
            r.period,
            owner=r.owner,
            lease=r.lease,
            max_attempts=r.max_attempts,
            allow_overlap=r.allow_overlap,
            ignore_backoff=r.ignore_backoff,
            retry_exhausted=r.retry_exhausted,
        )

    return _through_reconnects(session, claim)


def _finish_surely(
    session: Session, job_id: int, period_start: datetime, attempt: int, **fields: Any
) -> Finished | None:
    """Write the finish; after a reconnect, read the row back instead of guessing whether the
    earlier commit happened."""

    def finish(reconnected: bool) -> Finished | None:
        if reconnected:
            row = session.ledger.run_row(job_id, period_start)
            if row is None or row.attempt != attempt:
                return None
            if row.status != RunStatus.running:
                assert row.finished_at is not None
                return Finished(row.finished_at, row.failures, row.retry_after)
        return session.ledger.finish(job_id, period_start, attempt, **fields)

    return _through_reconnects(session, finish)


def _finish_then_claim_surely(
    session: Session,
    job_id: int,
    period_start: datetime,
    attempt: int,
    then: ClaimRequest,
    fields: FinishFields,
) -> tuple[Finished | None, Claim | Unclaimed | None]:
    """The finish and the next claim in one transaction; when that fails, the finish on its
    own, and the next period left unclaimed (its own claim, in its own turn, says what is
    wrong with it). They commit together or not at all: after a lost answer the finish is read
    back as :func:`_finish_surely` does, and the claim adopted if it committed."""
    try:
        finished, claim = session.ledger.finish_then_claim(
            job_id, period_start, attempt, then, **fields
        )
    except (psycopg.OperationalError, DatabaseError):
        finished = _finish_surely(session, job_id, period_start, attempt, **fields)
        adopted = _through_reconnects(
            session, lambda _: session.ledger.adopt(then.job_id, then.period.start, then.owner)
        )
        return finished, UNCLAIMED if adopted is None else adopted
    except psycopg.Error:  # a deadlock, a trigger: rolled back whole, nothing of it written
        return _finish_surely(session, job_id, period_start, attempt, **fields), UNCLAIMED
    if finished is None:  # fenced off, and so nothing claimed: the next period is its own
        return None, UNCLAIMED
    return finished, claim


def _why_not(session: Session, job: Job, job_id: int, period: Period) -> tuple[str, bool]:
    """Why a claim found nothing to do, and whether it is worth trying again soon."""
    try:
        return _reason(session, job, job_id, period)
    except (psycopg.OperationalError, DatabaseError):
        return "the database went away; try again", True


def _reason(session: Session, job: Job, job_id: int, period: Period) -> tuple[str, bool]:
    ledger = session.ledger
    job_row = ledger.job_rows([job.name]).get(job.name)
    if job_row is not None and job_row.paused_at is not None:
        return f"{job.name} is paused (since {iso_utc(job_row.paused_at)})", False
    row = ledger.run_row(job_id, period.start)
    if row is not None:
        if row.status == RunStatus.succeeded:
            return f"already succeeded (attempt {row.attempt})", False
        if row.status == RunStatus.waived:
            return "waived by hand", False
        if row.status == RunStatus.running and row.lease_live:
            return f"running elsewhere: attempt {row.attempt} on {row.owner}", False
        if row.status == RunStatus.failed and row.failures >= job.max_attempts:
            failed = f"failed {row.failures} times (max_attempts = {job.max_attempts})"
            label = job.period_value(period.start)
            again = (
                f"`catchup replay --job {job.name} --since {label} --max 1 --retry-exhausted` or "
                f"`catchup reset {job.name} {label} --reason …` runs it again"
            )
            return f"exhausted: {failed}; {again}", False
        if row.status == RunStatus.running:
            return (
                f"attempt {row.attempt} lost its lease and no attempts are left "
                f"(max_attempts = {job.max_attempts})",
                False,
            )
        if (
            row.status == RunStatus.failed
            and row.retry_after is not None
            and row.retry_after > row.now
        ):
            return f"failed; next retry after {iso_utc(row.retry_after)}", False
    blocker = ledger.blocker(job_id, period.start)
    if blocker is not None:
        other = job.label(blocker.period_start)
        return (
            f"another period ({other}) is running on {blocker.owner} and overlap is forbidden",
            True,
        )
    # The claim met a blocker that has finished since: claimable again, so worth another try.
    return "another period of the job was running; try again", True
