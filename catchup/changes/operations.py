"""What people do to the ledger by hand: mark, reset, adopt, pause, resume, rename, retire.

Every change is audited (who, when, why, what it was before) in the events table, and refused
whole when any period it names is running.
"""

from __future__ import annotations

import getpass
import re
import socket
from collections.abc import Callable
from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from ..config.job import Job
from ..config.values import name_problem, parse_instant
from ..errors import ConfigError, DatabaseError
from ..ledger.rows import LockedRow
from ..results import Change, Changes
from ..scan.detector import prepare, scan_jobs
from ..scan.keyed import current_keys, selected
from ..schedule import Period
from ..session import Session
from ..vocabulary import EventAction, PeriodState, RunStatus
from .held import held_said

if TYPE_CHECKING:
    from ..scan.window import Moment

MAX_PERIODS = 100_000


def default_actor() -> str:
    try:
        user = getpass.getuser()
    except Exception:
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def parse_periods(job: Job, args: list[str]) -> list[Period]:
    """``2026-10-03`` or ``2026-10-01..2026-10-07`` (both ends included), each a period start.
    A date without a time is midnight in the job's time zone; as a range's end, that whole
    local day (every period starting in it)."""
    timeline = job.timeline
    starts: set[datetime] = set()
    for arg in args:
        first_text, dots, last_text = arg.partition("..")
        try:
            first = parse_instant(first_text, job.timezone)
            last = parse_instant(last_text, job.timezone) if dots else first
            # a bare date ending a range is that whole local day: ..2026-10-31 on a 15-minute
            # job takes its 23:45 too
            whole_day = dots and re.fullmatch(r"\d{4}-\d\d-\d\d", last_text.strip())
            end = (
                parse_instant(
                    (date.fromisoformat(last_text.strip()) + timedelta(days=1)).isoformat(),
                    job.timezone,
                )
                if whole_day
                else None
            )
        except ValueError as exc:
            raise ConfigError(f"{job.name}: {arg!r}: {exc}") from None
        if last < first:
            raise ConfigError(f"{job.name}: {arg!r}: the range ends before it starts")
        for edge in (first,) if end is not None else (first, last):
            job.period_starting(edge)
        for start in timeline.starts(first, end if end is not None else timeline.after(last)):
            starts.add(start)
            if len(starts) > MAX_PERIODS:
                raise ConfigError(f"{job.name}: more than {MAX_PERIODS} periods at once")
    return [timeline.period(start) for start in sorted(starts)]


def by_key(
    session: Session, job: Job, periods: list[Period], keys: tuple[str, ...] | None
) -> list[tuple[Job, list[Period]]]:
    """``periods`` of each key a change names: of ``keys``, or (None: ``--all-keys``) of
    every key the job expects in them, each key its own periods; a job without keys, itself."""
    if not job.keyed:
        return [(job, periods)]
    if keys is not None:
        return [(job.for_key(key), periods) for key in keys]

    row = session.job_rows(write=False).get(job.name)
    known = current_keys(session.ledger, job, row.id if row else 0, session.now(), write=False)
    pairs = []
    for key in sorted(known, key=lambda k: k.key):
        mine = [
            p
            for p in periods
            if key.expected_from < p.end and (key.gone_at is None or p.start < key.gone_at)
        ]
        if mine:
            pairs.append((job.for_key(key.key), mine))
    if not pairs:
        raise ConfigError(f"{job.name}: no key is expected in those periods; nothing was changed")
    return pairs


def each_key(
    session: Session,
    pairs: list[tuple[Job, list[Period]]],
    change: Callable[[Job, list[Period]], Changes],
) -> Changes:
    """``change`` of each key's periods, all in one transaction (refused whole, as one key's
    change is), as one :class:`Changes`."""
    with session.transaction():
        done = [change(job, periods) for job, periods in pairs]
    return Changes(done[0].job, done[0].action, tuple(row for c in done for row in c.rows))


def _refuse_running(job: Job, rows: list[LockedRow]) -> None:
    running = [row.period_start for row in rows if row.status == RunStatus.running]
    if running:
        labels = ", ".join(job.label(r) for r in running[:5])
        raise ConfigError(
            f"{job.name}: refusing: {labels} "
            f"{'is' if len(running) == 1 else 'are'} running; nothing was changed"
        )


def _changeable(session: Session, job: Job) -> int:
    """The ledger id of ``job``, to change it by hand; a held job (catchup/changes/held.py) is
    refused: a change would make it no longer new (its old name's done periods would run
    again), or keep `catchup rename` from replacing its row. The config says which it is first."""
    if (old := session.held().get(job.name)) is not None:
        raise ConfigError(f"{held_said(job.name, old)}; nothing was changed")
    return session.registered_id(job.name)


def mark(
    session: Session,
    job: Job,
    periods: list[Period],
    *,
    skip: bool,
    reason: str,
    actor: str,
    action: EventAction | None = None,
) -> Changes:
    """Waive ``periods``: done out of band (``skip=False``) or deliberately skipped; recorded
    in the audit trail as ``action`` (default: done or skip)."""
    ledger = session.ledger
    job_id = _changeable(session, job)
    action = action or (EventAction.skip if skip else EventAction.done)
    note = f"{action} by {actor}: {reason}"
    with session.transaction():
        # a failover's suspect periods first (sql/migrations/0021): waived on the new timeline
        decided = ledger.decide_suspects(job_id, periods, "waived", note, job.key)
        rest = [p for p in periods if p.start not in decided]
        rows = ledger.lock_periods(job_id, [p.start for p in rest], job.key)
        _refuse_running(job, rows)
        before = {row.period_start: PeriodState(row.status) for row in rows}
        # done means done: a period that succeeded stays succeeded (and keeps its evidence)
        kept = {
            p.start for p in periods if not skip and before.get(p.start) == PeriodState.succeeded
        }
        targets = [p for p in rest if p.start not in kept]
        changed = set(ledger.mark_periods(job_id, targets, note, job.key))
        if len(changed) != len(targets):
            raise ConfigError(
                f"{job.name}: a period started running meanwhile; nothing was changed"
            )
        before.update(dict.fromkeys(decided, PeriodState.suspect))
        targets = [p for p in periods if p.start not in kept]
        previous: list[str | None] = [before.get(p.start, PeriodState.missing) for p in targets]
        if targets:
            ledger.record_events(
                job_id, action, [p.start for p in targets], previous, reason, actor, job.key
            )
    return Changes(
        job.name,
        action,
        tuple(
            Change(
                job.name,
                p,
                job.label(p.start),
                before.get(p.start, PeriodState.missing),
                PeriodState.succeeded if p.start in kept else PeriodState.waived,
                p.start not in kept and before.get(p.start) != PeriodState.waived,
                key=job.key,
            )
            for p in periods
        ),
    )


def reset(session: Session, job: Job, periods: list[Period], *, reason: str, actor: str) -> Changes:
    """Make succeeded, waived or exhausted (any failed) periods runnable again: failed, with no
    failures counted, so the next tick or replay runs them."""
    ledger = session.ledger
    job_id = _changeable(session, job)
    note = f"reset by {actor}: {reason}"
    with session.transaction():
        # a failover's suspect periods (sql/migrations/0021): lost, runnable as the next attempt
        decided = ledger.decide_suspects(job_id, periods, "lost", note, job.key)
        rest = [p for p in periods if p.start not in decided]
        rows = ledger.lock_periods(job_id, [p.start for p in rest], job.key)
        _refuse_running(job, rows)
        before = {row.period_start: PeriodState(row.status) for row in rows}
        targets = [p for p in rest if p.start in before]
        changed = set(ledger.reset_periods(job_id, [p.start for p in targets], note, job.key))
        changed |= set(decided)
        before.update(dict.fromkeys(decided, PeriodState.suspect))
        targets = [p for p in periods if p.start in before]
        ledger.record_events(
            job_id,
            EventAction.reset,
            [p.start for p in targets],
            [before[p.start] for p in targets],
            reason,
            actor,
            job.key,
        )
    return Changes(
        job.name,
        EventAction.reset,
        tuple(
            Change(
                job.name,
                p,
                job.label(p.start),
                before.get(p.start, PeriodState.missing),
                PeriodState.failed
                if p.start in changed
                else before.get(p.start, PeriodState.missing),
                p.start in changed,
                key=job.key,
            )
            for p in periods
        ),
    )


def pause(session: Session, job: Job, *, reason: str | None, actor: str) -> datetime:
    """Pause ``job`` (of a keyed job's ``job.key``, that key alone); since when it is paused."""
    job_id = _changeable(session, job)
    if job.key:
        _known_key(session, job, job_id)
    with session.transaction():
        since = (
            session.ledger.pause_key(job_id, job.key)
            if job.key
            else session.ledger.pause_job(job_id)
        )
        assert since is not None
        session.ledger.record_events(
            job_id, EventAction.pause, [None], [None], reason, actor, job.key
        )
    return since


def _known_key(session: Session, job: Job, job_id: int) -> None:
    """Record the job's keys as its source gives them now; a ConfigError when ``job.key`` is
    not one of them."""

    keys = current_keys(session.ledger, job, job_id, session.now(), write=True)
    selected(replace(job, selected_keys=(job.key,)), keys)


def resume(session: Session, job: Job, *, reason: str | None, actor: str) -> bool:
    """Resume ``job``; False (and nothing recorded) when it was not paused."""
    job_id = _changeable(session, job)
    if job.key:
        _known_key(session, job, job_id)
    with session.transaction():
        if job.key:
            if not session.ledger.resume_key(job_id, job.key):
                return False
        elif not session.ledger.resume_job(job_id):
            return False
        session.ledger.record_events(
            job_id, EventAction.resume, [None], [None], reason, actor, job.key
        )
    return True


def adopt(
    session: Session,
    jobs: list[Job],
    *,
    since: Moment | None,
    until: Moment | None,
    reason: str,
    actor: str,
) -> list[Changes]:
    """Record each job's untracked periods (its evidence exists, the ledger has no row) as
    waived, audited as ``adopt``: onboarding a job that ran elsewhere before."""

    for job in jobs:
        if job.evidence is None:
            raise ConfigError(f"{job.name} has no evidence query: nothing shows what ran")
    ready = prepare(session, jobs, since, until)
    jobs, targets = ready.jobs, [replace(t, paused=False) for t in ready.targets]
    found = scan_jobs(
        session.ledger, targets, now=ready.now, since=since, until=until, record=False
    )
    for result in found:
        if result.evidence_error:
            raise DatabaseError(f"{result.job}: {result.evidence_error}")
    changes = []
    for job, result in zip(jobs, found, strict=True):
        periods = [
            period
            for range_ in result.ranges
            if range_.state == PeriodState.untracked
            for period in job.timeline.periods(range_.first, job.timeline.after(range_.last))
        ]
        changes.append(
            mark(
                session,
                job,
                periods,
                skip=True,
                reason=reason,
                actor=actor,
                action=EventAction.adopt,
            )
        )
    return changes


def rename(session: Session, old: str, new: str, *, reason: str, actor: str) -> None:
    """``old`` (in the ledger) takes the name ``new``, keeping its id and everything recorded
    for it; refused, as a ConfigError, when it cannot be."""

    if (said := name_problem(new, "new name")) is not None:
        raise ConfigError(said)
    if old in session.config.renames.values():
        # the config's renamed_from first (what the first command that writes does): OLD is
        # the name the config gives the ledger's job, though no command wrote it there yet
        session.apply_renames()
    why = session.ledger.rename_job(old, new, reason, actor)
    if why is not None:
        raise ConfigError(f"cannot rename {old} to {new}: {why}")


def retire(session: Session, name: str, *, reason: str, actor: str) -> None:
    if name in session.config.jobs:
        raise ConfigError(
            f"{name} is still in the config: take it out first (a configured job is never retired)"
        )
    if not session.ledger.retire_job(name, reason, actor):
        raise ConfigError(f"the ledger has no job {name!r}")
