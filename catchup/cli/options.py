"""What the commands share: the exit codes they document, the value types they parse, and the
option bundles (jobs, window, format, actor, reason) written once. Imports only click, so
``catchup --help`` stays fast."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..config.bounds import SCHEDULER_GRACE, SERVE_REFRESH, Bound
from ..render.limits import GAP_LIMIT

# Imports inside functions: at first use, so `catchup --help` and each command load only
# what they need.

F = TypeVar("F", bound=Callable[..., Any])

EXIT_CODES = """\b
Exit codes:
  0    done, or nothing to do (including "another replica has it")
  1    gaps found (scan, except --format openmetrics), or a period failed (run, tick, replay)
  2    usage or configuration error (a job that cannot start, too: no attempt counted)
  3    database unreachable or database error
  130  interrupted, or (run) its period cancelled by catchup cancel"""

CANCEL_EXIT_CODES = """\b
Exit codes:
  0    cancelled (recorded so), or asked to stop (--no-wait)
  1    not cancelled: the attempt ended first, or still runs when the wait is over
  2    usage or configuration error (the period is not running: nothing written)
  3    database unreachable or database error
  130  interrupted"""

DOCTOR_EXIT_CODES = """\b
Exit codes:
  0    nothing serious found
  1    something serious: the config, or the database
  130  interrupted"""

DATE_HELP = "a date is the job's local midnight, a time with Z or an offset is absolute"


class When(click.ParamType):  # type: ignore[type-arg]
    """A date or time, checked for form here and read once the job is known: a bare date (or a
    time without an offset) is in each job's own time zone; ``Z`` or an offset is absolute."""

    name = "DATE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from ..config.values import parse_instant

        try:
            parse_instant(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return value


class Reason(click.ParamType):  # type: ignore[type-arg]
    """Why a person changed the ledger: kept in the audit trail, so it must say something."""

    name = "TEXT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from ..api import reason_problem

        problem = reason_problem(str(value))
        if problem is not None:
            self.fail(problem, param, ctx)
        return str(value)


class Listen(click.ParamType):  # type: ignore[type-arg]
    """``HOST:PORT`` (``[::1]:9187`` for IPv6) to listen on."""

    name = "HOST:PORT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from ..config.values import parse_listen

        try:
            return parse_listen(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Seconds(click.ParamType):  # type: ignore[type-arg]
    """A duration (``60s``, ``5m``) between ``low`` and ``high`` seconds, as seconds."""

    name = "DURATION"

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from ..config.values import parse_duration

        try:
            seconds = parse_duration(str(value)).total_seconds()
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if not self.low <= seconds <= self.high:
            self.fail(f"{value}: from {self.low:g}s to {self.high:g}s", param, ctx)
        return seconds


def jobs_option[F: Callable[..., Any]](f: F) -> F:
    """``--job J`` (repeatable): the jobs to act on, every job when none is given."""
    return click.option(
        "--job",
        "job_names",
        multiple=True,
        metavar="JOB",
        help="Only this job (repeatable; default: every job).",
    )(f)


def keys_option[F: Callable[..., Any]](f: F) -> F:
    """``--key K`` (repeatable): only these keys of jobs with keys."""
    return click.option(
        "--key",
        "keys",
        multiple=True,
        metavar="KEY",
        help="Only this key of a job with keys (repeatable; default: every key).",
    )(f)


def one_key_option(what: str) -> Callable[[F], F]:
    """``--key K`` where one key is meant: the same key twice is that key, two different keys
    are refused (click alone keeps the last one given, without a word)."""
    return click.option("--key", multiple=True, metavar="KEY", callback=_one_key, help=what)


def _one_key(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> str | None:
    keys = tuple(dict.fromkeys(value))
    if len(keys) > 1:
        named = ", ".join(ascii(k) for k in keys[:3]) + (", …" if len(keys) > 3 else "")
        raise click.BadParameter(f"one key here, not {len(keys)} ({named})", ctx, param)
    return keys[0] if keys else None


def some_keys_options(what: str) -> Callable[[F], F]:
    """``--key K`` (repeatable) and ``--all-keys``: the keys of a job with keys whose periods
    a command changes or explains."""

    def apply(f: F) -> F:
        f = click.option(
            "--all-keys", is_flag=True, help="Every key expected in the period(s) (not --key)."
        )(f)
        return click.option(
            "--key", "keys", multiple=True, metavar="KEY", help=f"{what} (repeatable)."
        )(f)

    return apply


def window_options(*, since_required: bool = False) -> Callable[[F], F]:
    """``--since`` and ``--until``: which period starts, in each job's own zone."""

    def apply(f: F) -> F:
        f = click.option(
            "--until",
            type=When(),
            help=f"Period starts before this (exclusive); {DATE_HELP}.",
        )(f)
        return click.option(
            "--since",
            type=When(),
            required=since_required,
            help=f"First period start (inclusive); {DATE_HELP}.",
        )(f)

    return apply


def json_option(what: str) -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=what)


def actor_option[F: Callable[..., Any]](f: F) -> F:
    return click.option(
        "--actor", metavar="WHO", help="Who made the change (default: $USER@host)."
    )(f)


def reason_option(*, required: bool) -> Callable[[F], F]:
    return click.option(
        "--reason", type=Reason(), required=required, help="Why; kept in the history."
    )


def every_option[F: Callable[..., Any]](f: F) -> F:
    return click.option(
        "--every",
        type=click.IntRange(1, 60),
        default=5,
        show_default=True,
        help="Minutes between ticks: a divisor of 60, so they come evenly.",
    )(f)


def deadline_option(what: str) -> Callable[[F], F]:
    """``--deadline DURATION``: a recipe's last resort for a hung tick (``what`` it sets)."""
    return click.option(
        "--deadline",
        type=Seconds(60, 7 * 86400),
        default="6h",
        show_default=True,
        metavar="DURATION",
        help=f"{what}: longer than your longest job's timeout.",
    )


def workers_option(bound: Bound, *, what: str) -> Callable[[F], F]:
    """``--workers N``: the pool that runs periods (its connections are N plus two)."""
    return click.option(
        "--workers",
        type=click.IntRange(bound.low, bound.high),
        default=bound.default,
        show_default=True,
        help=f"{what} (overlap = forbid still holds).",
    )


def refresh_option[G: Callable[..., Any]](f: G) -> G:
    """``--refresh DURATION``: how often a served page's scan runs (serve, scheduler --serve)."""
    return click.option(
        "--refresh",
        type=Seconds(SERVE_REFRESH.low, SERVE_REFRESH.high),
        default=f"{SERVE_REFRESH.default:g}s",
        show_default=True,
        metavar="DURATION",
        help="How often to scan the ledger (a page load or a scrape never does).",
    )(f)


def log_output_option[G: Callable[..., Any]](f: G) -> G:
    """``--log-output``: every job's output logged as if it had ``log_output = true``."""
    return click.option(
        "--log-output",
        is_flag=True,
        help="Also print each job's output to stderr, a line at a time after job= key= "
        "period= attempt= (as log_output = true does for one job).",
    )(f)


def scheduler_options(what: str) -> Callable[[F], F]:
    """``--scheduler`` and ``--grace`` of the deploy recipes: the built-in scheduler on every
    replica instead of a timer calling ``catchup tick`` (--every and --deadline then unused)."""

    def apply(f: F) -> F:
        f = click.option(
            "--grace",
            # whole seconds in the recipe: under one it would be written 0s, which the
            # scheduler refuses (a pod or a unit that never starts)
            type=Seconds(max(1, SCHEDULER_GRACE.low), SCHEDULER_GRACE.high),
            default=f"{SCHEDULER_GRACE.default:g}s",
            show_default=True,
            metavar="DURATION",
            help="With --scheduler: how long what runs may finish on a stop (the recipe's "
            "stop timeout is this plus 15 s).",
        )(f)
        return click.option(
            "--scheduler",
            is_flag=True,
            help=f"Instead of ticks: {what}, each serving the page (--every, --deadline and "
            "--serve unused).",
        )(f)

    return apply


def limit_options(what: str) -> Callable[[F], F]:
    """``--limit N`` and ``--all``: how much of a long report people are shown (JSON is always
    complete)."""

    def apply(f: F) -> F:
        f = click.option("--all", "show_all", is_flag=True, help="Show them all.")(f)
        return click.option(
            "--limit",
            "limit_shown",
            type=click.IntRange(1, 1_000_000),
            default=GAP_LIMIT,
            show_default=True,
            help=f"How many {what} (the report says how many more).",
        )(f)

    return apply
