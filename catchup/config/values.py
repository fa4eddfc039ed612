"""The value parsers of catchup.toml and the command line, each bounded where it parses:
durations, instants (a bare date in a job's zone), command placeholders, schema names, and the
stable spread of a job's start."""

from __future__ import annotations

import hashlib
import re
import string
import unicodedata
from datetime import UTC, date, datetime, time, timedelta
from urllib.parse import urlsplit

from ..schedule import Schedule, as_utc, to_utc, to_wall, zone

# matched whole (fullmatch: `$` would let a trailing newline through)
JOB_NAME = re.compile(r"[^\W][\w.-]{0,63}")
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
PLACEHOLDERS = frozenset({"job", "key", "period", "period_start", "period_end", "attempt"})
# a job's key (tenant, region, shard): text of at most this many characters
KEY_LENGTH = 200
_DURATION = re.compile(r"(\d{1,12})\s*(ms|s|m|h|d|w)")
# Bounds, so that nothing parsed can carry a computed time out of PostgreSQL's (or Python's)
# range: durations up to ten years, dates from 1900 to 2199, counts to sensible sizes.
MAX_DURATION = timedelta(days=3650)

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# PostgreSQL's own schemas: a ledger there would mix with the catalog or with everyone's tables
SYSTEM_SCHEMAS = frozenset({"public", "information_schema"})


# Letters that show as nothing: Hangul and halfwidth fillers, the Braille blank; with the
# format characters (zero-width space and joiners, bidi marks) they make a name look like
# another, or a reason look written.
_INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0\u2800\u180e")


def invisible(c: str) -> bool:
    return c in _INVISIBLE or unicodedata.category(c) in ("Cf", "Cc", "Zs", "Zl", "Zp")


def blank(text: str) -> bool:
    """Nothing visible in ``text``: empty, spaces, or only zero-width and filler characters."""
    return all(invisible(c) or c.isspace() for c in text)


def project_problem(name: str) -> str | None:
    """Why ``name`` cannot name a project (``[project] name``); None when it can. Freer than a
    job's name, so a config can say it is a project the ledger knows by its config's path."""
    if blank(name):
        return "a project name needs a visible character"
    if len(name) > 300:
        return "a project name has at most 300 characters"
    if any(invisible(c) and c != " " for c in name):
        return f"{name[:40]!a}: a project name has no control or invisible characters"
    return None


def name_problem(name: str, what: str = "job name") -> str | None:
    """Why ``name`` cannot name a job (or a webhook); None when it can. Letters of any
    language are welcome, but not a name that could pass for another: one with invisible
    characters, one not in Unicode's composed form (NFC), or one that mixes scripts (a
    Cyrillic i among Latin letters)."""
    shown = name if len(name) <= 40 else name[:40] + "…"
    if not JOB_NAME.fullmatch(name):
        return (
            f"{what} {shown!r}: use up to 64 letters, digits, '_', '.' or '-', "
            "starting with a letter or digit"
        )
    if any(invisible(c) for c in name):
        return f"{what} {shown!a}: it holds an invisible character"
    if unicodedata.normalize("NFC", name) != name:
        return f"{what} {shown!a}: write it in composed form (NFC), as keyboards do"
    scripts = sorted({_script(c) for c in name if c.isalpha()} & _LOOKALIKE_SCRIPTS)
    if len(scripts) > 1:
        return (
            f"{what} {shown!a}: it mixes {' and '.join(s.title() for s in scripts)} "
            "letters, so it could pass for another name"
        )
    return None


# scripts whose letters look alike (a Latin a, a Cyrillic a, a Greek alpha): one a name
_LOOKALIKE_SCRIPTS = frozenset({"LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC"})


def _script(c: str) -> str:
    """The script a letter belongs to, as the first word of its Unicode name (LATIN, CYRILLIC,
    GREEK, CJK, …); empty for a letter without a name."""
    return unicodedata.name(c, "").split(" ")[0]


def storable(text: str) -> str:
    """``text`` as PostgreSQL can store it: a NUL byte (no text field may hold one) and a lone
    surrogate (not UTF-8; Python lets an exception's text carry one) become U+FFFD."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a webhook's address, in words that never repeat any of it (its
    path may hold a token); None when it can be posted to."""

    if any(not 0x21 <= ord(c) <= 0x7E for c in url):
        return "it holds a space, a control or a non-ASCII character (percent-encode them)"
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number raises here
    except ValueError:
        return "it does not parse as a URL (an IPv6 host's [ never closed, or a bad port?)"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "expected an http:// or https:// URL with a host"
    return None


def public_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be where the status page is reached (alerts put it in every link
    they post): a webhook's rules, and no user or password, query or fragment."""
    if (said := url_problem(url)) is not None:
        return said
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        return "it holds a user or password (alerts post it in every link): leave them out"
    if parts.query or parts.fragment:
        return "expected the page's address without a ?query or #fragment"
    return None


def schema_problem(name: str) -> str | None:
    """Why ``name`` cannot hold a ledger; None when it can."""
    if not SCHEMA_NAME.fullmatch(name):
        return f"{name[:70]!r} is not a plain lower-case identifier"
    if name in SYSTEM_SCHEMAS or name.startswith("pg_"):
        return f"{name!r} is one of PostgreSQL's own schemas; choose one for catchup, like catchup"
    return None


def parse_duration(value: object, *, allow_zero: bool = False) -> timedelta:
    """``90s``, ``15m``, ``2h``, ``1d``, ``1h30m`` (also ``ms`` and ``w``)."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f'expected a duration like "90s", "15m", "2h", got {type_name(value)}')
    text = value.strip().lower()
    pos = 0
    seconds = 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos and text[pos : match.start()].strip():
            break
        seconds += int(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not text or text[pos:].strip() or pos == 0:
        raise ValueError(f'{value!r} is not a duration like "90s", "15m", "2h" or "1d"')
    if seconds == 0 and not allow_zero:
        raise ValueError(f"{value!r}: must be longer than zero")
    if seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"{value!r} is longer than the longest allowed, 3650d (ten years)")
    return timedelta(seconds=seconds)


def parse_instant(value: object, timezone: str = "UTC") -> datetime:
    """A TOML date/datetime or an ISO 8601 string; a date means midnight and a time without an
    offset is wall-clock time, both in ``timezone`` (UTC unless given)."""
    return parse_written(value, timezone)[0]


def parse_written(value: object, timezone: str = "UTC") -> tuple[datetime, datetime]:
    """:func:`parse_instant`, and the local time in ``timezone`` as it was written (which
    differs from the instant's own local time inside a DST gap)."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime.combine(value, time(0))
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
                moment = datetime.combine(date.fromisoformat(text), time(0))
            else:
                moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"{value!r} is not a date like 2026-10-01 or a time like 2026-10-01T13:00:00Z"
            ) from None
    else:
        raise ValueError(f'expected a date like "2026-10-01", got {type_name(value)}')
    if not datetime(1900, 1, 2) <= moment.replace(tzinfo=None) < datetime(2199, 12, 31):
        raise ValueError(f"{value!s:.40}: dates from 1900-01-02 to 2199-12-30 only")
    tz = zone(timezone)
    if moment.tzinfo is None:
        return to_utc(moment, tz), moment
    return as_utc(moment), to_wall(moment, tz)


def written_as_date(value: object) -> bool:
    """A start written as a date alone (``2026-10-01``), with no time of day."""
    if isinstance(value, str):
        return re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()) is not None
    return isinstance(value, date) and not isinstance(value, datetime)


def check_placeholders(arg: str) -> str | None:
    """None when every ``{…}`` in a command argument is known and formats; else the reason."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(arg) if f is not None]
    except ValueError as exc:
        return f"{arg!r}: {exc} (write {{{{ and }}}} for literal braces)"
    for name in fields:
        base = re.split(r"[.\[]", name, maxsplit=1)[0]
        if base not in PLACEHOLDERS:
            known = ", ".join("{" + p + "}" for p in sorted(PLACEHOLDERS))
            return f"{arg!r}: unknown placeholder {{{name}}}; known: {known}"
    sample = datetime(2026, 10, 31, tzinfo=UTC)
    try:
        arg.format(
            job="j", key="k", period="2026-10-31", period_start=sample, period_end=sample, attempt=1
        )
    except (ValueError, KeyError, IndexError, AttributeError, TypeError) as exc:
        return f"{arg!r}: {exc}"
    return None


def key_problem(key: object) -> str | None:
    """None when ``key`` can be a job's key: text, not empty, at most :data:`KEY_LENGTH`
    characters, no control character (it reaches argv, environments and terminals), no
    zero-width, filler or direction-changing one (a key that looks like another)."""
    if not isinstance(key, str):
        return f"expected text, got {type_name(key)}"
    if key.isascii() and key.isprintable() and 0 < len(key) <= KEY_LENGTH:
        return None  # the usual key, at a million keys a read: none of the checks below fails
    if not key:
        return "is empty"
    if len(key) > KEY_LENGTH:
        return f"{key[:40]!a}…: longer than {KEY_LENGTH} characters"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in key):
        return f"{key[:60]!a} holds a control character"
    if storable(key) != key:
        return f"{key[:60]!a} holds a character PostgreSQL cannot store"
    if any(c != " " and invisible(c) for c in key):  # as a name: it could pass for another key
        return f"{key[:60]!a} holds an invisible or direction-changing character"
    return None


def type_name(value: object) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    names.update({list: "a list", dict: "a table", datetime: "a datetime", date: "a date"})
    return names.get(type(value), type(value).__name__)


SPREAD_DEFAULT = timedelta(minutes=10)


def spread_offset(name: str, bound: timedelta, schedule: Schedule) -> timedelta:
    """A stable delay in ``[0, bound)`` from the job's name (SHA-256, never Python's salted
    ``hash``), whole seconds, at most a quarter of the period, so a fleet of jobs does not all
    start on the hour and each job always starts at the same offset."""
    length = schedule.typical()
    limit = int(min(bound, length / 4).total_seconds())
    if limit < 1:
        return timedelta(0)
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return timedelta(seconds=digest % limit)


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:9187`` for IPv6; a bare ``:PORT`` is localhost) as (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{value!r} is not HOST:PORT, like 127.0.0.1:9187")
    number = int(port)
    if not 1 <= number <= 65535:
        raise ValueError(f"{value!r}: the port must be from 1 to 65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    host = host or "127.0.0.1"
    if any(c.isspace() for c in host) or "/" in host:
        raise ValueError(f"{value!r}: {host!r} is not a host name or address")
    return host, number
