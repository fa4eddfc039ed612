"""Errors that end a command, each with its documented exit code."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_DATABASE = 3
EXIT_INTERRUPTED = 130


class CatchupError(Exception):
    """A failure reported to the user as one line and an exit code."""

    exit_code = EXIT_FAILED


class ConfigError(CatchupError):
    """The configuration or the command line is wrong; nothing was written."""

    exit_code = EXIT_USAGE

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class DatabaseError(CatchupError):
    """The database is unreachable, too old, or refused a statement."""

    exit_code = EXIT_DATABASE


class Unconfirmed(CatchupError):
    """With ``durable_claims``, a claim committed on the primary but the synchronous standby
    did not confirm it within the claim's lease: the period is not started. Not a
    :class:`DatabaseError` on purpose: the claim path must not reconnect and take back a claim
    that a failover could still lose."""

    exit_code = EXIT_DATABASE


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (a driver error's DETAIL and HINT follow it),
    or its type's name when it has none."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def describe(exc: BaseException) -> str:
    """``Type: text`` of an exception, whatever its ``__str__`` does (raises, returns a
    non-string): the text is then said to be unreadable, never missing."""
    name = type(exc).__name__
    try:
        text = str(exc)
    except BaseException:
        return f"{name}: <its text could not be rendered>"
    return f"{name}: {text}" if text else name
