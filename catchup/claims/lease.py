"""A period's lease, kept alive while its job runs: the :class:`LeaseKeeper` thread renews it
(fenced by the attempt) and trips when it is lost or runs out; renewals go over one
:class:`HeartbeatLine`, a connection of its own shared by every period a process runs at once.

A lease is renewed on a connection of its own (not the one that claimed: a job may run for
hours and that connection is the runner's), but not one per running period: a tick or a replay
with N workers keeps N + 1 connections open (the workers' and this one), whatever the number of
jobs. Renewals take turns on it; a broken connection is replaced by the first renewal that finds
it broken, within the time that renewal's lease has left."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import psycopg

from ..ledger import Ledger
from ..ledger.rows import Renewed
from ..postgres import database as db
from .failover import Held

POLL_SECONDS = 0.05  # how often a running job's loop looks at its process and its lease
RENEW_AFTER = 2 * POLL_SECONDS


def retry_wait(failures: int, interval: float, left: float) -> float:
    """Seconds the heartbeat waits after ``failures`` failed renewals in a row, with ``left``
    seconds of lease: none after the first, then doubling from 0.2 s, never longer than a beat
    or half of what is left, so the retries fit inside the lease."""
    if failures <= 1:
        return 0.0
    return max(0.0, min(0.05 * 2.0**failures, interval, left / 2))


class LeaseKeeper:
    """Renews the lease on its own connection; trips when the lease is lost or runs out.

    ``renew(within)`` gets the seconds the lease has left, to bound a reconnect by them; a
    renewal that brings a cancel request (``catchup cancel``) sets ``cancel``, which the job's
    poll loop reads, and the renewals go on while the job stops. A failed
    renewal is retried at once (a cut connection is the usual cause, and a new one is a round
    trip away), then with a short backoff, never waiting past the lease it protects.

    Its thread is made when it starts (:meth:`watch`): a batch's thousands of short periods
    each have a keeper, and most never need a renewal."""

    def __init__(
        self,
        renew: Callable[[float], Renewed | None],
        lease: timedelta,
        granted: float | None = None,
    ) -> None:
        """``granted``: the time.monotonic() before the lease was last given or renewed (a
        period claimed with others, before it starts); by default now, just after its claim."""
        self.renew = renew
        self.lease = lease.total_seconds()
        self.armed = time.monotonic()
        # conservative: measured after the claim (or before the batch's claim or renewal)
        self.deadline = (self.armed if granted is None else granted) + self.lease
        self.lost: str | None = None
        self.cancel: str | None = None  # who asked this attempt to stop, and why
        self.failures = 0  # renewals that failed in a row
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def ident(self) -> int | None:
        """The renewing thread's, once started."""
        return None if self._thread is None else self._thread.ident

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="catchup-heartbeat", daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def run(self) -> None:
        interval = max(self.lease / 3, 0.2)
        wait = interval
        while not self._stop.wait(wait):
            sent = time.monotonic()
            try:
                renewed = self.renew(max(self.deadline - sent, 0.0))
            except Exception as exc:
                self.failures += 1
                left = self.deadline - time.monotonic()
                if left <= 0:
                    self.lost = self.lost or f"lease could not be renewed before it ran out ({exc})"
                    return
                wait = retry_wait(self.failures, interval, left)
                continue
            if renewed is None:
                self.lost = self.lost or "lease lost: the period was taken over or expired"
                return
            self.failures = 0
            self.deadline = sent + self.lease
            self.cancel = self.cancel or renewed.cancel
            wait = interval

    def watch(self) -> None:
        """Called by the job's poll loop while the job runs: the renewing thread starts once the
        job has run for RENEW_AFTER (its first renewal is a third of the lease away, at least
        0.2 s). A job done sooner never needed a renewal, and cost no thread: a backlog of short
        periods runs about a tenth faster (benchmarks/replay.py)."""
        if self._thread is None and time.monotonic() >= self.armed + RENEW_AFTER:
            self.start()

    def expired(self) -> str | None:
        if self.lost:
            return self.lost
        if time.monotonic() >= self.deadline:
            self.lost = "lease could not be renewed before it ran out"
        return self.lost

    def stop(self) -> None:
        self._stop.set()


class HeartbeatLine:
    """The one connection a process renews every lease on (see the module's text)."""

    def __init__(self, target: db.Target, schema: str) -> None:
        self.target = target
        self.schema = schema
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[object] | None = None

    def renew(
        self,
        job_id: int,
        period_start: datetime,
        attempt: int,
        lease: timedelta,
        within: float,
        key: str = "",
        held: Held | None = None,
    ) -> Renewed | None:
        """Extend the lease of ``attempt`` (fenced); None when the attempt no longer owns it.
        With ``held``, a row a failover lost is written again (``Ledger.recreate``) and the
        lease goes on. Raises on a connection that broke (the keeper retries, and this
        reconnects)."""
        with self._lock:
            ledger = self._ledger(within)
            renewed = ledger.heartbeat(job_id, period_start, attempt, lease, key)
            if renewed is None and held is not None:
                expires = ledger.recreate(held, lease)
                renewed = None if expires is None else Renewed(expires)
            return renewed

    def renew_many(
        self,
        job_id: int,
        held: Sequence[tuple[str, datetime, int]],
        lease: timedelta,
        within: float,
        mine: Sequence[Held] = (),
    ) -> dict[tuple[str, datetime], Renewed]:
        """:meth:`renew` of many attempts of one job in one statement (a batch's running
        period and those claimed with it): the new expiry of each still held. With ``mine``
        (what the runner holds of each), the rows a failover lost are written again
        (``Ledger.recreate_many``) and their leases go on."""
        with self._lock:
            ledger = self._ledger(within)
            renewed = ledger.renew_many(job_id, held, lease)
            gone = [h for h in mine if (h.key, h.period.start) not in renewed]
            if gone:
                made = ledger.recreate_many(job_id, gone, lease)
                renewed.update({at: Renewed(expires) for at, expires in made.items()})
            return renewed

    def _ledger(self, within: float) -> Ledger:
        """The line's ledger; the lock is held. A broken connection is replaced, within
        ``within`` seconds."""
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            self._conn = None
            conn = db.connect(self.target, application="catchup-heartbeat", within=within)
            self._conn = conn
        return Ledger(conn, self.schema)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
