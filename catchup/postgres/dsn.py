"""A DSN as catchup holds one (``[database] dsn``, ``keys_dsn``, ``evidence_dsn``, the
database a command resolved): the text itself, to connect with, whose ``repr`` never shows
its password. So the repr and str of every object that holds one (``Job``, ``Config``, the
facade's results, a ``Target``) show where it points, never how it logs in. Pure."""

from __future__ import annotations

import os

# Imports inside functions: at first use: reading a DSN or a config never loads the driver
# nor the ledger.


def redact(conninfo: str) -> str:
    """The conninfo as ``postgresql://user@host:port/db``: never the password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(conninfo)
    except Exception:
        return "<unparseable DSN>"
    user = str(params.get("user") or os.environ.get("PGUSER") or "")
    host = str(params.get("host") or params.get("hostaddr") or os.environ.get("PGHOST") or "")
    port = str(params.get("port") or os.environ.get("PGPORT") or "")
    dbname = str(params.get("dbname") or os.environ.get("PGDATABASE") or "")
    host = host or "localhost"
    where = f"{host}:{port}" if port else f"{host}"
    return f"postgresql://{user + '@' if user else ''}{where}/{dbname}"


class Dsn(str):
    """A DSN: the text (``str(dsn)``, or the value itself, is what connects), shown by
    ``repr`` as :func:`redact` shows it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<DSN {redact(self)}>"


def hidden[T](value: T) -> T:
    """``value`` as a :class:`Dsn` when it is text (else as it is): what a frozen object's
    ``__post_init__`` keeps of each DSN it holds."""
    if isinstance(value, str) and not isinstance(value, Dsn):
        return Dsn(value)  # type: ignore[return-value]
    return value
