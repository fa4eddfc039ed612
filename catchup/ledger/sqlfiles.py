"""The SQL catchup sends, loaded once from the ``sql/`` folder and composed per schema."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from psycopg import sql

_HEADER = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def sql_dir() -> Path:
    """The folder holding the SQL: inside the wheel, or the top-level ``sql/`` of a checkout."""
    package = Path(__file__).parent.parent  # catchup/
    packaged = package / "sql"
    if packaged.is_dir():
        return packaged
    return package.parent / "sql"


def parse_queries(text: str) -> dict[str, str]:
    """Split a file of ``-- name: x`` sections into a dict of query texts."""
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        queries[name] = body.strip()
    return queries


def query_files() -> list[Path]:
    """``sql/queries/*.sql``: a file per part of ``catchup/ledger/`` (claims.sql holds what
    ledger/claims.py sends, and so on); a name is unique across them."""
    return sorted((sql_dir() / "queries").glob("*.sql"))


@functools.cache
def _raw_queries() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in query_files():
        text = path.read_text(encoding="utf-8")
        for name, body in parse_queries(text).items():
            if name in found:
                raise ValueError(f"query {name!r} is defined twice ({path.name})")
            found[name] = body
    return found


def _compose(text: str, schema: str, **parts: str | sql.Composable) -> sql.Composed:
    # The files are ours and fixed, so they are literal SQL in all but type; only the schema
    # (and, for a few statements, another name) is variable, and goes in as an identifier. A
    # statement that takes no parameters (ALTER ROLE … PASSWORD) gets its value as a literal.
    template = sql.SQL(text)
    names = {
        key: value if isinstance(value, sql.Composable) else sql.Identifier(value)
        for key, value in parts.items()
    }
    return template.format(schema=sql.Identifier(schema), **names)


@functools.cache
def query(name: str, schema: str) -> sql.Composed:
    """The named query with ``{schema}`` bound to the quoted schema identifier."""
    return _compose(_raw_queries()[name], schema)


def query_naming(name: str, schema: str, **parts: str | sql.Composable) -> sql.Composed:
    """The named query with ``{schema}`` and the other ``{…}`` names bound: a string as an
    identifier, a :class:`psycopg.sql.Literal` as a quoted value."""
    return _compose(_raw_queries()[name], schema, **parts)


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, text) of every migration, in order."""
    found = []
    for path in sorted((sql_dir() / "migrations").glob("*.sql")):
        number, _, _rest = path.stem.partition("_")
        found.append((int(number), path.stem, path.read_text(encoding="utf-8")))
    return found


def migration(text: str, schema: str) -> sql.Composed:
    return _compose(text, schema)
