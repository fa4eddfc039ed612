"""What each operation of the facade returns: frozen objects, rendered by ``catchup.render``
for people and scripts, returned as they are by the Python API (no I/O here)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from .claims.failover import Moved
from .config.job import Job
from .maintenance.retention import CompactedRun
from .models import STATUSES, EventRow, HistoryRow, JobLine, Outcome, RunRow, TickLeft, Unconfigured
from .reports.explain import Explanation
from .scan.targets import KeyRow, KeysFailure
from .schedule import Period, iso_utc
from .scheduler.pulsefacts import Pulse
from .vocabulary import EventAction, OutcomeStatus, PeriodState


@dataclass(frozen=True)
class Renewed:
    """A lease renewed by a heartbeat: its new expiry, and who asked the attempt to stop and
    why (``catchup cancel``), when somebody did."""

    expires: datetime
    cancel_actor: str | None = None
    cancel_reason: str | None = None

    @property
    def cancel(self) -> str | None:
        """The attempt's error once it stops: ``cancelled by ACTOR: REASON``."""
        if self.cancel_actor is None:
            return None
        return f"cancelled by {self.cancel_actor}: {self.cancel_reason}"


@dataclass(frozen=True)
class Connected:
    """Which database a facade opened: said once on stderr by the CLI (never a password)."""

    database: str
    version: str
    schema: str
    note: str | None
    # jobs the ledger has and the config does not name, and configured jobs new to the ledger
    # that have the schedule of one of those (new name, old name): a rename nobody said
    unconfigured: tuple[Unconfigured, ...] = ()
    lookalikes: tuple[tuple[str, str], ...] = ()
    # the server's new timeline (a failover), when this command was the first to see it
    moved: Moved | None = None
    # the project's ledger was moved to it now (embedded): the line is said even under -q
    relocated: bool = False


@dataclass(frozen=True)
class Renamed:
    """``catchup rename``: the job's id, and all recorded for it, now under ``new``."""

    old: str
    new: str
    config_behind: bool = False  # the config names old, not new: old is held until it does


@dataclass(frozen=True)
class Retired:
    """``catchup retire``: the job is gone on purpose; its history stays."""

    job: str


@dataclass(frozen=True)
class NotDue:
    """``run`` without ``--period`` before the job's first period is due: nothing to do."""

    job: str
    first: Period
    label: str
    due: datetime  # when the first period falls due (database clock)


@dataclass(frozen=True)
class JobsReport:
    """``catchup jobs``: one line per job, and the scheduler's pulse."""

    database: str
    lines: tuple[JobLine, ...]
    pulse: Pulse
    unconfigured: tuple[Unconfigured, ...] = ()  # the ledger's jobs this config does not name
    keys_failed: tuple[KeysFailure, ...] = ()  # keyed jobs whose keys query failed: alone


@dataclass(frozen=True)
class History:
    """``catchup history``: a job's attempts and changes, newest first, up to ``limit`` each,
    and how many there are in all (so a report can say "50 of 169")."""

    job: str
    period: datetime | None
    limit: int
    attempts: tuple[HistoryRow, ...]
    total_attempts: int
    changes: tuple[EventRow, ...]
    total_changes: int
    labeler: Callable[[datetime], str] = field(default=iso_utc, compare=False, repr=False)
    # the period's compact record, when its detail was compacted (with --period)
    compacted: CompactedRun | None = None
    compacted_periods: int = 0  # how many of the job's periods were compacted in all
    compacted_at: datetime | None = None  # when the last of them was

    def label(self, start: datetime) -> str:
        return self.labeler(start)


@dataclass(frozen=True)
class KeysReport:
    """``catchup keys``: a job's keys, with when each was first and last seen and from when
    (and, once gone, until when) it is expected."""

    job: str
    now: datetime
    keys: tuple[KeyRow, ...]
    labeler: Callable[[datetime], str] = field(default=iso_utc, compare=False, repr=False)


@dataclass(frozen=True)
class Change:
    """What a mark or reset did to one period."""

    job: str
    period: Period
    label: str
    previous: PeriodState  # the row's status before, or missing
    now: PeriodState
    changed: bool  # a reset of a failed period changes it (its failures) though both say failed
    key: str = ""  # the period's key, for a job with keys


@dataclass(frozen=True)
class Changes:
    """The result of ``mark`` or ``reset``: what ``action`` did to each period named."""

    job: str
    action: EventAction
    rows: tuple[Change, ...]

    @property
    def changed(self) -> int:
        return sum(row.changed for row in self.rows)


@dataclass(frozen=True)
class Paused:
    job: str
    since: datetime
    key: str = ""  # one key of a job with keys, paused alone


@dataclass(frozen=True)
class Resumed:
    """``resume``: whether the job was paused, and the catch-up policy the next tick follows."""

    job: str
    resumed: bool
    catchup: Literal["all", "latest", "none"]
    catchup_window: timedelta
    max_per_tick: int
    key: str = ""  # one key of a job with keys, resumed alone


@dataclass(frozen=True)
class Migrated:
    schema: str
    applied: tuple[str, ...]
    version: int


@dataclass(frozen=True)
class Planned:
    """A period a replay or tick intends to run, and why: the state the scan found it in, or
    ``due`` (a tick's newest due period, which it runs without scanning)."""

    job: Job
    period: Period
    state: PeriodState | Literal["due"]
    # the upstream periods it waits for (job name, start): a worker pool starts it only once
    # those of them in the same plan are done
    needs: tuple[tuple[str, datetime], ...] = ()
    # where it goes in a plan: its start, or for a job with upstream jobs, no earlier than
    # what it waits for (the jobs' ranks break ties: upstream first)
    order: tuple[datetime, int] | None = None


@dataclass(frozen=True)
class Batch:
    """What a replay or tick did: the outcomes in the order they finished."""

    planned: int
    outcomes: tuple[Outcome, ...]
    interrupted: bool
    dry_run: bool = False
    # a dry run's periods, oldest first: produced as they are read (once), never built whole
    plan: Iterable[Planned] = ()
    # periods left alone because their output exists and the ledger has no run (evidence)
    untracked: int = 0
    untracked_keys: bool = False  # some of them are a keyed job's (adopt does not take those)
    # planned periods not started because --max-time ran out (the next tick's), and the limit
    deferred: int = 0
    max_time: float | None = None
    # upstream periods planned because the jobs asked for wait for them: (job, count), in order
    upstream: tuple[tuple[str, int], ...] = ()
    compacted: int = 0  # a tick's slice of compaction ([ledger] keep_detail): periods compacted
    held: tuple[tuple[str, str], ...] = ()  # held jobs (catchup/changes/held.py): (job, old name)
    left: TickLeft = field(default_factory=TickLeft)  # gaps: by max_per_tick, catchup_window
    keys_failed: tuple[KeysFailure, ...] = ()  # keyed jobs whose keys query failed: alone

    @property
    def totals(self) -> dict[str, int]:
        counts = Counter(outcome.status for outcome in self.outcomes)
        return {"planned": self.planned, **{s: counts.get(s, 0) for s in STATUSES}}

    @property
    def failed(self) -> bool:
        return any(outcome.status.is_failure for outcome in self.outcomes)

    @property
    def unstartable(self) -> bool:
        """A job could not start (a configuration error: nothing claimed, no attempt)."""
        return any(outcome.status == OutcomeStatus.unstartable for outcome in self.outcomes)

    @property
    def errors(self) -> bool:
        """A period met a database error (its job's others, and other jobs, still ran)."""
        return any(outcome.status == OutcomeStatus.error for outcome in self.outcomes)


@dataclass(frozen=True)
class Why:
    """One period's state, what explains it, and what would move it; for a blocked period,
    the upstream periods it waits for, each explained the same way."""

    job: str
    period: Period
    label: str
    state: str
    said: tuple[str, ...]
    commands: tuple[str, ...] = ()
    upstream: tuple[Why, ...] = ()
    more: int = 0  # upstream periods not done beyond those explained
    # a job with keys, no one key named: (state, how many keys, the first few) of the period
    keys: tuple[tuple[str, int, tuple[str, ...]], ...] = ()


@dataclass(frozen=True)
class PeriodReport:
    """One period as its page shows it (``/jobs/NAME/PERIOD``): what ``why`` and ``history
    --period`` say, and its ledger row (who holds it, its checkpoint), or None if it has none."""

    why: Why
    history: History
    row: RunRow | None
    key: str = ""  # a keyed job's period: its key
    value: str = ""  # the period as its commands name it (``catchup cancel JOB VALUE``)


@dataclass(frozen=True)
class RunningRow:
    """A period running now (``catchup ps``, the status page): who runs it, since when, and
    how long its lease has left, all on the database clock."""

    job: str
    key: str
    period_start: datetime
    period_end: datetime
    attempt: int
    owner: str | None  # host:pid
    claimed_at: datetime | None
    heartbeat_at: datetime | None
    lease_expires_at: datetime | None
    now: datetime
    total: int = 0  # how many run now in all (the rows stop at a limit)
    cancelling: bool = False  # somebody asked this attempt to stop (catchup cancel)

    @property
    def running_for(self) -> timedelta | None:
        return None if self.claimed_at is None else self.now - self.claimed_at

    @property
    def lease_left(self) -> timedelta | None:
        """Negative once the lease is past: its runner is gone or cut off."""
        return None if self.lease_expires_at is None else self.lease_expires_at - self.now


@dataclass(frozen=True)
class FailureRow:
    """A failed period that still stands, and what its last attempt said."""

    job: str
    key: str
    period_start: datetime
    attempt: int
    failures: int
    owner: str | None
    claimed_at: datetime | None
    finished_at: datetime | None
    exit_code: int | None
    error: str | None
    output_tail: str | None  # its end only, when tail_cut
    retry_after: datetime | None
    tail_cut: bool = False


@dataclass(frozen=True)
class PageFacts:
    """What the status page shows beside a scan, read with it: the periods running now, each
    job's failures that still stand, when each job is next due, its periods spelled out, and
    the jobs as the ledger resolves them (for labels and period ends)."""

    now: datetime
    running: tuple[RunningRow, ...] = ()
    failures: dict[str, tuple[FailureRow, ...]] = field(default_factory=dict)
    next_due: dict[str, datetime] = field(default_factory=dict)
    explained: dict[str, Explanation] = field(default_factory=dict)
    jobs: dict[str, Job] = field(default_factory=dict)

    @property
    def running_total(self) -> int:
        return self.running[0].total if self.running else 0


@dataclass(frozen=True)
class Running:
    """``catchup ps``: every period running now, on every host, on the database clock."""

    now: datetime
    rows: tuple[RunningRow, ...]
    jobs: dict[str, Job]  # the configured jobs, for their labels

    @property
    def total(self) -> int:
        return self.rows[0].total if self.rows else 0


@dataclass(frozen=True)
class CancelTarget:
    """A period's row as ``catchup cancel`` locked it."""

    status: str
    attempt: int
    owner: str | None
    claimed_at: datetime | None
    lease_expires_at: datetime | None
    live: bool  # running, and its lease holds
    now: datetime
    state: str  # as a scan names it


@dataclass(frozen=True)
class CancelProgress:
    """Where an attempt asked to stop stands now."""

    attempt_status: str | None  # its history row's status
    current_attempt: int
    status: str
    live: bool
    lease_expires_at: datetime | None
    now: datetime


@dataclass(frozen=True)
class Cancelled:
    """What ``catchup cancel`` did: ``outcome`` is ``cancelled`` (its runner stopped it, or
    the runner was gone and the cancel recorded it), ``requested`` (with no wait), ``running``
    (still, when the wait ran out), or how the attempt ended first (``succeeded``, ``failed``,
    ``lost``, ``interrupted``)."""

    job: str
    key: str
    period: Period
    label: str
    attempt: int
    owner: str | None
    outcome: str
    first: bool  # this request was the first for the attempt
    gone: bool = False  # the runner's lease had run out: recorded here, not by the runner
    seconds: float = 0.0

    @property
    def done(self) -> bool:
        return self.outcome in ("cancelled", "requested")
