"""The query files, split into named statements."""

from __future__ import annotations

import pytest

from catchup.ledger.sqlfiles import parse_queries


def test_query_files_split_into_named_statements() -> None:
    text = (
        "-- a header\n\n-- name: first\nSELECT 1;\n\n-- name: second\n-- what it does\nSELECT 2;\n"
    )
    assert parse_queries(text) == {"first": "SELECT 1;", "second": "-- what it does\nSELECT 2;"}
    with pytest.raises(ValueError, match="defined twice"):
        parse_queries("-- name: x\nSELECT 1;\n-- name: x\nSELECT 2;\n")
