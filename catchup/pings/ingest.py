"""A ping written through the one claim path.

- A **start** claims its period (which :mod:`.attribution` names): it is running under a lease
  of the job's ``timeout``, else of one period of the job (at most a day). No finish by then
  and the period is stale, as a runner's that vanished: a gap a replay runs.
- A **finish** (success, failure, an exit status) records the attempt its start claimed (the
  one of its run id, else the job's newest), however late it comes; with no start, it claims
  its period and records it in one transaction.
- A ping whose period is settled already, or runs under another claim (catchup's replay), is
  kept in the audit trail (a ``ping`` event) and changes nothing: a ping and a claim for one
  period never both win. A **log** ping is kept there too.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import NamedTuple

from ..config.job import Job
from ..config.values import storable
from ..ledger import FinishFields
from ..results import Pinged
from ..schedule import Period
from ..session import Session
from ..vocabulary import AttemptStatus, EventAction, PingKind, PingVerdict, RunStatus
from .attribution import named_period, ping_period

OWNER = "ping"  # a start ping's claim is owned by "ping <run id>", or "ping" without one
BODY_BYTES = 100_000  # what healthchecks keeps of a ping's body; the ledger keeps its tail
LONGEST_LEASE = timedelta(days=1)
LOG_CHARS = 500  # of a log ping's body, kept in the audit trail


class PingAsk(NamedTuple):
    """What a ping says, as the facade's ``ping`` takes it (a period and a key as given,
    read once the job is known)."""

    kind: PingKind | str = PingKind.success
    exit_status: int | None = None
    period: datetime | date | str | None = None  # a Moment, read in the job's zone
    rid: str | None = None
    key: str | None = None
    body: str | None = None


@dataclass(frozen=True)
class Ping:
    """One ping: what it says, the period it names (if it names one), its run id, its body
    (the run's output) and who sent it (for the audit trail)."""

    kind: PingKind
    exit_status: int | None = None  # /<exit status>: 0 a success, 1-255 a failure
    period: datetime | None = None
    rid: str | None = None
    body: str | None = None
    source: str = OWNER


def ingest(session: Session, job: Job, ping: Ping) -> Pinged:
    """Write ``ping`` of ``job`` (one key's job, for a job with keys)."""
    job_id = session.registered_id(job.name)
    now = session.now()
    owner = f"{OWNER} {ping.rid}" if ping.rid else OWNER
    if ping.kind is PingKind.log:
        return _logged(session, job, job_id, ping, now)
    if ping.kind is not PingKind.start and ping.period is None:
        opened = session.ledger.open_ping(job_id, job.key, owner)
        if opened is not None:
            start, end, attempt = opened
            return _finish(session, job, job_id, Period(start, end), attempt, ping)
        if ping.rid and (began := session.ledger.ping_started(job_id, job.key, owner)):
            # its start's period, taken over meanwhile (or finished): the finish is kept
            return _kept(session, job, job_id, job.timeline.period(began), ping)
    period = named_period(job, ping.period, now) if ping.period else ping_period(job, now)
    if period is None:
        return _pinged(job, ping, None, PingVerdict.not_due, None, "no period of it is due yet")
    return _claim(session, job, job_id, period, owner, ping)


def start_lease(job: Job) -> timedelta:
    """How long a started run holds its period: the job's timeout, else one period of it (a
    run still going when the next falls due has overrun), at most a day."""
    return job.timeout or min(job.timeline.current.typical(), LONGEST_LEASE)


def _claim(
    session: Session, job: Job, job_id: int, period: Period, owner: str, ping: Ping
) -> Pinged:
    """Claim ``period`` for the ping (a finish records it in the same transaction)."""
    with session.transaction():
        claim = session.ledger.claim(
            job_id,
            period,
            owner=owner,
            lease=start_lease(job),
            max_attempts=job.max_attempts,
            allow_overlap=True,  # what the ping reports has happened
            ignore_backoff=True,
            retry_exhausted=True,
            key=job.key,
        )
        if claim is None:
            return _kept(session, job, job_id, period, ping)
        if ping.kind is PingKind.start:
            return _pinged(job, ping, period, PingVerdict.started, claim.attempt, "running")
        return _finish(session, job, job_id, period, claim.attempt, ping)


def _finish(
    session: Session, job: Job, job_id: int, period: Period, attempt: int, ping: Ping
) -> Pinged:
    """Record the attempt, fenced by it: taken over meanwhile, the ping is only kept."""
    failed = ping.kind is PingKind.fail or bool(ping.exit_status)
    finished = session.ledger.finish(
        job_id, period.start, attempt, job.key, **finish_fields(job, ping, failed)
    )
    if finished is None:
        return _kept(session, job, job_id, period, ping)
    verdict = PingVerdict.failed if failed else PingVerdict.succeeded
    return _pinged(job, ping, period, verdict, attempt, verdict.value)


def finish_fields(job: Job, ping: Ping, failed: bool) -> FinishFields:
    """What the ledger records of a finishing ping."""
    exit_code = ping.exit_status if ping.exit_status is not None else (1 if failed else 0)
    body = (ping.body or "")[-BODY_BYTES:] or None
    return FinishFields(
        status=RunStatus.failed if failed else RunStatus.succeeded,
        history_status=AttemptStatus.failed if failed else AttemptStatus.succeeded,
        counts_as_failure=failed,
        backoff=job.retry_backoff,
        exit_code=exit_code,
        error=f"{ping.source}: {_said(ping)}" if failed else None,
        output_tail=body,
    )


def _said(ping: Ping) -> str:
    if ping.exit_status is not None:
        return f"exit status {ping.exit_status}"
    return "failed"


def _kept(session: Session, job: Job, job_id: int, period: Period, ping: Ping) -> Pinged:
    """A ping that settles nothing: its period settled, or running under another claim."""
    row = session.ledger.run_row(job_id, period.start, job.key)
    state = "missing" if row is None else row.status
    busy = state == RunStatus.running
    verdict = PingVerdict.busy if busy else PingVerdict.kept
    note = f"the period is {state}: " + ("another claim runs it" if busy else "kept as it was")
    reason = f"{ping.kind.value} ping: {note}"
    session.ledger.record_events(
        job_id, EventAction.ping, [period.start], [state], reason, ping.source, key=job.key
    )
    return _pinged(job, ping, period, verdict, None, note)


def _logged(session: Session, job: Job, job_id: int, ping: Ping, now: datetime) -> Pinged:
    """A log ping: its body's first line-ish 500 characters kept in the audit trail (storable
    whatever they hold), against the period it would settle."""
    period = ping_period(job, now) if ping.period is None else named_period(job, ping.period, now)
    line = storable(" ".join((ping.body or "")[:LOG_CHARS].split())[:LOG_CHARS]) or "(empty)"
    start = None if period is None else period.start
    session.ledger.record_events(
        job_id, EventAction.ping, [start], [None], f"log: {line}", ping.source, key=job.key
    )
    return _pinged(job, ping, period, PingVerdict.logged, None, "logged")


def _pinged(
    job: Job,
    ping: Ping,
    period: Period | None,
    verdict: PingVerdict,
    attempt: int | None,
    detail: str,
) -> Pinged:
    label = None if period is None else job.label(period.start)
    return Pinged(job.name, job.key, ping.kind, period, label, verdict, attempt, detail)
