"""The worker pool that ``replay`` and ``tick`` share: planned periods handed out oldest first
by the :class:`Dispatcher` (never two periods of a job that forbids overlap at once), workers
with a connection each, one connection renewing every lease, and the next period claimed with
each finish."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg

from ..claims.batch import BATCH_MAX, Sizes, batchable, run_batch
from ..claims.lease import HeartbeatLine
from ..claims.path import Handed, keyed, release, run_chained
from ..config.job import Job
from ..errors import first_line
from ..execution.callthread import CallThread
from ..models import ORDINARY, UNCLAIMED, Claim, ClaimRules, HandOff, Outcome
from ..postgres import database as db
from ..results import Batch, Planned
from ..schedule import Period
from ..session import Session
from ..vocabulary import OutcomeStatus
from .dispatch import Dispatcher, Flag


def run_planned(  # noqa: C901, PLR0913, PLR0915
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
    dispatcher = Dispatcher(items, limit, deadline, draining)
    outcomes: list[Outcome] = []
    lock = threading.Lock()
    errors: list[BaseException] = []
    config, target = session.config, session.target
    heartbeats = HeartbeatLine(target, config.schema)
    lent = session.heartbeats

    @contextmanager
    def worker_session(n: int) -> Iterator[Session]:
        if n == 0:  # the caller's session, idle while the pool runs
            session.heartbeats = heartbeats
            try:
                yield session
            finally:
                session.heartbeats = lent
            return
        with Session(config, target) as own:
            own.share_heartbeats(heartbeats)
            own.share_registration(session)
            yield own

    def record(outcome: Outcome) -> None:
        with lock:
            outcomes.append(outcome)
        if on_done:
            on_done(outcome)
        if stop_on_failure and outcome.status.is_failure:
            dispatcher.stop()

    sizes = Sizes(batch if prepare is None else 1)  # a period reset first goes alone

    def batched(item: Planned) -> int:
        """How many periods to claim with ``item`` (1: alone)."""
        return sizes.size(item.job) if batchable(item) and not item.needs else 1

    def work(n: int) -> None:
        calls = CallThread(f"catchup-call-{n}")
        try:
            with worker_session(n) as session:
                item = dispatcher.take()
                claimed: HandOff = UNCLAIMED
                while item is not None:
                    if stop.is_set():
                        if isinstance(claimed, Claim):  # handed over, not started: give back
                            record(release(session, item.job, item.period, claimed))
                        dispatcher.done(item)
                        return
                    if not isinstance(claimed, Claim) and (size := batched(item)) > 1:
                        more = dispatcher.take_more(item, size - 1, batchable)
                        if more:
                            run_group(session, [item, *more], calls)
                            item, claimed = dispatcher.take(), UNCLAIMED
                            continue
                    item, claimed = run_one(session, item, claimed, calls)
        except BaseException as exc:  # reported by the caller's thread
            errors.append(exc)
            dispatcher.stop()
        finally:
            calls.close()

    def run_group(session: Session, group: list[Planned], calls: CallThread) -> None:
        """``group`` claimed in one round trip; what another period of its key blocked runs
        alone after, waiting its turn."""
        settled: set[int] = set()

        def report(item: Planned, outcome: Outcome) -> None:
            settled.add(id(item))
            sizes.note(item.job, outcome.seconds)
            dispatcher.done(item)
            record(outcome)

        try:
            alone = run_batch(
                session,
                group,
                rules=rules,
                stop=stop,
                halted=lambda: stop.is_set() or dispatcher.stopped,
                calls=calls,
                report=report,
                on_start=on_start,
            )
        except psycopg.Error as exc:
            if isinstance(exc, psycopg.OperationalError):
                raise
            for item in group:
                if id(item) not in settled:
                    report(item, _database_error(item, exc, target.conninfo))
            return
        for item in alone:
            run_one(session, item, UNCLAIMED, calls, then=False)

    def run_one(
        session: Session,
        item: Planned,
        claimed: HandOff,
        calls: CallThread,
        then: bool = True,
    ) -> tuple[Planned | None, HandOff]:
        """Run ``item``; the worker's next item, and its claim if it came with this finish
        (``then`` False: none, the caller takes its own next item)."""
        following: list[Planned] = []
        released: list[bool] = []  # handoff() has freed the item's job (once: never again)

        def next_period() -> tuple[Job, Period] | None:
            # this item is done with (it succeeded); the next one is claimed with its finish,
            # unless its job's periods are claimed in batches now
            if released or not then or batched(item) > 1:
                return None
            released.append(True)
            if (nxt := dispatcher.handoff(item)) is None:
                return None
            following.append(nxt)
            return nxt.job, nxt.period

        handed = None
        try:
            if on_start:
                on_start(item)
            if prepare is not None:
                prepare(session, item)
            outcome, handed = _run_waiting(session, item, stop, rules, claimed, next_period, calls)
            sizes.note(item.job, outcome.seconds)
        except psycopg.Error as exc:
            if isinstance(exc, psycopg.OperationalError):
                raise  # the connection or the server: nothing else would run
            # one period's database error: reported, the others still run
            outcome = _database_error(item, exc, target.conninfo)
        finally:
            if released:  # handoff() freed its job; its finish is recorded now
                dispatcher.settle(item)
            else:
                dispatcher.done(item)
        nxt = handed.claim if following and handed is not None else UNCLAIMED
        try:
            record(outcome)
        except BaseException:
            # the caller's callback failed (its output went away, say): the claim handed over
            # with this finish is given back before the worker stops, never stranded
            if following and isinstance(nxt, Claim):
                with lock:
                    outcomes.append(release(session, following[0].job, following[0].period, nxt))
                dispatcher.done(following[0])
            raise
        if following:
            return following[0], nxt
        return (dispatcher.take() if then else None), UNCLAIMED

    threads = [
        threading.Thread(target=work, args=(n,), name=f"catchup-worker-{n}", daemon=True)
        for n in range(max(1, workers))
    ]
    try:
        for thread in threads:
            thread.start()
        # Join with a timeout, so the main thread keeps handling SIGINT and SIGTERM.
        while any(thread.is_alive() for thread in threads):
            for thread in threads:
                thread.join(0.1)
            if stop.is_set():
                dispatcher.stop()
    finally:
        heartbeats.close()
    if errors:
        raise errors[0]
    deferred = planned - len(outcomes) if dispatcher.expired else 0
    return Batch(
        planned=planned,
        outcomes=tuple(outcomes),
        interrupted=stop.is_set(),
        deferred=max(0, deferred),
        max_time=max_time,
    )


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
