"""A configured job and the config that holds the jobs: frozen values, no parsing here. The
table of a job's settings, :data:`JOB_KEYS`, is in :mod:`catchup.config.settings`."""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..postgres.dsn import hidden
from ..schedule import Period, Schedule, Timeline, human_label, iso_utc, period_label, zone
from ..schedule.exclusions import Entry, Excluded, entry_spans
from .settings import DEFAULT as _DEFAULT
from .settings import JOB_KEY, JOB_KEYS, JobKey, default
from .upstream import Dependency

__all__ = ["JOB_KEY", "JOB_KEYS", "Config", "Job", "JobKey", "default"]


@dataclass(frozen=True)
class Job:
    """One configured job. Periods are keyed in UTC.

    ``schedule`` is the configured schedule (bound to ``start``); ``timeline`` is every schedule
    the job has had, as the ledger recorded them (just ``schedule`` until a session loads it).
    """

    name: str
    schedule: Schedule
    start: datetime
    timeline: Timeline
    # the local time ``start`` was written as: a start inside a DST gap names the instant the
    # gap's length later, but schedules counted from it keep the written time
    start_wall: datetime | None = None
    delay: timedelta = _DEFAULT["delay"]
    command: tuple[str, ...] | None = None
    call: str | Callable[..., object] | None = None  # "module:function", or a callable in code
    timeout: timedelta | None = None
    lease: timedelta = _DEFAULT["lease"]
    kill_grace: timedelta = _DEFAULT["kill_grace"]
    max_attempts: int = _DEFAULT["max_attempts"]
    retry_backoff: timedelta = _DEFAULT["retry_backoff"]
    overlap: Literal["forbid", "forbid-job", "allow"] = _DEFAULT["overlap"]
    catchup: Literal["all", "latest", "none"] = _DEFAULT["catchup"]
    catchup_window: timedelta = _DEFAULT["catchup_window"]
    max_per_tick: int = _DEFAULT["max_per_tick"]
    timezone: str = _DEFAULT["timezone"]
    spread: timedelta = timedelta(0)  # the stable per-job part of delay that spread added
    # what the job leaves behind: a SELECT of one date or timestamptz column
    # (docs/how-to/adopt-a-cron-job.md)
    evidence: str | None = None
    evidence_dsn: str | None = None  # where it runs; None: the ledger's database
    verify: bool = _DEFAULT["verify"]  # a success without evidence for its period is a failure
    # where a command runs and a relative command[0] or a call's module is found: the config
    # file's folder (or ``workdir`` in it); None: the working directory of the process
    workdir: Path | None = None
    # the name the ledger knew it by: the first command that sees both renames it there
    renamed_from: str | None = None
    # new to the ledger, not a renamed job: never held (catchup/changes/held.py) for its schedule
    not_renamed: bool = False
    # what it prints under tick, replay and the scheduler also goes to catchup's stderr, a
    # prefixed line at a time (catchup/execution/output.py: LoggedLines)
    log_output: bool = False
    # the scheduler's lane of workers its periods run on ([scheduler.lanes]); None: the default
    lane: str | None = None
    # its cron's pings settle its periods (catchup/pings/); None: it has none. Out of the repr:
    # whoever knows it can ping
    ping: str | None = field(default=None, repr=False)
    # the days, ranges and rules whose periods nobody expects (catchup/schedule/exclusions.py)
    exclude: tuple[Entry, ...] = ()
    # the upstream jobs whose periods each period waits for (docs/how-to/chain-jobs.md)
    after: tuple[Dependency, ...] = ()
    when_outdated: Literal["report", "rerun"] = _DEFAULT["when_outdated"]
    # one period per key (docs/how-to/per-key-periods.md): the keys as a list, or a SELECT of a
    # key column and an optional date column (from when the key is expected); None: unkeyed
    keys: tuple[str, ...] | str | None = None
    keys_dsn: str | None = None  # where the keys query runs; None: the ledger's database
    keys_timeout: timedelta = _DEFAULT["keys_timeout"]  # how long one read of it may take
    # the key of this one series of periods ('' for an unkeyed job, or a keyed job as a whole)
    key: str = ""
    # the keys a command was asked about (--key); empty: every key
    selected_keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # its DSNs shown without their password by the job's repr, and by all that holds it
        object.__setattr__(self, "keys_dsn", hidden(self.keys_dsn))
        object.__setattr__(self, "evidence_dsn", hidden(self.evidence_dsn))

    @property
    def observed(self) -> bool:
        """A job catchup never runs: no command or call, its cron's pings settle its periods."""
        return self.command is None and self.call is None

    @property
    def keyed(self) -> bool:
        """Whether the job runs one period per key."""
        return self.keys is not None

    def for_key(self, key: str) -> Job:
        """This job's series of periods for ``key``: what the claim path runs (a copy with the
        key set: thousands of keys copy one job, and nothing of it depends on its key)."""
        # copy.copy's own way (a new object, this one's __dict__), without its generic
        # machinery: a replay of a million keys makes a million of them
        keyed = object.__new__(type(self))
        keyed.__dict__.update(self.__dict__)
        keyed.__dict__["key"] = key
        return keyed

    @property
    def whole_job_overlap(self) -> bool:
        """overlap = "forbid-job": a period waits while any key's other period runs."""
        return self.overlap == "forbid-job"

    @property
    def definition(self) -> dict[str, object]:
        """What the ledger records of this job's definition, and what another project must
        agree on to share the job: when it runs (schedule, zone, start) and what it runs. Of a
        command, only its program and a digest of the whole (its arguments may hold a
        secret; the ledger and the lines that name a clash never show them)."""

        if self.command is not None:
            runs = self.command[0]
            whole = json.dumps(list(self.command))
        elif self.call is None:  # observed: its own cron runs it
            runs = whole = "observed (pings)"
        elif callable(self.call):
            module = getattr(self.call, "__module__", None) or "?"
            runs = whole = f"{module}:{getattr(self.call, '__qualname__', repr(self.call))}"
        else:
            runs = whole = str(self.call)
        return {
            "schedule": self.schedule.text,
            "timezone": self.timezone,
            "start": iso_utc(self.start),
            "runs": runs,
            "runs_sha256": hashlib.sha256(whole.encode("utf-8", "surrogatepass")).hexdigest(),
        }

    @property
    def anchor(self) -> datetime:
        """The first period's start."""
        return self.timeline.first

    def label(self, start: datetime) -> str:
        """The name people see for the period starting at ``start``, in every command and
        report (:func:`catchup.schedule.human_label`)."""
        return human_label(self.timeline.schedule_at(start), start)

    def period_value(self, start: datetime) -> str:
        """``{period}`` (and ``CATCHUP_PERIOD``) for the period starting at ``start``."""
        return period_label(self.timeline.schedule_at(start), start)

    def excluded(self, lo: datetime, hi: datetime) -> Excluded:
        """What the job's ``exclude`` excludes of ``[lo, hi)`` (windows recorded afterwards are
        the ledger's: :mod:`catchup.scan.excluded`)."""
        if not self.exclude:
            return Excluded()
        return entry_spans(self.exclude, zone(self.timezone), lo, hi)

    def period_starting(self, start: datetime) -> Period:
        """The period that starts at ``start``; a :class:`ConfigError` saying why when none."""
        period = self.timeline.containing(start)
        if period is None:
            raise ConfigError(
                f"{self.name}: {iso_utc(start)} is before the job's first period "
                f"({self.label(self.anchor)})"
            )
        if period.start != start:
            raise ConfigError(
                f"{self.name}: {iso_utc(start)} is not a period start of schedule "
                f"{self.timeline.schedule_at(start).text!r}; the period containing it starts "
                f"{self.label(period.start)}"
            )
        return period


@dataclass(frozen=True)
class Webhook:
    """Where alerts go: a name (what logs and the ledger say), the URL (a secret: it may hold
    a token, never printed) and the body's format."""

    name: str
    url: str = field(repr=False)  # its path and query may hold a token
    format: Literal["json", "slack"] = "json"

    def describe(self) -> str:
        """The webhook as logs may show it: its name and host, never its path or query."""

        return f"{self.name} ({urlsplit(self.url).hostname or '?'})"


@dataclass(frozen=True)
class Alerts:
    """``[alerts]``: the webhooks told of new, grown and closed gap ranges."""

    webhooks: tuple[Webhook, ...] = ()
    max_per_minute: int = 6  # posts per webhook; more wait their turn


# the scheduler's lane of the jobs that name none: its workers are --workers
DEFAULT_LANE = "default"


@dataclass(frozen=True)
class Serve:
    """``[serve]``: what the status page and the alerts call this deployment (never its
    database), and where its page is reached from outside, for links in alerts."""

    title: str | None = None  # None: the config's folder name
    public_url: str | None = None  # e.g. https://catchup.example.com (no trailing slash)
    # /ping/<ping_key>/<job>: healthchecks' slug form; a secret, out of the repr
    ping_key: str | None = field(default=None, repr=False)
    # how many keys of each job /metrics names in catchup_failed_keys (the most failed first)
    metric_keys: int = 5


@dataclass(frozen=True)
class Project:
    """What names a project's database on the embedded server: its ``[project] name`` when it
    has one (two folders of one project share a ledger), else its folder; its schema and its
    jobs find a ledger an older catchup kept elsewhere."""

    folder: Path
    schema: str
    jobs: tuple[str, ...]
    name: str | None = None


@dataclass(frozen=True)
class Config:
    path: Path | None
    jobs: Mapping[str, Job] = field(default_factory=dict)
    dsn: str | None = None
    schema: str = "catchup"
    embedded: bool = True  # [database] embedded = false: never fall back to a local server
    # [database] durable_claims = true: claims and finishes wait for a synchronous standby
    durable_claims: bool = False
    schema_given: bool = False  # [database] schema (or schema=) was set, not the default
    alerts: Alerts | None = None
    # jobs declared in code, without a config file: what names their project (a ledger of its
    # own on the embedded server, as a config's folder gives one)
    origin: Path | None = None
    # ``[project] name`` (or ``project=`` in code): what the ledger records as this project
    project_name: str | None = None
    # ``[ledger] keep_detail``: a settled run's detail older than this is compacted (None: kept)
    keep_detail: timedelta | None = None
    serve: Serve = field(default_factory=Serve)
    # ``[scheduler.lanes]``: each lane's own workers (a job's ``lane``); the default lane has
    # the scheduler's --workers
    lanes: Mapping[str, int] = field(default_factory=dict)
    # --log-output (tick, replay, the scheduler): every job's output as if it had log_output
    log_output: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "dsn", hidden(self.dsn))  # its repr: no password

    def lane_jobs(self) -> dict[str, list[str]]:
        """The scheduler's lanes that have jobs, with their jobs' names (in the config's
        order): the default lane's, then the others by name."""
        found: dict[str, list[str]] = {}
        for name, job in self.jobs.items():
            found.setdefault(job.lane or DEFAULT_LANE, []).append(name)
        return dict(sorted(found.items(), key=lambda item: (item[0] != DEFAULT_LANE, item[0])))

    @property
    def title(self) -> str:
        """What pages and alerts call this deployment: ``[serve] title``, else ``[project]
        name``, else the config's folder name ("catchup" without either)."""
        if self.serve.title is not None:
            return self.serve.title
        if self.project_name is not None:
            return self.project_name
        if self.path is not None:
            return self.path.resolve().parent.name or "catchup"
        return self.project_name or "catchup"

    @property
    def registrant(self) -> str:
        """What the ledger records as the project that defined these jobs: its name, else
        its config file, else the script that declared them."""
        if self.project_name is not None:
            return self.project_name
        if self.path is not None:
            return str(self.path.resolve())
        return str(self.origin) if self.origin is not None else "python"

    @property
    def project(self) -> Project | None:
        """What gives this project a database of its own on the embedded server (its name, or
        its folder); None when a schema was chosen (then it is the user's choice) or there is
        no config file."""
        if self.schema_given:
            return None
        folder = self.path.resolve().parent if self.path is not None else self.origin
        if folder is None:
            return None
        return Project(folder, self.schema, tuple(sorted(self.jobs)), self.project_name)

    @property
    def renames(self) -> dict[str, str]:
        """``renamed_from``: each old name the ledger may still have, and the job's name now."""
        return {job.renamed_from: job.name for job in self.jobs.values() if job.renamed_from}

    def job(self, name: str) -> Job:
        try:
            return self.jobs[name]
        except KeyError:
            if name in self.renames:
                raise ConfigError(
                    f"{name} was renamed to {self.renames[name]} (renamed_from): its runs and "
                    "history are under that name now"
                ) from None
            known = ", ".join(sorted(self.jobs)) or "none"
            hint = difflib.get_close_matches(name, list(self.jobs), n=1)
            also = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ConfigError(f"unknown job {name!r}{also}; configured jobs: {known}") from None
