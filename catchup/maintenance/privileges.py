"""The doctor's word on the ledger's role: which privileges it has, which it lacks, and what
each one it lacks turns off. catchup needs only a schema it owns (a DBA may make it and hand it
over: ``CREATE SCHEMA catchup AUTHORIZATION app``); CREATE on the database only makes a schema
that is not there yet, and ``pg_read_all_stats`` (in ``pg_monitor``) only lets the doctor see
the standbys' state. A superuser or CREATEDB is more than it needs."""

from __future__ import annotations

from ..ledger.tools import Privileges
from ..session import Session
from .findings import Finding


def privilege_findings(session: Session, schema: str) -> list[Finding]:
    """One line for the schema, one for what the role has beyond need, one per optional
    privilege it lacks (with what that turns off)."""
    seen = session.ledger.privileges()
    return [_schema(seen, schema), *_beyond(seen), *_optional(seen)]


def sql_name(name: str) -> str:
    """``name`` as SQL writes an identifier, for a statement a person pastes into psql."""
    plain = name.isascii() and name.isidentifier() and name == name.lower()
    return name if plain else '"' + name.replace('"', '""') + '"'


def _schema(seen: Privileges, schema: str) -> Finding:
    role, owned = sql_name(seen.role), sql_name(schema)
    if seen.schema_present and (seen.owns_schema or seen.superuser):
        return Finding("ok", "role", f"{role} owns the schema {schema}: all catchup needs")
    if seen.schema_present:
        return Finding(
            "serious",
            "role",
            f"{role} does not own the schema {schema}: migrations change its tables and "
            f"functions; have its owner run ALTER SCHEMA {owned} OWNER TO {role}",
        )
    if seen.create_schemas:
        return Finding(
            "info", "role", f"the schema {schema} is not there yet: the next command makes it"
        )
    return Finding(
        "serious",
        "role",
        f"the schema {schema} is not there and {role} may not create one (no CREATE on the "
        f"database): have a DBA run CREATE SCHEMA {owned} AUTHORIZATION {role}",
    )


def _beyond(seen: Privileges) -> list[Finding]:
    extra = [
        what
        for what, held in (("superuser", seen.superuser), ("CREATEDB", seen.create_databases))
        if held
    ]
    if not extra:
        return []
    return [
        Finding(
            "info",
            "role",
            f"{seen.role} is {' and '.join(extra)}: more than catchup needs "
            "(a role that owns only its schema will do; docs/how-to/your-postgresql.md)",
        )
    ]


def _optional(seen: Privileges) -> list[Finding]:
    if seen.read_all_stats:
        return []
    return [
        Finding(
            "info",
            "role",
            f"{seen.role} lacks pg_read_all_stats (GRANT pg_monitor TO {sql_name(seen.role)}): the "
            "failover check cannot see whether a standby is synchronous",
        )
    ]
