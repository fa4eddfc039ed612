"""The test harness itself: what keeps one failed test from holding the whole run."""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest
from fix_db import Database, drop_schema


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
@pytest.mark.superuser
def test_a_schema_a_stray_transaction_holds_is_still_dropped(database: Database) -> None:
    """A failed test can leave a connection idle in a transaction that read its ledger (a
    worker thread still running): dropping its schema ends that connection instead of
    waiting for it for ever, as one hung teardown held a whole CI run until its limit."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    stray = psycopg.connect(database.conninfo)
    try:
        stray.execute(psycopg.sql.SQL("CREATE SCHEMA {}").format(psycopg.sql.Identifier(name)))
        stray.execute(
            psycopg.sql.SQL("CREATE TABLE {}.runs (id int)").format(psycopg.sql.Identifier(name))
        )
        stray.commit()
        stray.execute(
            psycopg.sql.SQL("SELECT * FROM {}.runs").format(psycopg.sql.Identifier(name))
        )  # now idle in a transaction that holds a lock on the table
        done = threading.Event()

        def drop() -> None:
            drop_schema(database.conninfo, name)
            done.set()

        worker = threading.Thread(target=drop, daemon=True)
        worker.start()
        assert done.wait(120), "the schema's DROP waited on the stray transaction"
        with psycopg.connect(database.conninfo) as conn:
            left = conn.execute(
                "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (name,)
            ).fetchone()
        assert left == (0,)
        assert stray.closed or stray.broken or _ended(stray)
    finally:
        stray.close()


def _ended(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    try:
        conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return True
    return False
