"""A ledger is made for something that can run. Before a command whose every job has keys makes
the project's database or its schema (the first ``tick``, ``replay`` or ``run`` of a config), it
reads their keys; when each one's query fails, the first failure is raised (exit 3, or 2 for
keys refused) and nothing is written: no database, no schema. A command with one job that can
run makes the ledger as always, and the failing jobs fail alone (``keyed.read_each``).

Where a keys query without ``keys_dsn`` runs before its ledger exists: on the ledger's database
when it exists (the schema not made yet), else on the embedded server's ``template1``, of
which ``CREATE DATABASE`` makes the project's database a copy: the query meets the same tables
(none of the team's) that it would meet there a moment later."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg.conninfo import make_conninfo

from ..config.job import Job, Project
from ..errors import DatabaseError, first_line
from ..ledger import Ledger
from ..postgres import database as db
from .keyed import KeysFailed, source_keys

# Imports inside functions: at first use: the embedded server's side, only before a ledger is made.

TEMPLATE = "template1"  # what CREATE DATABASE copies


def keys_before_making(
    jobs: list[Job], schema: str, project: Project | None, server: Callable[[], db.Target]
) -> None:
    """Raise the first of ``jobs``' keys failures when every one of them is keyed, its keys
    query fails, and the ledger is not made yet; else nothing (the command goes on).
    ``server``: the ledger's target without the project's database made (``db.resolve``
    without ``project``)."""
    if not jobs or not all(job.keyed for job in jobs):
        return
    where = _unmade(server(), schema, project)
    if where is None:
        return
    failed: list[KeysFailed] = []
    with db.connect(where, application="catchup-keys", writes=False) as conn:
        ledger = Ledger(conn, schema)
        for job in jobs:
            try:
                source_keys(ledger, job)
            except KeysFailed as exc:
                failed.append(exc)
            else:
                return
    raise failed[0]


def _unmade(target: db.Target, schema: str, project: Project | None) -> db.Target | None:
    """Where the keys queries run when the ledger is not made yet; None when it is."""
    from ..postgres.projectdb import unmade

    try:
        if target.embedded_data is not None and project is not None:
            if unmade(target.conninfo, project):
                return db.Target(make_conninfo(target.conninfo, dbname=TEMPLATE), target.source)
            return None  # the project's database is there: db.resolve finds it
        with db.connect(target, writes=False) as conn:
            return target if Ledger(conn, schema).version() == 0 else None
    except psycopg.Error as exc:
        said = db.scrub(first_line(exc), target.conninfo)
        raise DatabaseError(f"cannot connect to the ledger's database: {said}") from None
