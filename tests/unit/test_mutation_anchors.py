"""Every mutation in tests/mutations.py still finds the code it removes, exactly once: a move or
a rename that leaves an anchor behind is caught here at once, not after the mutation run."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import pytest

from conftest import ROOT


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
