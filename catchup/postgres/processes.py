"""The operating-system side of the embedded server: its own system user (PostgreSQL refuses
to run as root), private files and socket folders, and its programs started with an argv list
(never a shell), as that user."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import DatabaseError

SERVER_USER = "embedded_postgres"  # PostgreSQL refuses to run as root
# root's alone (0755), as the lock must be: /run, or /etc on a system without one
USERADD_LOCK = "/run/catchup-useradd.lock" if os.path.isdir("/run") else "/etc/.catchup-useradd"
USERADD_WAIT = 30.0  # seconds another catchup may take to make the server's user
_SOCKET_MAX = 100  # sun_path is 108 bytes; leave room for ".s.PGSQL.NNNNN"


def server_user(*, create: bool = True, name: str = SERVER_USER) -> pwd.struct_passwd | None:
    """The system user the embedded server runs as (as root; None otherwise), made when it is
    not there yet (``create``). catchup's first commands on a fresh machine, started at once,
    each find it missing: they make it one at a time, under a lock of catchup's own, each
    looking again first. (useradd run at once by several processes here gave them different
    uids for one name, one of them lost: files chowned to it were out of the server's reach.)"""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(name)
    except KeyError:
        if not create:
            return None
    with _useradd_lock():
        try:  # made by another catchup while this one waited
            return pwd.getpwnam(name)
        except KeyError:
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                check=True,
                capture_output=True,
            )
        return pwd.getpwnam(name)


@contextlib.contextmanager
def _useradd_lock() -> Iterator[None]:
    """catchup's lock on making a system user: a file in a folder of root's alone (never one
    others may write to), taken within USERADD_WAIT seconds."""
    try:
        fd = os.open(USERADD_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise DatabaseError(
            f"cannot make the embedded server's user: {USERADD_LOCK}: {exc.strerror}"
        ) from None
    try:
        deadline = time.monotonic() + USERADD_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise DatabaseError(
                        f"another process has held {USERADD_LOCK} for {USERADD_WAIT:.0f} s: "
                        f"cannot make the embedded server's user"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # the lock goes with it


def write_private(path: Path, text: str, user: pwd.struct_passwd | None) -> None:
    """Write ``path`` 0600 for the server's user, replacing (never following) what was there."""
    temp = path.with_name(path.name + ".new")
    temp.unlink(missing_ok=True)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    if user is not None:
        os.chown(temp, user.pw_uid, user.pw_gid)
    os.replace(temp, path)


def socket_dir(data: Path, user: pwd.struct_passwd | None) -> Path:
    """The data folder when its path fits a socket address; else a new private folder with an
    unpredictable name (mkdtemp: created, never found, so nothing planted can be used)."""
    if len(str(data)) < _SOCKET_MAX:
        return data
    path = Path(tempfile.mkdtemp(prefix="catchup-"))
    if user is not None:
        os.chown(path, user.pw_uid, user.pw_gid)
    return path


def pg_ctl(bins: Path, data: Path, args: list[str]) -> None:
    run(bins, "pg_ctl", ["-D", str(data), *args], server_user())


def run(bins: Path, program: str, args: list[str], user: pwd.struct_passwd | None) -> None:
    with tempfile.TemporaryFile() as out:
        try:
            result = spawn(bins, program, args, user, out)
        except OSError as exc:
            raise DatabaseError(f"cannot run {bins / program}: {exc.strerror}") from None
        if result.returncode != 0:
            out.seek(0)
            tail = out.read().decode(errors="replace").strip().splitlines()[-3:]
            raise DatabaseError(f"{program} failed: {' / '.join(tail)}")


def launch(argv: list[str], user: pwd.struct_passwd | None, log: int) -> None:
    """Start ``argv`` in the background, detached: ``setsid --fork`` makes it nobody's child (it
    outlives this process, in a session of its own). An argv list: no shell."""
    launcher = shutil.which("setsid")
    options: dict[str, Any] = {
        "stdin": subprocess.DEVNULL,
        "stdout": log,
        "stderr": subprocess.STDOUT,
        "user": user.pw_uid if user else None,
        "group": user.pw_gid if user else None,
        "extra_groups": [] if user else None,
        "cwd": "/",
        "start_new_session": True,
    }
    try:
        if launcher is not None:
            subprocess.run([launcher, "--fork", *argv], check=True, **options)
        else:
            subprocess.Popen(argv, **options)  # a child of ours, left running
    except (OSError, subprocess.CalledProcessError) as exc:
        raise DatabaseError(f"cannot start {argv[0]}: {exc}") from None


def spawn(
    bins: Path, program: str, args: list[str], user: pwd.struct_passwd | None, out: Any
) -> subprocess.CompletedProcess[bytes]:
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
