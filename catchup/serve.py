"""``catchup serve``: one long-running process, safe on every replica, read-only towards the
ledger. A watcher thread scans on its own timer and keeps the newest report rendered; the HTTP
handlers only hand out what it rendered, so a scrape or a page load never costs a scan, and a
slow or unreachable database makes the page say so and ``catchup_up`` 0, never a hung request.

    /          the status page (HTML, refreshes itself, no JavaScript)
    /metrics   Prometheus exposition: the classic text format, or OpenMetrics when asked
    /api/scan  the ``scan --json`` document
    /keys/JOB  a keyed job's keys, as ``catchup keys JOB`` lists them (/api/keys/JOB: its JSON)
    /healthz   the process answers and its watcher thread runs (503 otherwise)
    /readyz    the newest scan succeeded recently (503 otherwise)
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg

from .errors import CatchupError, first_line
from .models import ScanReport
from .render import json as json_render
from .render.metrics import Served, exposition
from .render.page import keys_page, keys_path, status_page
from .results import KeysReport
from .retention import LedgerSize

# a scan is "recent" for /readyz within this many refresh intervals (plus its own duration)
READY_INTERVALS = 3
CSP = "default-src 'none'; style-src 'unsafe-inline'"


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


class Watcher:
    """Scans every ``refresh`` seconds with ``scan()`` and keeps the newest :class:`View`."""

    def __init__(
        self,
        scan: Callable[[], ScanReport],
        reset: Callable[[], None],
        *,
        after: Callable[[ScanReport], list[str]] | None = None,
        keys: Callable[[], list[KeysReport]] | None = None,
        size: Callable[[], LedgerSize] | None = None,
        scrub: Callable[[str], str],
        refresh: float,
        database: str,
        schema: str,
    ) -> None:
        self._scan, self._reset, self._scrub = scan, reset, scrub
        self._after, self._keys, self._size = after, keys, size
        self.refresh = refresh
        self.database, self.schema = database, schema
        self._lock = threading.Lock()
        self._view = View(page=self._page(View()))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="catchup-serve-scan", daemon=True)

    @property
    def view(self) -> View:
        with self._lock:
            return self._view

    def _page(self, view: View) -> bytes:
        return status_page(
            view.report,
            database=self.database,
            schema=self.schema,
            refresh=max(1, round(self.refresh)),
            error=view.error,
            scanned=view.scanned,
            took=view.took,
        ).encode()

    def scan_once(self) -> None:
        started = time.monotonic()
        try:
            report = self._scan()
            keyed = self._keys() if self._keys is not None else []
            size = self._size() if self._size is not None else None
        except (psycopg.Error, CatchupError) as exc:
            text = first_line(exc) if isinstance(exc, psycopg.Error) else str(exc)
            self._reset()  # the next scan starts from a new connection
            failed = replace(self.view, error=self._scrub(text))
            failed = replace(failed, page=self._page(failed))
            with self._lock:
                self._view = failed
            return
        took = time.monotonic() - started
        view = View(
            report=report,
            scanned=report.generated_at,
            finished=time.monotonic(),
            took=took,
            document="".join(json_render.scan_json_chunks(report)).encode(),
            keyed=self._keyed(keyed),
            size=size,
        )
        view = replace(view, page=self._page(view))
        with self._lock:
            self._view = view
        if self._after is not None:
            try:
                problems = self._after(report)
            except (psycopg.Error, CatchupError) as exc:
                text = first_line(exc) if isinstance(exc, psycopg.Error) else str(exc)
                self._reset()
                problems = [f"alerts: {self._scrub(text)}"]
            for line in problems:
                print(f"catchup serve: {line}", file=sys.stderr, flush=True)

    def _keyed(self, reports: list[KeysReport]) -> dict[str, tuple[bytes, str]]:
        refresh = max(1, round(self.refresh))
        out: dict[str, tuple[bytes, str]] = {}
        for report in reports:
            page = keys_page(report, refresh=refresh).encode()
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
                failed = replace(self.view, error=said)
                failed = replace(failed, page=self._page(failed))
                with self._lock:
                    self._view = failed
            self.stop.wait(self.refresh)

    def alive(self) -> bool:
        """The watcher thread still runs (``/healthz``): a dead one would serve its last scan
        for ever, so a liveness probe must see it and restart the process."""
        return self.thread.is_alive() or not self.thread.ident

    def ready(self) -> bool:
        view = self.view
        if view.error is not None or view.finished is None:
            return False
        age = time.monotonic() - view.finished
        return age <= READY_INTERVALS * self.refresh + (view.took or 0)

    def served(self) -> Served:
        view = self.view
        age = None if view.finished is None else time.monotonic() - view.finished
        up = view.error is None and view.report is not None
        return Served(view.report, up, view.took, age, view.size)


def handler_for(watcher: Watcher) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def version_string(self) -> str:
            return "catchup"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/":
                self._send(HTTPStatus.OK, watcher.view.page, "text/html; charset=utf-8")
            elif path == "/metrics":
                body, content_type = exposition(watcher.served(), self.headers.get("Accept"))
                self._send(HTTPStatus.OK, body, content_type)
            elif path == "/api/scan":
                view = watcher.view
                if view.report is None:
                    self._send(HTTPStatus.SERVICE_UNAVAILABLE, b'{"error": "no scan yet"}\n')
                else:
                    self._send(HTTPStatus.OK, view.document, "application/json")
            elif path == "/healthz":
                if watcher.alive():
                    self._send(HTTPStatus.OK, b"ok\n", "text/plain; charset=utf-8")
                else:
                    body = b"not alive: the scanning watcher stopped\n"
                    self._send(HTTPStatus.SERVICE_UNAVAILABLE, body, "text/plain")
            elif path == "/readyz":
                if watcher.ready():
                    self._send(HTTPStatus.OK, b"ready\n", "text/plain; charset=utf-8")
                else:
                    body = b"not ready: " + (watcher.view.error or "no recent scan").encode()
                    self._send(HTTPStatus.SERVICE_UNAVAILABLE, body + b"\n", "text/plain")
            elif (keyed := watcher.view.keyed.get(path)) is not None:
                self._send(HTTPStatus.OK, *keyed)
            else:
                self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")

        def _send(
            self, status: HTTPStatus, body: bytes, content_type: str = "application/json"
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header(
                "Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'"
            )
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # no request log: a scrape every few seconds is not news

    return Handler


def serve(
    watcher: Watcher,
    host: str,
    port: int,
    stop: threading.Event,
    on_listening: Callable[[str], None] | None = None,
) -> None:
    """Scan and serve until ``stop`` is set."""
    try:
        server = ThreadingHTTPServer((host, port), handler_for(watcher))
    except OSError as exc:
        from .errors import ConfigError

        raise ConfigError(f"--listen {host}:{port}: {exc.strerror}") from None
    server.daemon_threads = True
    watcher.thread.start()
    thread = threading.Thread(target=server.serve_forever, name="catchup-serve-http", daemon=True)
    thread.start()
    if on_listening is not None:
        bound_host, bound_port = server.server_address[:2]
        on_listening(f"http://{_host(str(bound_host))}:{bound_port}/")
    try:
        while not stop.wait(0.2):
            pass
    finally:
        watcher.stop.set()
        server.shutdown()
        server.server_close()


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
