"""The worker pool that ``replay`` and ``tick`` share: planned periods handed out oldest first
by the :class:`Dispatcher` (never two periods of a job that forbids overlap at once), workers
with a connection each, one connection renewing every lease, and the next period claimed with
each finish."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg

from ..claims.batch import BATCH_MAX, Sizes, batchable, run_batch
from ..claims.lease import HeartbeatLine
from ..claims.path import Handed, keyed, release, run_chained
from ..claims.reconnecting import open_surely
from ..config.job import Job
from ..errors import first_line
from ..execution.callthread import CallThread
from ..ledger.rows import Claim
from ..postgres import database as db
from ..results import ORDINARY, UNCLAIMED, Batch, ClaimRules, HandOff, Outcome, Planned
from ..schedule import Period
from ..session import Session
from ..vocabulary import OutcomeStatus
from .dispatch import Dispatcher, Flag


def run_planned(  # noqa: PLR0913
    session: Session,
    items: Iterator[Planned],
    *,
    planned: int,
    workers: int,
    limit: int | None = None,
    stop_on_failure: bool = False,
    interrupted: threading.Event | None = None,
    rules: ClaimRules = ORDINARY,
    on_start: Callable[[Planned], None] | None = None,
    on_done: Callable[[Outcome], None] | None = None,
    prepare: Callable[[Session, Planned], None] | None = None,
    max_time: float | None = None,
    batch: int = BATCH_MAX,
    draining: Flag | None = None,
) -> Batch:
    """Run ``items`` on ``workers`` threads, each with a connection of its own (the first
    worker uses ``session``'s), and one more connection that all of them renew leases on: a pool
    of N keeps N + 1 connections, whatever the number of jobs and periods.

    A keyed job's short periods are claimed up to ``batch`` at a time (:mod:`catchup.claims.batch`;
    1: each period in its own round trip)."""
    stop = interrupted or threading.Event()
    deadline = None if max_time is None else time.monotonic() + max_time
    pool = _Pool(
        session,
        Dispatcher(items, limit, deadline, draining),
        stop=stop,
        rules=rules,
        hooks=_Hooks(on_start, on_done, prepare, stop_on_failure),
        # a period reset first goes alone
        sizes=Sizes(batch if prepare is None else 1),
    )
    pool.run(max(1, workers))
    deferred = planned - len(pool.outcomes) if pool.dispatcher.expired else 0
    return Batch(
        planned=planned,
        outcomes=tuple(pool.outcomes),
        interrupted=stop.is_set(),
        deferred=max(0, deferred),
        max_time=max_time,
    )


@dataclass(frozen=True)
class _Hooks:
    """What the caller of the pool asked for around each period."""

    on_start: Callable[[Planned], None] | None
    on_done: Callable[[Outcome], None] | None
    prepare: Callable[[Session, Planned], None] | None
    stop_on_failure: bool


class _Pool:
    """The workers of one :func:`run_planned`: what they share (the dispatcher, the outcomes,
    the heartbeat line, the batch sizes) and what each does (:meth:`work`)."""

    def __init__(
        self,
        session: Session,
        dispatcher: Dispatcher,
        *,
        stop: threading.Event,
        rules: ClaimRules,
        hooks: _Hooks,
        sizes: Sizes,
    ) -> None:
        self.session, self.dispatcher, self.stop = session, dispatcher, stop
        self.rules, self.hooks, self.sizes = rules, hooks, sizes
        self.outcomes: list[Outcome] = []
        self.lock = threading.Lock()
        self.errors: list[BaseException] = []
        self.config, self.target = session.config, session.target
        self.heartbeats = HeartbeatLine(self.target, self.config.schema)
        self.lent = session.heartbeats

    def run(self, workers: int) -> None:
        """The workers started, joined with a timeout (so the main thread keeps handling
        SIGINT and SIGTERM), the first error raised here."""
        threads = [
            threading.Thread(target=self.work, args=(n,), name=f"catchup-worker-{n}", daemon=True)
            for n in range(workers)
        ]
        try:
            for thread in threads:
                thread.start()
            while any(thread.is_alive() for thread in threads):
                for thread in threads:
                    thread.join(0.1)
                if self.stop.is_set():
                    self.dispatcher.stop()
        finally:
            self.heartbeats.close()
        if self.errors:
            raise self.errors[0]

    @contextmanager
    def worker_session(self, n: int) -> Iterator[Session]:
        session, heartbeats = self.session, self.heartbeats
        if n == 0:  # the caller's session, idle while the pool runs
            session.heartbeats = heartbeats
            try:
                yield session
            finally:
                session.heartbeats = self.lent
            return
        # the caller's session connected a moment ago: a failure now is a restart, outlived
        with open_surely(lambda: Session(self.config, self.target)) as own:
            own.share_heartbeats(heartbeats)
            own.share_registration(session)
            yield own

    def record(self, outcome: Outcome) -> None:
        self.record_many([outcome])

    def record_many(self, outcomes: list[Outcome]) -> None:
        """Each of ``outcomes`` kept and told, in order (a batch's, recorded together)."""
        with self.lock:
            self.outcomes.extend(outcomes)
        for outcome in outcomes:
            if self.hooks.on_done:
                self.hooks.on_done(outcome)
            if self.hooks.stop_on_failure and outcome.status.is_failure:
                self.dispatcher.stop()

    def batched(self, item: Planned) -> int:
        """How many periods to claim with ``item`` (1: alone)."""
        return self.sizes.size(item.job) if batchable(item) and not item.needs else 1

    def work(self, n: int) -> None:
        calls = CallThread(f"catchup-call-{n}")
        dispatcher, stop, record = self.dispatcher, self.stop, self.record
        try:
            with self.worker_session(n) as session:
                item = dispatcher.take()
                claimed: HandOff = UNCLAIMED
                while item is not None:
                    if stop.is_set():
                        if isinstance(claimed, Claim):  # handed over, not started: give back
                            record(release(session, item.job, item.period, claimed))
                        dispatcher.done(item)
                        return
                    if not isinstance(claimed, Claim) and (size := self.batched(item)) > 1:
                        more = dispatcher.take_more(item, size - 1, batchable)
                        if more:
                            self.run_group(session, [item, *more], calls)
                            item, claimed = dispatcher.take(), UNCLAIMED
                            continue
                    item, claimed = self.run_one(session, item, claimed, calls)
        except BaseException as exc:  # reported by the caller's thread
            self.errors.append(exc)
            dispatcher.stop()
        finally:
            calls.close()

    def run_group(self, session: Session, group: list[Planned], calls: CallThread) -> None:
        """``group`` claimed in one round trip; what another period of its key blocked runs
        alone after, waiting its turn."""
        settled: set[int] = set()

        def report(told: list[tuple[Planned, Outcome]]) -> None:
            for item, outcome in told:
                settled.add(id(item))
                self.sizes.note(item.job, outcome.seconds)
            self.dispatcher.done_many([item for item, _ in told])
            self.record_many([outcome for _, outcome in told])

        try:
            alone = run_batch(
                session,
                group,
                rules=self.rules,
                stop=self.stop,
                halted=lambda: self.stop.is_set() or self.dispatcher.stopped,
                calls=calls,
                report=report,
                on_start=self.hooks.on_start,
            )
        except psycopg.Error as exc:
            if isinstance(exc, psycopg.OperationalError):
                raise
            conninfo = self.target.conninfo
            report([(i, _database_error(i, exc, conninfo)) for i in group if id(i) not in settled])
            return
        for item in alone:
            self.run_one(session, item, UNCLAIMED, calls, then=False)

    def run_one(
        self,
        session: Session,
        item: Planned,
        claimed: HandOff,
        calls: CallThread,
        then: bool = True,
    ) -> tuple[Planned | None, HandOff]:
        """Run ``item``; the worker's next item, and its claim if it came with this finish
        (``then`` False: none, the caller takes its own next item)."""
        dispatcher = self.dispatcher
        following: list[Planned] = []
        released: list[bool] = []  # handoff() has freed the item's job (once: never again)

        def next_period() -> tuple[Job, Period] | None:
            # this item is done with (it succeeded); the next one is claimed with its finish,
            # unless its job's periods are claimed in batches now
            if released or not then or self.batched(item) > 1:
                return None
            released.append(True)
            if (nxt := dispatcher.handoff(item)) is None:
                return None
            following.append(nxt)
            return nxt.job, nxt.period

        outcome, handed = self.attempt(session, item, claimed, next_period, calls, released)
        nxt = handed.claim if following and handed is not None else UNCLAIMED
        try:
            self.record(outcome)
        except BaseException:
            # the caller's callback failed (its output went away, say): the claim handed over
            # with this finish is given back before the worker stops, never stranded
            if following and isinstance(nxt, Claim):
                with self.lock:
                    self.outcomes.append(
                        release(session, following[0].job, following[0].period, nxt)
                    )
                dispatcher.done(following[0])
            raise
        if following:
            return following[0], nxt
        return (dispatcher.take() if then else None), UNCLAIMED

    def attempt(
        self,
        session: Session,
        item: Planned,
        claimed: HandOff,
        next_period: Callable[[], tuple[Job, Period] | None],
        calls: CallThread,
        released: list[bool],
    ) -> tuple[Outcome, Handed | None]:
        """``item`` through the claim path (a database error of its own is its outcome), and
        the dispatcher told it is done."""
        handed = None
        try:
            if self.hooks.on_start:
                self.hooks.on_start(item)
            if self.hooks.prepare is not None:
                self.hooks.prepare(session, item)
            outcome, handed = _run_waiting(
                session, item, self.stop, self.rules, claimed, next_period, calls
            )
            self.sizes.note(item.job, outcome.seconds)
        except psycopg.Error as exc:
            if isinstance(exc, psycopg.OperationalError):
                raise  # the connection or the server: nothing else would run
            # one period's database error: reported, the others still run
            outcome = _database_error(item, exc, self.target.conninfo)
        finally:
            if released:  # handoff() freed its job; its finish is recorded now
                self.dispatcher.settle(item)
            else:
                self.dispatcher.done(item)
        return outcome, handed


def _database_error(item: Planned, exc: psycopg.Error, conninfo: str) -> Outcome:
    """One period's database error, reported without a password: the others still run."""
    return Outcome(
        item.job.name,
        item.period,
        item.job.label(item.period.start),
        OutcomeStatus.error,
        detail=f"database error: {db.scrub(first_line(exc), conninfo)}",
        key=item.job.key,
    )


def _run_waiting(
    session: Session,
    item: Planned,
    stop: threading.Event,
    rules: ClaimRules,
    claimed: HandOff,
    next_period: Callable[[], tuple[Job, Period] | None],
    calls: CallThread | None = None,
) -> tuple[Outcome, Handed | None]:
    """Run ``item``; while another period of its job runs elsewhere (overlap forbidden), wait
    for it rather than skip, so a shared backlog is finished, one period at a time."""
    delay = 0.05
    while True:
        outcome, handed = run_chained(
            session,
            item.job,
            item.period,
            interrupted=stop,
            stream=False,
            rules=rules,
            claimed=claimed,
            next_period=next_period,
            calls=calls,
        )
        if not outcome.blocked or stop.wait(delay):
            return keyed(outcome, item.job), handed
        claimed = UNCLAIMED
        delay = min(delay * 2, 1.0)
