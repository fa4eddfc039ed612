"""The operating-system side of the embedded server: its own system user (PostgreSQL refuses
to run as root), private files and socket folders, and its programs started with an argv list
(never a shell), as that user."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ..errors import DatabaseError

SERVER_USER = "embedded_postgres"  # PostgreSQL refuses to run as root
_SOCKET_MAX = 100  # sun_path is 108 bytes; leave room for ".s.PGSQL.NNNNN"


def server_user(*, create: bool = True) -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER)
    except KeyError:
        if not create:
            return None
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
