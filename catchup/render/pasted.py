"""Commands printed for a person to paste into a shell: ``why`` and its JSON, the status pages,
the hints of scan, doctor and refusals, the deploy recipes' headers. Every value in them is
quoted (``shlex.quote``), so a key read from a customers' table (``ev il;$(touch x)``) stays
one argument when pasted and never becomes shell syntax. Pure: one place builds them all."""

from __future__ import annotations

import shlex

# what a person fills in before running the command: constant text, never a value
REASON = '--reason "…"'


def shell(*words: str) -> str:
    """A command line of ``words``, each quoted where the shell would read it otherwise."""
    return " ".join(shlex.quote(word) for word in words)


def command(*words: str, key: str = "", reason: bool = False) -> str:
    """``catchup WORD…``, its values quoted; ``--key KEY`` with ``key`` (one key's series),
    and the ``--reason "…"`` to fill in with ``reason``."""
    line = shell("catchup", *words, *(("--key", key) if key else ()))
    return f"{line} {REASON}" if reason else line


def keyed(line: str, key: str) -> str:
    """A command built by :func:`command` for one key's series: ``--key KEY`` added."""
    return f"{line} {shell('--key', key)}"
