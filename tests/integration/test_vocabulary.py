"""The closed vocabulary: the enums are exactly the SQL's CHECK lists and what period_state()
returns; and a ledger migrated before period_state() existed reaches the same schema."""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from catchup.ledger import Ledger, sqlfiles
from catchup.vocabulary import (
    DERIVED_STATES,
    AttemptStatus,
    EventAction,
    PeriodState,
    RunStatus,
)


def check_list(sql: Any, schema: str, table: str, column: str) -> set[str]:
    """The values a CHECK (column IN (...)) constraint on ``table`` allows."""
    rows = sql(
        "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c "
        "JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace "
        "WHERE n.nspname = %s AND t.relname = %s AND c.contype = 'c'",
        [schema, table],
    )
    found: set[str] = set()
    for (definition,) in rows:
        if f"({column} = ANY" in definition:
            found |= set(re.findall(r"'(\w+)'::text", definition))
    return found


def test_enums_equal_the_check_lists(ledger: Ledger, sql: Any, schema: str) -> None:
    assert check_list(sql, schema, "runs", "status") == set(RunStatus)
    assert check_list(sql, schema, "history", "status") == set(AttemptStatus)
    assert check_list(sql, schema, "events", "action") == set(EventAction)


def test_period_state_returns_exactly_the_period_states(sql: Any, ledger: Ledger) -> None:
    now = datetime(2026, 10, 1, tzinfo=UTC)
    statuses: list[str | None] = [None, *RunStatus]
    leases = [None, now - timedelta(seconds=1), now + timedelta(seconds=1)]
    seen = set()
    for status, failures, interrupted, cancelled, lease in itertools.product(
        statuses, [0, 3], [False, True], [False, True], leases
    ):
        ((state,),) = sql(
            "SELECT {schema}.period_state(%s, %s, %s, %s, %s, %s, 3)",
            [status, failures, interrupted, cancelled, lease, now],
        )
        seen.add(state)
    assert seen == set(PeriodState) - DERIVED_STATES


def test_a_ledger_migrated_before_period_state_existed_gets_it(ledger: Ledger, sql: Any) -> None:
    """0005 once shipped without period_state() and was edited afterwards; 0006 repairs the
    ledgers that applied the first 0005, so they reach the same schema as a fresh one."""

    def functions() -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = sql(
            "SELECT p.proname, pg_get_function_identity_arguments(p.oid), prosrc FROM pg_proc p "
            "JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = %s "
            "ORDER BY 1, 2",
            [ledger.schema],
        )
        return rows

    fresh = functions()
    assert "period_state" in [name for name, _, _ in fresh]
    # as that ledger was: 0005 applied without the function, 0006 not yet
    sql("DROP FUNCTION {schema}.period_state(text, integer, timestamptz, timestamptz, integer)")
    sql("DELETE FROM {schema}.schema_version WHERE version > 5")
    assert ledger.migrate() == [name for n, name, _ in sqlfiles.migrations() if n > 5]
    assert functions() == fresh


def test_a_ledger_migrated_before_interrupted_existed_reads_it_from_history(
    ledger: Ledger, sql: Any
) -> None:
    """0012 adds runs.interrupted: a ledger whose last attempt of a period was interrupted
    before that gets it from the period's history, so its scan says `interrupted` at once."""
    sql("INSERT INTO {schema}.jobs (name) VALUES ('billing')")
    for day, last in ((1, "interrupted"), (2, "failed")):
        start = datetime(2026, 10, day, tzinfo=UTC)
        sql(
            "INSERT INTO {schema}.runs (job_id, period_start, period_end, status, attempt, "
            "failures) VALUES (1, %s, %s, 'failed', 2, 1)",
            [start, start + timedelta(days=1)],
        )
        for attempt, status in (
            (1, "failed" if last == "interrupted" else "interrupted"),
            (2, last),
        ):
            sql(
                "INSERT INTO {schema}.history (job_id, period_start, attempt, status, "
                "started_at) VALUES (1, %s, %s, %s, %s)",
                [start, attempt, status, start],
            )
    sql("DROP VIEW {schema}.periods")  # (0020's, which reads the column; it comes back)
    sql("ALTER TABLE {schema}.runs DROP COLUMN interrupted")
    sql("DELETE FROM {schema}.schema_version WHERE version > 11")
    assert ledger.migrate() == [name for n, name, _ in sqlfiles.migrations() if n > 11]
    assert sql("SELECT period_start::date::text, interrupted FROM {schema}.runs ORDER BY 1") == [
        ("2026-10-01", True),
        ("2026-10-02", False),
    ]
