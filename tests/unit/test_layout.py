"""The shape of the package: a handful of modules at the top and capability packages that say
what they own, no import cycle anywhere in catchup/ (imports inside functions count too: they
only hide a cycle until the function runs), no function over the limit, and layers that import
downwards only."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from paths import ROOT

PACKAGE = ROOT / "catchup"
TOP = 8  # modules at the top of catchup/ (issue 50): the shared nouns
FUNCTION_LIMIT = 60  # lines a function may have
# Functions still over the limit, at most as long as they are now: the list may only shrink.
LONG: dict[str, int] = {
    "catchup/api/looking.py:Looking.serve": 135,
    "catchup/api/scheduling.py:Scheduling.scheduler": 167,
    "catchup/cli/looking.py:scan": 79,
    "catchup/cli/running.py:replay": 72,
    "catchup/config/jobs.py:parse_job": 68,
    "catchup/deploy/tick.py:_kubernetes_serve": 80,
    "catchup/execution/runner.py:run_callable": 69,
    "catchup/postgres/database.py:connect": 77,
    "catchup/postgres/database.py:resolve": 78,
    "catchup/render/documents.py:scan_markdown": 80,
    "catchup/render/documents.py:scan_openmetrics": 69,
    "catchup/render/periodpage.py:period_page": 68,
    "catchup/replay/runs.py:replay": 80,
    "catchup/replay/runs.py:tick": 73,
    "catchup/scan/blocked.py:blocked_states": 67,
    "catchup/scan/keyblocked.py:carved_keys": 61,
    "catchup/scheduler/leading.py:schedule": 99,
}
# Functions allowed over ruff's C901, PLR0913, PLR0915 (a `noqa` each), when the rules came in.
ALLOWED = {"C901": 10, "PLR0913": 26, "PLR0915": 3}


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The catchup modules ``name`` imports, anywhere in it."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                child = f"{target}.{alias.name}"
                found.add(child if child in known else target)
    return {m for m in found if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_in_the_package() -> None:
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert cycles(graph) == []


def test_the_cycle_check_sees_a_cycle_through_a_function_level_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_at_most_eight_modules_at_the_top_and_each_package_says_what_it_owns() -> None:
    """The root holds a handful of shared nouns; everything else is in a capability package
    whose ``__init__.py`` docstring says what it owns (CONTRIBUTING lists them)."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= TOP, top
    silent = [
        str(init.relative_to(ROOT))
        for init in PACKAGE.glob("*/__init__.py")
        if not ast.get_docstring(ast.parse(init.read_text()))
    ]
    assert silent == []
    listed = (ROOT / "CONTRIBUTING.md").read_text()
    unlisted = [p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()]
    assert [name for name in unlisted if f"`{name}/`" not in listed] == []


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """Every function in ``tree`` (methods and nested ones too) by qualified name, with its
    length in lines."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{node.name}"
            yield name, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def test_no_function_over_the_limit() -> None:
    """Functions, not files, are kept small: none over ``FUNCTION_LIMIT`` lines but those in
    ``LONG``, each at most as long as it is listed (the list may only shrink)."""
    too_long, lengths = {}, {}
    for path in PACKAGE.rglob("*.py"):
        for name, lines in functions(ast.parse(path.read_text())):
            where = f"{path.relative_to(ROOT)}:{name}"
            lengths[where] = lines
            if lines > LONG.get(where, FUNCTION_LIMIT):
                too_long[where] = lines
    assert too_long == {}, f"over {FUNCTION_LIMIT} lines (or longer than in LONG): split them"
    shrunk = {w: n for w, n in LONG.items() if lengths.get(w, 0) <= FUNCTION_LIMIT}
    assert shrunk == {}, "now within the limit (or gone): take them out of LONG"
    # the loops that run until stopped (the scheduler, its lead, serve) are the longest left
    longest = sorted(where for where, lines in lengths.items() if lines > 80)
    assert len(longest) <= 3, longest


def test_the_ruff_allow_lists_only_shrink() -> None:
    """Complexity (C901), arguments (PLR0913) and statements (PLR0915) are ruff's to check
    (pyproject.toml); the functions over them carry a ``noqa`` naming the rule, no more of them
    than when the rules came in (ruff's RUF100 flags a ``noqa`` no longer needed)."""
    counts = dict.fromkeys(ALLOWED, 0)
    for path in PACKAGE.rglob("*.py"):
        for line in path.read_text().splitlines():
            if "# noqa:" in line:
                for rule in ALLOWED:
                    counts[rule] += rule in line.split("# noqa:", 1)[1]
    grown = {rule: n for rule, n in counts.items() if n > ALLOWED[rule]}
    assert grown == {}, "a function over ruff's limits: split it rather than allow it"


def test_an_import_inside_a_function_is_there_for_start_up_and_says_so() -> None:
    """Imports go at a module's top, where its header shows what it needs; one inside a
    function is for start-up time only (a command loads what it runs, reading a config never
    loads the driver), in the modules listed here, each saying so at its top."""
    allowed: tuple[str, ...] = ("cli/", "api/", "postgres/", "config/jobs.py", "config/loading.py")
    allowed += ("render/batches.py", "reports/why.py", "scan/firstread.py", "schedule/zones.py")
    found, silent = [], []
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        inside = [
            node.lineno
            for function in ast.walk(ast.parse(text))
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(function)
            if isinstance(node, ast.Import | ast.ImportFrom)
        ]
        where = str(path.relative_to(PACKAGE))
        if inside and not where.startswith(allowed):
            found.append(f"catchup/{where}:{min(inside)}")
        elif inside and "# Imports inside functions: " not in text:
            silent.append(f"catchup/{where}")
    assert found == [], "an import inside a function: move it to the module's top"
    assert silent == [], "say why at the module's top: # Imports inside functions: …"


def test_the_layers_import_downwards_only() -> None:
    """The data-access layer and the render layer know nothing of the command line; rendering
    knows nothing of the database (an import inside a function counts too)."""
    forbidden = {"ledger": {"click"}, "render": {"click", "psycopg"}}
    found = []
    for layer, names in forbidden.items():
        for path in (PACKAGE / layer).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                modules = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and not node.level
                    else []
                )
                found += [
                    f"{path.relative_to(ROOT)}: {m}" for m in modules if m.split(".")[0] in names
                ]
    assert found == []


def test_each_query_file_holds_what_its_ledger_part_sends() -> None:
    """sql/queries/claims.sql is what catchup/ledger/claims.py sends, and so on: a statement
    whose name its part never uses belongs in another file (or nowhere)."""
    import re

    from catchup.ledger.sqlfiles import parse_queries, query_files

    # named by the scan's planner in catchup/scan/detector.py, or by a test of the SQL generator
    elsewhere = {"scan_full", "scan_full_calendar", "scan_full_listed", "local_series"}
    misplaced = []
    for path in query_files():
        part = PACKAGE / "ledger" / f"{path.stem}.py"
        assert part.is_file(), f"{path.name}: no catchup/ledger/{path.stem}.py"
        code = part.read_text()
        if path.stem == "tools":
            continue  # also the demo's and the benchmarks' statements
        for name in parse_queries(path.read_text()):
            if name not in elsewhere and not re.search(rf"[\"']{name}[\"']", code):
                misplaced.append(f"{path.name}: {name}")
    assert misplaced == []
