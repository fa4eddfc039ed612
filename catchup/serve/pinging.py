"""``/ping/…``: healthchecks' ping API, wire-compatible, for the jobs with a ``ping``.

    /ping/<uuid>                 a success (GET, HEAD or POST; a POST's body is the output)
    /ping/<uuid>/start           the run started
    /ping/<uuid>/fail            the run failed
    /ping/<uuid>/log             a line for the record
    /ping/<uuid>/<exit status>   0 a success, 1-255 a failure, more: 400
    /ping/<ping key>/<job>/…     the same by the job's name ([serve] ping_key: a secret)
    ?rid=<uuid>                  pairs a start with its finish
    ?key=<key>  ?period=<start>  catchup's own: the key of a job with keys; the period outright

Answers as healthchecks answers: ``200 OK`` (and ``Ping-Body-Limit``), ``404 not found`` for
a uuid no job has (nothing is written, no job is made), ``400`` for an exit status over 255 or
a malformed run id. A ping is written through the claim path (:mod:`catchup.pings`) by one of
a few facades of its own, each on its own connection: the page's handlers never wait for it,
and a flood waits its turn here (503 after :data:`WAIT` seconds), never the page."""

from __future__ import annotations

import hmac
import queue
import re
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

import psycopg

from ..errors import CatchupError, ConfigError, first_line
from ..pings.ingest import PingAsk

SLOTS = 4  # facades (connections) writing pings at once
RATE = 500.0  # pings a second one address may send, on average …
BURST = 1000.0  # … after a burst of this many; more wait (at most WAIT), then 429
ADDRESSES = 4096  # addresses remembered; the longest idle is forgotten first
WAIT = 5.0  # seconds a ping waits for one before it is told 503
BODY_LIMIT = 10_000  # bytes of a body kept, as healthchecks keeps them (Ping-Body-Limit)
WIRE_LIMIT = 100_000  # bytes of a body read at most; a longer one is refused (413)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_ROUTE = re.compile(r"/ping/(?P<uuid>[^/]+)(?:/(?P<what>start|fail|log|\d{1,9}))?/?")
_SLUG = re.compile(r"/ping/(?P<key>[^/]+)/(?P<job>[^/]+)(?:/(?P<what>start|fail|log|\d{1,9}))?/?")

Answer = tuple[int, bytes]


class PingDesk:
    """Where pings are written: ``make()`` gives a facade (its own connection), ``jobs()`` the
    configured jobs by their ping's uuid (read at each ping: a reloaded config is followed)."""

    def __init__(
        self,
        make: Callable[[], Any],
        jobs: Callable[[], dict[str, str]],
        ping_key: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.jobs = jobs
        self.make = make
        self.ping_key = ping_key
        self.buckets: dict[str, tuple[float, float]] = {}  # address: (tokens, when)
        self.buckets_lock = threading.Lock()
        self.free: queue.LifoQueue[Any] = queue.LifoQueue()
        self.slots = queue.Queue[None]()
        for _ in range(SLOTS):
            self.slots.put(None)

    def close(self) -> None:
        while not self.free.empty():
            self.free.get_nowait().close()

    def turn(self, address: str) -> bool:
        """Whether ``address`` may ping now: each has a bucket of :data:`BURST` pings refilled
        at :data:`RATE` a second; an empty one waits for its next ping, at most :data:`WAIT`
        seconds (a flood is slowed, the others' pings and the page are not)."""
        with self.buckets_lock:
            now = time.monotonic()
            tokens, when = self.buckets.pop(address, (BURST, now))
            tokens = min(BURST, tokens + (now - when) * RATE) - 1
            if len(self.buckets) >= ADDRESSES:
                del self.buckets[next(iter(self.buckets))]
            self.buckets[address] = (tokens, now)
        if tokens >= 0:
            return True
        wait = -tokens / RATE
        if wait > WAIT:
            return False
        time.sleep(wait)
        return True

    def answer(self, path: str, query: dict[str, list[str]], body: bytes, source: str) -> Answer:
        """What a ping at ``path`` gets, written first when it names a job."""
        found = self._job(path)
        if found is None:
            return HTTPStatus.NOT_FOUND, b"not found"
        name, what = found
        exit_status = int(what) if what.isdigit() else None
        if exit_status is not None and exit_status > 255:
            return HTTPStatus.BAD_REQUEST, b"invalid url format"
        rid = _first(query, "rid")
        if rid is not None and _UUID.fullmatch(rid) is None:
            return HTTPStatus.BAD_REQUEST, b"invalid uuid format"
        kind = "fail" if exit_status else ("success" if exit_status == 0 else what)
        text = body[:BODY_LIMIT].decode("utf-8", "replace") or None
        asked = {
            "exit_status": exit_status,
            "rid": None if rid is None else rid.lower(),
            "key": _first(query, "key"),
            "period": _first(query, "period"),
            "body": text,
        }
        return self._write(name, kind, asked, source)

    def _job(self, path: str) -> tuple[str, str] | None:
        """The job a ping's path names, and what it says: by its uuid, or (healthchecks' slug
        form, with ``[serve] ping_key``) by the key and the job's name; None: no such job."""
        route = _ROUTE.fullmatch(path)
        if route is not None and _UUID.fullmatch(route["uuid"]) is not None:
            name = self.jobs().get(route["uuid"].lower())
            return None if name is None else (name, route["what"] or "success")
        slug, key = _SLUG.fullmatch(path), self.ping_key()
        if slug is None or key is None or not _same(slug["key"], key):
            return None
        if slug["job"] not in self.jobs().values():
            return None
        return slug["job"], slug["what"] or "success"

    def _write(self, name: str, kind: str, asked: dict[str, Any], source: str) -> Answer:
        """The ping written by a free facade; 503 when none frees up in time, or the ledger
        fails (the facade is closed: the next ping opens a new connection)."""
        try:
            self.slots.get(timeout=WAIT)
        except queue.Empty:
            return HTTPStatus.SERVICE_UNAVAILABLE, b"busy: try again"
        app = None
        try:
            try:
                app = self.free.get_nowait()
            except queue.Empty:
                app = self.make()
            app.ping_from(source, name, PingAsk(kind, **asked))
        except ConfigError as exc:  # a key or a period the job does not have
            return HTTPStatus.BAD_REQUEST, first_line(exc).encode()
        except (CatchupError, psycopg.Error, OSError) as exc:
            if app is not None:
                app.close()  # the next ping opens a new connection
                app = None
            said = f"the ledger cannot say now ({type(exc).__name__}): try again"
            return HTTPStatus.SERVICE_UNAVAILABLE, said.encode()
        finally:
            if app is not None:
                self.free.put(app)
            self.slots.put(None)
        return HTTPStatus.OK, b"OK"


def _first(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _same(given: str, key: str) -> bool:
    """``given`` is the ping key, compared in constant time (whatever bytes the path held)."""
    return hmac.compare_digest(given.encode("utf-8", "replace"), key.encode("utf-8"))
