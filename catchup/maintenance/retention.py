"""Compaction's pure parts: the rows it reads back and what it reports, and the cutoff it works
to (``[ledger] keep_detail`` or ``--until``, on the database clock's ``now``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ..errors import ConfigError
from ..schedule import iso_utc
from ..vocabulary import RunStatus
from .findings import Level

BATCH_PERIODS = 500  # the most runs in a batch: its rows stay locked until it commits
BATCH_MIN = 50  # the fewest, on a server too slow for more
BATCH_SECONDS = 0.05  # what a batch should take at most (a claim of one of its rows waits)
TICK_SLICE = 2_000  # what a tick compacts at most, after what it ran


def next_batch(limit: int, seconds: float) -> int:
    """The next batch's size after one of ``limit`` runs took ``seconds``: halved when it held
    its rows longer than BATCH_SECONDS, doubled (up to BATCH_PERIODS) when it took under a
    third of that, else the same."""
    if seconds > BATCH_SECONDS:
        return max(BATCH_MIN, limit // 2)
    if seconds < BATCH_SECONDS / 3:
        return min(BATCH_PERIODS, limit * 2)
    return limit


@dataclass(frozen=True)
class CompactedRun:
    """A period's compact record: what the ledger keeps once its detail is gone."""

    period_start: datetime
    key: str
    status: RunStatus
    attempt: int
    failures: int
    claimed_at: datetime | None  # the first attempt's start
    finished_at: datetime | None
    compacted_at: datetime
    error: str | None  # a waiver's note

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", RunStatus(self.status))


@dataclass(frozen=True)
class BatchDone:
    """One batch: the periods compacted, the attempts dropped, the runs looked at, and where
    the job's cursor stands now (None when another host held the job's turn)."""

    periods: int
    attempts: int
    looked: int
    through: datetime | None


@dataclass(frozen=True)
class Plan:
    """What a compaction would drop of one job (``--dry-run``)."""

    periods: int
    attempts: int
    bytes: int


@dataclass(frozen=True)
class Behind:
    """How far one job's compaction is behind its cutoff: the oldest settled run finished
    before it and not compacted (None: none), and what was compacted so far."""

    oldest: datetime | None
    periods: int
    compacted_at: datetime | None


@dataclass(frozen=True)
class TableSize:
    name: str
    rows: int  # live rows as the statistics system counts them (close, not exact)
    bytes: int  # with indexes and TOAST


@dataclass(frozen=True)
class JobCompaction:
    """What ``catchup compact`` did (or, dry, would do) with one job."""

    job: str
    periods: int
    attempts: int
    bytes: int | None  # a dry run's estimate of the detail dropped
    busy: bool  # another host was compacting it: left to that one
    left: bool  # stopped short of the cutoff (a tick's slice, --max-time)


@dataclass(frozen=True)
class Compacted:
    """``catchup compact``: the cutoff, and each job's part."""

    before: datetime
    dry_run: bool
    jobs: tuple[JobCompaction, ...]

    @property
    def periods(self) -> int:
        return sum(j.periods for j in self.jobs)

    @property
    def attempts(self) -> int:
        return sum(j.attempts for j in self.jobs)


def cutoff(now: datetime, keep_detail: timedelta | None, before: datetime | None) -> datetime:
    """The instant before which a settled run's detail goes: ``before`` when given (never after
    ``now``), else ``now - keep_detail``."""
    if before is not None:
        if before > now:
            raise ConfigError(
                f"--until {iso_utc(before)} is after the database's clock ({iso_utc(now)}):"
                " only detail of runs that ended can go"
            )
        return before
    if keep_detail is None:
        raise ConfigError(
            'nothing says what is old: set [ledger] keep_detail (like "90d") or give --until'
        )
    return now - keep_detail


@dataclass(frozen=True)
class LedgerSize:
    """What the doctor and ``/metrics`` say of the ledger's size and compaction: each table,
    the oldest attempt kept, and (with ``keep_detail``) each job's oldest settled run past the
    cutoff and not compacted yet."""

    tables: tuple[TableSize, ...]
    oldest_detail: datetime | None
    cutoff: datetime | None
    behind: dict[str, datetime]

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tables)

    def behind_seconds(self, job: str) -> float:
        """How long past the cutoff the job's oldest run waiting for compaction ended."""
        oldest = self.behind.get(job)
        return (
            0.0 if oldest is None or self.cutoff is None else (self.cutoff - oldest).total_seconds()
        )


def size_lines(size: LedgerSize, keep_detail: timedelta | None) -> list[tuple[Level, str]]:
    """The doctor's lines on the ledger's size, as (level, text)."""
    biggest = sorted(size.tables, key=lambda t: t.bytes, reverse=True)[:3]
    parts = ", ".join(
        f"{t.name} {t.rows:,} row{'' if t.rows == 1 else 's'} {_bytes(t.bytes)}" for t in biggest
    )
    lines: list[tuple[Level, str]] = [("info", f"{_bytes(size.bytes)} in all ({parts})")]
    if size.oldest_detail is not None:
        lines.append(("info", f"the oldest attempt kept started {iso_utc(size.oldest_detail)}"))
    if keep_detail is None:
        lines.append(("info", "[ledger] keep_detail is not set: every attempt's detail is kept"))
        return lines
    late = {job: at for job, at in size.behind.items() if size.behind_seconds(job) > 86_400}
    if not late:
        lines.append(
            ("ok", "compaction keeps up: no settled run's detail is a day past keep_detail")
        )
    for job, at in sorted(late.items()):
        days = size.behind_seconds(job) / 86_400
        lines.append(
            (
                "warning",
                f"{job}: detail of runs that ended {iso_utc(at)} is {days:.0f} days past"
                " keep_detail (each tick compacts a slice; `catchup compact` does it all)",
            )
        )
    return lines


def _bytes(count: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if count < 1000:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"
