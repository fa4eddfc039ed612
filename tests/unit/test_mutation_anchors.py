"""Every mutation in tests/mutations.py still finds the code it removes, exactly once: a move or
a rename that leaves an anchor behind is caught here at once, not after the mutation run."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import pytest
from paths import ROOT


def mutations() -> list[Any]:
    spec = importlib.util.spec_from_file_location(
        "catchup_mutations", ROOT / "tests" / "mutations.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return list(module.MUTATIONS)


@pytest.mark.parametrize("mutation", mutations(), ids=lambda m: m.name)
def test_the_mutation_still_applies(mutation: Any) -> None:
    texts: dict[str, str] = {}
    for path, old, new in mutation.edits():
        text = texts.get(path) or (ROOT / path).read_text()
        assert text.count(old) == 1, f"{path}: the code {mutation.name} removes has moved"
        texts[path] = text.replace(old, new)


def _function_at(text: str, at: int) -> str | None:
    """The signature (name and parameters, spaces collapsed) of the SQL function around
    offset ``at`` of a migration, if it is in one."""
    import re

    found = None
    for match in re.finditer(r"FUNCTION \{schema\}\.(\w+)\(", text[:at]):
        found = match
    if found is None:
        return None
    depth, end = 1, found.end()
    while depth and end < len(text):
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        end += 1
    return " ".join(text[found.start() : end].split())


@pytest.mark.parametrize("mutation", mutations(), ids=lambda m: m.name)
def test_a_mutated_sql_function_is_not_replaced_by_a_later_migration(mutation: Any) -> None:
    """A later migration that replaces a function makes a mutation of the old definition
    change nothing (it survives): 0012's finish_attempt did that to `finish-fence`."""
    for path, old, _ in mutation.edits():
        if not path.startswith("sql/migrations/"):
            continue
        text = (ROOT / path).read_text()
        signature = _function_at(text, text.index(old))
        if signature is None:
            continue
        number = int(path.split("/")[-1][:4])
        later = sorted((ROOT / "sql" / "migrations").glob("*.sql"))
        replaced = [
            p.name
            for p in later
            if int(p.name[:4]) > number and signature in " ".join(p.read_text().split())
        ]
        assert not replaced, f"{mutation.name}: {signature} is replaced by {replaced}"
