"""What a scan is asked to look at: a job's :class:`ScanTarget`, and a keyed job's keys
(:class:`KeyRow`) and ranges of one key (:class:`KeyRange`). Plain values, no I/O."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import NamedTuple

from ..config.job import Job


class KeyRange(NamedTuple):
    """Consecutive periods of one key of a job in one state (``first``, ``last``: starts)."""

    key: str
    state: str
    first: datetime
    last: datetime
    periods: int


@dataclass(frozen=True, slots=True)
class KeyCounts:
    """How many keys a job has recorded, how many of them are gone and how many paused, and
    when its keys were last read (None: never); counted by the ledger, however many."""

    total: int = 0
    gone: int = 0
    paused: int = 0
    read_at: datetime | None = None

    @property
    def expected(self) -> int:
        return self.total - self.gone


@dataclass(frozen=True, slots=True)
class KeyRow:
    """One key of a job as the ledger knows it: expected from ``expected_from`` (and, when
    ``gone_at`` is set, no longer from then on), first and last seen by a read of its keys."""

    key: str
    expected_from: datetime
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    gone_at: datetime | None = None
    paused_at: datetime | None = None
    # ranges [lo, hi) of period starts a scan found to have a row each (catchup/scan/verified.py)
    verified: tuple[tuple[datetime, datetime], ...] | None = None
    # the last of them is recorded unbounded: it reaches the job's horizon, wherever that is
    follows: bool = False

    def unexpected(self, start: datetime) -> str | None:
        """Why the period starting at ``start`` is not one of this key's (before the key was
        expected, or after it was gone), or None when it is."""
        if start < self.expected_from:
            return (
                f"{self.key} is expected from {self.expected_from:%Y-%m-%dT%H:%M:%SZ} (when its"
                " keys first held it): this period is not one of its own"
            )
        if self.gone_at is not None and start >= self.gone_at:
            return (
                f"{self.key} is gone since {self.gone_at:%Y-%m-%dT%H:%M:%SZ} (its keys no longer"
                " hold it): this period is not one of its own"
            )
        return None


@dataclass(frozen=True, slots=True)
class Settled:
    """A keyed job's keys a scan of its window did not read, being settled there (each
    expected period with a row, what scans verified of it following the horizon: nothing to
    find, nothing to write), counted by ``bucket``: how many of the window's period ends are
    at or before when the key is expected (it is expected in the periods from that index on;
    a key gone before the window in the window's length). Their rows that have not succeeded
    the scan reads from the ledger (``split``)."""

    buckets: tuple[tuple[int, int], ...] = ()  # (bucket, keys)
    split: bool = False  # the keys were read as the window needs (Ledger.keys_to_scan)

    @property
    def count(self) -> int:
        return sum(n for _, n in self.buckets)

    def expected(self, periods: int) -> int:
        """How many (key, period) pairs of the window's ``periods`` they are expected in."""
        return sum(max(0, periods - b) * n for b, n in self.buckets)

    def with_row(self, i: int) -> int:
        """How many of them (each has a row every period it is expected in) are expected in
        the window's period ``i`` (0-based)."""
        return sum(n for b, n in self.buckets if b <= i)


NONE_SETTLED = Settled()


@dataclass(frozen=True)
class ScanTarget:
    """One job to scan: its config, its ledger id, whether it is paused, and where its window
    starts when that is its own (a tick's ``catchup_window``) rather than the scan's."""

    job: Job
    job_id: int
    paused: bool
    since: datetime | None = None
    keys: tuple[KeyRow, ...] = ()  # a keyed job's keys (those asked for), with their history
    # ``keys`` are every key of the job (no --key, not an upstream's few): only a scan of them
    # all may move the job's horizon (catchup/scan/verified.py)
    all_keys: bool = False
    keys_failed: KeysFailure | None = None  # its keys query failed: ``keys`` are those read last
    # ``keys`` were recorded and not read back (every key of the job): its scan reads those
    # its window needs (Ledger.keys_to_scan), and what needs them all reads them all
    deferred: bool = False
    # a first read's keys, judged beside it: what its first scan writes, if it still holds
    # (catchup/scan/prejudge.py)
    prejudged: Judged | None = None


@dataclass(frozen=True)
class KeysFailure:
    """A keyed job whose keys query failed: it went on with the ``known`` keys it read last."""

    job: str
    error: str  # one line, without a password
    database: bool  # a database error (exit 3); else what it returned is refused (2)
    known: int

    @property
    def exit_code(self) -> int:
        return 3 if self.database else 2

    @property
    def line(self) -> str:
        return self._said("went on with", "nothing of it ran (unstartable)")

    @property
    def scan_line(self) -> str:
        """What a scan says of it (a scan runs nothing): on which keys it was scanned."""
        return self._said("is scanned on", "none of its periods is known")

    def _said(self, went: str, none: str) -> str:
        if self.known:
            keys = f"{self.known} key{'s' if self.known != 1 else ''}"
            return f"{self.error}; {self.job} {went} the {keys} it read last"
        return f"{self.error}; {self.job} has no keys read before: {none}"


def keys_failed(targets: list[ScanTarget]) -> tuple[KeysFailure, ...]:
    """The keyed jobs of ``targets`` whose keys query failed."""
    return tuple(t.keys_failed for t in targets if t.keys_failed is not None)


@dataclass(frozen=True, repr=False)
class Prejudged:
    """What settle_complete_keys would write of a first read's keys on the first scan after it
    (of the periods it was judged for: :class:`~catchup.scan.prejudge.Prejudging`), judged
    before they were recorded (:func:`prejudge_first_keys`): the keys to write, in key order,
    as one text (a line a key: 200,000 keys cost their characters, not 200,000 objects) and
    what of each (``los``: the start its range follows from, one object each; None, cut),
    where the horizon moves, and what applying it checks (the keys' ``digest`` under
    ``seeds``, with their dates; the scan ``state`` it read: None, none)."""

    job_id: int
    start: datetime
    horizon: datetime
    state: tuple[str, int] | None
    digest: list[Decimal]
    seeds: tuple[int, int]
    lines: str
    los: list[datetime | None]

    @property
    def keys(self) -> list[str]:
        """The keys to write, in key order."""
        return self.lines.split("\n") if self.lines else []

    def __repr__(self) -> str:
        return f"Prejudged(job {self.job_id}, {len(self.los):,} keys to write)"


# what a first read's keys were judged beside it, for a scan's periods (None: not for them)
Judged = Callable[[Sequence[tuple[datetime, datetime]]], Prejudged | None]
