"""The dispatcher of the worker pool: planned periods handed out oldest first, never two
periods of a job (or of one key of it) that forbids overlap at once, never a period before
the upstream periods of the same plan it waits for."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Protocol

from ..config.job import Job
from ..results import Planned

LOOKAHEAD = 512


class Flag(Protocol):
    """What ``draining`` is: a ``threading.Event``, or the scheduler's fence (set once a stop
    is asked or the term that planned is lost: nothing new starts)."""

    def is_set(self) -> bool: ...


def lane(job: Job) -> str:
    """What two periods must not share to run at once when overlap is forbidden: the job, or
    (overlap forbidden per key) the job's key."""
    return job.name if not job.key or job.whole_job_overlap else f"{job.name}\0{job.key}"


class Dispatcher:
    """Hands out planned periods oldest-first to worker threads, never two periods of a job
    whose overlap is forbidden at once (the claim would refuse the second anyway)."""

    def __init__(
        self,
        items: Iterator[Planned],
        limit: int | None,
        deadline: float | None = None,
        draining: Flag | None = None,
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
        # set: nothing new is handed out either (a scheduler stopping: what runs finishes)
        self._draining = draining
        self.expired = False

    def _past_deadline(self) -> bool:
        if self._deadline is not None and time.monotonic() >= self._deadline:
            self.expired = True
        if self._draining is not None and self._draining.is_set():
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

    def _settled(self, item: Planned, notify: bool = True) -> None:
        """``item``'s outcome is recorded: periods that wait for it may start."""
        key = (item.job.name, item.period.start)
        self._unfinished[key] -= 1
        if self._unfinished[key] <= 0:
            del self._unfinished[key]
        if notify:
            self._cond.notify_all()

    def settle(self, item: Planned) -> None:
        """After :meth:`handoff`: ``item``'s finish is recorded now."""
        with self._cond:
            self._settled(item)

    def done(self, item: Planned) -> None:
        self.done_many([item])

    def done_many(self, items: list[Planned]) -> None:
        """:meth:`done` of each of ``items`` (a batch's, recorded together), the workers that
        wait woken once."""
        with self._cond:
            for item in items:
                self._busy[lane(item.job)] -= 1
                self._settled(item, notify=False)
            self._cond.notify_all()

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

    def take_more(self, first: Planned, n: int, fits: Callable[[Planned], bool]) -> list[Planned]:
        """Up to ``n`` more pending items of ``first``'s job that ``fits`` and no running
        item forbids, now reserved, oldest first: claimed with ``first`` in one batch."""
        taken: list[Planned] = []
        with self._cond:
            if self._stopped or self._past_deadline():
                return taken
            self._fill()
            i = 0
            while i < len(self._pending) and len(taken) < n:
                item = self._pending[i]
                if (
                    item.job.name != first.job.name
                    or not fits(item)
                    or (item.job.overlap != "allow" and self._busy[lane(item.job)])
                    or (item.needs and any(self._unfinished[x] for x in item.needs))
                ):
                    i += 1
                    continue
                self._busy[lane(item.job)] += 1
                taken.append(self._pending.pop(i))
        return taken

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
