"""What each operation of the facade returns, and what commands report: frozen objects,
rendered by ``catchup.render`` for people and scripts, returned as they are by the Python
API (no I/O here). The rows the ledger reads are :mod:`catchup.ledger.rows`."""

from __future__ import annotations

import functools
import heapq
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal, NamedTuple

from .claims.failover import Failover, Moved
from .config.job import Job
from .maintenance.retention import CompactedRun
from .reports.explain import Explanation
from .scan.names import JsonNames
from .scan.targets import KeyCounts, KeyRange, KeyRow, KeysFailure
from .schedule import Period, iso_utc
from .scheduler.pulsefacts import Pulse
from .vocabulary import (
    GAP_STATES,
    EventAction,
    JobChange,
    OutcomeStatus,
    PeriodState,
    PingKind,
    PingVerdict,
)

if TYPE_CHECKING:
    from .ledger.rows import (
        Claim,
        EventRow,
        FailureRow,
        HistoryRow,
        RunningRow,
        RunRow,
        Unconfigured,
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
    # what excluded each excluded range, by its first period: "bank-holidays", or "a window
    # recorded by ana: db migration" (catchup/scan/excluded.py)
    excluded_by: tuple[tuple[datetime, str], ...] = ()
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

    def failed_keys(self, most: int) -> list[tuple[str, int]]:
        """The ``most`` keys with the most failed or exhausted periods, with how many (the
        most first, then by key): a range of several keys holds as many periods of each."""
        counts: dict[str, int] = {}
        for gap in self.gaps:
            if gap.state not in (PeriodState.failed, PeriodState.exhausted):
                continue
            held = self.keys_in(gap) or ()
            for key in held:
                counts[key] = counts.get(key, 0) + gap.periods // len(held)
        return heapq.nsmallest(most, counts.items(), key=lambda kv: (-kv[1], kv[0]))

    def waits(self, gap: Range) -> str | None:
        """What a blocked range waits for (``export … (failed)``); None for any other."""
        if gap.state != PeriodState.blocked:
            return None
        return next((said for first, said in self.blocked_by if first == gap.first), None)

    def excluder(self, gap: Range) -> str | None:
        """What excluded an excluded range (``bank-holidays``); None for any other."""
        if gap.state != PeriodState.excluded:
            return None
        return next((said for first, said in self.excluded_by if first == gap.first), None)

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
class ScanReport:
    generated_at: datetime
    since: datetime
    until: datetime
    jobs: tuple[JobScan, ...]
    pulse: Pulse | None = None  # the scheduler's pulse, read in the same call
    calendars: tuple[Calendar, ...] = ()  # one per job, when asked for
    failover: Failover | None = None  # the ledger's last failover: its periods may be suspect
    keys_failed: tuple[KeysFailure, ...] = ()  # keyed jobs whose keys query failed
    metric_keys: int = 5  # [serve] metric_keys: the keys per job catchup_failed_keys names

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
    (also a period whose output exists though the ledger never saw it run),
    ``include_excluded`` (also a period nobody expects: its job's ``exclude``, a window)."""

    ignore_backoff: bool = False
    retry_exhausted: bool = False
    ignore_evidence: bool = False
    include_excluded: bool = False


ORDINARY = ClaimRules()  # what a tick claims: due periods, backoffs waited out, attempts left


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
class Pinged:
    """What one ping of an observed job did (``catchup ping``, ``/ping/…``): the period it
    settled (None when none is due yet), how, and the attempt it recorded."""

    job: str
    key: str
    kind: PingKind
    period: Period | None
    label: str | None
    verdict: PingVerdict
    attempt: int | None
    detail: str

    @property
    def settled(self) -> bool:
        """It wrote its period's state (a start, a success, a failure)."""
        return self.verdict in (PingVerdict.started, PingVerdict.succeeded, PingVerdict.failed)


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
    attempt: int | None = None  # the one attempt asked for (--attempt), if one was
    key: str = ""  # the one key asked for (--key), if one was

    def label(self, start: datetime) -> str:
        return self.labeler(start)


@dataclass(frozen=True)
class KeysReport:
    """``catchup keys``: a job's keys in key order, with when each was first and last seen and
    from when (and, once gone, until when) it is expected: all of them, or a page of them.
    ``counts`` counts them all; ``after``, the key the page starts after (None or ``""``:
    the first page); ``next_after`` is the page's last key when more follow (pass it as
    ``after`` for the next page), else None."""

    job: str
    now: datetime
    keys: tuple[KeyRow, ...]
    counts: KeyCounts
    next_after: str | None = None
    after: str | None = None
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
class Window:
    """A window recorded afterwards (``catchup exclude``), or undone: ``[first, until)`` of a
    job's periods (of ``key``; None: every key), how many period starts fall in it, and why."""

    job: str
    key: str | None
    first: datetime
    until: datetime
    periods: int
    reason: str
    actor: str
    new: bool = True  # False: the same window was recorded (and live) already


@dataclass(frozen=True)
class Windows:
    """The result of ``exclude``: the windows recorded (``exclude``) or undone (``include``)."""

    action: EventAction
    windows: tuple[Window, ...]

    @property
    def periods(self) -> int:
        return sum(w.periods for w in self.windows)


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


@dataclass(frozen=True)
class KeysChange:
    """A keyed job's keys as its (new) keys query returns them, against those the ledger
    recorded: how many came and went, the first few of each (in key order)."""

    added: int
    gone: int
    first_added: tuple[str, ...]
    first_gone: tuple[str, ...]
    error: str | None = None  # why the keys query could not be read


@dataclass(frozen=True)
class JobPlan:
    """``catchup plan``: one job's change, and what the first tick after it would run."""

    job: str
    change: JobChange
    was: str | None = None  # renamed from, or (held) the job whose schedule it has
    differs: tuple[str, ...] = ()  # what differs, as people name it ("schedule", "catchup")
    at_once: tuple[datetime, ...] = ()  # period starts the first tick runs, not run before
    at_once_keys: int = 0  # how many (key, period)s of them, for a job with keys
    already: int = 0  # periods the first tick runs that the current config's would run too
    left: int = 0  # gap periods max_per_tick leaves for later ticks
    gaps: int = 0  # gap periods in its whole history (replay's), under the new config
    gaps_before: int | None = None  # the same under the current config (None: not known)
    expected: int = 0  # periods expected from its start to now (excluded ones not counted)
    expected_before: int | None = None
    excluded: int = 0  # periods its exclude excludes, from its start to now
    excluded_before: int | None = None
    keys: KeysChange | None = None
    last_success: datetime | None = None  # a removed job's, from the ledger
    paused: bool = False  # nothing of it runs until `catchup resume`
    back: bool = False  # added to the config again: the ledger has its past periods
    labeler: Callable[[datetime], str] = field(default=iso_utc, compare=False, repr=False)

    def label(self, start: datetime) -> str:
        return self.labeler(start)

    @property
    def runs(self) -> int:
        """How many periods (a keyed job: (key, period)s) the change runs at once."""
        return self.at_once_keys or len(self.at_once)


@dataclass(frozen=True)
class Plan:
    """``catchup plan NEW.toml``: what the change from the current config (``against``, None:
    the ledger alone) to ``config`` does, job by job, on the database clock at ``now``."""

    config: str
    against: str | None
    ledger: str  # the database and schema, as ``Connected`` names it (no password)
    now: datetime
    jobs: tuple[JobPlan, ...]
    # the projects the ledger records as defining its jobs, other than this config's: the
    # change would be refused as deployed (one job, one definition) unless it is that file
    others: tuple[str, ...] = ()

    @property
    def runs(self) -> int:
        return sum(job.runs for job in self.jobs)
