"""Where a key of catchup.toml was written: its line number, so every problem is reported as
``catchup.toml:12: …`` (tomllib parses values but forgets lines)."""

from __future__ import annotations

import json
import re


def toml_error(name: str, message: str, last_line: int) -> str:
    match = re.search(r"\(at line (\d+), column (\d+)\)$", message)
    if match:
        reason = message[: match.start()].strip()
        return f"{name}:{match.group(1)}: invalid TOML: {reason} (column {match.group(2)})"
    match = re.search(r"\(at end of document\)$", message)
    if match:
        reason = message[: match.start()].strip()
        return f"{name}:{last_line}: invalid TOML: {reason} at the end of the file"
    return f"{name}: invalid TOML: {message}"


_HEADER = re.compile(r"^\s*\[(?!\[)\s*(.+?)\s*\]\s*(#.*)?$")
_KEY = re.compile(
    r"""^\s*((?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*="""
)
_PART = re.compile(r"""\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)\s*(?:\.|$)""")


class KeyLines:
    """Line numbers of tables and keys in a TOML text, for error messages (tomllib has none)."""

    def __init__(self, text: str) -> None:
        self.lines: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        for number, line in enumerate(text.splitlines(), start=1):
            header = _HEADER.match(line)
            if header:
                table = _split_key(header.group(1))
                self.lines.setdefault(table, number)
                continue
            key = _KEY.match(line)
            if key:
                path = table + _split_key(key.group(1))
                for i in range(len(table) + 1, len(path) + 1):
                    self.lines.setdefault(path[:i], number)

    def find(self, path: tuple[str, ...]) -> int:
        """The line of ``path``, or of its nearest enclosing table, or 1."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return 1


def _split_key(text: str) -> tuple[str, ...]:
    parts = []
    for match in _PART.finditer(text):
        part = match.group(1)
        if part[0] == '"':
            try:
                part = json.loads(part)
            except ValueError:
                part = part[1:-1]
        elif part[0] == "'":
            part = part[1:-1]
        parts.append(part)
    return tuple(parts)
