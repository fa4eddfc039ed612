"""The public surface, pinned (as httpx's tests/test_exported_members.py pins its own): what
``from catchup import *`` gives, and that every type the facade's methods return is among it.
A change here is a change to what users import: say so in the CHANGELOG."""

from __future__ import annotations

import ast
import importlib
import inspect
import re

import catchup
from catchup.api import Catchup

PUBLIC = [
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


def test_the_exported_members_are_pinned() -> None:
    assert catchup.__all__ == PUBLIC
    assert sorted(dir(catchup)) == sorted({*PUBLIC, *(n for n in vars(catchup) if n[:2] == "__")})
    for name in PUBLIC:
        assert getattr(catchup, name) is not None, name


def _imported_names(module: str) -> dict[str, tuple[str, str]]:
    """Each name a module of ours binds by import or class (``TYPE_CHECKING`` ones too), and
    the module and name it comes from."""
    mod = importlib.import_module(module)
    is_package = (mod.__file__ or "").endswith("__init__.py")
    package = module.split(".") if is_package else module.split(".")[:-1]
    found: dict[str, tuple[str, str]] = {}
    for node in ast.walk(ast.parse(inspect.getsource(mod))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, node.module] if node.module else base)
            found |= {(a.asname or a.name): (target, a.name) for a in node.names}
        elif isinstance(node, ast.ClassDef):
            found[node.name] = (module, node.name)
    return found


def test_every_type_the_facade_returns_is_exported() -> None:
    missing = []
    for method, function in inspect.getmembers(Catchup, predicate=inspect.isfunction):
        if method.startswith("_"):
            continue
        returned = inspect.get_annotations(function).get("return") or ""
        names = _imported_names(function.__module__)
        for word in re.findall(r"[A-Za-z_]\w*", str(returned)):
            module, name = names.get(word, ("", ""))
            if module.startswith("catchup") and name not in PUBLIC:
                missing.append(f"Catchup.{method} returns {module}.{name}")
            elif module.startswith("catchup"):
                assert getattr(catchup, name) is getattr(importlib.import_module(module), name)
    assert missing == []
