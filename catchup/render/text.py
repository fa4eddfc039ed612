"""The one formatter of each kind every renderer uses: stored text made safe to print, the
colour and glyph of each state, instants, durations and a job's schedule.

Period labels come from the job (:meth:`catchup.config.loading.Job.label`, carried by results as a
``label`` or a ``labeler``); durations are :func:`catchup.schedule.span`; instants are
:func:`catchup.schedule.iso_utc`. Re-exported here so renderers import them from one place.
"""

from __future__ import annotations

import unicodedata

from ..schedule import is_utc, iso_utc, span

__all__ = ["GLYPH", "LEGEND", "STYLE", "iso_utc", "safe", "schedule_text", "seconds", "span"]

STYLE = {
    "succeeded": "green",
    "waived": "cyan",
    "excluded": "dim",  # nobody expects it: calm, never a problem
    "running": "blue",
    "skipped": "dim",
    "failed": "red",
    "exhausted": "bold red",
    "lost": "magenta",
    "interrupted": "yellow",
    "cancelled": "yellow",
    "error": "bold red",
    "unstartable": "bold red",
    "blocked": "bright_black",
    "missing": "yellow",
    "stale": "magenta",
    "suspect": "bold magenta",
    "held": "bold yellow",  # why: a rename in progress (catchup/changes/held.py)
    "waiting": "yellow",  # why: due, every worker of its scheduler lane busy
    "untracked": "dim cyan",
    "unverified": "bold yellow",
    "outdated": "yellow",
}

# A distinct glyph per state, so the calendar reads without colour too (pipes, NO_COLOR).
GLYPH = {
    "succeeded": "■",
    "waived": "▣",
    "excluded": "∅",  # not ⊘: the page shows blocked as ⊘ (web.py)
    "running": "▶",
    "missing": "□",
    "blocked": "⧖",
    "interrupted": "◐",
    "cancelled": "⊖",
    "stale": "◌",
    "suspect": "⁇",
    "failed": "✗",
    "exhausted": "✖",
    "untracked": "▤",
    "unverified": "◇",
    "outdated": "↻",
}
LEGEND = (
    "succeeded",
    "waived",
    "excluded",
    "untracked",
    "running",
    "unverified",
    "outdated",
    "missing",
    "blocked",
    "interrupted",
    "cancelled",
    "stale",
    "suspect",
    "failed",
    "exhausted",
)

# Bidirectional overrides and isolates reorder what a terminal shows ("Trojan Source").
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


# control characters, and the line and paragraph separators (U+2028, U+2029) that many tools
# (log shippers, editors, JavaScript) break a line at
_ESCAPED = frozenset(("Cc", "Zl", "Zp"))


def safe(text: str, *, lines: bool = False) -> str:
    """Text that a user or a job wrote, made fit to print: control characters (escape sequences,
    BEL, backspace, C1 codes, DEL) and bidirectional overrides are shown escaped (``\\x1b``),
    so nothing stored can move the cursor, retitle the terminal, or hide a link. Tabs stay;
    newlines stay where ``lines`` (an output tail), else they are escaped too (a table cell).
    Consoles print with markup off, so brackets are plain text as well."""
    out = []
    for c in text:
        if c == "\t" or (lines and c == "\n"):
            out.append(c)
        elif c in _BIDI or unicodedata.category(c) in _ESCAPED:
            code = ord(c)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(c)
    return "".join(out)


def log_prefix(job: str, key: str, period: str, attempt: int) -> str:
    """What goes before each logged line of a job's output (``log_output``): logfmt fields,
    ``key=`` only for a job with keys, a value quoted when it holds a space, a quote, an ``=``
    or is empty, control characters escaped."""
    fields = [("job", job), ("key", key), ("period", period), ("attempt", str(attempt))]
    return " ".join(f"{name}={logfmt(value)}" for name, value in fields if name != "key" or key)


def logfmt(value: str) -> str:
    """``value`` as one logfmt value: bare when it can be, else quoted and escaped."""
    text = safe(value).replace("\t", "\\t")
    if text and not any(c in text for c in ' "=\\') and text.isprintable():
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def keys_paused(keys: tuple[str, ...] | None) -> str:
    """`` (2 keys paused)`` after a job's name; nothing when none of its keys is."""
    if not keys:
        return ""
    return f" ({len(keys):,} key{'s' if len(keys) > 1 else ''} paused)"


def schedule_text(text: str, timezone: str) -> str:
    """A schedule as people read it: with its time zone unless that is UTC."""
    return text if is_utc(timezone) else f"{text} ({timezone})"


def seconds(value: float | None) -> str:
    """How long a run took: ``12.3s``."""
    return "" if value is None else f"{value:.1f}s"
