"""catchup: once-per-period jobs that run exactly once per period, with gaps found and replayed.

    from catchup import Catchup, make_job

    def export(ctx):  # ctx: JobContext
        ...

    with Catchup(jobs=[make_job("export", "hourly", "2026-11-01", call=export)]) as app:
        app.tick()
        report = app.scan()

Names are imported lazily, so the command line starts fast.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Catchup": "catchup.api",
    "make_job": "catchup.config.loading",
    "load_config": "catchup.config.loading",
    "Config": "catchup.config.job",
    "Job": "catchup.config.job",
    "JobContext": "catchup.execution.runner",
    "Outcome": "catchup.results",
    "ScanReport": "catchup.results",
    "JobScan": "catchup.results",
    "Range": "catchup.results",
    "Island": "catchup.results",  # Range's old name
    "Period": "catchup.schedule",
    "CatchupError": "catchup.errors",
    "ConfigError": "catchup.errors",
    "DatabaseError": "catchup.errors",
    # what the facade's methods return (tests/unit/test_exported_members.py pins them)
    "Batch": "catchup.results",
    "Cancelled": "catchup.results",
    "Changes": "catchup.results",
    "Compacted": "catchup.maintenance.retention",
    "ConfigWatch": "catchup.config.reloading",
    "Explanation": "catchup.reports.explain",
    "Finding": "catchup.maintenance.findings",
    "History": "catchup.results",
    "JobsReport": "catchup.results",
    "KeysReport": "catchup.results",
    "Migrated": "catchup.results",
    "NotDue": "catchup.results",
    "Paused": "catchup.results",
    "PeriodReport": "catchup.results",
    "Plan": "catchup.results",
    "Pinged": "catchup.results",
    "Renamed": "catchup.results",
    "Resumed": "catchup.results",
    "Retired": "catchup.results",
    "Running": "catchup.results",
    "Why": "catchup.results",
    "Window": "catchup.results",
    "Windows": "catchup.results",
}

__all__ = [
    "Batch",
    "Cancelled",
    "Catchup",
    "CatchupError",
    "Changes",
    "Compacted",
    "Config",
    "ConfigError",
    "ConfigWatch",
    "DatabaseError",
    "Explanation",
    "Finding",
    "History",
    "Island",
    "Job",
    "JobContext",
    "JobScan",
    "JobsReport",
    "KeysReport",
    "Migrated",
    "NotDue",
    "Outcome",
    "Paused",
    "Period",
    "PeriodReport",
    "Pinged",
    "Plan",
    "Range",
    "Renamed",
    "Resumed",
    "Retired",
    "Running",
    "ScanReport",
    "Why",
    "Window",
    "Windows",
    "__version__",
    "load_config",
    "make_job",
]

if TYPE_CHECKING:
    from .api import Catchup
    from .config.job import Config, Job
    from .config.loading import load_config, make_job
    from .config.reloading import ConfigWatch
    from .errors import CatchupError, ConfigError, DatabaseError
    from .execution.runner import JobContext
    from .maintenance.findings import Finding
    from .maintenance.retention import Compacted
    from .reports.explain import Explanation
    from .results import (
        Batch,
        Cancelled,
        Changes,
        History,
        Island,
        JobScan,
        JobsReport,
        KeysReport,
        Migrated,
        NotDue,
        Outcome,
        Paused,
        PeriodReport,
        Pinged,
        Plan,
        Range,
        Renamed,
        Resumed,
        Retired,
        Running,
        ScanReport,
        Why,
        Window,
        Windows,
    )
    from .schedule import Period


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'catchup' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (imported lazily, so not yet in the module's namespace)."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
