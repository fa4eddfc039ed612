"""``catchup serve``: one long-running process, safe on every replica, read-only towards the
ledger but for the pings of the jobs that take them. A watcher thread scans on its own timer
and keeps the newest report rendered; the HTTP handlers only hand out what it rendered, so a
scrape or a page load never costs a scan, and a slow or unreachable database makes the page
say so and ``catchup_up`` 0, never a hung request.

    /          the status page: a verdict, the scheduler's pulse, what runs, a row per job
               (filters: ?state=failed&job=bill); HTML that reloads itself, no JavaScript
    /jobs/JOB  a job's page: gap ranges with their commands, failures, a grid of periods
    /jobs/JOB/PERIOD  a period's page (?key=K for a keyed job's): its state and why, every
               attempt (host, times, exit code, error, output tail), its checkpoint, changes
    /metrics   Prometheus exposition: the classic text format, or OpenMetrics when asked
    /api/scan  the ``scan --json`` document (also ``/`` with ``Accept: application/json``)
    /api/jobs/JOB  a job's page as JSON (also /jobs/JOB with ``Accept: application/json``)
    /api/jobs/JOB/PERIOD  a period's page as JSON: ``why --json`` and ``history --json``
    /keys/JOB  a keyed job's keys as the ledger recorded them, 1,000 a page (?after=KEY: the
               next, read when asked for; /api/keys/JOB: its JSON)
    /ping/UUID healthchecks' ping API for the jobs with a ``ping``: the one write serve makes
               (/start, /fail, /log, /EXIT-STATUS, ?rid=; :mod:`catchup.serve.pinging`)
    /healthz   the process answers and its watcher thread runs (503 otherwise)
    /readyz    the newest scan succeeded recently (503 otherwise)

The HTTP side (routes, HEAD, ETag, compression, limits) is :mod:`catchup.serve.httpd`.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

import psycopg

from ..errors import CatchupError, ConfigError, first_line
from ..maintenance.retention import LedgerSize
from ..render import json as json_render
from ..render.metrics import Served
from ..render.page import keys_page, keys_path
from ..render.web import Site, home
from ..results import JobScan, KeysReport, PageFacts, PeriodReport, ScanReport

# a scan is "recent" for /readyz within this many refresh intervals (plus its own duration)
READY_INTERVALS = 3


@dataclass(frozen=True)
class View:
    """What the handlers serve: rendered once per scan."""

    report: ScanReport | None = None
    scanned: datetime | None = None  # the served report's database clock
    finished: float | None = None  # time.monotonic() when it was made
    took: float | None = None
    error: str | None = None  # the newest attempt's, if it failed
    page: bytes = b""
    document: bytes = b"{}"
    # each keyed job's keys page and document, by their paths (/keys/NAME, /api/keys/NAME)
    keyed: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    size: LedgerSize | None = None  # the ledger's tables and compaction, read with the scan
    facts: PageFacts | None = None  # what the pages show beside the scan, read with it
    generation: int = 0  # a new one per view: what rendered pages are cached by


SOON_POLL = 0.25  # seconds between looks at a scan asked for sooner (a reload)


class Watcher:
    """Scans every ``refresh`` seconds with ``scan()`` and keeps the newest :class:`View`."""

    def __init__(  # noqa: PLR0913
        self,
        scan: Callable[[], ScanReport],
        reset: Callable[[], None],
        *,
        after: Callable[[ScanReport], list[str]] | None = None,
        keys: Callable[[], list[KeysReport]] | None = None,
        size: Callable[[], LedgerSize] | None = None,
        facts: Callable[[], PageFacts] | None = None,
        period: Callable[[str, str, str | None], PeriodReport | None] | None = None,
        key_page: Callable[[str, str], KeysReport | None] | None = None,
        scrub: Callable[[str], str],
        refresh: float,
        title: str,
        notice: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._scan, self._reset, self._scrub = scan, reset, scrub
        self.notice = notice  # what keeps it from being ready beside its scans (a config)
        self._after, self._keys, self._size, self._facts = after, keys, size, facts
        self._period, self._key_page = period, key_page
        self.refresh = refresh
        self.title = title
        self._lock = threading.Lock()
        self._generations = iter(range(1, 2**62))
        self._view = View(page=self._page(View()))
        self.stop = threading.Event()
        self._soon = threading.Event()  # scan now, not at the next refresh (a reload)
        self.thread = threading.Thread(target=self._loop, name="catchup-serve-scan", daemon=True)

    @property
    def view(self) -> View:
        with self._lock:
            return self._view

    def site(self, view: View) -> Site:
        """What every page says of where it comes from (the deployment's name, never the
        database) and how old its scan is."""
        return Site(
            self.title,
            max(1, round(self.refresh)),
            view.scanned,
            view.took,
            _public(view.error),
            notice=self.notice(),
        )

    def _page(self, view: View) -> bytes:
        return home(view.report, view.facts, self.site(view)).encode()

    def _publish(self, view: View, *, over: View | None = None) -> None:
        """``view`` rendered and served; with ``over``, only if that is still the view served
        (a scan that published meanwhile rendered the newer one, with the newer site)."""
        view = replace(view, generation=next(self._generations))
        view = replace(view, page=self._page(view))
        with self._lock:
            if over is None or self._view is over:
                self._view = view

    def republish(self) -> None:
        """Render the newest view's pages again now (what the site says changed); a scan
        published while they were rendered is never replaced by the older view."""
        current = self.view
        self._publish(current, over=current)

    def scan_soon(self) -> None:
        """Scan again now, not at the next refresh (the config was read again)."""
        self._soon.set()

    def scan_once(self) -> None:
        started = time.monotonic()
        try:
            report = self._scan()
            keyed = self._keys() if self._keys is not None else []
            size = self._size() if self._size is not None else None
            facts = self._facts() if self._facts is not None else None
        except (psycopg.Error, CatchupError) as exc:
            text = first_line(exc) if isinstance(exc, psycopg.Error) else str(exc)
            self._reset()  # the next scan starts from a new connection
            self._publish(replace(self.view, error=self._scrub(text)))
            return
        took = time.monotonic() - started
        view = View(
            report=report,
            scanned=report.generated_at,
            finished=time.monotonic(),
            took=took,
            document="".join(json_render.scan_json_chunks(report)).encode(),
            keyed=self._keyed(
                keyed,
                Site(self.title, max(1, round(self.refresh)), report.generated_at, took),
                {job.job: job for job in report.jobs},
            ),
            size=size,
            facts=facts,
        )
        self._publish(view)
        if self._after is not None:
            try:
                problems = self._after(report)
            except (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege):
                # a serve whose role may only read ([serve] dsn's kind): said once, not retried
                self._after = None
                problems = [
                    "alerts: not recorded nor sent by this serve: its role may only read; a "
                    "serve or `catchup scheduler --serve` whose role writes sends them"
                ]
            except (psycopg.Error, CatchupError) as exc:
                text = first_line(exc) if isinstance(exc, psycopg.Error) else str(exc)
                self._reset()
                problems = [f"alerts: {self._scrub(text)}"]
            for line in problems:
                print(f"catchup serve: {line}", file=sys.stderr, flush=True)

    def _keyed(
        self, reports: list[KeysReport], site: Site, scans: dict[str, JobScan]
    ) -> dict[str, tuple[bytes, str]]:
        out: dict[str, tuple[bytes, str]] = {}
        for report in reports:
            page = keys_page(report, site, scans.get(report.job)).encode()
            out[keys_path(report.job)] = (page, "text/html; charset=utf-8")
            document = (json_render.keys_json(report) + "\n").encode()
            out[keys_path(report.job, api=True)] = (document, "application/json")
        return out

    def _loop(self) -> None:
        while not self.stop.is_set():
            try:
                self.scan_once()
            except Exception as exc:
                # the watcher outlives any surprise: said in one line (its type only: the text
                # of an unexpected error may quote a secret), the page says the scan failed,
                # and the next round tries again
                said = f"the scan or its alerts failed unexpectedly ({type(exc).__name__})"
                print(f"catchup serve: {said}; trying again", file=sys.stderr, flush=True)
                with contextlib.suppress(Exception):
                    self._reset()
                self._publish(replace(self.view, error=said))
            self._rest()

    def _rest(self) -> None:
        """Until the next scan: ``refresh`` seconds, a stop, or a scan asked for sooner
        (looked at every quarter of a second)."""
        until = time.monotonic() + self.refresh
        while not self._soon.is_set() and (left := until - time.monotonic()) > 0:
            if self.stop.wait(min(left, SOON_POLL)):
                break
        self._soon.clear()

    def period(self, name: str, period: str, key: str | None) -> PeriodReport | str | None:
        """One period's page, read now (``/jobs/NAME/PERIOD``): its report; or what is wrong
        with what was asked, in one line; or None when the ledger cannot say now (busy, or an
        error, logged here: the page says only that)."""
        read = self._period
        if read is None:
            return None
        return self._read_now("a period page", lambda: read(name, period, key))

    def key_page(self, name: str, after: str) -> KeysReport | str | None:
        """A page of a keyed job's keys after the first (``/keys/NAME?after=KEY``), read now,
        as :meth:`period` reads a period's page."""
        read = self._key_page
        if read is None:
            return None
        return self._read_now("a page of keys", lambda: read(name, after))

    def _read_now[T](self, what: str, read: Callable[[], T | None]) -> T | str | None:
        try:
            return read()
        except ConfigError as exc:
            return (str(exc).splitlines() or ["not a page of this job"])[0]
        except (psycopg.Error, CatchupError) as exc:
            said = self._scrub(first_line(exc) if isinstance(exc, psycopg.Error) else str(exc))
            print(f"catchup serve: {what}: {said}", file=sys.stderr, flush=True)
            return None

    def alive(self) -> bool:
        """The watcher thread still runs (``/healthz``): a dead one would serve its last scan
        for ever, so a liveness probe must see it and restart the process."""
        return self.thread.is_alive() or not self.thread.ident

    def ready(self) -> bool:
        view = self.view
        if view.error is not None or view.finished is None or self.notice() is not None:
            return False
        age = time.monotonic() - view.finished
        return age <= READY_INTERVALS * self.refresh + (view.took or 0)

    def served(self) -> Served:
        view = self.view
        age = None if view.finished is None else time.monotonic() - view.finished
        up = view.error is None and view.report is not None
        return Served(view.report, up, view.took, age, view.size)


def _public(error: str | None) -> str | None:
    """A failed scan as the page says it: a connection's failure names no DSN, user, host or
    socket path there (the log and /readyz, for the operator, say which)."""
    if error is not None and error.startswith("cannot connect to "):
        return "cannot connect to the database (the log and /readyz say more)"
    return error
