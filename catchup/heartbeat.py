"""One connection for the heartbeats of every period a process runs at once.

A lease is renewed on a connection of its own (not the one that claimed: a job may run for
hours and that connection is the runner's), but not one per running period: a tick or a replay
with N workers keeps N + 1 connections open (the workers' and this one), whatever the number of
jobs. Renewals take turns on it; a broken connection is replaced by the first renewal that finds
it broken, within the time that renewal's lease has left."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import psycopg

from . import db
from .ledger import Ledger


class HeartbeatLine:
    def __init__(self, target: db.Target, schema: str) -> None:
        self.target = target
        self.schema = schema
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[object] | None = None

    def renew(
        self, job_id: int, period_start: datetime, attempt: int, lease: timedelta, within: float
    ) -> datetime | None:
        """Extend the lease of ``attempt`` (fenced); None when the attempt no longer owns it.
        Raises on a connection that broke (the keeper retries, and this reconnects)."""
        with self._lock:
            conn = self._conn
            if conn is None or conn.closed or conn.broken:
                if conn is not None:
                    conn.close()
                self._conn = None
                conn = db.connect(self.target, application="catchup-heartbeat", within=within)
                self._conn = conn
            return Ledger(conn, self.schema).heartbeat(job_id, period_start, attempt, lease)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
