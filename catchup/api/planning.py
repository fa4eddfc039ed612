"""Planning a config change: what a new catchup.toml would do to the ledger, read-only."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..errors import DatabaseError
from ..ledger import sqlfiles
from ..results import Plan
from ..session import Session
from .base import Base

# Imports inside functions: at first use, so a command loads only the capability it runs.


class Planning(Base):
    def plan(self, new: str | Path) -> Plan:
        """``catchup plan NEW.toml``: each job of ``new`` against the ledger it names (added,
        held, renamed, redefined, unchanged, and the ledger's jobs it no longer names), a
        keyed job's keys, its periods expected, excluded and gaps, and what the first tick
        after the change would run that this config's first tick would not (this config: the
        one in use, when it is another file on the same ledger; else the ledger alone).
        Writes nothing: no migration, no job registered, no keys recorded."""
        from ..reports.plan import other_projects, plan_jobs

        newer = Base(new, dsn=self._dsn, require_config=True)
        try:
            old = self._current(newer)
            session = _reading(newer)
            if old is not None and old.target.describe() != session.target.describe():
                old = None  # another database: the ledger alone
            jobs = plan_jobs(session, old)
            return Plan(
                config=str(new),
                against=str(self.config.path) if old is not None else None,
                ledger=session.target.describe() + f", schema {newer.config.schema}",
                now=session.now(),
                jobs=tuple(jobs),
                others=other_projects(session),
            )
        finally:
            newer.close()

    def _current(self, newer: Base) -> Session | None:
        """This config's read-only session, when it is another file on ``newer``'s schema;
        ``newer`` is then planned as the file it replaces (its project, its embedded
        database: one job, one definition, whichever file gives it)."""
        path, new_path = self.config.path, newer.config.path
        if path is None or new_path is None or path.resolve() == new_path.resolve():
            return None
        if self.config.schema != newer.config.schema:
            return None
        if self._target().conninfo != newer._target().conninfo:  # compared, never shown
            return None
        newer.use_config(replace(newer.config, path=path))
        return _reading(self)


def _reading(app: Base) -> Session:
    """``app``'s session, reading only; refused when the ledger is not at the latest version
    (a plan reads it as the new catchup would find it)."""
    session = app._open(prepare=False, writes=False)
    session.ledger.only_read()  # the server holds plan to its word: nothing is written
    session.definitions_checked = False  # another project's definitions: said, not refused
    version, latest = session.ledger.version(), len(sqlfiles.migrations())
    if version == 0:
        raise DatabaseError(
            f"there is no ledger in schema {app.config.schema} yet: `catchup migrate` makes "
            "an empty one (it registers no job), and plan then says what the first tick runs"
        )
    if version < latest:
        raise DatabaseError(
            f"the ledger (schema {app.config.schema}) is at version {version} of {latest}: "
            "`catchup migrate` brings it up to date (plan only reads)"
        )
    return session
