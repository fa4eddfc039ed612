"""``catchup.toml`` → validated, frozen jobs. Every problem is reported with file and line."""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import string
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any, Literal

from .errors import ConfigError
from .schedule import (
    Period,
    Schedule,
    ScheduleError,
    Timeline,
    as_utc,
    human_label,
    iso_utc,
    parse_schedule,
    period_label,
    to_utc,
    to_wall,
    zone,
)

CONFIG_NAME = "catchup.toml"
JOB_NAME = re.compile(r"^[^\W][\w.-]{0,63}$")
SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
PLACEHOLDERS = frozenset({"job", "period", "period_start", "period_end", "attempt"})
_DURATION = re.compile(r"(\d{1,12})\s*(ms|s|m|h|d|w)")
# Bounds, so that nothing parsed can carry a computed time out of PostgreSQL's (or Python's)
# range: durations up to ten years, dates from 1900 to 2199, counts to sensible sizes.
MAX_DURATION = timedelta(days=3650)
MAX_INTS = {"max_attempts": 1000, "max_per_tick": 100_000}
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

DEFAULTS: dict[str, Any] = {
    "delay": "0s",
    "timeout": None,
    "lease": "60s",
    "kill_grace": "10s",
    "max_attempts": 3,
    "retry_backoff": "5m",
    "overlap": "forbid",
    "catchup": "all",
    "catchup_window": "30d",
    "max_per_tick": 100,
    "timezone": "UTC",
    "spread": False,
}
JOB_KEYS = frozenset({"schedule", "start", "command", "call", *DEFAULTS})
DATABASE_KEYS = frozenset({"dsn", "schema", "embedded"})
# PostgreSQL's own schemas: a ledger there would mix with the catalog or with everyone's tables
SYSTEM_SCHEMAS = frozenset({"public", "information_schema"})


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
    delay: timedelta = timedelta(0)
    command: tuple[str, ...] | None = None
    call: str | Callable[..., object] | None = None  # "module:function", or a callable in code
    timeout: timedelta | None = None
    lease: timedelta = timedelta(seconds=60)
    kill_grace: timedelta = timedelta(seconds=10)
    max_attempts: int = 3
    retry_backoff: timedelta = timedelta(minutes=5)
    overlap: Literal["forbid", "allow"] = "forbid"
    catchup: Literal["all", "latest", "none"] = "all"
    catchup_window: timedelta = timedelta(days=30)
    max_per_tick: int = 100
    timezone: str = "UTC"
    spread: timedelta = timedelta(0)  # the stable per-job part of delay that spread added

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
class Config:
    path: Path | None
    jobs: Mapping[str, Job] = field(default_factory=dict)
    dsn: str | None = None
    schema: str = "catchup"
    embedded: bool = True  # [database] embedded = false: never fall back to a local server
    schema_given: bool = False  # [database] schema (or schema=) was set, not the default

    @property
    def project(self) -> tuple[Path, str, tuple[str, ...]] | None:
        """What gives this project a database of its own on the embedded server: its folder,
        its schema and its jobs; None when a schema was chosen (then it is the user's choice)
        or there is no config file."""
        if self.path is None or self.schema_given:
            return None
        return (self.path.resolve().parent, self.schema, tuple(sorted(self.jobs)))

    def job(self, name: str) -> Job:
        try:
            return self.jobs[name]
        except KeyError:
            known = ", ".join(sorted(self.jobs)) or "none"
            hint = difflib.get_close_matches(name, list(self.jobs), n=1)
            also = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ConfigError(f"unknown job {name!r}{also}; configured jobs: {known}") from None


def find_config(explicit: str | None, cwd: Path | None = None) -> Path | None:
    """``--config``, else ``CATCHUP_CONFIG``, else ``catchup.toml`` in the directory or a parent."""
    chosen = explicit or os.environ.get("CATCHUP_CONFIG")
    if chosen:
        path = Path(chosen)
        if not path.is_file():
            raise ConfigError(f"{chosen}: no such config file")
        return path
    here = (cwd or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_NAME
        if candidate.is_file():
            # shown in messages: keep it short when it is here or below
            return candidate.relative_to(here) if folder == here else candidate
    return None


def load_config(path: Path | None, *, schema: str | None = None) -> Config:
    """Read and validate ``path``; ``None`` gives an empty config (no jobs)."""
    said = None if schema is None else schema_problem(schema)
    if said is not None:
        raise ConfigError(f"schema: {said}")
    if path is None:
        return Config(path=None, schema=schema or "catchup")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_config(raw, path, schema=schema)


def parse_config(raw: bytes, path: Path, *, schema: str | None = None) -> Config:
    name = str(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{name}:{line}: not valid UTF-8 (byte {raw[exc.start]:#04x})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(_toml_error(name, str(exc), len(text.splitlines()) or 1)) from None
    lines = _KeyLines(text)
    problems: list[str] = []

    def problem(where: tuple[str, ...], message: str) -> None:
        problems.append(f"{name}:{lines.find(where)}: {message}")

    for key in data:
        if key not in ("database", "jobs"):
            problem((key,), f"unknown section or key {key!r}{_suggest(key, {'database', 'jobs'})}")

    dsn = None
    schema_name = schema or "catchup"
    database = data.get("database", {})
    if not isinstance(database, dict):
        problem(("database",), "[database] must be a table")
        database = {}
    embedded = True
    for key, value in database.items():
        where = ("database", key)
        if key not in DATABASE_KEYS:
            problem(where, f"database.{key}: unknown key{_suggest(key, DATABASE_KEYS)}")
        elif key == "embedded":
            if isinstance(value, bool):
                embedded = value
            else:
                problem(where, f"database.embedded: expected true or false, got {_type(value)}")
        elif not isinstance(value, str):
            problem(where, f"database.{key}: expected a string, got {_type(value)}")
        elif key == "dsn":
            from .db import dsn_problem

            said = dsn_problem(value)
            if said is None:
                dsn = value
            else:
                problem(where, f"database.dsn: {said}")
        elif schema is None:
            said = schema_problem(value)
            if said is None:
                schema_name = value
            else:
                problem(where, f"database.schema: {said}")

    jobs: dict[str, Job] = {}
    table = data.get("jobs", {})
    if not isinstance(table, dict):
        problem(("jobs",), "[jobs] must be a table of jobs, like [jobs.billing]")
        table = {}
    for job_name, spec in table.items():
        where = ("jobs", job_name)
        if not JOB_NAME.match(job_name):
            shown = job_name if len(job_name) <= 40 else job_name[:40] + "…"
            problem(
                where,
                f"job name {shown!r}: use up to 64 letters, digits, '_', '.' or '-', "
                "starting with a letter or digit",
            )
            continue
        if not isinstance(spec, dict):
            problem(where, f"jobs.{job_name}: expected a table like [jobs.{job_name}]")
            continue
        job = _parse_job(
            job_name, spec, lambda key, msg, j=job_name: problem(("jobs", j, key), msg)
        )
        if job is not None:
            jobs[job_name] = job
    if problems:
        raise ConfigError(problems)
    return Config(
        path=path,
        jobs=jobs,
        dsn=dsn,
        schema=schema_name,
        embedded=embedded,
        schema_given=schema is not None or "schema" in database,
    )


def schema_problem(name: str) -> str | None:
    """Why ``name`` cannot hold a ledger; None when it can."""
    if not SCHEMA_NAME.match(name):
        return f"{name[:70]!r} is not a plain lower-case identifier"
    if name in SYSTEM_SCHEMAS or name.startswith("pg_"):
        return f"{name!r} is one of PostgreSQL's own schemas; choose one for catchup, like catchup"
    return None


def _parse_job(name: str, spec: dict[str, Any], problem: Any) -> Job | None:
    count = 0

    def bad(key: str, message: str) -> None:
        nonlocal count
        count += 1
        problem(key, f"jobs.{name}.{key}: {message}")

    for key in spec:
        if key not in JOB_KEYS:
            bad(key, f"unknown key{_suggest(key, JOB_KEYS)}")
    values = {**DEFAULTS, **{k: v for k, v in spec.items() if k in JOB_KEYS}}

    timezone: str | None = None
    if not isinstance(values["timezone"], str):
        bad(
            "timezone",
            f'expected an IANA name like "Europe/Berlin", got {_type(values["timezone"])}',
        )
    else:
        try:
            zone(values["timezone"])
            timezone = values["timezone"]
        except ScheduleError as exc:
            bad("timezone", str(exc))

    schedule: Schedule | None = None
    if "schedule" not in spec:
        bad(
            "schedule", "missing (hourly, daily, weekly, monthly, 'every N minutes', cron or RRULE)"
        )
    elif not isinstance(spec["schedule"], str):
        bad("schedule", f"expected a string, got {_type(spec['schedule'])}")
    else:  # with a bad zone, still check the rest in UTC: every mistake is reported at once
        try:
            schedule = parse_schedule(spec["schedule"], timezone or "UTC")
        except ScheduleError as exc:
            bad("schedule", str(exc))

    start: datetime | None = None
    start_wall: datetime | None = None
    if "start" not in spec:
        bad("start", 'missing: the first period, like "2026-10-01"')
    else:
        try:
            start, start_wall = parse_written(spec["start"], timezone or "UTC")
        except ValueError as exc:
            bad("start", str(exc))

    command: tuple[str, ...] | None = None
    call: str | None = None
    if ("command" in spec) == ("call" in spec):
        bad("command", 'give exactly one of command (an argv list) or call ("module:function")')
    elif "command" in spec:
        raw = spec["command"]
        if not isinstance(raw, list) or not raw or not all(isinstance(a, str) for a in raw):
            bad("command", "expected a non-empty list of strings (argv; no shell)")
        else:
            for arg in raw:
                error = check_placeholders(arg)
                if error:
                    bad("command", error)
                    break
            command = tuple(raw)
    else:
        raw = spec["call"]
        if not isinstance(raw, str) or not re.match(r"^[\w.]+:[\w.]+$", raw):
            bad("call", f'expected "module:function", got {raw!r}')
        else:
            call = raw

    durations: dict[str, timedelta | None] = {}
    for key in ("delay", "timeout", "lease", "kill_grace", "retry_backoff", "catchup_window"):
        value = values[key]
        if value is None:
            durations[key] = None
            continue
        try:
            durations[key] = parse_duration(value, allow_zero=key in ("delay", "retry_backoff"))
        except ValueError as exc:
            bad(key, str(exc))
    lease = durations.get("lease")
    if lease is not None and lease < timedelta(seconds=1):
        bad("lease", "must be at least 1s (the heartbeat renews it every third of it)")

    ints: dict[str, int] = {}
    for key in ("max_attempts", "max_per_tick"):
        value = values[key]
        if isinstance(value, bool) or not isinstance(value, int):
            bad(key, f"expected a whole number, got {_type(value)}")
        elif value < 1:
            bad(key, f"must be at least 1, got {value}")
        elif value > MAX_INTS[key]:
            bad(key, f"at most {MAX_INTS[key]:,}, got {value:,}")
        else:
            ints[key] = value

    choices = {"overlap": ("forbid", "allow"), "catchup": ("all", "latest", "none")}
    for key, allowed in choices.items():
        if values[key] not in allowed:
            bad(key, f"expected one of {', '.join(allowed)}, got {values[key]!r}")
    bound: timedelta | None = None
    raw_spread = values["spread"]
    if raw_spread is True:
        bound = SPREAD_DEFAULT
    elif raw_spread is not False:
        try:
            bound = parse_duration(raw_spread)
        except ValueError:
            bad(
                "spread",
                f'expected true, false or a bound like "15m", got {_type(raw_spread)}'
                if not isinstance(raw_spread, str)
                else f"{raw_spread!r} is not a duration",
            )

    if count or schedule is None or start is None or timezone is None:
        return None
    spread = spread_offset(name, bound, schedule) if bound else timedelta(0)
    return Job(
        name=name,
        schedule=schedule.bound(start, start_wall),
        start=start,
        start_wall=start_wall,
        timeline=Timeline.single(schedule, start, start_wall),
        delay=(durations["delay"] or timedelta(0)) + spread,
        spread=spread,
        command=command,
        call=call,
        timeout=durations["timeout"],
        lease=durations["lease"] or timedelta(seconds=60),
        kill_grace=durations["kill_grace"] or timedelta(seconds=10),
        max_attempts=ints["max_attempts"],
        retry_backoff=durations["retry_backoff"] or timedelta(0),
        overlap=values["overlap"],
        catchup=values["catchup"],
        catchup_window=durations["catchup_window"] or timedelta(days=30),
        max_per_tick=ints["max_per_tick"],
        timezone=timezone,
    )


def parse_duration(value: object, *, allow_zero: bool = False) -> timedelta:
    """``90s``, ``15m``, ``2h``, ``1d``, ``1h30m`` (also ``ms`` and ``w``)."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f'expected a duration like "90s", "15m", "2h", got {_type(value)}')
    text = value.strip().lower()
    pos = 0
    seconds = 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos and text[pos : match.start()].strip():
            break
        seconds += int(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not text or text[pos:].strip() or pos == 0:
        raise ValueError(f'{value!r} is not a duration like "90s", "15m", "2h" or "1d"')
    if seconds == 0 and not allow_zero:
        raise ValueError(f"{value!r}: must be longer than zero")
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"{value!r} is longer than the longest allowed, 3650d (ten years)")
    return timedelta(seconds=seconds)


def parse_instant(value: object, timezone: str = "UTC") -> datetime:
    """A TOML date/datetime or an ISO 8601 string; a date means midnight and a time without an
    offset is wall-clock time, both in ``timezone`` (UTC unless given)."""
    return parse_written(value, timezone)[0]


def parse_written(value: object, timezone: str = "UTC") -> tuple[datetime, datetime]:
    """:func:`parse_instant`, and the local time in ``timezone`` as it was written (which
    differs from the instant's own local time inside a DST gap)."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime.combine(value, time(0))
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
                moment = datetime.combine(date.fromisoformat(text), time(0))
            else:
                moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"{value!r} is not a date like 2026-10-01 or a time like 2026-10-01T13:00:00Z"
            ) from None
    else:
        raise ValueError(f'expected a date like "2026-10-01", got {_type(value)}')
    if not datetime(1900, 1, 2) <= moment.replace(tzinfo=None) < datetime(2199, 12, 31):
        raise ValueError(f"{value!s:.40}: dates from 1900-01-02 to 2199-12-30 only")
    tz = zone(timezone)
    if moment.tzinfo is None:
        return to_utc(moment, tz), moment
    return as_utc(moment), to_wall(moment, tz)


def check_placeholders(arg: str) -> str | None:
    """None when every ``{…}`` in a command argument is known and formats; else the reason."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(arg) if f is not None]
    except ValueError as exc:
        return f"{arg!r}: {exc} (write {{{{ and }}}} for literal braces)"
    for name in fields:
        base = re.split(r"[.\[]", name, maxsplit=1)[0]
        if base not in PLACEHOLDERS:
            known = ", ".join("{" + p + "}" for p in sorted(PLACEHOLDERS))
            return f"{arg!r}: unknown placeholder {{{name}}}; known: {known}"
    sample = datetime(2026, 10, 31, tzinfo=UTC)
    try:
        arg.format(job="j", period="2026-10-31", period_start=sample, period_end=sample, attempt=1)
    except (ValueError, KeyError, IndexError, AttributeError, TypeError) as exc:
        return f"{arg!r}: {exc}"
    return None


def _suggest(key: str, known: frozenset[str] | set[str]) -> str:
    hint = difflib.get_close_matches(key, sorted(known), n=1)
    return f" (did you mean {hint[0]!r}?)" if hint else ""


def _type(value: object) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    names.update({list: "a list", dict: "a table", datetime: "a datetime", date: "a date"})
    return names.get(type(value), type(value).__name__)


def _toml_error(name: str, message: str, last_line: int) -> str:
    match = re.search(r"\(at line (\d+), column (\d+)\)$", message)
    if match:
        reason = message[: match.start()].strip()
        return f"{name}:{match.group(1)}: invalid TOML: {reason} (column {match.group(2)})"
    match = re.search(r"\(at end of document\)$", message)
    if match:
        reason = message[: match.start()].strip()
        return f"{name}:{last_line}: invalid TOML: {reason} at the end of the file"
    return f"{name}: invalid TOML: {message}"


_HEADER = re.compile(r"^\s*\[(?!\[)\s*(.+?)\s*\]\s*(#.*)?$")
_KEY = re.compile(
    r"""^\s*((?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*="""
)
_PART = re.compile(r"""\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)\s*(?:\.|$)""")


class _KeyLines:
    """Line numbers of tables and keys in a TOML text, for error messages (tomllib has none)."""

    def __init__(self, text: str) -> None:
        self.lines: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        for number, line in enumerate(text.splitlines(), start=1):
            header = _HEADER.match(line)
            if header:
                table = _split_key(header.group(1))
                self.lines.setdefault(table, number)
                continue
            key = _KEY.match(line)
            if key:
                path = table + _split_key(key.group(1))
                for i in range(len(table) + 1, len(path) + 1):
                    self.lines.setdefault(path[:i], number)

    def find(self, path: tuple[str, ...]) -> int:
        """The line of ``path``, or of its nearest enclosing table, or 1."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return 1


def _split_key(text: str) -> tuple[str, ...]:
    parts = []
    for match in _PART.finditer(text):
        part = match.group(1)
        if part[0] == '"':
            try:
                part = json.loads(part)
            except ValueError:
                part = part[1:-1]
        elif part[0] == "'":
            part = part[1:-1]
        parts.append(part)
    return tuple(parts)


def make_job(
    name: str,
    schedule: str,
    start: str | date | datetime,
    *,
    command: list[str] | tuple[str, ...] | None = None,
    call: str | Callable[..., object] | None = None,
    **options: Any,
) -> Job:
    """Declare a job in code, checked like one in catchup.toml.

    ``options`` are the other keys of a ``[jobs.NAME]`` table (``delay="30m"``, ``lease="60s"``,
    ``max_attempts=3``, ``overlap="forbid"``, ``catchup="all"``, …). ``call`` may be a callable
    taking a :class:`~catchup.runner.JobContext`.
    """
    spec: dict[str, Any] = {"schedule": schedule, "start": start, **options}
    if command is not None:
        spec["command"] = list(command)
    if call is not None:
        spec["call"] = call if isinstance(call, str) else "in.code:callable"
    problems: list[str] = []
    if not JOB_NAME.match(name):
        problems.append(f"job name {name!r}: use up to 64 letters, digits, '_', '.' or '-'")
    job = _parse_job(name, spec, lambda key, message: problems.append(message))
    if problems or job is None:
        raise ConfigError(problems or [f"jobs.{name}: invalid"])
    if call is not None and not isinstance(call, str):
        job = replace(job, call=call)
    return job


SPREAD_DEFAULT = timedelta(minutes=10)


def spread_offset(name: str, bound: timedelta, schedule: Schedule) -> timedelta:
    """A stable delay in ``[0, bound)`` from the job's name (SHA-256, never Python's salted
    ``hash``), whole seconds, at most a quarter of the period, so a fleet of jobs does not all
    start on the hour and each job always starts at the same offset."""
    length = schedule.typical()
    limit = int(min(bound, length / 4).total_seconds())
    if limit < 1:
        return timedelta(0)
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return timedelta(seconds=digest % limit)
