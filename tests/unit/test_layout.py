"""The shape of the package: no import cycle anywhere in catchup/ (imports inside functions
count too: they only hide a cycle until the function runs), and no module over the limit."""

from __future__ import annotations

import ast
from pathlib import Path

from paths import ROOT

PACKAGE = ROOT / "catchup"
LIMIT = 400  # lines a module may have
# Modules still over the limit, at most as long as they are now: the list may only shrink.
OVER: dict[str, int] = {}


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


def test_no_module_over_the_limit() -> None:
    too_long = {}
    for path in PACKAGE.rglob("*.py"):
        where = str(path.relative_to(ROOT))
        lines = len(path.read_text().splitlines())
        if lines > OVER.get(where, LIMIT):
            too_long[where] = lines
    assert too_long == {}, f"over {LIMIT} lines (or longer than listed in OVER): split them"
    shrunk = {
        where: n
        for where, n in OVER.items()
        if len((ROOT / where).read_text().splitlines()) <= LIMIT
    }
    assert shrunk == {}, "now within the limit: take them out of OVER"


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
