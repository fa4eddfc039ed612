"""The ledger's rows and the results of commands, as frozen objects (no I/O here)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, NamedTuple

from .claims.failover import Failover
from .scan.names import JsonNames
from .scan.targets import KeyRange, KeysFailure
from .schedule import Period, iso_utc
from .scheduler.pulsefacts import Pulse
from .vocabulary import (
    GAP_STATES,
    AttemptStatus,
    EventAction,
    OutcomeStatus,
    PeriodState,
    RunStatus,
)

STATUSES: tuple[OutcomeStatus, ...] = tuple(OutcomeStatus)  # in this order in totals and tables


@dataclass(frozen=True)
class Outcome:
    """What ``run`` did with one period: the object the CLI and the Python API render."""

    job: str
    period: Period
    label: str
    status: OutcomeStatus
    attempt: int | None = None
    detail: str = ""
    exit_code: int | None = None
    seconds: float | None = None
    blocked: bool = False  # skipped only because another period of the job holds the lease
    # a failed period's last lines of output, when it was not streamed (tick, replay)
    output: str = ""
    key: str = ""  # the period's key, for a job with keys
    keys_failed: KeysFailure | None = None  # run of one key: its job's keys query failed


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
class JobLine:
    """One row of ``catchup jobs``."""

    job: str
    schedule: str
    first_period: str
    last_success: str | None
    next_due: datetime | None
    expected: int
    done: int
    running: int
    failed: int
    paused: bool
    timezone: str = "UTC"
    exhausted: int = 0  # failed with no attempts left (not in ``failed``)
    interrupted: int = 0  # its last attempt was interrupted, no failure counted (not in ``failed``)
    cancelled: int = (
        0  # its last attempt a person cancelled, no failure counted (not in ``failed``)
    )
    first_start: datetime | None = None  # UTC, for JSON: the labels above are for people
    last_success_start: datetime | None = None
    paused_keys: tuple[str, ...] | None = None  # a job with keys: its paused keys


class Range(NamedTuple):
    """Consecutive periods of one job in one state: ``first`` and ``last`` are period starts.

    A named tuple rather than a dataclass: a scan of a long, ragged history makes millions."""

    state: str
    first: datetime
    last: datetime
    periods: int

    @property
    def status(self) -> str:
        """``state``, by its name in ``scan --json``'s gaps."""
        return self.state


COUNTED_STATES: tuple[PeriodState, ...] = tuple(PeriodState)


Island = Range  # the old name of a range (catchup 0.1); kept for code that imports it


@dataclass(frozen=True)
class JobScan(JsonNames):
    """One job's expected periods in the scanned window, by state (``counts``, or each by its
    name in the JSON: ``missing``), and its gaps oldest-first."""

    job: str
    schedule: str
    timezone: str
    daily_or_longer: bool
    paused: bool
    first: datetime | None
    until: datetime | None
    expected: int
    counts: dict[str, int]  # by PeriodState (a str): every state, zero or more
    ranges: tuple[Range, ...]
    last_success: datetime | None
    evidence: bool = False  # the job has an evidence query: unverified/untracked are known
    # why the job's evidence query could not be read (then its evidence states are not known)
    evidence_error: str | None = None
    keys_error: str | None = None  # why its keys query failed (scanned on the keys read last)
    # what each blocked range waits for, by its first period: "export … (failed)"
    blocked_by: tuple[tuple[datetime, str], ...] = ()
    # a job with keys: how many keys were expected in the window, each key's ranges, and the
    # keys of each of ``ranges`` (which then group the keys' ranges of one state and span)
    keys: int = 0
    key_ranges: tuple[KeyRange, ...] = ()
    range_keys: tuple[tuple[str, ...], ...] = ()
    paused_keys: tuple[str, ...] = ()  # the keys asked for that are paused (`pause --key`)
    # the job's one name for a period (Job.label): a local date, or a UTC time
    labeler: Callable[[datetime], str] = field(default=iso_utc, compare=False, repr=False)

    def label(self, start: datetime) -> str:
        return self.labeler(start)

    @functools.cached_property
    def _keys_by_range(self) -> dict[tuple[str, datetime, datetime], tuple[str, ...]]:
        return {
            (r.state, r.first, r.last): held
            for r, held in zip(self.ranges, self.range_keys, strict=False)
        }

    def keys_in(self, gap: Range) -> tuple[str, ...] | None:
        """The keys a range of a job with keys groups (None for a job without keys)."""
        if not self.keys and not self.range_keys:
            return None
        return self._keys_by_range.get((gap.state, gap.first, gap.last), ())

    def waits(self, gap: Range) -> str | None:
        """What a blocked range waits for (``export … (failed)``); None for any other."""
        if gap.state != PeriodState.blocked:
            return None
        return next((said for first, said in self.blocked_by if first == gap.first), None)

    @property
    def islands(self) -> tuple[Range, ...]:
        """``ranges``, by its old name (catchup 0.1)."""
        return self.ranges

    @property
    def gaps(self) -> tuple[Range, ...]:
        """Missing, failed, exhausted and stale runs; none for a paused job."""
        if self.paused:
            return ()
        return tuple(i for i in self.ranges if i.state in GAP_STATES)


@dataclass(frozen=True)
class TickLeft:
    """The gap periods a tick left: to later ticks by ``max_per_tick``, (job, count); before
    each job's ``catchup_window`` (a replay's, never a tick's), (job, count, the first's start)."""

    later: tuple[tuple[str, int], ...] = ()
    outside: tuple[tuple[str, int, datetime], ...] = ()


@dataclass(frozen=True)
class EvidenceState:
    """What earlier scans verified of a job's evidence (``evidence_state``): every row that
    finished by ``verified_at`` in the job's periods before ``verified_until`` had evidence."""

    job_id: int
    signature: str
    verified_until: datetime
    verified_at: datetime


@dataclass(frozen=True)
class ScanReport:
    generated_at: datetime
    since: datetime
    until: datetime
    jobs: tuple[JobScan, ...]
    pulse: Pulse | None = None  # the scheduler's pulse, read in the same call
    calendars: tuple[Calendar, ...] = ()  # one per job, when asked for
    failover: Failover | None = None  # the ledger's last failover: its periods may be suspect
    keys_failed: tuple[KeysFailure, ...] = ()  # keyed jobs whose keys query failed

    @property
    def health(self) -> Pulse | None:
        """``pulse``, by its old name (catchup 0.1)."""
        return self.pulse

    @property
    def has_gaps(self) -> bool:
        return any(job.gaps for job in self.jobs)


@dataclass(frozen=True)
class Calendar:
    """A job's periods as a grid for people: one cell per day (rows are months) or per hour
    (rows are days); each cell holds the worst state of the periods it touches, or None."""

    job: str
    unit: Literal["day", "hour"]
    rows: tuple[tuple[str, tuple[str | None, ...]], ...]
    truncated: bool
    timezone: str = "UTC"  # the zone whose local days and hours the grid shows
    # a keyed job's: how many of its keys have a period in a gap in each cell, row by row
    keys: int = 0
    key_gaps: tuple[tuple[int, ...], ...] = ()
    gap_key: tuple[tuple[str, ...], ...] = ()  # of those cells, the key when there is one


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


class Unclaimed:
    """A next period handed over without a claim (claim it first): unlike ``None``, which says
    its claim was tried and found nothing to do."""


UNCLAIMED = Unclaimed()

# What a hand-off brings for the next period: its ``Claim`` (won in the transaction that
# recorded the last one), ``UNCLAIMED`` (not tried: claim it the ordinary way), or ``None``
# (tried, and there was nothing to do).
type HandOff = Claim | Unclaimed | None


@dataclass(frozen=True)
class ClaimRules:
    """How far a command's claims reach past the ordinary, one bundle through the claim path:
    ``ignore_backoff`` (a person asked: a failed period is retried at once, not after its
    backoff), ``retry_exhausted`` (also a period with no attempts left), ``ignore_evidence``
    (also a period whose output exists though the ledger never saw it run)."""

    ignore_backoff: bool = False
    retry_exhausted: bool = False
    ignore_evidence: bool = False


ORDINARY = ClaimRules()  # what a tick claims: due periods, backoffs waited out, attempts left
