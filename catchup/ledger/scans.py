"""The scan's statements: one read-only snapshot, the coverage a scan has verified, the rows
that are not succeeded (through a server-side cursor), the holes between rows, and the
coverage a scan learns. The gaps-and-ranges logic around them is in :mod:`catchup.scan.detector`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypedDict

import psycopg

from ..results import Range
from .base import LedgerBase

UNFINISHED_BATCH = 20_000


# The parameters of the scan's statements (sql/queries/scans.sql), one typed shape each: arrays
# of one entry per job (or per piece of a job's window), sent as PostgreSQL arrays.
class Windows(TypedDict):
    """Each job's window: ``coverage``."""

    job_ids: list[int]
    firsts: list[datetime]
    untils: list[datetime]
    now: datetime


class Pieces(Windows):
    """Each piece of a window with its step: ``scan_unfinished``, ``scan_unfinished_rows``."""

    steps: list[str | None]
    max_attempts: list[int]


class Holes(TypedDict):
    """Fixed-step pieces no coverage vouches for: ``scan_missing``."""

    job_ids: list[int]
    los: list[datetime]
    his: list[datetime]
    steps: list[str | None]
    lasts: list[datetime]


class Listed(TypedDict):
    """Listed period starts of wall-clock pieces, numbered by piece: ``scan_listed_missing``."""

    job_ids: list[int]
    pieces: list[int]
    starts: list[datetime]


class Covered(TypedDict):
    """What one scan learned has a row for every period: the coverage statements."""

    job_id: int
    signature: str
    first: datetime
    until: datetime
    firsts: list[datetime]
    lasts: list[datetime]


class Scanning(LedgerBase):
    @contextmanager
    def scan_snapshot(self) -> Iterator[None]:
        """One read-only, repeatable-read transaction, in UTC: the coverage and the rows it
        vouches for are read from the same snapshot."""
        with self.conn.transaction():
            self.conn.execute(self._q("scan_snapshot"))
            self.conn.execute(self._q("scan_settings"))
            yield

    def scan_states(self, job_ids: list[int]) -> dict[int, tuple[str, int]]:
        """Per job: the signature its coverage is valid for, and its generation."""
        rows = self.conn.execute(self._q("scan_state"), {"job_ids": job_ids})
        return {job_id: (sig, generation) for job_id, sig, generation in rows}

    def coverage(self, window: Windows) -> list[tuple[int, datetime, datetime]]:
        """Verified ranges (job, first, last) inside each job's window."""
        return [(j, a, b) for j, a, b in self.conn.execute(self._q("coverage"), window)]

    def unfinished_ranges(self, pieces: Pieces, into: dict[int, list[Range]]) -> None:
        """Runs of rows that are not succeeded, per fixed-step piece, grouped in SQL, appended
        to ``into`` by job id. Possibly millions: read in batches through a server-side cursor,
        and a one-period range shares one datetime for first and last."""
        with self.conn.cursor(name="catchup_scan_unfinished", binary=True) as cur:
            cur.itersize = UNFINISHED_BATCH
            cur.execute(self._q("scan_unfinished"), pieces)
            while batch := cur.fetchmany(cur.itersize):
                for job_id, state, first, last, count in batch:
                    into[job_id].append(Range(state, first, first if count == 1 else last, count))

    def unfinished_rows(self, pieces: Pieces) -> Iterator[tuple[int, str, datetime]]:
        """Rows that are not succeeded, one by one (wall-clock pieces are grouped in Python)."""
        yield from self.conn.execute(self._q("scan_unfinished_rows"), pieces)

    def missing_ranges(self, holes: Holes) -> list[tuple[int, datetime, datetime]]:
        """Runs of periods with no row, in fixed-step pieces no coverage vouches for."""
        return [(j, a, b) for j, a, b in self.conn.execute(self._q("scan_missing"), holes)]

    def listed_missing(self, listed: Listed) -> list[tuple[int, datetime, datetime, int]]:
        """Runs of listed period starts with no row."""
        rows = self.conn.execute(self._q("scan_listed_missing"), listed)
        return [(j, a, b, n) for j, a, b, n in rows]

    def full_piece(self, statement: str, params: dict[str, Any]) -> list[Range]:
        """The plain detector over one piece: every period classified by ``period_state()``."""
        rows = self.conn.execute(self._q(statement), params)
        return [Range(state, first, last, count) for _, state, first, last, count in rows]

    def upstream_states(
        self, spans: list[tuple[int, datetime, datetime, int]], now: datetime
    ) -> list[dict[datetime, str]]:
        """For each span (job_id, lo, hi, max_attempts): the state of each row of the job
        starting in ``[lo, hi)`` at ``now``. One statement for all of them."""
        found: list[dict[datetime, str]] = [{} for _ in spans]
        if not spans:
            return found
        job_ids, los, his, maxes = (list(c) for c in zip(*spans, strict=True))
        params = {"job_ids": job_ids, "los": los, "his": his, "max_attempts": maxes, "now": now}
        for n, start, state in self.conn.execute(self._q("upstream_states"), params):
            found[n - 1][start] = state
        return found

    def succeeded_runs(
        self, job_id: int, starts: list[datetime]
    ) -> dict[datetime, tuple[datetime, int]]:
        """Each succeeded row of ``job_id`` at these period starts: (finished_at, attempt)."""
        params = {"job_id": job_id, "starts": starts}
        rows = self.conn.execute(self._q("succeeded_runs"), params).fetchall()
        return {start: (finished, attempt) for start, finished, attempt in rows}

    def succeeded_key_runs(
        self, job_id: int, starts: list[datetime], keys: list[str] | None
    ) -> list[tuple[str, datetime, datetime]]:
        """A keyed job's succeeded rows at these period starts (of ``keys``, or of every key),
        as (key, start, finished_at)."""
        params = {"job_id": job_id, "starts": starts, "keys": keys}
        rows = self.conn.execute(self._q("succeeded_key_runs"), params).fetchall()
        return [(key, start, finished) for key, start, finished in rows]

    def rerun_runs(
        self, spans: list[tuple[int, datetime, datetime]]
    ) -> list[list[tuple[datetime, datetime, datetime, str]]]:
        """For each span (job_id, lo, hi): the job's rows starting in ``[lo, hi)`` that
        succeeded at a later attempt, as (start, end, finished_at, key). One statement."""
        found: list[list[tuple[datetime, datetime, datetime, str]]] = [[] for _ in spans]
        if not spans:
            return found
        job_ids, los, his = (list(c) for c in zip(*spans, strict=True))
        params = {"job_ids": job_ids, "los": los, "his": his}
        for n, start, end, finished, key in self.conn.execute(self._q("rerun_runs"), params):
            found[n - 1].append((start, end, finished, key))
        return found

    def last_success_of_keys(self, job_id: int, keys: list[str] | None) -> datetime | None:
        """The newest succeeded period of a job with keys (of any of ``keys``; None: of any
        key it has)."""
        row = self.conn.execute(
            self._q("last_success_keys"), {"job_id": job_id, "keys": keys}
        ).fetchone()
        return None if row is None else row[0]

    def last_successes(self, job_ids: list[int]) -> dict[int, datetime | None]:
        rows = self.conn.execute(self._q("last_success"), {"job_ids": job_ids})
        return {job_id: success for job_id, success in rows}

    def record_coverage(self, state: tuple[str, int] | None, params: Covered) -> bool:
        """Remember which periods have rows (``params``: job_id, signature, first, until,
        firsts, lasts), unless rows disappeared since the scan read them (the generation
        moved). False when nothing was recorded; a read-only role records nothing."""
        try:
            with self.conn.transaction():
                if state is None:
                    if self.conn.execute(self._q("open_scan_state"), params).fetchone() is None:
                        return False  # created meanwhile, perhaps by a deletion
                else:
                    current = self.conn.execute(self._q("lock_scan_state"), params).fetchone()
                    if current is None or current[1] != state[1]:
                        return False  # rows were removed since the scan's snapshot
                    if current[0] != params["signature"]:
                        self.conn.execute(self._q("reset_coverage"), params)
                self.conn.execute(self._q("replace_coverage"), params)
        except psycopg.errors.InsufficientPrivilege:
            return False
        return True
