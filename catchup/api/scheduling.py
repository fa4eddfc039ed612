"""The built-in scheduler (``catchup scheduler``): lead or stand by, tick when a period falls
due (:mod:`catchup.scheduler.leading`), read the config again when it changes
(:mod:`catchup.config.reloading`), and with ``serve`` serve what ``catchup serve`` serves from the
same process."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config.bounds import SCHEDULER_GRACE, SCHEDULER_LEASE, SCHEDULER_WORKERS, SERVE_REFRESH
from ..config.job import DEFAULT_LANE
from ..errors import ConfigError
from ..postgres import database as db
from ..results import Batch, Outcome
from ..scan.keyed import KeysFailed
from ..vocabulary import OutcomeStatus
from .base import check
from .looking import Looking
from .running import Running

if TYPE_CHECKING:
    from ..config.job import Config
    from ..config.reloading import ConfigWatch
    from ..serve.watcher import Watcher

# Imports inside functions: at first use, so a command loads only the capability it runs.

LISTEN_WAIT = 30.0  # seconds the page's port may take to be bound before the scheduler starts


class Scheduling(Running, Looking):
    def scheduler(  # noqa: C901, PLR0913, PLR0915
        self,
        *,
        workers: int = SCHEDULER_WORKERS.default or 1,
        lease: float = SCHEDULER_LEASE.default or 15,
        grace: float = SCHEDULER_GRACE.default or 0,
        stopping: threading.Event,
        say: Callable[[str], None],
        on_done: Callable[[Outcome], None] | None = None,
        reload: threading.Event | None = None,
        serve: tuple[str, int] | None = None,
        refresh: float = SERVE_REFRESH.default or 60,
        on_listening: Callable[[str], None] | None = None,
    ) -> None:
        """``catchup scheduler``: lead or stand by until ``stopping`` is set; as the leader,
        tick whenever a period of any job falls due (:mod:`catchup.scheduler.leading`). ``say`` gets
        the lead's changes and the config's reloads, ``on_done`` each outcome but the skipped
        ones. The config's file is read again when it changes, and when ``reload`` is set (a
        SIGHUP); a version that does not load is refused and the last good one kept. With
        ``serve`` (host, port), the status page, ``/metrics`` and the probes are served from
        this process, scanned every ``refresh`` seconds."""

        import psycopg

        from ..changes.held import held_said
        from ..errors import DatabaseError
        from ..scheduler.inflight import InFlight, Lanes
        from ..scheduler.leadership import wake_in
        from ..scheduler.leading import LONGEST_SLEEP, Fence, schedule
        from ..session import owner_name

        check(SCHEDULER_WORKERS, workers)
        check(SCHEDULER_LEASE, lease)
        check(SCHEDULER_GRACE, grace)
        check(SERVE_REFRESH, refresh)
        watch = self.config_watch()
        hup = reload if reload is not None else threading.Event()

        def done(outcome: Outcome) -> None:
            if on_done is not None and outcome.status != OutcomeStatus.skipped:
                on_done(outcome)

        told: set[tuple[str, str]] = set()  # the held jobs said (once each, while held)
        owed: set[str] = set()  # the lanes whose every worker was busy at the last start
        woken = threading.Event()  # set (through schedule's keeper) when an owed lane frees

        def freed(lane: str) -> None:
            if lane in owed:
                woken.set()

        lanes = Lanes(workers, freed)
        recheck = threading.Event()  # a period failed: its retry may be the next to fall due

        def finished(outcome: Outcome) -> None:
            if outcome.status.is_failure:
                recheck.set()
            done(outcome)

        def tick(
            fence: Fence, interrupted: threading.Event, term: int, lane: InFlight, free: int
        ) -> Batch:
            named = "" if lane.name == DEFAULT_LANE else f", lane {lane.name}"
            say(f"tick (term {term}{named})")
            names = self.config.lane_jobs().get(lane.name, [])
            if not names:
                return Batch(planned=0, outcomes=(), interrupted=False)
            # a facade of its own (its own connections): the ticks before it may still run
            runner = type(self)(self.config, dsn=self._dsn)
            runner._keys_checked = True  # the ledger is made: the leader's session made it
            try:
                with lane.tick(free) as holding:
                    ran = runner.tick(
                        jobs=names,
                        workers=free,
                        interrupted=interrupted,
                        on_done=finished,
                        draining=fence,
                        term=term,
                        holding=holding,
                    )
            except KeysFailed as exc:  # every job is one whose keys fail: none ran, still led
                say(str(exc))
                return Batch(planned=0, outcomes=(), interrupted=False)
            finally:
                runner.close()
            for failure in ran.keys_failed:  # that job's alone: the lead is kept
                say(failure.line)
            with lock:
                for new, old in sorted(set(ran.held) - told):  # the rest of the jobs ran
                    say(f"warning: {held_said(new, old)}")
                told.intersection_update(ran.held)
                told.update(ran.held)
            return ran

        lock = threading.Lock()
        owner = owner_name()  # its own periods' leases are renewed: no wake for them

        def wake() -> float:
            try:
                session = self.session
                jobs = session.resolve_all(list(self.config.jobs.values()), write=False)
                rows = session.job_rows(write=False)
                retry = session.ledger.next_retry([row.id for row in rows.values()], owner)
                return wake_in(jobs, session.now(), LONGEST_SLEEP, retry)
            except (psycopg.Error, DatabaseError):
                self.close()  # the next look opens a new connection
                raise

        def pending() -> bool:
            return hup.is_set() or (watch is not None and watch.pending())

        page: threading.Thread | None = None
        republish: list[Callable[[], None]] = []  # the served pages, rendered again
        rescan: list[Callable[[], None]] = []  # the served pages, scanned again

        def reloaded() -> None:
            if watch is None:
                hup.clear()
                say("no config file to read again (the jobs were given in code)")
                return
            if hup.is_set():
                watch.hup.set()
                hup.clear()
            state, said = watch.load()
            if said:
                say(said)
            if state.config is not self.given:
                self.use_config(state.config)
            for again in republish:
                again()

        if serve is not None:  # bound first: a bad port is refused, nothing written
            page, again, soon = self._serve_beside(
                serve, refresh, stopping, on_listening, watch, lambda: self.config
            )
            republish.append(again)
            rescan.append(soon)
        self._keys_checked = True  # it keeps leading whatever a job's keys do (issue 46)
        try:
            session = self.session  # opened (and the ledger migrated) before anything leads
            if self._on_connect is not None:  # it said the held jobs: the first tick need not
                told.update(session.held().items())
            self._on_connect = None  # the database line is said once, not at each reconnect
            for twin in db.twin_ledgers(session.target, self.config.project):
                say(f"warning: {twin}")  # another ledger of this project runs its periods too
            schedule(
                session.target,
                self.config.schema,
                tick,
                wake,
                lease=lease,
                grace=grace,
                stopping=stopping,
                say=say,
                lanes=lambda: lanes.of(self.config.lanes, list(self.config.lane_jobs())),
                owed=owed,
                woken=woken,
                loads=lanes.loads,
                recheck=recheck,
                pending=pending,
                reload=reloaded,
                on_lead=lambda: [again() for again in rescan],  # the page says who leads now
            )
        finally:
            stopping.set()
            if page is not None:
                page.join(timeout=10)

    def _serve_beside(
        self,
        at: tuple[str, int],
        refresh: float,
        stopping: threading.Event,
        on_listening: Callable[[str], None] | None,
        watch: ConfigWatch | None,
        configs: Callable[[], Config],
    ) -> tuple[threading.Thread, Callable[[], None], Callable[[], None]]:
        """Serve the pages from a thread of this process, on a facade of its own (its own
        connections): returned once the port is bound; a port that cannot be is refused."""
        pages = type(self)(self.config, dsn=self._dsn)
        bound = threading.Event()
        failed: list[BaseException] = []
        watchers: list[Watcher] = []

        def notice() -> str | None:
            return None if watch is None else watch.state.notice

        def listening(url: str) -> None:
            bound.set()
            if on_listening is not None:
                on_listening(url)

        def run() -> None:
            try:
                pages.serve(
                    host=at[0],
                    port=at[1],
                    refresh=refresh,
                    stop=stopping,
                    on_listening=listening,
                    configs=configs,
                    notice=notice,
                    option="--serve",
                    on_watcher=watchers.append,
                )
            except BaseException as exc:
                failed.append(exc)
                bound.set()
            finally:
                pages.close()

        thread = threading.Thread(target=run, name="catchup-scheduler-serve", daemon=True)
        thread.start()
        bound.wait(LISTEN_WAIT)
        if failed:
            raise failed[0]
        if not bound.is_set():
            raise ConfigError(f"--serve {at[0]}:{at[1]}: not listening after {LISTEN_WAIT:g} s")

        def changed() -> None:
            for watcher in watchers:
                watcher.republish()

        def scan_soon() -> None:
            for watcher in watchers:
                watcher.scan_soon()

        return thread, changed, scan_soon
