"""The one table of a ``[jobs.NAME]`` table's settings: :data:`JOB_KEYS` (default, what each
accepts, what it means), which the parser, ``make_job``, the ``Job`` defaults and the
configuration reference all read. (A setting is a "job key" in code; a job's ``keys`` are the
tenants, regions or shards it runs a period for each.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

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
        "what runs: placeholders {job} {key} {period} {period_start} {period_end} {attempt}",
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
        "forbid, forbid-job or allow",
        "forbid: a period waits while an earlier one of the job (of its key) runs; forbid-job: "
        "of any key",
        default="forbid",
        choices=("forbid", "forbid-job", "allow"),
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
        "a SELECT of one date or timestamp column (with keys: the key, then the date)",
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
        "keys",
        "other",
        "a list of strings, or a SELECT of a key column (and a date or timestamp column)",
        "one period per key (tenant, region, shard): the keys, and from when each is expected",
    ),
    JobKey(
        "keys_dsn",
        "other",
        "a DSN",
        "where the keys query runs (default: the ledger's database)",
    ),
    JobKey(
        "keys_timeout",
        "duration",
        "a duration",
        "how long one read of the keys query may take, its rows compared with the keys held"
        " included (past it the read fails: the job goes on with the keys read last, if any)",
        default="30s",
        at_least="1s",
    ),
    JobKey(
        "renamed_from",
        "other",
        "a job name",
        "the ledger's old name for this job: renamed on the first write",
    ),
    JobKey(
        "lane",
        "text",
        "a lane's name from [scheduler.lanes]",
        "the scheduler's workers its periods run on (default: the default lane, --workers)",
    ),
    JobKey(
        "exclude",
        "other",
        'a list of dates, ranges A..B, "RRULE:…" day rules, cron specs or "calendar:NAME"',
        "periods nobody expects (holidays, maintenance): one whose start falls in one is "
        "excluded, never run and never a gap",
    ),
    JobKey(
        "ping",
        "other",
        'a UUID like "5bf66975-d4c7-4bf5-bcc8-b8d8a82ea278"',
        "its own cron reports each run by a ping (healthchecks' format), which settles its "
        "period; without command or call catchup never runs it (an observed job)",
    ),
    JobKey(
        "not_renamed",
        "flag",
        "true or false",
        "a new job, not a renamed one: runs though its schedule is that of a job the ledger "
        "has and the config no longer names (such a job is held: nothing of it runs)",
        default=False,
    ),
    JobKey(
        "log_output",
        "flag",
        "true or false",
        "what it prints under tick, replay and the scheduler also goes to catchup's stderr, "
        "each line prefixed job= key= period= attempt= (at most 1,000 lines of 4 KiB per "
        "attempt, control characters escaped); its tail is kept in the ledger either way",
        default=False,
    ),
)
JOB_KEY = {key.name: key for key in JOB_KEYS}


def default(name: str) -> Any:
    """The default of the job key ``name``, as a ``Job`` holds it."""
    key = JOB_KEY[name]
    if key.kind == "duration" and key.default is not None:
        return parse_duration(key.default, allow_zero=key.zero)
    return key.default


DEFAULT: dict[str, Any] = {key.name: default(key.name) for key in JOB_KEYS}
