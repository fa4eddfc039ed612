"""The config a facade (:class:`catchup.api.Catchup`) stands on: given, found and read from
``catchup.toml``, or made of jobs declared in code (a project of their own), those jobs checked
as a file's are (their graph of ``after``, their lanes)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from ..errors import ConfigError
from .job import Config, Job
from .lanes import lane_unknown
from .loading import find_config, load_config
from .upstream import graph_problems
from .values import project_problem, type_name


def resolve_config(
    config: Config | str | Path | None,
    *,
    jobs: Iterable[Job],
    schema: str | None,
    require_config: bool,
    project: str | None,
) -> tuple[Config, bool]:
    """The config, and whether it can be read again (``catchup scheduler`` reloads one read
    from its file, with no jobs added in code, with the schema it was first read with)."""
    declared = declared_jobs(jobs)
    if project is not None and (said := project_problem(project)) is not None:
        raise ConfigError(f"project: {said}")
    if isinstance(config, Config):
        loaded = config
    elif declared and config is None:
        # jobs in code are a project of their own: never the catchup.toml of the folder
        # this happens to run in (its jobs of the same names would be redefined)
        loaded = Config(
            path=None,
            schema=schema or "catchup",
            schema_given=schema is not None,
            origin=code_origin(project),
        )
    else:
        path = find_config(None if config is None else str(config))
        if path is None and require_config and not declared:
            raise ConfigError(
                f"no catchup.toml in {Path.cwd()} or its parents (use --config or CATCHUP_CONFIG)"
            )
        loaded = load_config(path, schema=schema)
    if project is not None:
        loaded = replace(loaded, project_name=project)
    if declared:
        loaded = replace(
            loaded,
            jobs={**loaded.jobs, **declared},
            schema=schema or loaded.schema,
            schema_given=loaded.schema_given or schema is not None,
        )
    if declared:  # a file's jobs were checked as it loaded
        after = {name: job.after for name, job in loaded.jobs.items()}
        policies = {name: job.catchup for name, job in loaded.jobs.items()}
        keys = {name: job.keys for name, job in loaded.jobs.items()}
        problems = graph_problems(after, policies, keys)
        wrong = [f"jobs.{n}.after: {said}" for n, said in problems.items()]
        wrong += [
            f"jobs.{name}.lane: {lane_unknown(job.lane, loaded.lanes)}"
            for name, job in loaded.jobs.items()
            if job.lane is not None and job.lane not in loaded.lanes
        ]
        if wrong:
            raise ConfigError(wrong)
    return loaded, not declared and not isinstance(config, Config)


def declared_jobs(jobs: Iterable[Job]) -> dict[str, Job]:
    """The jobs declared in code, by name; a :class:`ConfigError` for a name given twice (a
    TOML table cannot be: one of the two would be lost without a word)."""
    declared: dict[str, Job] = {}
    for job in jobs:
        if not isinstance(job, Job):
            raise ConfigError(f"jobs: expected jobs from make_job, got {type_name(job)}")
        if job.name in declared:
            raise ConfigError(f"jobs.{job.name}: declared twice (a job's name names one job)")
        declared[job.name] = job
    return declared


def code_origin(project: str | None) -> Path:
    """What names a project of jobs declared in code: ``project`` if given, else the script
    that runs (``python billing.py``: billing.py), else the working folder."""
    if project is not None:  # checked by Catchup()
        return Path.cwd() / f"python-{project}"
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    return Path(main).resolve() if main else Path.cwd() / "python"
