"""The HTTP side of ``catchup serve``: the standard library's threading server, bounded, and
handlers that only hand out what the watcher rendered (or render a page from the newest scan,
cached until the next one). GET and HEAD only; conditional requests (``ETag``,
``Last-Modified``), gzip when asked, every page also as JSON, a strict CSP.

Limits, against what the open internet sends: at most :data:`MAX_CONNECTIONS` at once (more
are told 503 and closed), :data:`IDLE_SECONDS` for a connection to send its next request
line or header, a request line of 8 KiB, 100 headers of 64 KiB each (the standard library's),
no request bodies (a request that announces one is refused and its connection closed) but a
ping's, of :data:`~catchup.serve.pinging.WIRE_LIMIT` bytes at most."""

from __future__ import annotations

import gzip
import hashlib
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from email.utils import format_datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ..errors import ConfigError
from ..render.jobpage import job_page
from ..render.json import keys_json
from ..render.metrics import exposition
from ..render.page import keys_page
from ..render.pagejson import job_json
from ..render.periodpage import period_document, period_page
from ..render.text import safe
from ..render.web import STATE_FILTERS, home, stylesheet
from .pinging import BODY_LIMIT, WIRE_LIMIT, PingDesk
from .watcher import View, Watcher

MAX_CONNECTIONS = 512
IDLE_SECONDS = 15.0
MAX_REQUEST_LINE = 8192
MAX_FIELDS = 4  # fields in a query string (?state=…&job=…, ?key=…)
MAX_PERIOD = 200  # characters of a period's name or a key in a period page's address
DRAINED = 65_536  # the most of a refused body read (and dropped) before the answer
COMPRESS_FROM = 1024  # bytes: smaller bodies go as they are
CACHED_PAGES = 256  # rendered pages kept per scan (each filter of / is one)
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'"
)
HTML = "text/html; charset=utf-8"
JSON = "application/json"
TEXT = "text/plain; charset=utf-8"


# a client that hung up while it was answered: nothing to say
CLIENT_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)


class _Unavailable(Exception):
    """The ledger cannot say now (busy, or failing): a 503, not cached."""


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the listen backlog: a burst of connections is not turned away
    block_on_close = False

    def __init__(
        self, address: tuple[str, int], watcher: Watcher, pings: PingDesk | None = None
    ) -> None:
        self.watcher = watcher
        self.pings = pings
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.pages: dict[tuple[int, str], tuple[int, bytes, str]] = {}
        self.pages_lock = threading.Lock()
        super().__init__(address, Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            try:  # full: said at once, and closed
                request.sendall(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                    b"Connection: close\r\nRetry-After: 1\r\n\r\n"
                )
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A request that failed: a client gone mid-answer (a closed tab, a timed-out probe)
        is nobody's error and is not said; anything else is said in one line, by its type
        (an unexpected error's text may quote a secret), never as a traceback."""
        kind = sys.exc_info()[0]
        if kind is None or issubclass(kind, CLIENT_GONE):
            return
        said = f"a request failed unexpectedly ({kind.__name__}); serving on"
        print(f"catchup serve: {said}", file=sys.stderr, flush=True)

    def cached(self, view: View, path: str, make: Any) -> tuple[int, bytes, str]:
        """A page rendered from ``view`` by ``make()`` once per scan and path."""
        key = (view.generation, path)
        with self.pages_lock:
            found = self.pages.get(key)
        if found is not None:
            return found
        made: tuple[int, bytes, str] = make()
        with self.pages_lock:
            if any(k[0] != view.generation for k in self.pages) or len(self.pages) >= CACHED_PAGES:
                self.pages.clear()  # a new scan, or too many filters: start again
            self.pages[key] = made
        return made


class Handler(BaseHTTPRequestHandler):
    server: Server
    query: dict[str, list[str]]
    raw_requestline: bytes
    protocol_version = "HTTP/1.1"  # connections kept open between requests, within IDLE_SECONDS
    timeout = IDLE_SECONDS
    # the standard library's own refusals (a malformed request line, too many headers): plain
    error_message_format = "%(code)d %(message)s\n"
    error_content_type = TEXT

    def version_string(self) -> str:
        return "catchup"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def parse_request(self) -> bool:
        if not super().parse_request():  # the headers read too, before any answer
            return False
        if len(self.raw_requestline) > MAX_REQUEST_LINE:
            self.close_connection = True
            self._send(HTTPStatus.REQUEST_URI_TOO_LONG, b"request line too long\n", TEXT)
            return False
        length = self.headers.get("Content-Length", "0")
        self.body = b""
        if self.path.startswith("/ping/"):
            return self._ping_body(length)
        if self.headers.get("Transfer-Encoding") or length != "0":
            self.close_connection = True  # the connection ends here
            if _length(length) <= DRAINED:
                # a small body is read and dropped, so closing does not reset the connection
                # before the client has read the answer
                self.rfile.read(int(length))
            self._send(HTTPStatus.CONTENT_TOO_LARGE, b"no request bodies here\n", TEXT)
            return False
        return True

    def _ping_body(self, length: str) -> bool:
        """A ping's body, read whole (it is the run's output) up to :data:`WIRE_LIMIT`."""
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            self._send(HTTPStatus.LENGTH_REQUIRED, b"a ping's body needs a length\n", TEXT)
            return False
        if _length(length) > WIRE_LIMIT:
            self.close_connection = True
            body = f"a ping's body is at most {WIRE_LIMIT} bytes\n".encode()
            self._send(HTTPStatus.CONTENT_TOO_LARGE, body, TEXT)
            return False
        self.body = self.rfile.read(_length(length))
        return True

    def _ping(self) -> None:
        """``/ping/…`` (:mod:`catchup.serve.pinging`): written, then answered as healthchecks
        answers."""
        parts = urlsplit(self.path)
        try:
            query = parse_qs(parts.query, max_num_fields=MAX_FIELDS)
        except ValueError:
            self._send(HTTPStatus.BAD_REQUEST, b"invalid url format", TEXT, cache="no-store")
            return
        desk, address = self.server.pings, str(self.client_address[0])
        extra = {"Ping-Body-Limit": str(BODY_LIMIT), "Access-Control-Allow-Origin": "*"}
        if desk is not None and not desk.turn(address):
            extra["Retry-After"] = "1"
            body = b"too many pings: slow down"
            self._send(HTTPStatus.TOO_MANY_REQUESTS, body, TEXT, extra=extra)
            return
        status, body = (
            (HTTPStatus.NOT_FOUND, b"not found")
            if desk is None
            else desk.answer(parts.path, query, self.body, f"ping from {address}")
        )
        self._send(status, body, TEXT, cache="no-store", extra=extra)

    def do_POST(self) -> None:
        if urlsplit(self.path).path.startswith("/ping/"):
            self.head = False
            self._ping()
        else:
            self._refuse()

    def do_GET(self) -> None:
        self._route(head=False)

    def do_HEAD(self) -> None:
        self._route(head=True)

    def _route(self, head: bool) -> None:
        """A ping, or the pages."""
        if urlsplit(self.path).path.startswith("/ping/"):
            self.head = head
            self._ping()
        else:
            self._answer(head)

    def _refuse(self) -> None:
        self.close_connection = True
        allowed = "GET, HEAD, POST" if self.path.startswith("/ping/") else "GET, HEAD"
        said = allowed.replace(", POST", " or POST").replace("GET, HEAD", "GET or HEAD", 1)
        body = f"{said} only\n".encode()
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, body, TEXT, extra={"Allow": allowed})

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _refuse

    def _answer(self, head: bool) -> None:
        self.head = head
        watcher = self.server.watcher
        parts = urlsplit(self.path)
        path, view = parts.path, watcher.view
        try:
            self.query = parse_qs(parts.query, max_num_fields=MAX_FIELDS)
        except ValueError:
            body = f"at most {MAX_FIELDS} fields in a query\n".encode()
            self._send(HTTPStatus.BAD_REQUEST, body, TEXT)
            return
        wants_json = JSON in (self.headers.get("Accept") or "").split(";")[0].split(",")
        if (path == "/" and wants_json) or path == "/api/scan":
            if view.report is None:
                self._send(HTTPStatus.SERVICE_UNAVAILABLE, b'{"error": "no scan yet"}\n', JSON)
            else:
                self._send(HTTPStatus.OK, view.document, JSON, view=view)
        elif path == "/":
            self._home(view)
        elif path.startswith(("/jobs/", "/api/jobs/")):
            api = path.startswith("/api/")
            rest = path.removeprefix("/api/jobs/" if api else "/jobs/")
            name, _, period = rest.partition("/")
            if period:
                keys = self.query.get("key")
                key = keys[0] if keys else None
                self._period(view, unquote(name), unquote(period), key, api or wants_json)
            else:
                self._job(view, unquote(name) if name else None, api or wants_json)
        elif path == "/static/catchup.css":
            self._send(HTTPStatus.OK, stylesheet(), "text/css; charset=utf-8", cache="max-age=3600")
        elif path == "/metrics":
            body, content_type = exposition(watcher.served(), self.headers.get("Accept"))
            self._send(HTTPStatus.OK, body, content_type, cache="no-store")
        elif path in ("/healthz", "/readyz"):
            self._probe(path == "/readyz", view)
        elif path.startswith(("/keys/", "/api/keys/")):
            self._keys(view, "/api" + path if wants_json and path[1] == "k" else path)
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", TEXT)

    def _probe(self, ready: bool, view: View) -> None:
        """``/healthz`` (the watcher thread runs) or ``/readyz`` (a recent scan succeeded)."""
        watcher = self.server.watcher
        if not ready:
            if watcher.alive():
                self._send(HTTPStatus.OK, b"ok\n", TEXT, cache="no-store")
            else:
                body = b"not alive: the scanning watcher stopped\n"
                self._send(HTTPStatus.SERVICE_UNAVAILABLE, body, TEXT, cache="no-store")
        elif watcher.ready():
            self._send(HTTPStatus.OK, b"ready\n", TEXT, cache="no-store")
        else:
            said = safe(watcher.notice() or view.error or "no recent scan")
            body = b"not ready: " + said.encode()
            self._send(HTTPStatus.SERVICE_UNAVAILABLE, body + b"\n", TEXT, cache="no-store")

    def _home(self, view: View) -> None:
        asked = self.query
        state = (asked.get("state") or [""])[0] or None
        name = (asked.get("job") or [""])[0][:100] or None
        if state is not None and state not in STATE_FILTERS:
            body = f"state: expected one of {', '.join(STATE_FILTERS)}\n".encode()
            self._send(HTTPStatus.BAD_REQUEST, body, TEXT)
            return
        auto = bool(asked.get("auto"))
        if state is None and name is None and not auto:
            self._send(HTTPStatus.OK, view.page, HTML, view=view)
            return
        watcher = self.server.watcher

        def make() -> tuple[int, bytes, str]:
            site = replace(watcher.site(view), auto=auto)
            page = home(view.report, view.facts, site, state=state, name=name)
            return HTTPStatus.OK, page.encode(), HTML

        self._send(*self.server.cached(view, f"/?{state}&{name}&{auto}", make), view=view)

    def _job(self, view: View, name: str | None, api: bool) -> None:
        watcher = self.server.watcher
        auto = bool(self.query.get("auto"))

        def make() -> tuple[int, bytes, str]:
            if name is None or view.report is None:
                return HTTPStatus.NOT_FOUND, b"not found\n", TEXT
            if api:
                document = job_json(view.report, view.facts, name)
                if document is None:
                    return HTTPStatus.NOT_FOUND, b'{"error": "no such job"}\n', JSON
                return HTTPStatus.OK, document.encode(), JSON
            site = replace(watcher.site(view), auto=auto)
            page = job_page(view.report, view.facts, site, name)
            if page is None:
                return HTTPStatus.NOT_FOUND, b"no such job in the newest scan\n", TEXT
            return HTTPStatus.OK, page.encode(), HTML

        self._send(*self.server.cached(view, f"{api}:{name}:{auto}", make), view=view)

    def _period(self, view: View, name: str, period: str, key: str | None, api: bool) -> None:
        """``/jobs/NAME/PERIOD``: read from the ledger when first asked for after a scan (the
        other pages are the scan's), then cached until the next one; 503 while it cannot be
        read (never cached)."""
        watcher = self.server.watcher
        if view.report is None or all(j.job != name for j in view.report.jobs):
            self._send(HTTPStatus.NOT_FOUND, b"no such job in the newest scan\n", TEXT)
            return
        if "/" in period or len(period) > MAX_PERIOD or len(key or "") > MAX_PERIOD:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", TEXT)
            return

        def make() -> tuple[int, bytes, str]:
            read = watcher.period(name, period, key)
            if read is None:
                raise _Unavailable
            if isinstance(read, str):
                return HTTPStatus.BAD_REQUEST, (safe(read) + "\n").encode(), TEXT
            if api:
                return HTTPStatus.OK, period_document(read).encode(), JSON
            return HTTPStatus.OK, period_page(read, watcher.site(view)).encode(), HTML

        self._cached_or_busy(view, f"period:{api}:{name}:{period}:{key}", make)

    def _keys(self, view: View, path: str) -> None:
        """``/keys/NAME`` (its JSON with ``/api`` or ``Accept: application/json``, as
        ``/jobs/NAME``): the scan's first page, or ``?after=KEY`` the page after KEY."""
        if path not in view.keyed:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", TEXT)
        elif after := (self.query.get("after") or [""])[0]:
            self._keys_after(view, path, after)
        else:
            self._send(HTTPStatus.OK, *view.keyed[path], view=view)

    def _keys_after(self, view: View, path: str, after: str) -> None:
        """``/keys/NAME?after=KEY`` (and its JSON): the page of keys after KEY, read from the
        ledger when first asked for after a scan, then cached until the next one (the first
        page is the scan's); 503 while it cannot be read (never cached)."""
        watcher = self.server.watcher
        api = path.startswith("/api/")
        name = unquote(path.removeprefix("/api/keys/" if api else "/keys/"))
        if len(after) > MAX_PERIOD:
            self._send(HTTPStatus.BAD_REQUEST, b"after: not a key (at most 200 characters)\n", TEXT)
            return

        def make() -> tuple[int, bytes, str]:
            read = watcher.key_page(name, after)
            if read is None:
                raise _Unavailable
            if isinstance(read, str):
                return HTTPStatus.BAD_REQUEST, (safe(read) + "\n").encode(), TEXT
            if api:
                return HTTPStatus.OK, (keys_json(read) + "\n").encode(), JSON
            jobs = view.report.jobs if view.report is not None else ()
            scan = next((j for j in jobs if j.job == name), None)
            return HTTPStatus.OK, keys_page(read, watcher.site(view), scan).encode(), HTML

        self._cached_or_busy(view, f"keys:{api}:{name}:{after}", make)

    def _cached_or_busy(
        self, view: View, key: str, make: Callable[[], tuple[int, bytes, str]]
    ) -> None:
        """A page read from the ledger when asked for: cached for the view, or 503 when the
        ledger cannot say now."""
        try:
            answer = self.server.cached(view, key, make)
        except _Unavailable:
            body = b"the ledger cannot say now; try again\n"
            extra = {"Retry-After": "1"}
            self._send(HTTPStatus.SERVICE_UNAVAILABLE, body, TEXT, cache="no-store", extra=extra)
            return
        self._send(*answer, view=view)

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str,
        *,
        view: View | None = None,
        cache: str = "no-cache",
        extra: dict[str, str] | None = None,
    ) -> None:
        tag = '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
        if status == HTTPStatus.OK and tag in (self.headers.get("If-None-Match") or ""):
            status, body = HTTPStatus.NOT_MODIFIED, b""
        encoding = None
        accepts = (self.headers.get("Accept-Encoding") or "").lower()
        if len(body) >= COMPRESS_FROM and "gzip" in accepts:
            body, encoding = gzip.compress(body, compresslevel=5, mtime=0), "gzip"
        self.send_response(status)
        if status != HTTPStatus.NOT_MODIFIED:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if encoding:
            self.send_header("Content-Encoding", encoding)
        self.send_header("Vary", "Accept, Accept-Encoding")
        if status in (HTTPStatus.OK, HTTPStatus.NOT_MODIFIED):
            self.send_header("ETag", tag)
            if view is not None and view.scanned is not None:
                self.send_header("Last-Modified", format_datetime(view.scanned, usegmt=True))
        self.send_header("Cache-Control", cache)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("Referrer-Policy", "no-referrer")
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if not getattr(self, "head", False) and self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return  # no request log: a scrape every few seconds is not news


def serve(
    watcher: Watcher,
    host: str,
    port: int,
    stop: threading.Event,
    on_listening: Callable[[str], None] | None = None,
    option: str = "--listen",
    pings: PingDesk | None = None,
) -> None:
    """Scan and serve until ``stop`` is set (``option``: what a port that cannot be bound is
    said to come from; ``pings``: where ``/ping/…`` is written, None: nothing takes pings)."""
    try:
        server = Server((host, port), watcher, pings)
    except OSError as exc:
        raise ConfigError(f"{option} {host}:{port}: {exc.strerror}") from None
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


def _length(header: str) -> int:
    """A Content-Length's bytes: ASCII digits, nine at most (any other value is read as more
    than any limit: refused, never converted)."""
    if header.isascii() and header.isdecimal() and len(header) <= 9:
        return int(header)
    return 10**9


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
