"""A schema's catalog, every relation, column, constraint, index, function and trigger, its
own name replaced so two schemas compare (sql/schema.sql against the migrations; a ledger
migrated from an older release against a fresh one)."""

from __future__ import annotations

from typing import Any

import psycopg

CATALOG = {
    "relations": """
        SELECT c.relname, c.relkind FROM pg_class c
        WHERE c.relnamespace = %(ns)s::regnamespace ORDER BY 1""",
    "columns": """
        SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
               pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated
        FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = %(ns)s::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
        ORDER BY 1, 2""",
    "constraints": """
        SELECT c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid)
        FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid
        WHERE c.relnamespace = %(ns)s::regnamespace ORDER BY 1, 2""",
    "indexes": """
        SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %(ns)s ORDER BY 1""",
    "functions": """
        SELECT p.proname, pg_get_function_identity_arguments(p.oid),
               pg_get_function_result(p.oid), p.prosrc, p.provolatile, p.proparallel
        FROM pg_proc p WHERE p.pronamespace = %(ns)s::regnamespace ORDER BY 1, 2""",
    "triggers": """
        SELECT c.relname, t.tgname, pg_get_triggerdef(t.oid)
        FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
        WHERE c.relnamespace = %(ns)s::regnamespace AND NOT t.tgisinternal ORDER BY 1, 2""",
}


def catalog(conn: psycopg.Connection[Any], schema: str) -> dict[str, list[tuple[Any, ...]]]:
    """Everything the schema holds, its own name replaced so two schemas compare."""

    def plain(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return value.replace(f'"{schema}".', "<schema>.").replace(f"{schema}.", "<schema>.")

    return {
        what: [tuple(plain(v) for v in row) for row in conn.execute(query, {"ns": schema})]
        for what, query in CATALOG.items()
    }
