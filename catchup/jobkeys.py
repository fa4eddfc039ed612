"""The keys of a ``[jobs.NAME]`` table: their defaults, what each accepts, and the message when
it does not. ``catchup.toml`` (:mod:`catchup.config`) and ``make_job`` both read jobs through
:func:`parse_job`, so a job in code is checked exactly as one in the file."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from .job import Job
from .schedule import Schedule, ScheduleError, Timeline, parse_schedule, zone
from .values import (
    MAX_INTS,
    SPREAD_DEFAULT,
    check_placeholders,
    parse_duration,
    parse_written,
    spread_offset,
    type_name,
)

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
JOB_KEYS = frozenset(
    {
        "schedule",
        "start",
        "command",
        "call",
        "evidence",
        "evidence_dsn",
        "verify",
        "workdir",
        "renamed_from",
        *DEFAULTS,
    }
)
# An evidence query is a read-only SELECT (or WITH … SELECT): one statement, checked here
# before anything runs; it also runs in a READ ONLY transaction.
_SELECT = re.compile(r"^\s*(select|with)\b", re.IGNORECASE)


def parse_job(name: str, spec: dict[str, Any], problem: Any) -> Job | None:
    count = 0

    def bad(key: str, message: str) -> None:
        nonlocal count
        count += 1
        problem(key, f"jobs.{name}.{key}: {message}")

    for key in spec:
        if key not in JOB_KEYS:
            bad(key, f"unknown key{suggest(key, JOB_KEYS)}")
    values = {**DEFAULTS, **{k: v for k, v in spec.items() if k in JOB_KEYS}}

    timezone: str | None = None
    if not isinstance(values["timezone"], str):
        bad(
            "timezone",
            f'expected an IANA name like "Europe/Berlin", got {type_name(values["timezone"])}',
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
        bad("schedule", f"expected a string, got {type_name(spec['schedule'])}")
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
            command = tuple(raw)
    else:
        raw = spec["call"]
        if not isinstance(raw, str) or not re.fullmatch(r"[\w.]+:[\w.]+", raw):
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
            bad(key, f"expected a whole number, got {type_name(value)}")
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
                f'expected true, false or a bound like "15m", got {type_name(raw_spread)}'
                if not isinstance(raw_spread, str)
                else f"{raw_spread!r} is not a duration",
            )

    evidence, evidence_dsn, verify = _evidence_keys(spec, bad)

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
        evidence=evidence,
        evidence_dsn=evidence_dsn,
        verify=verify,
    )


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
    from .db import dsn_problem

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
            bad("evidence", f"expected a SELECT of one column, got {type_name(evidence)}")
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


def suggest(key: str, known: frozenset[str] | set[str]) -> str:
    hint = difflib.get_close_matches(key, sorted(known), n=1)
    return f" (did you mean {hint[0]!r}?)" if hint else ""
