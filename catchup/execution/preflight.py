"""Whether a job can start at all, found before a period is claimed (so a bad deploy counts no
attempt): its folder, its program (``command[0]``, a relative one from the job's folder), its
module and function (``call``, imported from sys.path with the job's folder after it)."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config.job import Job
from ..errors import describe


def program_path(job: Job, program: str) -> str:
    """``command[0]`` as it is started: a relative path (``./close.sh``, ``bin/x``) from the
    job's folder, whatever folder the scheduler started catchup in; a bare name from PATH."""
    if "/" in program and not os.path.isabs(program) and job.workdir is not None:
        return str(job.workdir / program)
    return program


def not_runnable(program: str, env: dict[str, str], shown: str | None = None) -> str | None:
    """Why ``program`` cannot be started, as the exec would say it; None when it can."""
    shown = shown or program
    path = program if "/" in program else shutil.which(program, path=env.get("PATH"))
    if path is None or not os.path.exists(path):
        return f"cannot start {shown!r}: not found"
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        return f"cannot start {shown!r}: permission denied"
    return None


def cannot_start(job: Job) -> str | None:
    """Why ``job`` cannot start at all (its folder, its program or its module is missing),
    found before a period is claimed, so a bad deploy counts no attempt; None when it can.
    A ``call`` is imported here (the import is what would fail)."""
    if job.workdir is not None and not job.workdir.is_dir():
        return f"cannot start: its folder {job.workdir} does not exist"
    if job.command is not None:
        program = job.command[0]
        if "{" in program:
            return None  # a placeholder in the program: known once the period is
        return not_runnable(program_path(job, program), dict(os.environ), program)
    if job.call is not None:
        try:
            load_call(job.call, job.workdir)
        except Exception as exc:
            return f"cannot load {job.call}: {describe(exc)}"
    return None


def load_call(
    call: str | Callable[..., object], folder: Path | None = None
) -> Callable[..., object]:
    """A ``module:function`` reference imported, or a callable given in code, as is. The job's
    ``folder`` (the config file's) is on ``sys.path``, after what is there already, so a
    module beside catchup.toml is found and can shadow nothing installed."""
    if callable(call):
        return call
    if folder is not None and str(folder) not in sys.path:
        sys.path.append(str(folder))
    module_name, _, attr = call.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    return target  # type: ignore[no-any-return]
