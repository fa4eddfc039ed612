"""A configured job and the config that holds the jobs: frozen values, no parsing here; and
:data:`JOB_KEYS`, the one table of a ``[jobs.NAME]`` table's keys (default, what each accepts,
what it means) that the parser, ``make_job``, the ``Job`` defaults and the configuration
reference all read."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from .errors import ConfigError
from .schedule import (
    Period,
    Schedule,
    Timeline,
    human_label,
    iso_utc,
    period_label,
)
from .upstream import Dependency
from .values import parse_duration


@dataclass(frozen=True)
class JobKey:
    """One key of a ``[jobs.NAME]`` table."""

    name: str
    kind: Literal["text", "duration", "count", "choice", "flag", "other"]
    accepts: str  # what a value is: the words of the error messages and of the reference
    means: str  # one line, for the reference
    default: str | int | bool | None = None  # as written in catchup.toml; None: there is none
    required: bool = False
    zero: bool = False  # a duration that may be 0s
    at_least: str | None = None  # a duration's floor, as written
    most: int | None = None  # a count's ceiling (every count is at least 1)
    choices: tuple[str, ...] = ()


JOB_KEYS: tuple[JobKey, ...] = (
    JobKey(
        "schedule",
        "other",
        "hourly, daily, weekly, monthly, 'every N minutes', cron or RRULE",
        "when periods begin, on the wall clock of `timezone`",
        required=True,
    ),
    JobKey(
        "start",
        "other",
        'a date or time, like "2026-10-01"',
        "the first period: the first boundary at or after this",
        required=True,
    ),
    JobKey(
        "timezone",
        "text",
        'an IANA name like "Europe/Berlin"',
        "the schedule's wall clock (periods stay UTC)",
        default="UTC",
    ),
    JobKey(
        "command",
        "other",
        "a non-empty list of strings (argv; no shell)",
        "what runs: placeholders {job} {period} {period_start} {period_end} {attempt}",
    ),
    JobKey(
        "call",
        "other",
        '"module:function"',
        "what runs instead of a command: a Python function given a JobContext",
    ),
    JobKey(
        "workdir",
        "other",
        "a folder, relative to the config file's",
        "where the job runs (default: the config file's folder)",
    ),
    JobKey(
        "delay",
        "duration",
        "a duration",
        "a period is due this long after it ends",
        default="0s",
        zero=True,
    ),
    JobKey(
        "spread",
        "other",
        'true, false or a bound like "15m"',
        "add a stable per-job delay (true: below 10m)",
        default=False,
    ),
    JobKey(
        "timeout",
        "duration",
        "a duration",
        "an attempt running longer is stopped (the lease still catches dead runners)",
    ),
    JobKey(
        "lease",
        "duration",
        "a duration",
        "how long a claim holds without a heartbeat (renewed every third of it)",
        default="60s",
        at_least="1s",
    ),
    JobKey(
        "kill_grace",
        "duration",
        "a duration",
        "SIGTERM, then this long, then SIGKILL",
        default="10s",
    ),
    JobKey(
        "max_attempts",
        "count",
        "a whole number",
        "failures before a period is exhausted",
        default=3,
        most=1000,
    ),
    JobKey(
        "retry_backoff",
        "duration",
        "a duration",
        "wait before a retry; doubles per failure, capped at 6h",
        default="5m",
        zero=True,
    ),
    JobKey(
        "overlap",
        "choice",
        "forbid or allow",
        "forbid: a period waits while an earlier one of the job runs",
        default="forbid",
        choices=("forbid", "allow"),
    ),
    JobKey(
        "catchup",
        "choice",
        "all, latest or none",
        "what `tick` does with older due periods",
        default="all",
        choices=("all", "latest", "none"),
    ),
    JobKey(
        "catchup_window",
        "duration",
        "a duration",
        "`tick` leaves older gaps to `replay`; `scan` still reports them",
        default="30d",
    ),
    JobKey(
        "max_per_tick",
        "count",
        "a whole number",
        "at most this many periods of the job a tick (a flood guard)",
        default=100,
        most=100_000,
    ),
    JobKey(
        "evidence",
        "other",
        "a SELECT of one date or timestamp column",
        "what the job leaves behind: finds untracked and unverified periods",
    ),
    JobKey(
        "evidence_dsn",
        "other",
        "a DSN",
        "where the evidence query runs (default: the ledger's database)",
    ),
    JobKey(
        "verify",
        "flag",
        "true or false",
        "a run that exits 0 but leaves no evidence for its period is failed",
        default=False,
    ),
    JobKey(
        "after",
        "other",
        'a list like ["export", { job = "x", periods = "previous" }]',
        "the jobs whose periods each period waits for: every one overlapping it (or, with "
        'periods = "previous", the latest one before it)',
    ),
    JobKey(
        "when_outdated",
        "choice",
        "report or rerun",
        "a period an upstream re-run made outdated: reported (report), or run again by tick",
        default="report",
        choices=("report", "rerun"),
    ),
    JobKey(
        "renamed_from",
        "other",
        "a job name",
        "the ledger's old name for this job: renamed on the first write",
    ),
)
JOB_KEY = {key.name: key for key in JOB_KEYS}


def default(name: str) -> Any:
    """The default of the job key ``name``, as a ``Job`` holds it."""
    key = JOB_KEY[name]
    if key.kind == "duration" and key.default is not None:
        return parse_duration(key.default, allow_zero=key.zero)
    return key.default


_DEFAULT: dict[str, Any] = {key.name: default(key.name) for key in JOB_KEYS}


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
    overlap: Literal["forbid", "allow"] = _DEFAULT["overlap"]
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
    # the upstream jobs whose periods each period waits for (docs/how-to/chain-jobs.md)
    after: tuple[Dependency, ...] = ()
    when_outdated: Literal["report", "rerun"] = _DEFAULT["when_outdated"]

    @property
    def definition(self) -> dict[str, object]:
        """What the ledger records of this job's definition, and what another project must
        agree on to share the job: when it runs (schedule, zone, start) and what it runs. Of a
        command, only its program and a digest of the whole (its arguments may hold a
        secret; the ledger and the lines that name a clash never show them)."""
        import hashlib
        import json

        if self.command is not None:
            runs = self.command[0]
            whole = json.dumps(list(self.command))
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
    url: str
    format: Literal["json", "slack"] = "json"

    def describe(self) -> str:
        """The webhook as logs may show it: its name and host, never its path or query."""
        from urllib.parse import urlsplit

        return f"{self.name} ({urlsplit(self.url).hostname or '?'})"


@dataclass(frozen=True)
class Alerts:
    """``[alerts]``: the webhooks told of new, grown and closed gap ranges."""

    webhooks: tuple[Webhook, ...] = ()
    max_per_minute: int = 6  # posts per webhook; more wait their turn


@dataclass(frozen=True)
class Config:
    path: Path | None
    jobs: Mapping[str, Job] = field(default_factory=dict)
    dsn: str | None = None
    schema: str = "catchup"
    embedded: bool = True  # [database] embedded = false: never fall back to a local server
    schema_given: bool = False  # [database] schema (or schema=) was set, not the default
    alerts: Alerts | None = None
    # jobs declared in code, without a config file: what names their project (a ledger of its
    # own on the embedded server, as a config's folder gives one)
    origin: Path | None = None
    # ``[project] name`` (or ``project=`` in code): what the ledger records as this project
    project_name: str | None = None

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
    def project(self) -> tuple[Path, str, tuple[str, ...]] | None:
        """What gives this project a database of its own on the embedded server: its folder,
        its schema and its jobs; None when a schema was chosen (then it is the user's choice)
        or there is no config file."""
        if self.schema_given:
            return None
        if self.path is not None:
            return (self.path.resolve().parent, self.schema, tuple(sorted(self.jobs)))
        if self.origin is not None:
            return (self.origin, self.schema, tuple(sorted(self.jobs)))
        return None

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
