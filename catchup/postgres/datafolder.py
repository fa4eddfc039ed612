"""The embedded server's data folder: made aside (``initdb`` in a side folder with a marker, then
renamed into place whole), checked before each start (a link, a file, a half-made or foreign
folder is refused, never removed), its settings rewritten, its password kept 0600 beside it."""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import stat
from pathlib import Path

from ..errors import ConfigError, DatabaseError
from .processes import run, socket_dir, write_private

# Imports inside functions: at first use: reading a DSN or a config never loads the driver
# nor the ledger.

PASSWORD_FILE = "catchup.password"  # in the data folder, 0600
SETTINGS_FILE = "catchup.conf"  # rewritten at each start, included by postgresql.conf
_HBA = "# catchup: local connections only, with the password from catchup.password\n" + (
    "local all all scram-sha-256\n"
)


def password(data: Path) -> str | None:
    """The server's password, from its data folder; None for a server that predates it."""
    try:
        return (data / PASSWORD_FILE).read_text().strip() or None
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DatabaseError(f"cannot read the embedded server's password: {exc.strerror}") from None


INIT_MARKER = "catchup-initdb"  # written first in a folder catchup makes a new server in


def read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def check_data(data: Path) -> None:
    """Refuse a data folder catchup did not make, rather than start in it or remove it: a link,
    a file, a folder with no server's data in it, or one with only part of it."""
    try:
        info = os.lstat(data)
    except FileNotFoundError:
        return
    hint = "move it away, or choose another CATCHUP_HOME; catchup leaves it as it is"
    if stat.S_ISLNK(info.st_mode):
        raise ConfigError(f"CATCHUP_HOME: {data} is a symbolic link, not a server's data: {hint}")
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"CATCHUP_HOME: {data} is a file, not a server's data folder: {hint}")
    if not (data / "PG_VERSION").exists():
        if not any(data.iterdir()):
            data.rmdir()  # empty: nothing to lose, made anew in its place
            return
        raise ConfigError(
            f"CATCHUP_HOME: {data} holds files but no PostgreSQL data (no PG_VERSION): {hint}"
        )
    if not (data / "global" / "pg_control").exists():
        raise ConfigError(
            f"CATCHUP_HOME: {data} is not a whole PostgreSQL data folder (PG_VERSION but no "
            f"global/pg_control): {hint}"
        )


def create(bins: Path, data: Path, user: pwd.struct_passwd | None) -> None:
    """initdb in a folder of catchup's own beside ``data`` (its marker written first), then one
    rename into place. Folders left by an interrupted start are removed first: only those that
    carry the marker and hold nothing but what catchup puts there."""
    parent = data.parent
    for old in parent.glob(f".{data.name}.init-*"):
        if _only_ours(old):
            # renamed away first: an initdb orphaned by the interrupted start may still write
            # into it by its old path (it then fails), and what it leaves goes on the next try
            gone = parent / f".{data.name}.gone-{secrets.token_hex(6)}"
            with contextlib.suppress(OSError):
                os.rename(old, gone)
    for gone in parent.glob(f".{data.name}.gone-*"):
        shutil.rmtree(gone, ignore_errors=True)
    aside = parent / f".{data.name}.init-{secrets.token_hex(6)}"
    aside.mkdir(mode=0o700)
    (aside / INIT_MARKER).write_text("a new embedded server, made by catchup; not yet in use\n")
    made = aside / "data"
    made.mkdir(mode=0o700)
    if user is not None:
        os.chown(aside, user.pw_uid, user.pw_gid)
        os.chown(made, user.pw_uid, user.pw_gid)
    _initdb(bins, made, aside, user)
    os.rename(made, data)
    shutil.rmtree(aside, ignore_errors=True)


def _only_ours(folder: Path) -> bool:
    try:
        return (
            stat.S_ISDIR(os.lstat(folder).st_mode)
            and (folder / INIT_MARKER).is_file()
            and {p.name for p in folder.iterdir()} <= {INIT_MARKER, "pw", "data"}
        )
    except OSError:
        return False


def _initdb(bins: Path, data: Path, aside: Path, user: pwd.struct_passwd | None) -> None:
    secret = secrets.token_hex(24)
    # initdb reads the password from a file: in the private folder the server is made in
    pwfile = aside / "pw"
    fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secret + "\n")
    if user is not None:
        os.chown(pwfile, user.pw_uid, user.pw_gid)
    try:
        run(
            bins,
            "initdb",
            [
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=scram-sha-256",
                f"--pwfile={pwfile}",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            user,
        )
    finally:
        pwfile.unlink(missing_ok=True)
    write_private(data / PASSWORD_FILE, secret + "\n", user)
    (data / "pg_hba.conf").write_text(_HBA)
    with open(data / "postgresql.conf", "a") as conf:
        conf.write(
            "\n# catchup: a local server for one host\n"
            "listen_addresses = ''\n"
            "max_connections = 200\n"
            "timezone = 'UTC'\n"
            "log_timezone = 'UTC'\n"
        )


def settings(data: Path, user: pwd.struct_passwd | None) -> None:
    """Write this start's socket folder to the server's configuration (never a command line)."""
    folder = socket_dir(data, user)
    # unix_socket_directories is a list: the folder as one double-quoted element, inside a
    # single-quoted configuration string
    element = '"' + str(folder).replace('"', '""') + '"'
    value = "'" + element.replace("\\", "\\\\").replace("'", "''") + "'"
    write_private(
        data / SETTINGS_FILE,
        f"# written by catchup at each start\nunix_socket_directories = {value}\n",
        user,
    )
    conf = data / "postgresql.conf"
    include = f"include_if_exists = '{SETTINGS_FILE}'"
    if include not in conf.read_text():
        with open(conf, "a") as out:
            out.write(f"\n{include}\n")


def require_password(data: Path, user: pwd.struct_passwd | None, socket: Path, port: int) -> None:
    """A server made before catchup set a password (trust), running on ``socket`` and
    ``port``: give it one, and require it."""
    import psycopg

    from ..ledger import Ledger

    secret = secrets.token_hex(24)
    with psycopg.connect(
        host=str(socket),
        port=port,
        user="postgres",
        dbname="postgres",
        autocommit=True,
    ) as conn:
        ledger = Ledger(conn, "postgres")  # no ledger here: the bootstrap statements only
        ledger.set_password(secret)
        write_private(data / PASSWORD_FILE, secret + "\n", user)
        (data / "pg_hba.conf").write_text(_HBA)
        ledger.reload_conf()
