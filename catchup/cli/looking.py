"""``scan``, ``jobs``, ``history`` and ``explain``: the commands that report."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..config.bounds import ATTEMPT_MOST, EXPLAIN_COUNT, HISTORY_LIMIT, KEYS_SHOWN, PS_LIMIT
from ..errors import EXIT_DATABASE, EXIT_FAILED, EXIT_USAGE, ConfigError
from .base import State, _safe, console, pass_state, show
from .options import (
    DATE_HELP,
    EXIT_CODES,
    When,
    jobs_option,
    json_option,
    keys_option,
    limit_options,
    one_key_option,
    some_keys_options,
    window_options,
)

if TYPE_CHECKING:
    from ..results import KeysReport

# Imports inside functions: at first use, so `catchup --help` and each command load only
# what they need.

JSON_PAGE = 50_000  # keys read at a time by `catchup keys --json` (the first page counts them)


@click.command(epilog=EXIT_CODES)
@jobs_option
@window_options()
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown", "openmetrics"]),
    default="table",
    show_default=True,
    help="How to report.",
)
@json_option("Same as --format json.")
@click.option("--calendar", is_flag=True, help="Add a calendar heat map per job (table format).")
@click.option(
    "--full",
    is_flag=True,
    help="Read every period again instead of trusting what is known complete.",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Also save the table report as FILE: .svg, .html or .txt.",
)
@limit_options("gap ranges the table and Markdown show, oldest first")
@click.option(
    "--notify",
    is_flag=True,
    help="Post new, grown and closed gap ranges to the [alerts] webhooks (each told once).",
)
@keys_option
@pass_state
def scan(  # noqa: C901
    state: State,
    job_names: tuple[str, ...],
    keys: tuple[str, ...],
    since: str | None,
    until: str | None,
    fmt: str,
    as_json: bool,
    calendar: bool,
    full: bool,
    output: str | None,
    limit_shown: int,
    show_all: bool,
    notify: bool,
) -> None:
    """Find the periods that were never run, failed, or are stuck, and report them.

    Each job's expected periods (from its start, or --since, to the last due one, or --until)
    are checked against the ledger on the database clock. Gaps are missing, failed, exhausted
    and stale periods, oldest first; running periods and paused jobs are shown but are not gaps.
    A bare date is each job's own local midnight. Tables and Markdown lead with a line per job,
    then the oldest --limit gap ranges; --json is always complete. Gaps exit 1, except with
    --format openmetrics (the metrics carry them, for a textfile collector).

    Example: catchup scan --since 2026-10-01 --format markdown >> "$GITHUB_STEP_SUMMARY"
    """
    from ..render import documents, json, pulse
    from ..render import scan as scan_report
    from . import files

    if output is not None and not output.endswith((".svg", ".html", ".txt")):
        raise ConfigError(f"--output {output}: the name must end in .svg, .html or .txt")
    if output is not None and not os.access(Path(output).parent, os.W_OK):
        raise ConfigError(f"--output {output}: no folder {Path(output).parent} to write into")
    if output is not None and (problem := files.link_problem(Path(output))) is not None:
        raise ConfigError(f"--output {output}: {problem}")
    fmt = "json" if as_json else fmt
    shown = None if show_all else limit_shown
    with_calendars = output is not None or (calendar and fmt == "table")
    app = state.app()
    if notify and app.config.alerts is None:
        raise ConfigError("--notify needs an [alerts] section with a webhook in catchup.toml")
    result = app.scan(
        jobs=job_names, since=since, until=until, full=full, calendars=with_calendars, keys=keys
    )
    if notify:
        for line in app.notify(result):
            click.echo(f"catchup: {line} (tried again later)", err=True)
    if fmt == "json":
        for chunk in json.scan_json_chunks(result):
            click.echo(chunk, nl=False)
        click.echo()
    elif fmt == "markdown":
        click.echo(documents.scan_markdown(result, limit=shown), nl=False)
    elif fmt == "openmetrics":
        click.echo(documents.scan_openmetrics(result), nl=False)
    else:
        out = console()
        scan_report.scan_tables(out, result, limit=shown)
        if result.pulse is not None:
            pulse.scheduler(out, result.pulse)
        if calendar:
            scan_report.calendars(out, result.calendars)
    if output is not None:
        files.replace_file(
            Path(output), scan_report.export(output, result, limit=shown), "--output"
        )
    for failure in result.keys_failed:  # each in one line; the other jobs in full above
        click.echo(f"catchup: {_safe(failure.scan_line)}", err=True)
    if any(job.evidence_error for job in result.jobs) or any(
        f.database for f in result.keys_failed
    ):
        sys.exit(EXIT_DATABASE)  # reported above, each in its job's row: the rest in full
    if result.keys_failed:
        sys.exit(EXIT_USAGE)  # keys refused: the config's query needs a person, not a gap
    # the metrics carry the gaps: a textfile collector's `scan … > f.tmp && mv f.tmp f.prom`
    # must publish them exactly when there are some
    if result.has_gaps and fmt != "openmetrics":
        sys.exit(EXIT_FAILED)


@click.command(epilog=EXIT_CODES)
@json_option("Print JSON instead of a table.")
@pass_state
def jobs(state: State, as_json: bool) -> None:
    """List the configured jobs: schedule, last success, next due, done/expected periods.

    Example: catchup jobs --json
    """
    from ..render import json, tables

    report = state.app().jobs()
    show(report, as_json, json.jobs_json, tables.jobs)
    for failure in report.keys_failed:  # counted on the keys read last: a person must look
        click.echo(f"catchup: {_safe(failure.scan_line)}", err=True)
    if report.keys_failed:
        sys.exit(max(f.exit_code for f in report.keys_failed))


@click.command(epilog=EXIT_CODES)
@click.argument("job")
@click.option(
    "--period",
    type=When(),
    help=f"Only this period (shows its last output too); {DATE_HELP}.",
)
@click.option(
    "--limit",
    type=click.IntRange(HISTORY_LIMIT.low, HISTORY_LIMIT.high),
    default=HISTORY_LIMIT.default,
    show_default=True,
    help="Show at most this many attempts and changes (the report says how many there are).",
)
@click.option(
    "--attempt",
    type=click.IntRange(1, ATTEMPT_MOST),
    help="Only this attempt of the --period, with all of its output tail.",
)
@one_key_option("Only this key of a job with keys.")
@json_option("Print JSON instead of a table.")
@pass_state
def history(
    state: State,
    job: str,
    period: str | None,
    limit: int,
    attempt: int | None,
    key: str | None,
    as_json: bool,
) -> None:
    """Show the attempts of JOB, newest first, or of one period with --period (each attempt's
    output tail, error and exit code: why attempt 1 failed before attempt 2 succeeded), and
    the changes made to it (marks, resets, pauses, windows excluded and undone, schedule and
    start changes).

    Example: catchup history billing --period 2026-10-31 --attempt 1
    """
    from ..render import json, tables

    result = state.app().history(job, period=period, limit=limit, key=key, attempt=attempt)
    show(result, as_json, json.history_json, tables.history)


@click.command(epilog=EXIT_CODES)
@click.option(
    "--limit",
    type=click.IntRange(PS_LIMIT.low, PS_LIMIT.high),
    default=PS_LIMIT.default,
    show_default=True,
    help="Show at most this many (the report says how many run).",
)
@json_option("Print JSON instead of a table.")
@pass_state
def ps(state: State, limit: int, as_json: bool) -> None:
    """List every period running now, on every host: job, key, period, attempt, host:pid, how
    long it has run and how long its lease has left (a lease gone by is a runner that is gone;
    the next claim takes the period over). Oldest claim first; read-only.

    Example: catchup ps --json
    """
    from ..render import running

    show(state.app().ps(limit=limit), as_json, running.ps_json, running.ps)


@click.command(
    epilog="Exit codes: 0 nothing would run at once, 1 the first tick after the change would "
    "run periods the current config's would not, 2 bad input (either config), 3 database error."
)
@click.argument("new_config", metavar="NEW.toml", type=click.Path(dir_okay=False))
@json_option("Print JSON instead of text.")
@pass_state
def plan(state: State, new_config: str, as_json: bool) -> None:
    """Say what NEW.toml would do to the ledger before it is deployed, writing nothing.

    Each job of NEW.toml against the ledger it names: added, held (new, with the schedule of
    a job it no longer names: nothing runs), renamed (renamed_from), redefined (what differs:
    schedule, time zone, start, what it runs, and the settings that differ from the current
    config's), unchanged; and the ledger's jobs it no longer names, removed. A keyed job's
    keys as its new query returns them against those recorded; each job's periods expected,
    excluded and gaps from its start to now, with what they were. Then the periods the first
    tick after the change would run at once that the current config's first tick would not
    (the current config: --config, or the catchup.toml found here, when it is another file on
    the same ledger; without one, every period the first tick would run). Exit 1 when there
    are any, so CI can hold a change until someone has looked.

    Example: catchup plan deploy/catchup.toml
    """
    from ..render.plan import plan_json, plan_text

    result = state.app(require_config=False).plan(new_config)
    show(result, as_json, plan_json, plan_text)
    if result.runs:
        sys.exit(EXIT_FAILED)


@click.command(epilog=EXIT_CODES)
@click.argument("job")
@json_option("Print JSON instead of a table.")
@pass_state
def keys(state: State, job: str, as_json: bool) -> None:
    """List the keys of JOB (a job with keys), in key order: from when each is expected, when
    it was first and last seen, and when it was gone. Reads the job's keys query (or list) and
    records what it returns, as tick, scan and replay do. The table shows the first 1,000 and
    counts them all; --json lists every key.

    Example: catchup keys invoice
    """
    from ..render import json, tables

    app = state.app()
    if not as_json:
        show(app.keys(job, limit=KEYS_SHOWN), as_json, json.keys_json, tables.keys)
        return

    def pages() -> Iterator[KeysReport]:  # a page at a time: a job may have a million keys
        page = app.keys(job, limit=JSON_PAGE)
        yield page
        while page.next_after is not None:
            page = app.keys(job, after=page.next_after, limit=JSON_PAGE, counts=page.counts)
            yield page

    for chunk in json.keys_json_chunks(pages()):
        click.echo(chunk, nl=False)
    click.echo()


@click.command(epilog=EXIT_CODES)
@click.argument("job")
@click.argument("period", type=When())
@some_keys_options("The key whose period it is")
@json_option("Print JSON instead of text.")
@pass_state
def why(
    state: State, job: str, period: str, keys: tuple[str, ...], all_keys: bool, as_json: bool
) -> None:
    """Say why PERIOD of JOB is in its state: not due yet (and when), running where, blocked
    by which upstream periods (down the chain to what blocks them), failed with which error
    and when it retries, exhausted, paused, waiting for a free worker of the scheduler, or
    done; with the command that would move it.
    A job with keys, without one --key: how many of its keys are in each state, the first
    few of each state not done, and the paused ones.

    Example: catchup why billing 2026-11-25
    """
    from ..render import json, why

    result = state.app().why(job, period, keys=keys, all_keys=all_keys)
    show(result, as_json, json.why_json, why.why_text)


@click.command(epilog=EXIT_CODES)
@click.argument("job")
@click.option(
    "--since",
    "--from",
    "start",
    type=When(),
    help=f"Start at the period containing this (default: the current period); {DATE_HELP}. "
    "Given, it reads catchup.toml alone: no database, the job's schedule as configured, due "
    "times on this host's clock. (--from: its old name.)",
)
@click.option(
    "--limit",
    "--count",
    "count",
    type=click.IntRange(EXPLAIN_COUNT.low, EXPLAIN_COUNT.high),
    default=EXPLAIN_COUNT.default,
    show_default=True,
    help="How many periods to spell out. (--count: its old name.)",
)
@json_option("Print JSON instead of a table.")
@pass_state
def explain(state: State, job: str, start: str | None, count: int, as_json: bool) -> None:
    """Spell out JOB's periods: UTC and local bounds, length, and when each falls due, with
    notes on what to watch: periods a DST change makes shorter or longer, local times a DST
    change skips or repeats in the 400 days from the first period shown (and what systemd and
    cron would do with them instead), a job due exactly on the hour with others.

    Example: catchup explain billing --limit 5
    """
    from ..render import explain as rendered

    result = state.app().explain(job, start=start, count=count)
    show(result, as_json, rendered.explanation_json, rendered.explanation)
