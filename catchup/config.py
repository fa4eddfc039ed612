"""``catchup.toml`` → validated, frozen jobs. Every problem is reported with file and line.

The types are in :mod:`catchup.job`, the value parsers in :mod:`catchup.values`."""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import replace
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .job import Alerts, Config, Job, Webhook
from .schedule import (
    Schedule,
    ScheduleError,
    Timeline,
    parse_schedule,
    zone,
)
from .tomllines import KeyLines, toml_error
from .values import (
    MAX_INTS,
    SPREAD_DEFAULT,
    check_placeholders,
    name_problem,
    parse_duration,
    parse_instant,
    parse_written,
    project_problem,
    schema_problem,
    spread_offset,
    type_name,
    url_problem,
)

CONFIG_NAME = "catchup.toml"

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
DATABASE_KEYS = frozenset({"dsn", "schema", "embedded"})


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
        raise ConfigError(toml_error(name, str(exc), len(text.splitlines()) or 1)) from None
    except RecursionError:  # the parser recurses once per level of arrays or inline tables
        raise ConfigError(
            f"{name}: arrays or tables nested too deeply (a config needs a few levels)"
        ) from None
    lines = KeyLines(text)
    problems: list[str] = []

    def problem(where: tuple[str, ...], message: str) -> None:
        problems.append(f"{name}:{lines.find(where)}: {message}")

    sections = {"project", "database", "jobs", "alerts"}
    for key in data:
        if key not in sections:
            problem((key,), f"unknown section or key {key!r}{_suggest(key, sections)}")

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
                problem(where, f"database.embedded: expected true or false, got {type_name(value)}")
        elif not isinstance(value, str):
            problem(where, f"database.{key}: expected a string, got {type_name(value)}")
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

    project_name = _parse_project(data.get("project"), problem) if "project" in data else None

    jobs: dict[str, Job] = {}
    table = data.get("jobs", {})
    if not isinstance(table, dict):
        problem(("jobs",), "[jobs] must be a table of jobs, like [jobs.billing]")
        table = {}
    for job_name, spec in table.items():
        where = ("jobs", job_name)
        if (said := name_problem(job_name)) is not None:
            problem(where, said)
            continue
        if not isinstance(spec, dict):
            problem(where, f"jobs.{job_name}: expected a table like [jobs.{job_name}]")
            continue
        job = _parse_job(
            job_name, spec, lambda key, msg, j=job_name: problem(("jobs", j, key), msg)
        )
        workdir = _workdir(spec.get("workdir"), path)
        renamed_from = spec.get("renamed_from")
        if isinstance(workdir, str):
            problem(("jobs", job_name, "workdir"), f"jobs.{job_name}.workdir: {workdir}")
        elif renamed_from is not None and (
            not isinstance(renamed_from, str)
            or (said := name_problem(renamed_from)) is not None
            or renamed_from == job_name
            or renamed_from in table
        ):
            why = (
                f"expected the job's old name, got {type_name(renamed_from)}"
                if not isinstance(renamed_from, str)
                else said
                if said is not None
                else "names the job itself"
                if renamed_from == job_name
                else f"{renamed_from} is still configured"
            )
            problem(("jobs", job_name, "renamed_from"), f"jobs.{job_name}.renamed_from: {why}")
        elif job is not None:
            jobs[job_name] = replace(job, workdir=workdir, renamed_from=renamed_from)
    alerts = _parse_alerts(data.get("alerts"), problem) if "alerts" in data else None
    if problems:
        raise ConfigError(problems)
    return Config(
        path=path,
        jobs=jobs,
        dsn=dsn,
        schema=schema_name,
        embedded=embedded,
        alerts=alerts,
        project_name=project_name,
        schema_given=schema is not None or "schema" in database,
    )


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


ALERT_KEYS = frozenset({"webhooks", "max_per_minute"})
WEBHOOK_KEYS = frozenset({"url", "format"})


def _parse_project(value: object, problem: Callable[[tuple[str, ...], str], None]) -> str | None:
    """``[project] name``: what the ledger records as having defined this config's jobs."""
    if not isinstance(value, dict):
        problem(("project",), '[project] must be a table, like [project] name = "billing"')
        return None
    for key in value:
        if key != "name":
            problem(("project", key), f"project.{key}: unknown key{_suggest(key, {'name'})}")
    if "name" not in value:
        return None
    name = value["name"]
    if not isinstance(name, str):
        problem(("project", "name"), f"project.name: expected a string, got {type_name(name)}")
        return None
    if (said := project_problem(name)) is not None:
        problem(("project", "name"), f"project.name: {said}")
        return None
    return name


def _parse_alerts(raw: object, problem: Callable[[tuple[str, ...], str], None]) -> Alerts | None:
    """``[alerts]`` with ``[alerts.webhooks.NAME]`` tables (``url``, ``format``) and
    ``max_per_minute``. A URL is checked for form only, and never repeated in a message."""
    if not isinstance(raw, dict):
        problem(("alerts",), "[alerts] must be a table")
        return None
    for key in raw:
        if key not in ALERT_KEYS:
            problem(("alerts", key), f"alerts.{key}: unknown key{_suggest(key, ALERT_KEYS)}")
    limit = raw.get("max_per_minute", 6)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 600:
        problem(("alerts", "max_per_minute"), "alerts.max_per_minute: a whole number, 1 to 600")
        limit = 6
    hooks = raw.get("webhooks", {})
    if not isinstance(hooks, dict) or not hooks:
        problem(("alerts",), "alerts: needs at least one [alerts.webhooks.NAME] with a url")
        return None
    webhooks = []
    for name, spec in hooks.items():
        where = ("alerts", "webhooks", name)
        label = f"alerts.webhooks.{name}"
        if name_problem(name) is not None:
            problem(where, f"{label[:60]!r}: a name is letters, digits, '_', '.' or '-'")
            continue
        if not isinstance(spec, dict):
            problem(where, f"{label}: expected a table with url (and format)")
            continue
        for key in spec:
            if key not in WEBHOOK_KEYS:
                problem((*where, key), f"{label}.{key}: unknown key{_suggest(key, WEBHOOK_KEYS)}")
        url = spec.get("url")
        if not isinstance(url, str):
            problem((*where, "url"), f"{label}.url: expected an http:// or https:// URL")
            continue
        if (said := url_problem(url)) is not None:
            problem((*where, "url"), f"{label}.url: {said}")
            continue
        fmt = spec.get("format", "json")
        if fmt not in ("json", "slack"):
            problem((*where, "format"), f"{label}.format: expected json or slack")
            continue
        webhooks.append(Webhook(name, url, fmt))
    return Alerts(tuple(webhooks), limit)


def _workdir(value: object, path: Path) -> Path | str:
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


def _suggest(key: str, known: frozenset[str] | set[str]) -> str:
    hint = difflib.get_close_matches(key, sorted(known), n=1)
    return f" (did you mean {hint[0]!r}?)" if hint else ""


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
    if (said := name_problem(name)) is not None:
        problems.append(said)
    job = _parse_job(name, spec, lambda key, message: problems.append(message))
    if problems or job is None:
        raise ConfigError(problems or [f"jobs.{name}: invalid"])
    if call is not None and not isinstance(call, str):
        job = replace(job, call=call)
    if "workdir" in options:  # relative to this process's folder; else it runs there
        workdir = _workdir(options["workdir"], Path.cwd() / CONFIG_NAME)
        if isinstance(workdir, str):
            raise ConfigError(f"jobs.{name}.workdir: {workdir}")
        job = replace(job, workdir=workdir)
    return job


__all__ = [
    "CONFIG_NAME",
    "Config",
    "Job",
    "find_config",
    "load_config",
    "make_job",
    "parse_config",
    "parse_duration",
    "parse_instant",
]
