"""The ticks a scheduler leader has running at once (issue 49). The leader never waits for a
tick: it starts one whenever a period falls due, a retry's backoff ends or the config changes,
while earlier ticks' periods still run. Each tick holds the periods it planned until they are
done, so a later tick plans none of them, nor another period of a job (or key) that forbids
overlap while one of its periods is held: it would only wait for it, holding a worker. The
workers are shared: a tick starts with those free, and a period that is due while none is
waits for the next one freed. Each lane of the scheduler (``[scheduler.lanes]``, a job's
``lane``) has an :class:`InFlight` of its own, so a lane's slow jobs never take another's
workers (:class:`Lanes`). No I/O here."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime

from ..config.job import DEFAULT_LANE, Job
from ..replay.dispatch import lane
from ..results import Planned

Identity = tuple[str, str, datetime]  # job, key, period start


class InFlight:
    """The periods each running tick of one lane holds, and the workers they keep busy, of
    ``workers``; ``on_free(lane)`` is called (outside its lock) each time one is freed."""

    def __init__(
        self, workers: int, name: str = DEFAULT_LANE, on_free: Callable[[str], None] | None = None
    ) -> None:
        self.workers = workers
        self.name = name
        self._on_free = on_free
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._ticks: dict[int, Holding] = {}
        self._next = 0

    def _busy(self) -> int:
        return sum(min(h.workers, len(h.items)) for h in self._ticks.values())

    def free(self) -> int:
        """Workers no running tick keeps (a tick keeps one per period it holds, up to its
        own): what the next tick may start with."""
        with self._lock:
            return max(0, self.workers - self._busy())

    def busy(self) -> int:
        with self._lock:
            return self._busy()

    def _freed_one(self) -> None:
        if self._on_free is not None:
            self._on_free(self.name)

    @contextmanager
    def tick(self, workers: int) -> Iterator[Holding]:
        """One tick of at most ``workers``: each period it plans held until it is done, or
        the tick ends."""
        with self._lock:
            holding = Holding(self, workers)
            self._ticks[id(holding)] = holding
        try:
            yield holding
        finally:
            with self._freed:
                del self._ticks[id(holding)]
                self._freed.notify_all()
            self._freed_one()

    def _plan(self, holding: Holding, chosen: list[Planned]) -> list[Planned]:
        with self._lock:
            others: Counter[Identity | str] = Counter()
            for other in self._ticks.values():
                if other is not holding:
                    others.update(other.marks)
            kept = [
                item
                for item in chosen
                if not any(others[m] for m in _marks(item.job, item.period.start))
            ]
            for item in kept:
                holding.items[_identity(item.job, item.period.start)] = item
                holding.marks.update(_marks(item.job, item.period.start))
            return kept

    def _done(self, holding: Holding, identity: Identity) -> None:
        with self._freed:
            item = holding.items.pop(identity, None)
            if item is not None:
                holding.marks.subtract(_marks(item.job, item.period.start))
                holding.marks = +holding.marks
                self._freed.notify_all()
        if item is not None:
            self._freed_one()


def _identity(job: Job, start: datetime) -> Identity:
    return (job.name, job.key or "", start)


def _marks(job: Job, start: datetime) -> tuple[Identity | str, ...]:
    """What a held period keeps from later ticks: itself, and (overlap forbidden) its lane."""
    identity = _identity(job, start)
    return (identity,) if job.overlap == "allow" else (identity, lane(job))


class Holding:
    """What one tick holds: the periods it planned, each released when it is done."""

    def __init__(self, flight: InFlight, workers: int) -> None:
        self._flight = flight
        self.workers = workers
        self.items: dict[Identity, Planned] = {}
        self.marks: Counter[Identity | str] = Counter()

    def plan(self, chosen: list[Planned]) -> list[Planned]:
        """``chosen`` but what another running tick holds; the rest held by this one."""
        return self._flight._plan(self, chosen)

    def done(self, job: str, key: str, start: datetime) -> None:
        """That period is done (or will not start): another tick may plan it, or its lane."""
        self._flight._done(self, (job, key, start))


class Lanes:
    """The scheduler's lanes, each an :class:`InFlight` of its own workers: the default
    lane's ``workers`` (``--workers``), the others' from the config (``[scheduler.lanes]``),
    resized as it is read again; a lane the config drops keeps what it holds until done."""

    def __init__(self, workers: int, on_free: Callable[[str], None] | None = None) -> None:
        self._workers = workers
        self._on_free = on_free
        self._lock = threading.Lock()
        self._flights: dict[str, InFlight] = {}

    def of(self, sizes: Mapping[str, int], names: list[str]) -> dict[str, InFlight]:
        """The lanes ``names`` (those with jobs), sized as ``sizes`` says (the default lane:
        ``--workers``), each made on first use."""
        with self._lock:
            found = {}
            for name in names:
                workers = self._workers if name == DEFAULT_LANE else sizes[name]
                flight = self._flights.get(name)
                if flight is None:
                    flight = self._flights[name] = InFlight(workers, name, self._on_free)
                flight.workers = workers  # a resized lane: what it holds runs on
                found[name] = flight
            return found

    def loads(self) -> dict[str, tuple[int, int]]:
        """Each lane's workers and how many are busy: what the leader publishes."""
        with self._lock:
            flights = list(self._flights.values())
        return {f.name: (f.workers, f.busy()) for f in flights}
