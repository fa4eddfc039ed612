"""The library facade: every operation of catchup as one call with typed inputs and a typed
result. The command line (``catchup.cli``) parses, calls one of these, renders the result and
maps it to an exit code; the Python API is this class. So the two cannot disagree.

The operations come in the command line's families: :mod:`.running`, :mod:`.looking`,
:mod:`.changing`, :mod:`.planning`, each a part of :class:`Catchup` standing on :mod:`.base`, and
:mod:`.scheduling` (the built-in scheduler, which ticks and serves)."""

from __future__ import annotations

from ..config.resolve import code_origin
from .base import reason_problem
from .changing import Changing
from .planning import Planning
from .scheduling import Scheduling

__all__ = ["Catchup", "code_origin", "reason_problem"]


class Catchup(Scheduling, Changing, Planning):
    """A ledger and its jobs.

    Load ``catchup.toml`` (``Catchup("catchup.toml")``, or ``Catchup()`` to find it like the
    CLI does) or declare jobs in code (``Catchup(jobs=[make_job(...)], dsn=...)``): those are a
    project of their own (named by ``project``, else by the script that runs), never the
    catchup.toml of the folder it runs in, so no job there is redefined. The database
    is chosen as by the CLI: ``dsn``, then ``CATCHUP_DSN``, ``[database] dsn``, ``DATABASE_URL``,
    ``PG*``, else the embedded PostgreSQL. It is opened on first use; use the object as a
    context manager, or call :meth:`close`. ``app.log_output = True``: every job's output is
    also written to stderr a prefixed line at a time where it is not streamed (``tick``,
    ``replay``, ``scheduler``), as a job's ``log_output = true`` does for that job.

    Times given as a bare date (``"2026-11-25"`` or a :class:`~datetime.date`) or without an
    offset are in each job's own time zone; a time with ``Z`` or an offset is absolute.
    """
