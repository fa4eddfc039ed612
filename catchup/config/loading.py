"""``catchup.toml`` → validated, frozen jobs. Every problem is reported with file and line.

The types are in :mod:`catchup.config.job`, the value parsers in :mod:`catchup.config.values`."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..schedule.exclusions import Entry
from .job import Alerts, Config, Job, Serve, Webhook
from .jobs import parse_calendars, parse_job, suggest, workdir_of
from .lanes import lane_unknown, parse_lanes
from .lines import KeyLines, toml_error
from .upstream import graph_problems
from .values import (
    name_problem,
    parse_duration,
    parse_instant,
    project_problem,
    public_url_problem,
    schema_problem,
    type_name,
    url_problem,
)

# Imports inside functions: at first use: reading a config never loads postgres/ (nor the driver).

CONFIG_NAME = "catchup.toml"

DATABASE_KEYS = frozenset({"dsn", "schema", "embedded", "durable_claims"})


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
    """``catchup.toml``'s bytes as a :class:`Config`; every problem found (not just the first),
    each as ``FILE:LINE: what``, in the order of the file."""
    name = str(path)
    text, data = _read_toml(raw, name)
    lines = KeyLines(text)
    problems: list[tuple[int, str]] = []

    def problem(where: tuple[str, ...], message: str) -> None:
        line = lines.find(where)
        problems.append((line, f"{name}:{line}: {message}"))

    sections = {
        "project",
        "database",
        "jobs",
        "alerts",
        "ledger",
        "serve",
        "scheduler",
        "calendars",
    }
    for key in data:
        if key not in sections:
            problem((key,), f"unknown section or key {key!r}{suggest(key, sections)}")
    database = data.get("database", {})
    if not isinstance(database, dict):
        problem(("database",), "[database] must be a table")
        database = {}
    found = _parse_database(database, schema, problem)
    project_name = _parse_project(data.get("project"), problem) if "project" in data else None
    keep_detail = _parse_ledger(data.get("ledger"), problem) if "ledger" in data else None
    serve = _parse_serve(data.get("serve"), problem) if "serve" in data else Serve()
    lanes = parse_lanes(data.get("scheduler"), problem) if "scheduler" in data else {}
    table = data.get("jobs", {})
    if not isinstance(table, dict):
        problem(("jobs",), "[jobs] must be a table of jobs, like [jobs.billing]")
        table = {}
    calendars = parse_calendars(data["calendars"], problem) if "calendars" in data else {}
    jobs = _parse_jobs(table, path, problem, calendars)
    _check_jobs_together(table, jobs, lanes, problem)
    alerts = _parse_alerts(data.get("alerts"), problem) if "alerts" in data else None
    if problems:  # in the order of the file, as a person reads it
        raise ConfigError([said for _, said in sorted(problems, key=lambda p: p[0])])
    return Config(
        path=path,
        jobs=jobs,
        dsn=found.dsn,
        schema=found.schema,
        embedded=found.embedded,
        durable_claims=found.durable_claims,
        alerts=alerts,
        project_name=project_name,
        keep_detail=keep_detail,
        serve=serve,
        lanes=lanes,
        schema_given=schema is not None or "schema" in database,
    )


Problem = Callable[[tuple[str, ...], str], None]  # (where: the key's path, what is wrong)


def _read_toml(raw: bytes, name: str) -> tuple[str, dict[str, Any]]:
    """The file as text and as TOML, or the one line that says why it is neither."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{name}:{line}: not valid UTF-8 (byte {raw[exc.start]:#04x})") from None
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(toml_error(name, str(exc), len(text.splitlines()) or 1)) from None
    except RecursionError:  # the parser recurses once per level of arrays or inline tables
        raise ConfigError(
            f"{name}: arrays or tables nested too deeply (a config needs a few levels)"
        ) from None


@dataclass(frozen=True)
class _Database:
    dsn: str | None = None
    schema: str = "catchup"
    embedded: bool = True
    durable_claims: bool = False


def _parse_database(database: dict[str, Any], schema: str | None, problem: Problem) -> _Database:
    """``[database]``: the DSN, the schema (unless one is given), embedded, durable_claims."""
    found = _Database(schema=schema or "catchup")
    for key, value in database.items():
        where = ("database", key)
        if key not in DATABASE_KEYS:
            problem(where, f"database.{key}: unknown key{suggest(key, DATABASE_KEYS)}")
        elif key in ("embedded", "durable_claims"):
            if isinstance(value, bool) and key == "embedded":
                found = replace(found, embedded=value)
            elif isinstance(value, bool):
                found = replace(found, durable_claims=value)
            else:
                wanted = f"expected true or false, got {type_name(value)}"
                problem(where, f"database.{key}: {wanted}")
        elif not isinstance(value, str):
            problem(where, f"database.{key}: expected a string, got {type_name(value)}")
        elif key == "dsn":
            from ..postgres.database import dsn_problem

            said = dsn_problem(value)
            if said is None:
                found = replace(found, dsn=value)
            else:
                problem(where, f"database.dsn: {said}")
        elif schema is None:
            said = schema_problem(value)
            if said is None:
                found = replace(found, schema=value)
            else:
                problem(where, f"database.schema: {said}")
    return found


def _parse_jobs(
    table: dict[str, Any],
    path: Path,
    problem: Problem,
    calendars: Mapping[str, tuple[Entry, ...]],
) -> dict[str, Job]:
    """``[jobs.NAME]`` each, read key by key (:func:`parse_job`), with its folder and the name
    it was renamed from."""
    jobs: dict[str, Job] = {}
    for job_name, spec in table.items():
        where = ("jobs", job_name)
        if (said := name_problem(job_name)) is not None:
            problem(where, said)
            continue
        if not isinstance(spec, dict):
            problem(where, f"jobs.{job_name}: expected a table like [jobs.{job_name}]")
            continue
        job = parse_job(
            job_name,
            spec,
            lambda key, msg, j=job_name: problem(("jobs", j, key), msg),
            calendars,
        )
        workdir = workdir_of(spec.get("workdir"), path)
        renamed_from = spec.get("renamed_from")
        if isinstance(workdir, str):
            problem(("jobs", job_name, "workdir"), f"jobs.{job_name}.workdir: {workdir}")
        elif renamed_from is not None and (
            why := _renamed_from_problem(job_name, renamed_from, table)
        ):
            problem(("jobs", job_name, "renamed_from"), f"jobs.{job_name}.renamed_from: {why}")
        elif job is not None:
            jobs[job_name] = replace(job, workdir=workdir, renamed_from=renamed_from)
    return jobs


def _renamed_from_problem(job_name: str, renamed_from: object, table: dict[str, Any]) -> str | None:
    """What is wrong with ``renamed_from``, if anything: it names another job, no longer
    configured."""
    if not isinstance(renamed_from, str):
        return f"expected the job's old name, got {type_name(renamed_from)}"
    if (said := name_problem(renamed_from)) is not None:
        return said
    if renamed_from == job_name:
        return "names the job itself"
    if renamed_from in table:
        return f"{renamed_from} is still configured"
    return None


def _check_jobs_together(
    table: dict[str, Any], jobs: dict[str, Job], lanes: dict[str, int], problem: Problem
) -> None:
    """What only the jobs together can say: the graph of ``after`` (unknown jobs, cycles),
    each job's lane, and that no two jobs share a ping."""
    after = {j: () for j in table} | {j: job.after for j, job in jobs.items()}
    policies = {j: job.catchup for j, job in jobs.items()}
    keys = {j: job.keys for j, job in jobs.items()}
    for j, said in graph_problems(after, policies, keys).items():
        problem(("jobs", j, "after"), f"jobs.{j}.after: {said}")
    for j, job in jobs.items():
        if job.lane is not None and job.lane not in lanes:
            problem(("jobs", j, "lane"), f"jobs.{j}.lane: {lane_unknown(job.lane, lanes)}")
    pinged: dict[str, str] = {}
    for j, job in jobs.items():
        if job.ping is not None and (first := pinged.setdefault(job.ping, j)) != j:
            problem(("jobs", j, "ping"), f"jobs.{j}.ping: {first} has this ping already")


ALERT_KEYS = frozenset({"webhooks", "max_per_minute"})
WEBHOOK_KEYS = frozenset({"url", "format"})


def _parse_project(value: object, problem: Callable[[tuple[str, ...], str], None]) -> str | None:
    """``[project] name``: what the ledger records as having defined this config's jobs."""
    if not isinstance(value, dict):
        problem(("project",), '[project] must be a table, like [project] name = "billing"')
        return None
    for key in value:
        if key != "name":
            problem(("project", key), f"project.{key}: unknown key{suggest(key, {'name'})}")
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


LEDGER_KEYS = frozenset({"keep_detail"})
KEEP_DETAIL_LEAST = timedelta(days=1)


def _parse_ledger(
    value: object, problem: Callable[[tuple[str, ...], str], None]
) -> timedelta | None:
    """``[ledger] keep_detail``: how long a settled run's attempts, output tail and checkpoint
    are kept (at least a day: they are what a person reads when something went wrong)."""
    if not isinstance(value, dict):
        problem(("ledger",), '[ledger] must be a table, like [ledger] keep_detail = "90d"')
        return None
    for key in value:
        if key not in LEDGER_KEYS:
            problem(("ledger", key), f"ledger.{key}: unknown key{suggest(key, LEDGER_KEYS)}")
    if "keep_detail" not in value:
        return None
    try:
        kept = parse_duration(value["keep_detail"])
    except ValueError as exc:
        problem(("ledger", "keep_detail"), f"ledger.keep_detail: {exc}")
        return None
    if kept < KEEP_DETAIL_LEAST:
        problem(("ledger", "keep_detail"), "ledger.keep_detail: at least 1d")
        return None
    return kept


SERVE_KEYS = frozenset({"title", "public_url", "ping_key", "metric_keys"})
METRIC_KEYS_MOST = 100
_PING_KEY = re.compile(r"[A-Za-z0-9_-]{16,64}")
TITLE_LONGEST = 80


def _parse_serve(value: object, problem: Callable[[tuple[str, ...], str], None]) -> Serve:
    """``[serve] title`` (what the page and alerts call the deployment), ``public_url``
    (where its page is reached, for the links alerts carry) and ``ping_key`` (the secret of
    ``/ping/<ping_key>/<job>``, healthchecks' slug form)."""
    if not isinstance(value, dict):
        problem(("serve",), '[serve] must be a table, like [serve] title = "billing, eu-west"')
        return Serve()
    found: dict[str, str] = {}
    metric_keys = _metric_keys(value.get("metric_keys", Serve.metric_keys), problem)
    for key, given in value.items():
        where = ("serve", key)
        if key == "metric_keys":
            continue
        if key not in SERVE_KEYS:
            problem(where, f"serve.{key}: unknown key{suggest(key, SERVE_KEYS)}")
        elif not isinstance(given, str):
            problem(where, f"serve.{key}: expected a string, got {type_name(given)}")
        elif key == "title" and not (0 < len(given.strip()) and len(given) <= TITLE_LONGEST):
            problem(where, f"serve.title: expected 1 to {TITLE_LONGEST} characters")
        elif key == "title" and not given.isprintable():
            problem(where, "serve.title: one line of printable text (no tab or control character)")
        elif key == "public_url" and (said := public_url_problem(given)) is not None:
            problem(where, f"serve.public_url: {said}")
        elif key == "ping_key" and not _PING_KEY.fullmatch(given):
            problem(where, "serve.ping_key: 16 to 64 letters, digits, '-' or '_' (a secret)")
        else:
            found[key] = given.rstrip("/") if key == "public_url" else given
    return Serve(
        title=found.get("title"),
        public_url=found.get("public_url"),
        ping_key=found.get("ping_key"),
        metric_keys=metric_keys,
    )


def _metric_keys(given: object, problem: Callable[[tuple[str, ...], str], None]) -> int:
    """``[serve] metric_keys``: how many keys per job ``catchup_failed_keys`` names."""
    where = ("serve", "metric_keys")
    if isinstance(given, bool) or not isinstance(given, int):
        problem(where, f"serve.metric_keys: expected a whole number, got {type_name(given)}")
        return Serve.metric_keys
    if not 0 <= given <= METRIC_KEYS_MOST:
        problem(where, f"serve.metric_keys: expected 0 to {METRIC_KEYS_MOST}, got {given}")
        return Serve.metric_keys
    return given


def _parse_alerts(raw: object, problem: Callable[[tuple[str, ...], str], None]) -> Alerts | None:  # noqa: C901
    """``[alerts]`` with ``[alerts.webhooks.NAME]`` tables (``url``, ``format``) and
    ``max_per_minute``. A URL is checked for form only, and never repeated in a message."""
    if not isinstance(raw, dict):
        problem(("alerts",), "[alerts] must be a table")
        return None
    for key in raw:
        if key not in ALERT_KEYS:
            problem(("alerts", key), f"alerts.{key}: unknown key{suggest(key, ALERT_KEYS)}")
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
                problem((*where, key), f"{label}.{key}: unknown key{suggest(key, WEBHOOK_KEYS)}")
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
    ``max_attempts=3``, ``overlap="forbid"``, ``catchup="all"``, …: every key, its default and
    bounds are in :data:`catchup.config.job.JOB_KEYS`). ``call`` may be a callable taking a
    :class:`~catchup.execution.runner.JobContext`.
    """
    if not isinstance(name, str):  # as a TOML table's name always is
        raise ConfigError(f"make_job: the job's name must be a string, got {type_name(name)}")
    spec: dict[str, Any] = {"schedule": schedule, "start": start, **options}
    if command is not None:  # a string is refused as in catchup.toml, never split into letters
        spec["command"] = list(command) if isinstance(command, list | tuple) else command
    if call is not None:  # a callable, or "module:function" checked as catchup.toml's
        spec["call"] = "in.code:callable" if callable(call) else call
    problems: list[str] = []
    if (said := name_problem(name)) is not None:
        problems.append(said)
    job = parse_job(name, spec, lambda key, message: problems.append(message))
    if problems or job is None:
        raise ConfigError(problems or [f"jobs.{name}: invalid"])
    if call is not None and not isinstance(call, str):
        job = replace(job, call=call)
    if "workdir" in options:  # relative to this process's folder; else it runs there
        workdir = workdir_of(options["workdir"], Path.cwd() / CONFIG_NAME)
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
