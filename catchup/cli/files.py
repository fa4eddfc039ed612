"""Files catchup writes for people (``scan --output``, ``deploy systemd --output-dir``): whole
or not at all, and never through a link someone left where the file goes."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from ..errors import ConfigError


def link_problem(path: Path) -> str | None:
    """Why ``path`` must not be written: it is a symbolic link (writing through it, as root,
    would overwrite whatever it points at) or a folder; None when it may be."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or "cannot be examined"
    if stat.S_ISLNK(info.st_mode):
        return "is a symbolic link; catchup writes a file there only, never through a link"
    if stat.S_ISDIR(info.st_mode):
        return "is a folder"
    return None


def replace_file(path: Path, text: str, what: str) -> None:
    """Write ``text`` to a new file beside ``path`` (created, never opened through a link),
    then rename it over ``path``: a reader sees the old file or the whole new one, and a link
    at ``path`` is refused, not followed. ``what`` names the option in messages."""
    problem = link_problem(path)
    if problem is not None:
        raise ConfigError(f"{what} {path}: {problem}")
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temp, path)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise ConfigError(f"{what} {path}: {exc.strerror or type(exc).__name__}") from None
