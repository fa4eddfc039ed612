"""Running periods: one (``run``), what the catch-up policies allow (``tick``), the gaps of a
window (``replay``); each through the one claim path."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime

from ..claims.path import choose_period, run_period
from ..claims.refusal import excluded_by
from ..config.bounds import MAX_TIME, REPLAY_WORKERS, TICK_WORKERS
from ..config.job import Job
from ..errors import ConfigError
from ..ledger import Ledger
from ..pings.ingest import PingAsk
from ..replay.dispatch import Flag
from ..results import Batch, ClaimRules, NotDue, Outcome, Pinged, Planned
from ..scan.keyed import KeysFailed, current_keys
from ..scan.targets import KeyRow, KeysFailure
from ..scan.window import Moment
from ..schedule import Period
from ..scheduler.inflight import Holding
from ..session import Session, owner_name
from ..vocabulary import PingKind, RunStatus
from .base import Base, check, check_actor, check_reason, instant

# Imports inside functions: at first use, so a command loads only the capability it runs.


class Running(Base):
    def run(
        self,
        job: str,
        period: Moment | None = None,
        *,
        interrupted: threading.Event | None = None,
        stream: bool = False,
        ignore_evidence: bool = False,
        key: str | None = None,
        include_excluded: bool = False,
    ) -> Outcome | NotDue:
        """Run one period (default: the latest due) through the claim path. :class:`NotDue`
        when no period is due yet; a :class:`ConfigError` for a period that is not a period
        start or not due (nothing is written then). A period whose output exists but that the
        ledger never saw (the job's evidence) is skipped, unless ``ignore_evidence``. A job with
        keys runs the period of one ``key`` here, of every key in :meth:`run_keys`. A period
        nobody expects (its job's ``exclude``, a window recorded by ``exclude``) is refused
        when asked for by ``period`` (skipped when it is the latest due), unless
        ``include_excluded``."""
        (spec,) = self.select([job], None if key is None else [key])
        refuse_observed(spec)
        start = None if period is None else instant(period, spec)
        session = self.session
        session.check_held()  # a held job's period is unstartable: nothing is claimed
        spec = session.resolve(spec, write=False)  # a bad period is refused before any write
        chosen = choose_period(spec, session.now(), start)
        if chosen is None:
            first = spec.timeline.period(spec.anchor)
            return NotDue(spec.name, first, spec.label(first.start), first.end + spec.delay)
        failed = None
        if spec.keyed:
            spec, failed = self._one_key(spec, chosen)
        if start is not None and not include_excluded:
            refuse_excluded(session, spec, chosen)
        rules = ClaimRules(ignore_evidence=ignore_evidence, include_excluded=include_excluded)
        outcome = run_period(
            session, spec, chosen, interrupted=interrupted, stream=stream, rules=rules
        )
        return outcome if failed is None else replace(outcome, keys_failed=failed)

    def _one_key(self, spec: Job, chosen: Period) -> tuple[Job, KeysFailure | None]:
        """``run`` of a keyed job: its one key's job, its keys recorded first (or, when its keys
        query fails, those read last and the failure); a key not expected then is refused."""
        if len(spec.selected_keys) != 1:
            raise ConfigError(f"{spec.name} has keys: run one with a key, or use run_keys")
        session = self.session
        job_id = session.registered_id(spec.name)  # the key history is recorded
        rows, failed = _keys_to_run(session.ledger, spec, job_id, session.now())
        spec = spec.for_key(spec.selected_keys[0])
        known = next((r for r in rows if r.key == spec.key), None)
        if known is not None and (why := known.unexpected(chosen.start)) is not None:
            label = spec.label(chosen.start)
            raise ConfigError(f"{spec.name} {label}: {why}; nothing was run")
        return spec, failed

    def run_keys(
        self,
        job: str,
        period: Moment | None = None,
        *,
        keys: Iterable[str] | None = None,
        workers: int = REPLAY_WORKERS.default or 1,
        interrupted: threading.Event | None = None,
        ignore_evidence: bool = False,
        include_excluded: bool = False,
    ) -> Batch | NotDue:
        """:meth:`run` of a job with keys: the period (default: the latest due) of every key
        expected to have it, or of ``keys``, on a pool of ``workers``."""
        from ..replay.runs import run_keys

        check(REPLAY_WORKERS, workers)
        (spec,) = self.select([job], keys)
        refuse_observed(spec)
        if not spec.keyed:
            raise ConfigError(f"{spec.name} has no keys: run it with run()")
        start = None if period is None else instant(period, spec)
        session = self.session
        if (old := session.check_held().get(spec.name)) is not None:
            return Batch(planned=0, outcomes=(), interrupted=False, held=((spec.name, old),))
        spec = session.resolve(spec, write=False)
        chosen = choose_period(spec, session.now(), start)
        if chosen is None:
            first = spec.timeline.period(spec.anchor)
            return NotDue(spec.name, first, spec.label(first.start), first.end + spec.delay)
        if start is not None and not include_excluded:
            refuse_excluded(session, spec, chosen)
        rules = ClaimRules(ignore_evidence=ignore_evidence, include_excluded=include_excluded)
        return run_keys(session, spec, chosen, workers, rules, interrupted)

    def ping(
        self,
        job: str,
        kind: PingKind | str = PingKind.success,
        *,
        exit_status: int | None = None,
        period: Moment | None = None,
        rid: str | None = None,
        key: str | None = None,
        body: str | None = None,
    ) -> Pinged:
        """What a ping of ``job``'s own cron says (healthchecks' ping API: ``start``,
        ``success``, ``fail``, ``log``, or an ``exit_status``), written through the claim path
        (:mod:`catchup.pings`): the latest period due settles, or the one ``period`` names; a
        finish settles the period its start (of run id ``rid``) claimed."""
        asked = PingAsk(kind, exit_status, period, rid, key, body)
        return self.ping_from(f"catchup ping on {owner_name()}", job, asked)

    def ping_from(self, source: str, job: str, asked: PingAsk) -> Pinged:
        """:meth:`ping` of what ``asked`` says, sent by ``source`` (for the audit trail:
        ``serve``'s ``/ping/…`` names the address)."""
        from ..pings.ingest import Ping, ingest

        key = asked.key
        (spec,) = self.select([job], None if key is None else [key])
        said = pingable(spec, asked)
        if spec.keyed and key is None:
            raise ConfigError(f"{spec.name} has keys: a ping names one (--key)")
        session = self.session
        spec = session.resolve(spec, write=False)
        if key is not None:
            spec = self._pinged_key(spec, key)
        start = None if asked.period is None else instant(asked.period, spec)
        ping = Ping(said, asked.exit_status, start, asked.rid, asked.body, source)
        return ingest(session, spec, ping)

    def _pinged_key(self, spec: Job, key: str) -> Job:
        """One key's job, for a ping: a key the job's keys have (read now, recorded)."""
        session = self.session
        job_id = session.registered_id(spec.name)
        rows, _ = _keys_to_run(session.ledger, spec, job_id, session.now())
        if not any(r.key == key for r in rows):
            raise ConfigError(f"{spec.name}: no key {key!r} among its keys; nothing was written")
        return spec.for_key(key)

    def tick(  # noqa: PLR0913
        self,
        *,
        jobs: Iterable[str] | None = None,
        workers: int = TICK_WORKERS.default or 1,
        interrupted: threading.Event | None = None,
        on_done: Callable[[Outcome], None] | None = None,
        max_time: float | None = None,
        keys: Iterable[str] | None = None,
        draining: Flag | None = None,
        term: int | None = None,
        look_back: bool = False,
        holding: Holding | None = None,
    ) -> Batch:
        """Run what each job's catch-up policy allows, on a pool of ``workers``: what
        ``catchup tick`` does (never a job with a ``ping``: its own cron runs it). After
        ``max_time`` seconds, or once ``draining`` is set, nothing new starts (what runs
        finishes). ``term``: the scheduler leader's, recorded
        with the tick (the pulse tells its ticks from a CronJob's). ``look_back``: also count
        the gaps before each job's ``catchup_window`` (``Batch.outside``; one more scan).
        ``holding``: the scheduler's, its other ticks still running
        (:mod:`catchup.scheduler.inflight`)."""
        from ..replay.runs import tick

        check(TICK_WORKERS, workers)
        if max_time is not None:
            check(MAX_TIME, max_time)
        chosen, held = self._unheld(self.select(jobs, keys))
        ran = tick(
            self.session,
            [job for job in chosen if job.ping is None],  # a job with a ping: its cron runs it
            workers=workers,
            interrupted=interrupted,
            on_done=on_done,
            max_time=max_time,
            draining=draining,
            term=term,
            look_back=look_back,
            holding=holding,
        )
        if self.config.keep_detail is not None and not ran.interrupted:
            # after what was due, a bounded slice of compaction: a tick stays quick
            from ..maintenance.compaction import compact
            from ..maintenance.retention import TICK_SLICE

            sliced = compact(self.session, chosen, max_periods=TICK_SLICE, max_time=1.0)
            if sliced.periods:
                ran = replace(ran, compacted=sliced.periods)
        return replace(ran, held=held) if held else ran

    def _unheld(self, jobs: list[Job]) -> tuple[list[Job], tuple[tuple[str, str], ...]]:
        """``jobs`` but the held ones (:mod:`catchup.changes.held`), read again now, and those:
        (job, the old name it looks like). Nothing of a held job is planned or claimed; the
        others run."""
        held = self.session.check_held()
        return [j for j in jobs if j.name not in held], tuple(
            (j.name, held[j.name]) for j in jobs if j.name in held
        )

    def replay(  # noqa: PLR0913
        self,
        *,
        since: Moment,
        until: Moment | None = None,
        jobs: Iterable[str] | None = None,
        workers: int = REPLAY_WORKERS.default or 1,
        limit: int | None = None,
        dry_run: bool = False,
        stop_on_failure: bool = False,
        retry_exhausted: bool = False,
        unverified: bool = False,
        outdated: bool = False,
        upstream: bool = True,
        reason: str | None = None,
        actor: str | None = None,
        interrupted: threading.Event | None = None,
        on_plan: Callable[[int], None] | None = None,
        on_start: Callable[[Planned], None] | None = None,
        on_done: Callable[[Outcome], None] | None = None,
        keys: Iterable[str] | None = None,
    ) -> Batch:
        """Run the gaps, oldest first: what ``catchup replay`` does. ``unverified`` also runs
        succeeded periods that left no evidence again, ``outdated`` those an upstream re-run
        made outdated (each reset with ``reason``, audited). With ``upstream`` (the default),
        the missing upstream periods the planned ones wait for are planned too."""
        from ..replay.runs import Audit, replay
        from ..scan.window import check_window

        if unverified and reason is None:
            raise ConfigError("--unverified needs --reason: it runs succeeded periods again")
        if outdated and reason is None:
            raise ConfigError("--outdated needs --reason: it runs succeeded periods again")
        why = check_reason(reason, required=False)
        check(REPLAY_WORKERS, workers)
        chosen = self.select(jobs, keys)
        check_window(chosen, since, until)  # before the session opens (and migrates)
        audit = Audit(why, check_actor(actor)) if why else None
        chosen, held = self._unheld(chosen)
        ran = replay(
            self.session,
            chosen,
            since=since,
            until=until,
            limit=limit,
            workers=workers,
            dry_run=dry_run,
            stop_on_failure=stop_on_failure,
            retry_exhausted=retry_exhausted,
            unverified=audit if unverified else None,
            outdated=audit if outdated else None,
            upstream=upstream,
            interrupted=interrupted,
            on_plan=on_plan,
            on_start=on_start,
            on_done=on_done,
        )
        return replace(ran, held=held) if held else ran


_RID = re.compile(r"[A-Za-z0-9._:-]{1,64}")


def pingable(job: Job, asked: PingAsk) -> PingKind:
    """The ping's kind, when ``job`` takes pings, the exit status is one (0-255) and the run
    id a word of 64 characters at most (a uuid, as healthchecks has it, is one)."""
    kind, exit_status = asked.kind, asked.exit_status
    if asked.rid is not None and not _RID.fullmatch(asked.rid):
        raise ConfigError("a run id is 1 to 64 letters, digits, '.', '_', ':' or '-'")
    if job.ping is None:
        raise ConfigError(
            f'{job.name} has no ping: add ping = "<uuid>" to [jobs.{job.name}] to let its own '
            "cron report its runs"
        )
    if exit_status is not None and not 0 <= exit_status <= 255:
        raise ConfigError(f"exit status {exit_status}: from 0 (a success) to 255")
    try:
        said = PingKind(kind)
    except ValueError:
        raise ConfigError(f"{kind!r}: a ping is {', '.join(PingKind)}") from None
    if exit_status is not None and said in (PingKind.start, PingKind.log):
        raise ConfigError(f"a {said.value} ping has no exit status: a finish has one")
    return said


def refuse_observed(job: Job) -> None:
    """An observed job has nothing to run: its own cron runs it, and its pings settle it."""
    if job.observed:
        raise ConfigError(
            f"{job.name} is observed: its own cron runs it and its pings settle its periods "
            f"(catchup ping {job.name}); catchup has no command to run"
        )


def _keys_to_run(
    ledger: Ledger, job: Job, job_id: int, now: datetime
) -> tuple[list[KeyRow], KeysFailure | None]:
    """:func:`current_keys`, recorded, for ``run`` of one key: when the keys query fails, the
    keys read last and the failure (said as a tick says it); with none read before, the
    failure is raised (nothing of the job can run)."""
    try:
        return current_keys(ledger, job, job_id, now, write=True), None
    except KeysFailed as exc:
        if not (known := ledger.key_history(job_id)):
            raise
        return known, KeysFailure(job.name, str(exc), exc.database, len(known))


def refuse_excluded(session: Session, job: Job, period: Period) -> None:
    """A :class:`ConfigError` when ``period`` of ``job`` (of its key) is excluded and has no
    outcome that stands (one run with --include-excluded that succeeded is done, as any
    other): nothing is run."""
    job_id = session.registered_id(job.name)
    if (by := excluded_by(session.ledger, job, job_id, period)) is None:
        return
    row = session.ledger.run_row(job_id, period.start, job.key)
    if row is not None and row.status in (RunStatus.succeeded, RunStatus.waived):
        return
    raise ConfigError(
        f"{job.name}: period {job.label(period.start)} is excluded by {by}; nothing was run "
        f"(--include-excluded runs it anyway)"
    )
