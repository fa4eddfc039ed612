"""Reading a ``[jobs.NAME]`` table into a :class:`~catchup.config.job.Job`, key by key as
:data:`~catchup.config.job.JOB_KEYS` describes them (default, what each accepts, its bounds), with a
message naming the key when a value does not fit. ``catchup.toml`` (:mod:`catchup.config.loading`)
and
``make_job`` both read jobs through :func:`parse_job`, so a job in code is checked exactly as
one in the file."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..schedule import Schedule, ScheduleError, Timeline, parse_schedule, zone
from ..schedule.exclusions import Entry, ExcludeError, read_entries, read_entry
from .job import JOB_KEY, JOB_KEYS, Job, JobKey, default
from .upstream import Dependency, parse_after
from .values import (
    SPREAD_DEFAULT,
    check_placeholders,
    key_problem,
    name_problem,
    parse_duration,
    parse_written,
    spread_offset,
    type_name,
    written_as_date,
)

# Imports inside functions: at first use: reading a config never loads postgres/ (nor the driver).

DEFAULTS: dict[str, Any] = {k.name: k.default for k in JOB_KEYS if k.default is not None}
KEY_NAMES = frozenset(JOB_KEY)
# An evidence query is a read-only SELECT (or WITH … SELECT): one statement, checked here
# before anything runs; it also runs in a READ ONLY transaction.
_SELECT = re.compile(r"^\s*(select|with)\b", re.IGNORECASE)


Calendars = Mapping[str, tuple[Entry, ...]]  # [calendars.NAME]: each one's entries
NO_CALENDARS: Calendars = MappingProxyType({})


def parse_job(
    name: str, spec: dict[str, Any], problem: Any, calendars: Calendars = NO_CALENDARS
) -> Job | None:
    count = 0

    def bad(key: str, message: str) -> None:
        nonlocal count
        count += 1
        problem(key, f"jobs.{name}.{key}: {message}")

    for key in spec:
        if key not in KEY_NAMES:
            bad(key, f"unknown key{suggest(key, KEY_NAMES)}")
    values = {**DEFAULTS, **{k: v for k, v in spec.items() if k in KEY_NAMES}}

    timezone = _timezone_key(values["timezone"], bad)
    schedule = _schedule_key(spec, timezone, bad)
    start, start_wall = _start_key(spec, timezone, bad)
    schedule = _counted_from_start(schedule, start, start_wall, spec, bad)
    ping = _ping_key(spec.get("ping"), bad)
    command, call = _runs_keys(spec, bad, observed="ping" in spec)
    durations, ints = _table_keys(values, bad)
    bound = _spread_key(values["spread"], bad)
    evidence, evidence_dsn, verify = _evidence_keys(spec, bad)
    keys, keys_dsn = _keys_keys(spec, bad)
    not_renamed, log_output = _flag_keys(values, spec, bad)
    lane = _lane_key(spec.get("lane"), bad)
    exclude = _exclude_key(spec.get("exclude"), calendars, bad)
    if command is not None and keys is None and any("{key" in arg for arg in command):
        bad("command", "{key} needs keys (the job's tenants, regions or shards)")
    after = _after_key(spec, bad)
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
        lease=durations["lease"] or default("lease"),
        kill_grace=durations["kill_grace"] or default("kill_grace"),
        max_attempts=ints["max_attempts"],
        retry_backoff=durations["retry_backoff"] or timedelta(0),
        overlap=values["overlap"],
        catchup=values["catchup"],
        catchup_window=durations["catchup_window"] or default("catchup_window"),
        max_per_tick=ints["max_per_tick"],
        timezone=timezone,
        evidence=evidence,
        evidence_dsn=evidence_dsn,
        verify=verify,
        after=after,
        when_outdated=values["when_outdated"],
        keys=keys,
        keys_dsn=keys_dsn,
        keys_timeout=durations["keys_timeout"] or default("keys_timeout"),
        not_renamed=not_renamed,
        log_output=log_output,
        lane=lane,
        ping=ping,
        exclude=exclude,
    )


def _timezone_key(value: object, bad: Callable[[str, str], None]) -> str | None:
    """``timezone``: an IANA zone, or None (said) when it is not one."""
    if not isinstance(value, str):
        bad("timezone", f"expected {JOB_KEY['timezone'].accepts}, got {type_name(value)}")
        return None
    try:
        zone(value)
    except ScheduleError as exc:
        bad("timezone", str(exc))
        return None
    return value


def _schedule_key(
    spec: dict[str, Any], timezone: str | None, bad: Callable[[str, str], None]
) -> Schedule | None:
    """``schedule``, read in the job's zone (with a bad zone, still checked in UTC: every
    mistake is reported at once)."""
    if "schedule" not in spec:
        bad("schedule", f"missing ({JOB_KEY['schedule'].accepts})")
    elif not isinstance(spec["schedule"], str):
        bad("schedule", f"expected a string, got {type_name(spec['schedule'])}")
    else:
        try:
            return parse_schedule(spec["schedule"], timezone or "UTC")
        except ScheduleError as exc:
            bad("schedule", str(exc))
    return None


def _start_key(
    spec: dict[str, Any], timezone: str | None, bad: Callable[[str, str], None]
) -> tuple[datetime | None, datetime | None]:
    """``start``: the first period, as an instant and as written on the job's wall clock."""
    if "start" not in spec:
        bad("start", f"missing: the first period, {JOB_KEY['start'].accepts}")
        return None, None
    try:
        return parse_written(spec["start"], timezone or "UTC")
    except ValueError as exc:
        bad("start", str(exc))
        return None, None


def _counted_from_start(
    schedule: Schedule | None,
    start: datetime | None,
    wall: datetime | None,
    spec: dict[str, Any],
    bad: Callable[[str, str], None],
) -> Schedule | None:
    """The schedule, unless counted from ``start`` it cannot be a job's (a rule that never
    occurs from there, or names a time of day with a start written as a date): said."""
    if schedule is None or start is None:
        return schedule
    said = schedule.bound(start, wall).refusal(written_as_date(spec["start"]))
    if said is not None:
        bad("schedule", said)
        return None
    return schedule


def _runs_keys(
    spec: dict[str, Any], bad: Callable[[str, str], None], *, observed: bool = False
) -> tuple[tuple[str, ...] | None, str | None]:
    """``command`` (an argv list) or ``call`` ("module:function"): exactly one of them, or
    (``observed``: a job with a ``ping``) neither."""
    if observed and "command" not in spec and "call" not in spec:
        return None, None
    if ("command" in spec) == ("call" in spec):
        bad("command", 'give exactly one of command (an argv list) or call ("module:function")')
        return None, None
    if "call" in spec:
        raw = spec["call"]
        if not isinstance(raw, str) or not re.fullmatch(r"[\w.]+:[\w.]+", raw):
            bad("call", f"expected {JOB_KEY['call'].accepts}, got {raw!r}")
            return None, None
        return None, raw
    raw = spec["command"]
    if not isinstance(raw, list) or not raw or not all(isinstance(a, str) for a in raw):
        bad("command", f"expected {JOB_KEY['command'].accepts}")
    elif (at := next((n for n, a in enumerate(raw) if "\x00" in a), None)) is not None:
        # no program can be given one: every run would fail, using up its attempts
        bad("command", f"argument {at + 1} holds a NUL character, which no argv can carry")
    elif not raw[0].strip():
        bad("command", "the program (the first argument) is empty")
    else:
        for arg in raw:
            error = check_placeholders(arg)
            if error:
                bad("command", error)
                break
        return tuple(raw), None
    return None, None


def _table_keys(
    values: dict[str, Any], bad: Callable[[str, str], None]
) -> tuple[dict[str, timedelta | None], dict[str, int]]:
    """The keys ``JOB_KEYS`` describes by kind: durations, counts, choices."""
    durations: dict[str, timedelta | None] = {}
    ints: dict[str, int] = {}
    for entry in JOB_KEYS:
        value = values.get(entry.name)
        if entry.kind == "duration":
            durations[entry.name] = _duration(entry, value, bad)
        elif entry.kind == "count":
            if isinstance(value, bool) or not isinstance(value, int):
                bad(entry.name, f"expected {entry.accepts}, got {type_name(value)}")
            elif value < 1:
                bad(entry.name, f"must be at least 1, got {value}")
            elif entry.most is not None and value > entry.most:
                bad(entry.name, f"at most {entry.most:,}, got {value:,}")
            else:
                ints[entry.name] = value
        elif entry.kind == "choice" and value not in entry.choices:
            bad(entry.name, f"expected one of {', '.join(entry.choices)}, got {value!r}")
    return durations, ints


def _spread_key(raw: object, bad: Callable[[str, str], None]) -> timedelta | None:
    """``spread``: true (the default bound), false, or a bound like "15m"."""
    if raw is True:
        return SPREAD_DEFAULT
    if raw is False:
        return None
    try:
        return parse_duration(raw)
    except ValueError:
        bad(
            "spread",
            f'expected true, false or a bound like "15m", got {type_name(raw)}'
            if not isinstance(raw, str)
            else f"{raw!r} is not a duration",
        )
        return None


def _not_renamed_key(value: object, spec: dict[str, Any], bad: Callable[[str, str], None]) -> bool:
    """``not_renamed``: true or false, and not with ``renamed_from``."""
    if not isinstance(value, bool):
        bad("not_renamed", f"expected true or false, got {type_name(value)}")
        return False
    if value and "renamed_from" in spec:
        bad("not_renamed", "and renamed_from say opposite things: keep the one that is true")
    return value


def _flag_keys(
    values: dict[str, Any], spec: dict[str, Any], bad: Callable[[str, str], None]
) -> tuple[bool, bool]:
    """``not_renamed`` and ``log_output``, checked."""
    return _not_renamed_key(values["not_renamed"], spec, bad), _log_output_key(
        values["log_output"], spec, bad
    )


def _log_output_key(value: object, spec: dict[str, Any], bad: Callable[[str, str], None]) -> bool:
    """``log_output``: true or false, and only for a job catchup runs."""
    if not isinstance(value, bool):
        bad("log_output", f"expected true or false, got {type_name(value)}")
        return False
    if value and "ping" in spec and "command" not in spec and "call" not in spec:
        bad("log_output", "an observed job (ping, no command or call) prints nothing here")
    return value


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _ping_key(value: object, bad: Callable[[str, str], None]) -> str | None:
    """A job's ``ping``: a UUID, as healthchecks names a check (lower case); None when not
    given."""
    if value is None:
        return None
    if not isinstance(value, str) or not _UUID.fullmatch(value.strip().lower()):
        shown = f"{value!r}"[:60] if isinstance(value, str) else type_name(value)
        bad("ping", f"expected {JOB_KEY['ping'].accepts}, got {shown}")
        return None
    return value.strip().lower()


def _after_key(spec: dict[str, Any], bad: Callable[[str, str], None]) -> tuple[Dependency, ...]:
    """``after``: the upstream jobs each period waits for; () when not given (or said)."""
    if "after" not in spec:
        return ()
    after, said = parse_after(spec["after"])
    if said is not None:
        bad("after", said)
    return after


def _exclude_key(
    value: object, calendars: Calendars, bad: Callable[[str, str], None]
) -> tuple[Entry, ...]:
    """A job's ``exclude``: its entries read (a calendar's as its own); () when not given."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        odd = [v for v in value if not isinstance(v, str)] if isinstance(value, list) else [value]
        got = type_name(odd[0]) + (" in the list" if isinstance(value, list) else "")
        bad("exclude", f"expected {JOB_KEY['exclude'].accepts}, got {got}")
        return ()
    try:
        return read_entries(value, calendars)
    except ExcludeError as exc:
        bad("exclude", str(exc))
        return ()


def parse_calendars(
    value: object, problem: Callable[[tuple[str, ...], str], None]
) -> dict[str, tuple[Entry, ...]]:
    """``[calendars.NAME] dates = [...]``: named lists of excluded days, ranges and rules that
    jobs share (``exclude = ["calendar:NAME"]``)."""
    if not isinstance(value, dict):
        problem(
            ("calendars",), "[calendars] must be a table of calendars, like [calendars.holidays]"
        )
        return {}
    found: dict[str, tuple[Entry, ...]] = {}
    for name, table in value.items():
        where = ("calendars", name)
        if (said := name_problem(name, "calendar name")) is not None:
            problem(where, f"calendars: {said}")
            continue
        if not isinstance(table, dict) or set(table) != {"dates"}:
            problem(where, f'calendars.{name}: expected one key, dates = ["2026-12-25", …]')
            continue
        dates = table["dates"]
        if not isinstance(dates, list) or not all(isinstance(d, str) for d in dates):
            problem((*where, "dates"), f"calendars.{name}.dates: expected a list of strings")
            continue
        if any(d.strip().startswith("calendar:") for d in dates):
            problem((*where, "dates"), f"calendars.{name}.dates: a calendar names no calendar")
            continue
        try:
            found[name] = tuple(read_entry(d, f"calendar {name}") for d in dates)
        except ExcludeError as exc:
            problem((*where, "dates"), f"calendars.{name}.dates: {exc}")
    return found


def _lane_key(value: object, bad: Callable[[str, str], None]) -> str | None:
    """A job's ``lane``: a lane's name (that [scheduler.lanes] has one is the config's to
    check); None when not given."""
    if value is None:
        return None
    if not isinstance(value, str):
        bad("lane", f"expected {JOB_KEY['lane'].accepts}, got {type_name(value)}")
        return None

    if (said := name_problem(value, "lane")) is not None:
        bad("lane", said)
        return None
    return value


def _duration(key: JobKey, value: object, bad: Callable[[str, str], None]) -> timedelta | None:
    if value is None:
        return None
    try:
        parsed = parse_duration(value, allow_zero=key.zero)
    except ValueError as exc:
        bad(key.name, str(exc))
        return None
    if key.at_least is not None and parsed < parse_duration(key.at_least):
        bad(key.name, f"must be at least {key.at_least}")
    return parsed


def workdir_of(value: object, path: Path) -> Path | str:
    """A job's folder: ``workdir`` (relative to the config file's folder), else that folder
    itself; a string says what is wrong with the value."""
    folder = path.resolve().parent
    if value is None:
        return folder
    if not isinstance(value, str):
        return f"expected a folder, got {type_name(value)}"
    if not value.strip():
        return "is empty (leave it out for this file's folder)"
    if any(ord(c) < 0x20 for c in value):
        return "holds a control character"
    return (folder / Path(value).expanduser()).resolve()


def dsn_key(value: object, key: str, bad: Callable[[str, str], None]) -> str | None:
    """A DSN-valued key of a job (``evidence_dsn``, and any later one): the rules of the
    ledger's own DSN, at load time, and never a word of the value in the message."""
    from ..postgres.database import dsn_problem

    if not isinstance(value, str):
        bad(key, f"expected a DSN, got {type_name(value)}")
        return None
    said = dsn_problem(value)
    if said is not None:
        bad(key, said)
        return None
    return value


def _evidence_keys(
    spec: dict[str, Any], bad: Callable[[str, str], None]
) -> tuple[str | None, str | None, bool]:
    """``evidence`` (a SELECT of one column), ``evidence_dsn`` and ``verify``, checked."""
    evidence = spec.get("evidence")
    if evidence is not None:
        if not isinstance(evidence, str) or not evidence.strip():
            what = "of the date; with keys, of the key and the date"
            bad("evidence", f"expected a SELECT ({what}), got {type_name(evidence)}")
            evidence = None
        elif not _SELECT.match(evidence) or ";" in evidence.strip().rstrip(";"):
            bad("evidence", "must be one read-only SELECT (or WITH … SELECT) of one column")
            evidence = None
        else:
            evidence = evidence.strip().rstrip(";").strip()
    evidence_dsn = spec.get("evidence_dsn")
    if evidence_dsn is not None:
        if "evidence" not in spec:
            bad("evidence_dsn", "needs evidence (the query to run there)")
        else:
            evidence_dsn = dsn_key(evidence_dsn, "evidence_dsn", bad)
    verify = spec.get("verify", False)
    if not isinstance(verify, bool):
        bad("verify", f"expected true or false, got {type_name(verify)}")
        verify = False
    elif verify and "evidence" not in spec:
        bad("verify", "needs evidence (the query that shows a period's output)")
    return evidence, evidence_dsn, verify


MAX_LISTED_KEYS = 100_000


def _keys_keys(
    spec: dict[str, Any], bad: Callable[[str, str], None]
) -> tuple[tuple[str, ...] | str | None, str | None]:
    """``keys`` (a list of keys, or a SELECT of a key column and an optional date column) and
    ``keys_dsn``, checked."""
    keys = spec.get("keys")
    result: tuple[str, ...] | str | None = None
    if keys is not None:
        if isinstance(keys, list):
            problems = [(n, said) for n, k in enumerate(keys) if (said := key_problem(k))]
            if not keys:
                bad("keys", "is empty: give at least one key, or leave keys out")
            elif len(keys) > MAX_LISTED_KEYS:
                bad("keys", f"at most {MAX_LISTED_KEYS:,} in a list (a query has no limit)")
            elif problems:
                n, said = problems[0]
                bad("keys", f"key {n + 1} {said}")
            elif len(set(keys)) != len(keys):
                twice = next(k for k in keys if keys.count(k) > 1)
                bad("keys", f"{twice!a} is listed twice")
            else:
                result = tuple(keys)
        elif isinstance(keys, str) and keys.strip():
            if not _SELECT.match(keys) or ";" in keys.strip().rstrip(";"):
                bad("keys", "must be a list, or one read-only SELECT (or WITH … SELECT)")
            else:
                result = keys.strip().rstrip(";").strip()
        else:
            bad("keys", f"expected a list of keys or a SELECT, got {type_name(keys)}")
    keys_dsn = spec.get("keys_dsn")
    if keys_dsn is not None:
        if not isinstance(keys, str):
            bad("keys_dsn", "needs keys as a query (the SELECT to run there)")
            keys_dsn = None
        else:
            keys_dsn = dsn_key(keys_dsn, "keys_dsn", bad)
    return result, keys_dsn


def suggest(key: str, known: frozenset[str] | set[str]) -> str:
    hint = difflib.get_close_matches(key, sorted(known), n=1)
    return f" (did you mean {hint[0]!r}?)" if hint else ""
