"""The embedded server's start lock: one process starts (or makes) the server while the others
wait for it, within a bound; a holder stopped with Ctrl-Z is named, never waited on for ever."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import ConfigError, DatabaseError

LOCK_WAIT = 120.0  # seconds: a first start (initdb) takes a few
STOPPED_GRACE = 2.0  # seconds a stopped holder (Ctrl-Z) is given before it is named


@contextlib.contextmanager
def locked(path: Path, wait: float = LOCK_WAIT) -> Iterator[None]:
    """The folder's start lock, waited for with a bound; the holder's pid is written into it,
    so a process that holds it too long (stopped with Ctrl-Z, or hung) is named."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise ConfigError(
            f"CATCHUP_HOME: cannot use {path.parent} for the embedded server: {exc.strerror}"
        ) from None
    try:
        started = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - started
                holder = _holder(fd)
                stopped = holder is not None and _state(holder) in ("T", "t")
                if waited >= wait or (stopped and waited >= STOPPED_GRACE):
                    raise DatabaseError(_held_too_long(path, holder, stopped, waited)) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _holder(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _state(pid: int) -> str | None:
    """A process's state letter from /proc (``T``: stopped); None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _held_too_long(path: Path, pid: int | None, stopped: bool, waited: float) -> str:
    who = "another process" if pid is None else f"process {pid}"
    if stopped:
        return (
            f"{who} holds {path} (it starts the embedded server) and is stopped (Ctrl-Z?): "
            f"resume it with `kill -CONT {pid}` or end it, then try again"
        )
    return (
        f"{who} has held {path} (it starts the embedded server) for {waited:.0f} s; "
        "wait for it, or end it if it hangs, then try again"
    )
