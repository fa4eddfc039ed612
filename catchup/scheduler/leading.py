"""``catchup scheduler``: the built-in scheduler, meant to run on every replica. The replicas
elect a leader through the ledger (``leader`` row, migration 0018): a lease on the database
clock and a term that grows with each change of hands. Only the leader plans: it wakes when
the next period of any job falls due (not on a fixed minute) and runs what is due through the
same claim path as ``catchup tick``, per each job's catch-up policy, on its pool of workers.
A second leader (a paused one waking up) is made harmless by the claim path, and rare by the
term: a leader renews its term right before each tick and starts none once it lost it.

The lead is kept by :class:`LeadKeeper`, a thread of its own on a connection of its own: it renews
every third of the lease while the leader's tick runs its jobs, and a standby asks every
:data:`STANDBY_POLL` seconds, so a dead leader is replaced within its lease plus that. On
SIGINT or SIGTERM the leader hands the lease back at once (a rolling deploy fails over
at once), starts nothing new, lets what runs finish for up to ``grace`` (then stops it, recorded
interrupted, no failure counted) and returns."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import psycopg

from ..config.reloading import CONFIG_POLL
from ..errors import DatabaseError, first_line
from ..ledger import Ledger
from ..postgres import database as db
from ..session import owner_name
from .inflight import InFlight
from .leadership import Lead

STANDBY_POLL = 1.0  # seconds between a standby's asks for the lead
LONGEST_SLEEP = 60.0  # a leader with nothing due still looks at least this often
LATE = 0.05  # seconds past a period's due moment it wakes (the hosts' clocks drift)
RECHECK_POLL = 1.0  # seconds between looks at a recheck asked (a failure, a tick ended)
FINISH_SLACK = 60.0  # seconds past the grace and a lease a stopping leader waits for its ticks


class LeadKeeper(threading.Thread):
    """Takes and keeps the lead on a connection of its own; ``term`` is the term held (None
    while another replica leads). Asked to ``stop``, it hands the lease back."""

    def __init__(  # noqa: PLR0913
        self,
        target: db.Target,
        schema: str,
        holder: str,
        lease: float,
        say: Callable[[str], None],
        changed: threading.Event | None = None,
        loads: Callable[[], dict[str, tuple[int, int]]] = dict,
        on_lead: Callable[[], object] = lambda: None,
    ) -> None:
        super().__init__(name="catchup-scheduler-lead", daemon=True)
        self._target, self._schema = target, schema
        self.holder, self.lease, self._say = holder, lease, say
        self.term: int | None = None
        self.lead: Lead | None = None
        # set when the lead is taken or lost (and by the caller: a worker freed, a reload)
        self.changed = changed if changed is not None else threading.Event()
        self._loads = loads  # each lane's workers and how many are busy: published each renewal
        self._on_lead = on_lead  # called each time it takes the lead
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._ledger: Ledger | None = None
        # the term held when the connection broke: asked for again on reconnecting, so a
        # leader whose lease outlived a cut connection keeps it (and starts nothing meanwhile)
        self._cut: int | None = None

    def _connected(self) -> Ledger:
        if self._ledger is None:
            # named by its holder in pg_stat_activity: which replica's connection is the lead's
            application = f"catchup scheduler {self.holder}"[:63]
            conn = db.connect(self._target, application=application, within=self.lease)
            self._ledger = Ledger(conn, self._schema)
        return self._ledger

    def renew(self) -> int | None:
        """Take or keep the lead now; the term held after it (None: another leads, or the
        ledger cannot say: a leader that cannot renew must act as one that lost)."""
        with self._lock:
            held = self.term
            asked = held or self._cut or 0
            try:
                lead = self._connected().lead(
                    self.holder, asked, timedelta(seconds=self.lease), self._loads()
                )
            except (psycopg.Error, DatabaseError) as exc:
                text = first_line(exc) if isinstance(exc, psycopg.Error) else str(exc)
                self._drop()
                lead = None
                if held is not None:
                    self._cut = held
                    self._say(f"cannot renew the lead ({text}); acting as a standby")
            else:
                self._cut = None
            self.lead = lead
            self.term = None if lead is None else lead.term
            if self.term != held:
                if self.term is not None and self.term == asked and held is None:
                    self._say(f"leading again (term {self.term}, its lease outlived the cut)")
                elif self.term is not None:
                    self._say(f"leading (term {self.term})")
                    self._on_lead()
                elif held is not None and self._cut is None:
                    self._say(f"term {held} ended: another replica leads")
                self.changed.set()
            return self.term

    def close(self) -> None:
        """Close its connection (the thread does at its end; a keeper never started must)."""
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._ledger is not None:
            try:
                self._ledger.conn.close()
            except Exception:
                pass
            self._ledger = None

    def run(self) -> None:
        while not self.stop.is_set():
            term = self.renew()
            self.stop.wait(self.lease / 3 if term is not None else STANDBY_POLL)
        with self._lock:
            if self.term is not None:
                try:
                    self._connected().resign(self.holder, self.term)
                    self._say(f"handed the lead back (term {self.term})")
                except (psycopg.Error, DatabaseError):
                    pass  # its lease runs out on its own
                self.term = None
            self._drop()
        self.changed.set()


class Fence:
    """What a leader's tick is drained by: set once a stop is asked or the term it was started
    under is gone (lost, handed back), read before each period starts (the dispatcher's
    ``draining``): a leader that lost the lead starts nothing more, and what runs finishes
    under its own lease and fence."""

    def __init__(self, keeper: LeadKeeper, term: int, stopping: threading.Event) -> None:
        self._keeper, self._term, self._stopping = keeper, term, stopping

    def is_set(self) -> bool:
        return self._stopping.is_set() or self._keeper.term != self._term


Tick = Callable[[Fence, threading.Event, int, InFlight, int], object]


def schedule(  # noqa: C901, PLR0913, PLR0915
    target: db.Target,
    schema: str,
    tick: Tick,
    wake_in: Callable[[], float],
    *,
    lease: float,
    grace: float,
    stopping: threading.Event,
    say: Callable[[str], None],
    lanes: Callable[[], dict[str, InFlight]],
    owed: set[str] | None = None,
    woken: threading.Event | None = None,
    loads: Callable[[], dict[str, tuple[int, int]]] = dict,
    recheck: threading.Event | None = None,
    pending: Callable[[], bool] = lambda: False,
    reload: Callable[[], None] = lambda: None,
    on_lead: Callable[[], object] = lambda: None,
) -> None:
    """Lead or stand by until ``stopping``; as the leader, start a tick of each lane with a
    free worker, ``tick(fence, interrupted, term, lane, workers)`` on a thread of its own,
    whenever a period falls due (and once on taking the lead: what came due while nobody led),
    never waiting for the ticks before it: their periods run on (each a worker of its lane's
    :class:`InFlight`, ``lanes()``) while it sleeps ``wake_in()`` seconds (until the next
    period falls due, or a retry's backoff ends). A lane with every worker busy is ``owed`` a
    tick: the caller's ``on_free`` of the lanes wakes it (``keeper.changed``) once one is
    freed. It is woken early when the lead changes hands, a stop is asked, or ``pending()``
    says the config must be read again: ``reload()`` then, between starts (and a tick at once
    after it). ``recheck`` (set by the caller when a period failed, and here when a tick
    ends): when to wake is asked again, as a retry's backoff may end sooner."""
    holder = f"{owner_name()}:{secrets.token_hex(3)}"
    keeper = LeadKeeper(target, schema, holder, lease, say, woken, loads, on_lead)
    interrupted = threading.Event()
    ticks: list[threading.Thread] = []
    failed: list[BaseException] = []
    recheck = recheck or threading.Event()

    def watch_config() -> None:
        while not stopping.wait(CONFIG_POLL):
            if pending():
                keeper.changed.set()

    threading.Thread(target=watch_config, name="catchup-scheduler-config", daemon=True).start()

    def on_stop() -> None:
        stopping.wait()
        keeper.stop.set()  # the lease handed back at once: a standby takes over
        if not interrupted.wait(grace):
            interrupted.set()  # what still runs after the grace is stopped

    threading.Thread(target=on_stop, name="catchup-scheduler-stop", daemon=True).start()

    def run(fence: Fence, term: int, lane: InFlight, workers: int) -> None:
        try:
            tick(fence, interrupted, term, lane, workers)
        except (psycopg.Error, DatabaseError) as exc:
            # the ledger went away mid-tick: said; the claims it made are fenced and their
            # leases run out, and the next tick takes them over
            say(first_line(exc) if isinstance(exc, psycopg.Error) else str(exc))
        except BaseException as exc:  # raised by the loop: a bug is never swallowed
            failed.append(exc)
            keeper.changed.set()
        finally:
            recheck.set()

    owed = owed if owed is not None else set()
    keeper.start()
    try:
        while not stopping.is_set():
            keeper.changed.clear()  # what sets it from here on wakes the sleep below
            if failed:
                raise failed[0]
            if pending():
                reload()
            if keeper.term is None:
                keeper.changed.wait(STANDBY_POLL)
                continue
            current = lanes()
            owed.update(current)  # a worker freed from here on wakes the sleep below
            free = {name: flight.free() for name, flight in current.items()}
            owed.intersection_update(name for name, n in free.items() if n == 0)
            if any(free.values()):
                # the term fence: renewed right before each start, so a leader that was
                # paused past its lease finds its term gone and starts nothing
                term = keeper.renew()
                if term is None or stopping.is_set():
                    continue
                ticks[:] = [t for t in ticks if t.is_alive()]
                for name, workers in free.items():
                    if workers:  # a lane with every worker busy: its due periods wait
                        fence = Fence(keeper, term, stopping)
                        ticks.append(_start(run, fence, term, current[name], workers))
            _sleep(keeper.changed, recheck, lambda: _wait(wake_in, say))
    finally:
        stopping.set()
        _finish(ticks, grace + lease + FINISH_SLACK)
        interrupted.set()  # the loop is done: nothing of it runs on
        keeper.stop.set()
        keeper.join(timeout=lease)


def _start(
    run: Callable[[Fence, int, InFlight, int], None],
    fence: Fence,
    term: int,
    lane: InFlight,
    workers: int,
) -> threading.Thread:
    """One lane's tick, on a thread of its own (never waited for)."""
    started = threading.Thread(
        target=run,
        args=(fence, term, lane, workers),
        name=f"catchup-scheduler-tick-{term}-{lane.name}",
        daemon=True,
    )
    started.start()
    return started


def _wait(wake_in: Callable[[], float], say: Callable[[str], None]) -> float:
    """How long the leader sleeps: until the next period falls due (a bit after it)."""
    try:
        wait = wake_in()
    except (psycopg.Error, DatabaseError) as exc:
        say(first_line(exc) if isinstance(exc, psycopg.Error) else str(exc))
        return STANDBY_POLL
    return wait + LATE if wait else LATE


def _sleep(woken: threading.Event, recheck: threading.Event, wait: Callable[[], float]) -> None:
    """Until the next start: ``wait()`` seconds (the next period falls due), or ``woken`` (the
    lead, a stop, the config). ``recheck`` makes it ask ``wait()`` again within a second: a
    period failed or a tick ended, and a retry's backoff may end sooner."""
    until = time.monotonic() + wait()
    while not woken.wait(max(0.0, min(until - time.monotonic(), RECHECK_POLL))):
        if time.monotonic() >= until:
            return
        if recheck.is_set():
            recheck.clear()
            until = min(until, time.monotonic() + wait())


def _finish(ticks: list[threading.Thread], within: float) -> None:
    """Wait for the running ticks (their periods finish within the grace, then are stopped
    and recorded), at most ``within`` seconds."""
    deadline = time.monotonic() + within
    for started in ticks:
        started.join(max(0.0, deadline - time.monotonic()))
