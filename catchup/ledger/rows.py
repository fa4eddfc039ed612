"""The rows the ledger returns, as frozen objects (no I/O here): a run, a claim, an
attempt, a change, a job's row, a running period, a standing failure, a cancel."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ..schedule.zones import iso_utc
from ..vocabulary import (
    AttemptStatus,
    EventAction,
    RunStatus,
)


class _RunStatusRow:
    """A row read from ``runs``: its status as the enum (the text is the enum's value)."""

    status: RunStatus

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", RunStatus(self.status))


@dataclass(frozen=True)
class Claim:
    """A period this process now owns, as ``attempt``, until ``lease_expires_at``."""

    id: int
    period_start: datetime
    period_end: datetime
    attempt: int
    lease_expires_at: datetime
    checkpoint: str | None


@dataclass(frozen=True)
class RunRow(_RunStatusRow):
    """The ledger row of one period, as read back."""

    period_start: datetime
    period_end: datetime
    status: RunStatus
    attempt: int
    failures: int
    owner: str | None
    lease_expires_at: datetime | None
    finished_at: datetime | None
    retry_after: datetime | None
    exit_code: int | None
    error: str | None
    lease_live: bool | None
    now: datetime
    interrupted: bool = False  # failed without a failure counted: stopped, or cancelled
    checkpoint: str | None = None  # what the newest attempt saved (catchup checkpoint)
    cancelled: bool = False  # interrupted because a person asked: catchup cancel


@dataclass(frozen=True)
class LockedRow(_RunStatusRow):
    """A period's row as a mark or reset locked it."""

    period_start: datetime
    status: RunStatus
    attempt: int
    failures: int
    live: bool


@dataclass(frozen=True)
class Blocker:
    """The live run of another period that keeps an overlap-forbidden job from starting."""

    period_start: datetime
    owner: str | None
    lease_expires_at: datetime


@dataclass(frozen=True)
class Waiting:
    """An upstream period a claim waits for that is not done: its status (None with no row),
    and its state as a scan names it (missing, failed, exhausted, running, …)."""

    job_id: int
    period_start: datetime
    status: str | None
    state: str = "missing"


@dataclass(frozen=True)
class Blocked:
    """A claim refused because upstream periods it waits for are not done (oldest first)."""

    waiting: tuple[Waiting, ...]


@dataclass(frozen=True)
class Finished:
    finished_at: datetime
    failures: int
    retry_after: datetime | None


@dataclass(frozen=True)
class HistoryRow:
    period_start: datetime
    attempt: int
    status: AttemptStatus
    owner: str | None
    started_at: datetime
    finished_at: datetime | None
    exit_code: int | None
    error: str | None
    output_tail: str | None
    total: int = 0  # how many attempts the query matched in all (the rows stop at a limit)
    key: str = ""  # the period's key, for a job with keys

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", AttemptStatus(self.status))


@dataclass(frozen=True)
class JobRow:
    id: int
    name: str
    paused_at: datetime | None
    project: str | None = None  # what registered it (Config.registrant); None: not recorded
    definition: dict[str, object] | None = None  # Job.definition as that project gave it
    retired_at: datetime | None = None  # `catchup retire`: a configured name brings it back


@dataclass(frozen=True)
class Unconfigured:
    """A job the ledger has and the config does not name: renamed without saying, or gone."""

    name: str
    last_success: datetime | None
    schedule: str | None  # the last one recorded, to spot the same job under a new name
    timezone: str | None
    project: str | None = None  # what defined it (Config.registrant); None: not recorded


@dataclass(frozen=True)
class EvidenceState:
    """What earlier scans verified of a job's evidence (``evidence_state``): every row that
    finished by ``verified_at`` in the job's periods before ``verified_until`` had evidence."""

    job_id: int
    signature: str
    verified_until: datetime
    verified_at: datetime


@dataclass(frozen=True)
class WindowRow:
    """A window recorded afterwards (``catchup exclude``): ``[lo, hi)`` of a job's periods
    (of ``key``; None: every key) nobody expected, who recorded it, when and why."""

    job_id: int
    key: str | None
    lo: datetime
    hi: datetime
    reason: str
    actor: str
    at: datetime

    @property
    def by(self) -> str:
        """What excluded its periods, as ``why`` and the scan say it."""
        return f"a window recorded by {self.actor} at {iso_utc(self.at)}: {self.reason}"


@dataclass(frozen=True)
class EventRow:
    """A change a person made: marking, resetting, pausing or resuming, with who and why."""

    period_start: datetime | None
    action: EventAction
    previous: str | None
    reason: str | None
    actor: str
    at: datetime
    total: int = 0  # how many changes the query matched in all
    key: str = ""  # the key changed ('' for the whole job, or an unkeyed job's period)

    def __post_init__(self) -> None:
        object.__setattr__(self, "action", EventAction(self.action))


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
