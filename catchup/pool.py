"""The worker pool that ``replay`` and ``tick`` share: planned periods handed out oldest first
by the :class:`Dispatcher` (never two periods of a job that forbids overlap at once), workers
with a connection each, one connection renewing every lease, and the next period claimed with
each finish."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

import psycopg

from . import db
from .claim import Handed, keyed, release, run_chained
from .errors import first_line
from .job import Job
from .lease import HeartbeatLine
from .models import ORDINARY, UNCLAIMED, Claim, ClaimRules, HandOff, Outcome
from .results import Batch, Planned
from .schedule import Period
from .session import Session
from .vocabulary import OutcomeStatus

LOOKAHEAD = 512


def lane(job: Job) -> str:
    """What two periods must not share to run at once when overlap is forbidden: the job, or
    (overlap forbidden per key) the job's key."""
    return job.name if not job.key or job.whole_job_overlap else f"{job.name}\0{job.key}"


class Dispatcher:
    """Hands out planned periods oldest-first to worker threads, never two periods of a job
    whose overlap is forbidden at once (the claim would refuse the second anyway)."""

    def __init__(
        self, items: Iterator[Planned], limit: int | None, deadline: float | None = None
    ) -> None:
        self._items = items
        self._left = limit
        self._pending: list[Planned] = []
        self._busy: Counter[str] = Counter()
        # planned periods taken in but not yet done: what a period that waits for them sees
        self._unfinished: Counter[tuple[str, datetime]] = Counter()
        self._cond = threading.Condition()
        self._stopped = False
        # time.monotonic() after which nothing new is handed out (tick --max-time)
        self._deadline = deadline
        self.expired = False

    def _past_deadline(self) -> bool:
        if self._deadline is not None and time.monotonic() >= self._deadline:
            self.expired = True
        return self.expired

    def _wait(self) -> None:
        if self._deadline is None:
            self._cond.wait()
        else:
            self._cond.wait(max(0.0, self._deadline - time.monotonic()))

    def _fill(self) -> None:
        while len(self._pending) < LOOKAHEAD and (self._left is None or self._left > 0):
            item = next(self._items, None)
            if item is None:
                break
            self._pending.append(item)
            self._unfinished[(item.job.name, item.period.start)] += 1
            if self._left is not None:
                self._left -= 1

    def take(self) -> Planned | None:
        with self._cond:
            while not self._stopped and not self._past_deadline():
                self._fill()
                if not self._pending:
                    return None
                if (item := self._free()) is not None:
                    return item
                self._wait()
            return None

    def _free(self, recording: tuple[str, datetime] | None = None) -> Planned | None:
        """The oldest pending item no worker's item forbids, now reserved; the lock is held.
        ``recording``: the item whose finish the taker records before it claims this one."""
        for i, item in enumerate(self._pending):
            if item.job.overlap != "allow" and self._busy[lane(item.job)]:
                continue
            if any(self._unfinished[n] for n in item.needs if n != recording):
                continue  # an upstream period of the same plan is still to run
            self._busy[lane(item.job)] += 1
            return self._pending.pop(i)
        return None

    def _settled(self, item: Planned) -> None:
        """``item``'s outcome is recorded: periods that wait for it may start."""
        key = (item.job.name, item.period.start)
        self._unfinished[key] -= 1
        if self._unfinished[key] <= 0:
            del self._unfinished[key]
        self._cond.notify_all()

    def settle(self, item: Planned) -> None:
        """After :meth:`handoff`: ``item``'s finish is recorded now."""
        with self._cond:
            self._settled(item)

    def done(self, item: Planned) -> None:
        with self._cond:
            self._busy[lane(item.job)] -= 1
            self._settled(item)

    def handoff(self, item: Planned) -> Planned | None:
        """``item`` is done; the next item the same worker may take at once, if any (then it
        claims it in the transaction that records ``item``). Never waits."""
        with self._cond:
            # its job is free; what waits for it waits on until its finish is recorded
            # (settle), which this worker does next
            self._busy[lane(item.job)] -= 1
            self._cond.notify_all()
            if self._stopped or self._past_deadline():
                return None
            self._fill()
            return self._free(recording=(item.job.name, item.period.start))

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()


def run_planned(
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
) -> Batch:
    """Run ``items`` on ``workers`` threads, each with a connection of its own (the first
    worker uses ``session``'s), and one more connection that all of them renew leases on: a pool
    of N keeps N + 1 connections, whatever the number of jobs and periods."""
    stop = interrupted or threading.Event()
    deadline = None if max_time is None else time.monotonic() + max_time
    dispatcher = Dispatcher(items, limit, deadline)
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

    def work(n: int) -> None:
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
                    item, claimed = run_one(session, item, claimed)
        except BaseException as exc:  # reported by the caller's thread
            errors.append(exc)
            dispatcher.stop()

    def run_one(
        session: Session, item: Planned, claimed: HandOff
    ) -> tuple[Planned | None, HandOff]:
        """Run ``item``; the worker's next item, and its claim if it came with this finish."""
        following: list[Planned] = []
        released: list[bool] = []  # handoff() has freed the item's job (once: never again)

        def next_period() -> tuple[Job, Period] | None:
            # this item is done with (it succeeded); the next one is claimed with its finish
            if released:
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
            outcome, handed = _run_waiting(session, item, stop, rules, claimed, next_period)
        except psycopg.Error as exc:
            if isinstance(exc, psycopg.OperationalError):
                raise  # the connection or the server: nothing else would run
            # one period's database error: reported, the others still run
            first = first_line(exc)
            outcome = Outcome(
                item.job.name,
                item.period,
                item.job.label(item.period.start),
                OutcomeStatus.error,
                detail=f"database error: {db.scrub(first, target.conninfo)}",
            )
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
        return dispatcher.take(), UNCLAIMED

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


def _run_waiting(
    session: Session,
    item: Planned,
    stop: threading.Event,
    rules: ClaimRules,
    claimed: HandOff,
    next_period: Callable[[], tuple[Job, Period] | None],
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
        )
        if not outcome.blocked or stop.wait(delay):
            return keyed(outcome, item.job), handed
        claimed = UNCLAIMED
        delay = min(delay * 2, 1.0)
