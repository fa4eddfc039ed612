"""sql/schema.sql is the whole schema as the migrations leave it: loaded into one schema and
compared, through the catalog, with a schema migrated through every migration."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fix_catalog import CATALOG, catalog
from fix_db import Database, drop_schema
from paths import ROOT

from catchup.ledger import Ledger, sqlfiles


@pytest.fixture
def two_schemas(database: Database) -> Iterator[tuple[psycopg.Connection[Any], str, str]]:
    names = (f"t_{uuid.uuid4().hex[:12]}", f"t_{uuid.uuid4().hex[:12]}")
    conn = psycopg.connect(database.conninfo, autocommit=True)
    try:
        yield conn, *names
    finally:
        conn.close()
        for name in names:
            drop_schema(database.conninfo, name)


@pytest.mark.superuser
def test_schema_sql_is_what_the_migrations_make(
    two_schemas: tuple[psycopg.Connection[Any], str, str],
) -> None:
    conn, migrated, written = two_schemas
    Ledger(conn, migrated).migrate()
    text = (ROOT / "sql" / "schema.sql").read_text()
    # as pg_dump's own header does (the file leaves it out): a function comes before the
    # tables its body reads
    conn.execute("SET check_function_bodies = off")
    conn.execute(sqlfiles.migration(text, written))
    got, want = catalog(conn, written), catalog(conn, migrated)
    for what in CATALOG:
        assert got[what] == want[what], (
            f"sql/schema.sql differs from the migrations in its {what}: "
            "uv run python tests/schema_dump.py > sql/schema.sql"
        )
