"""The command line: parse, call the library, render, and map every failure to an exit code."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from . import __version__
from .errors import (
    EXIT_DATABASE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    CatchupError,
    ConfigError,
    first_line,
)

if TYPE_CHECKING:
    from rich.console import Console

    from .config import Config
    from .core import Session

EXIT_CODES = """\b
Exit codes:
  0    done, or nothing to do (including "another replica has it")
  1    gaps found (scan), or a period failed (run, tick, replay)
  2    usage or configuration error
  3    database unreachable or database error
  130  interrupted"""


class Instant(click.ParamType):  # type: ignore[type-arg]
    """``2026-10-01`` (UTC midnight) or an ISO 8601 time with an offset."""

    name = "DATE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, datetime):
            return value
        from .config import parse_instant

        try:
            return parse_instant(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class Reason(click.ParamType):  # type: ignore[type-arg]
    """Why a person changed the ledger: kept in the audit trail, so it must say something."""

    name = "TEXT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not str(value).strip():
            self.fail("must say why (it is kept in the history)", param, ctx)
        if len(str(value)) > 1000:
            self.fail("at most 1,000 characters", param, ctx)
        return str(value)


class JobInstant(click.ParamType):  # type: ignore[type-arg]
    """Like :class:`Instant`, but read once the job is known: a date, or a time without an
    offset, is in the job's time zone. Checked for form here, resolved by :func:`_in_zone`."""

    name = "DATE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from .config import parse_instant

        try:
            parse_instant(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return value


def _in_zone(value: str | None, job: Any) -> datetime | None:
    from .config import parse_instant

    return None if value is None else parse_instant(value, job.timezone)


class State:
    """What every command shares: the options of the group, and lazily the config and ledger."""

    def __init__(self, config_path: str | None, dsn: str | None, quiet: bool) -> None:
        self.config_path = config_path
        self.dsn = dsn
        self.quiet = quiet
        self._config: Config | None = None

    def config(self, *, required: bool = True) -> Config:
        if self._config is None:
            from .config import find_config, load_config

            path = find_config(self.config_path)
            if path is None and required:
                raise ConfigError(
                    f"no catchup.toml in {Path.cwd()} or its parents (use --config or "
                    "CATCHUP_CONFIG)"
                )
            self._config = load_config(path)
        return self._config

    @contextmanager
    def session(self, *, config_required: bool = True, prepare: bool = True) -> Iterator[Session]:
        from . import db
        from .core import Session

        config = self.config(required=config_required)
        target = db.resolve(
            self.dsn, config.dsn, embedded_allowed=config.embedded, project=config.project
        )
        session = Session(config, target, prepare=prepare)
        if not self.quiet:
            from rich.text import Text

            err_console().print(
                Text(
                    f"database: {target.describe()}, PostgreSQL "
                    f"{db.server_version(session.conn)}, schema {config.schema}"
                    + (f" ({target.note})" if target.note else ""),
                    style="dim",
                ),
                soft_wrap=True,
            )
        try:
            yield session
        finally:
            session.close()


def console(stderr: bool = False) -> Console:
    """Rich on a terminal; on a pipe no colour codes and wide enough that tables do not fold."""
    from rich.console import Console

    # markup off: names, reasons and errors that users and jobs wrote are text, never markup
    out = Console(stderr=stderr, highlight=False, markup=False, emoji=False)
    if not out.is_terminal:
        width = max(out.width, 200)
        out = Console(stderr=stderr, highlight=False, markup=False, emoji=False, width=width)
    return out


def err_console() -> Console:
    return console(stderr=True)


class CatchupGroup(click.Group):
    """Turns every failure into one line on stderr and the documented exit code."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        # click shows a usage error as four lines (usage, hint, blank, error): one line here
        standalone = kwargs.pop("standalone_mode", True)
        try:
            value = super().main(*args, standalone_mode=False, **kwargs)  # type: ignore[call-overload]
        except click.UsageError as exc:
            if not standalone:
                raise
            # `catchup` alone (click 8.2+): the help itself, as click shows it
            if isinstance(exc, getattr(click.exceptions, "NoArgsIsHelpError", ())):
                exc.show()
                sys.exit(exc.exit_code)
            command = exc.ctx.command_path if exc.ctx is not None else "catchup"
            click.echo(f"catchup: {exc.format_message()} (see {command} --help)", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            if not standalone:
                raise
            exc.show()
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            if not standalone:
                raise
            click.echo("catchup: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        if not standalone:
            return value
        sys.exit(value if isinstance(value, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CatchupError as exc:
            for line in str(exc).splitlines() or [type(exc).__name__]:
                click.echo(f"catchup: {line}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("catchup: interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except Exception as exc:
            psycopg = sys.modules.get("psycopg")
            if psycopg is not None and isinstance(exc, psycopg.Error):
                first = first_line(exc)
                click.echo(f"catchup: database error: {first}", err=True)
                ctx.exit(EXIT_DATABASE)
            raise


@click.group(cls=CatchupGroup, epilog=EXIT_CODES)
@click.version_option(__version__, prog_name="catchup")
@click.option(
    "--config",
    "config_path",
    metavar="PATH",
    envvar="CATCHUP_CONFIG",
    help="catchup.toml to use (default: found in this directory or a parent).",
)
@click.option(
    "--dsn",
    metavar="DSN",
    help="PostgreSQL to use (default: CATCHUP_DSN, [database] dsn, DATABASE_URL, "
    "PG* variables, else the embedded server).",
)
@click.option("-q", "--quiet", is_flag=True, help="Do not print which database is used.")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, dsn: str | None, quiet: bool) -> None:
    """Run once-per-period jobs exactly once per period, find missed periods, replay them.

    Periods are half-open UTC intervals. Every replica may call catchup; the ledger in
    PostgreSQL makes sure each period runs once.
    """
    ctx.obj = State(config_path, dsn, quiet)


pass_state = click.make_pass_decorator(State)


@contextmanager
def _stop_signals() -> Iterator[threading.Event]:
    """SIGINT and SIGTERM set an event the runner watches: the job is stopped and recorded."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@cli.command(epilog=EXIT_CODES)
@click.argument("job")
@click.option(
    "--period",
    type=JobInstant(),
    help="The period start to run (default: the latest due); a date is in the job's time zone.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@pass_state
def run(state: State, job: str, period: str | None, as_json: bool) -> None:
    """Run one period of JOB through the claim path.

    Without --period, runs the latest due period. Exits 0 when the period succeeded, was already
    done, or another replica has it; 1 when the job failed.

    Example: catchup run billing --period 2026-10-31
    """
    from . import report
    from .core import choose_period, run_period

    spec = state.config().job(job)
    with state.session() as session:
        spec = session.resolve(spec, write=False)  # a bad --period is refused before any write
        chosen = choose_period(spec, session.now(), _in_zone(period, spec))
        if chosen is None:
            first = spec.timeline.period(spec.anchor)
            from .schedule import iso_utc

            message = f"{job}: nothing due yet (first period due {iso_utc(first.end + spec.delay)})"
            if as_json:
                click.echo('{"job": ' + _json_str(job) + ', "status": "not-due"}')
            else:
                console().print(message)
            return
        with _stop_signals() as stop:
            result = run_period(session, spec, chosen, interrupted=stop, stream=not as_json)
    if as_json:
        import json

        click.echo(json.dumps(report.outcome_json(result), ensure_ascii=False))
    else:
        report.outcome(console(), result)
    if result.status == "interrupted":
        sys.exit(EXIT_INTERRUPTED)
    if result.status in ("failed", "lost"):
        sys.exit(EXIT_FAILED)


@cli.command(epilog=EXIT_CODES)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@pass_state
def jobs(state: State, as_json: bool) -> None:
    """List the configured jobs: schedule, last success, next due, done/expected periods."""
    from . import report
    from .core import overview
    from .operations import scheduler_health

    with state.session() as session:
        lines = overview(session, list(session.config.jobs.values()))
        if as_json:
            click.echo(report.jobs_json(lines))
        else:
            out = console()
            report.jobs(out, lines, session.target.describe())
            report.scheduler(out, scheduler_health(session))


@cli.command(epilog=EXIT_CODES)
@click.argument("job")
@click.option(
    "--period",
    type=JobInstant(),
    help="Only this period (shows its last output too); a date is in the job's time zone.",
)
@click.option("--limit", type=click.IntRange(1, 100000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@pass_state
def history(state: State, job: str, period: str | None, limit: int, as_json: bool) -> None:
    """Show the attempts of JOB, newest first, or of one period with --period, and the changes
    made to it (marks, resets, pauses, schedule and start changes)."""
    from . import report

    spec = state.config().job(job)
    start = _in_zone(period, spec)
    with state.session() as session:
        spec = session.resolve(spec, write=False)
        rows = session.ledger.history(job, start, limit)
        events = session.ledger.events(session.job_id(job), start, limit)
    if as_json:
        click.echo(report.history_json(rows, events))
    else:
        report.history(console(), job, rows, show_output=period is not None, label=spec.label)
        report.events(console(), job, events, label=spec.label)


SCAN_EXIT_CODES = EXIT_CODES


@cli.command(epilog=SCAN_EXIT_CODES)
@click.option(
    "--job",
    "job_names",
    multiple=True,
    metavar="JOB",
    help="Only this job (repeatable; default: every job).",
)
@click.option("--since", type=Instant(), help="First period start to check (inclusive).")
@click.option("--until", type=Instant(), help="Period starts before this (exclusive).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json", "markdown", "openmetrics"]),
    default="table",
    show_default=True,
    help="How to report.",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
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
@pass_state
def scan(
    state: State,
    job_names: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    fmt: str,
    as_json: bool,
    calendar: bool,
    full: bool,
    output: str | None,
) -> None:
    """Find the periods that were never run, failed, or are stuck, and report them.

    Each job's expected periods (from its start, or --since, to the last due one, or --until)
    are checked against the ledger on the database clock. Gaps are missing, failed, exhausted
    and stale periods, oldest first; running periods and paused jobs are shown but are not gaps.

    Example: catchup scan --since 2026-10-01 --format markdown >> "$GITHUB_STEP_SUMMARY"
    """
    from . import report
    from . import scan as detector

    config = state.config()
    jobs = [config.job(name) for name in job_names] or list(config.jobs.values())
    if since is not None and until is not None and since >= until:
        raise ConfigError(f"--since {_iso(since)} is not before --until {_iso(until)}")
    if output is not None and not output.endswith((".svg", ".html", ".txt")):
        raise ConfigError(f"--output {output}: the name must end in .svg, .html or .txt")
    if output is not None and not os.access(Path(output).parent, os.W_OK):
        raise ConfigError(f"--output {output}: no folder {Path(output).parent} to write into")
    from .operations import scheduler_health

    with state.session() as session:
        jobs = session.resolve_all(jobs)
        result = detector.scan(session, jobs, since=since, until=until, full=full)
        health = scheduler_health(session)
    fmt = "json" if as_json else fmt
    if fmt == "json":
        for chunk in report.scan_json_chunks(result):
            click.echo(chunk, nl=False)
        click.echo()
    elif fmt == "markdown":
        click.echo(report.scan_markdown(result, health), nl=False)
    elif fmt == "openmetrics":
        click.echo(report.scan_openmetrics(result, health), nl=False)
    else:
        out = console()
        report.scan_tables(out, result)
        report.scheduler(out, health)
        if calendar:
            by_name = {job.name: job for job in jobs}
            report.calendars(out, [detector.calendar(by_name[j.job], j) for j in result.jobs])
    if output is not None:
        by_name = {job.name: job for job in jobs}
        grids = [detector.calendar(by_name[j.job], j) for j in result.jobs]
        report.save(output, result, health, grids)
    if result.has_gaps:
        sys.exit(EXIT_FAILED)


REPLAY_EXIT_CODES = EXIT_CODES


@cli.command(epilog=REPLAY_EXIT_CODES)
@click.option("--since", type=Instant(), required=True, help="First period start (inclusive).")
@click.option("--until", type=Instant(), help="Period starts before this (exclusive).")
@click.option(
    "--job", "job_names", multiple=True, metavar="JOB", help="Only this job (repeatable)."
)
@click.option("--max", "limit", type=click.IntRange(min=1), help="Run at most this many periods.")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Periods run at once in this process (overlap = forbid still holds).",
)
@click.option("--dry-run", is_flag=True, help="Print what would run; write nothing.")
@click.option("--stop-on-failure", is_flag=True, help="Start nothing new after a failure.")
@click.option(
    "--retry-exhausted", is_flag=True, help="Also run failed periods that have no attempts left."
)
@click.option("--json", "as_json", is_flag=True, help="Print the periods and totals as JSON.")
@pass_state
def replay(
    state: State,
    since: datetime,
    until: datetime | None,
    job_names: tuple[str, ...],
    limit: int | None,
    workers: int,
    dry_run: bool,
    stop_on_failure: bool,
    retry_exhausted: bool,
    as_json: bool,
) -> None:
    """Run the gaps that scan finds, oldest first, through the same claim path as run.

    Missing, failed and stale periods are run (a failed one at once, without waiting for its
    backoff); exhausted ones only with --retry-exhausted. A period another process is running,
    or that succeeds meanwhile, is skipped, so several replays (and ticks) on several hosts can
    share one backlog. Ctrl-C stops the running periods, records them as interrupted (left for
    a retry) and exits 130.

    Example: catchup replay --since 2026-10-01 --job billing --workers 4
    """
    from . import report
    from .replay import replay as run_replay

    config = state.config()
    jobs = [config.job(name) for name in job_names] or list(config.jobs.values())
    if until is not None and since >= until:
        raise ConfigError(f"--since {_iso(since)} is not before --until {_iso(until)}")
    out = console()
    show_progress = out.is_terminal and not as_json and not dry_run
    with state.session() as session, _stop_signals() as stop, _Progress(out, show_progress) as bar:
        result = run_replay(
            session,
            jobs,
            since=since,
            until=until,
            limit=limit,
            workers=workers,
            dry_run=dry_run,
            stop_on_failure=stop_on_failure,
            retry_exhausted=retry_exhausted,
            interrupted=stop,
            on_plan=bar.plan,
            on_start=bar.start,
            on_done=None if as_json else bar.done,
        )
    if dry_run:
        labels = [(p.job.name, _label(p.job, p.period.start), p.state) for p in result.plan]
        if as_json:
            import json

            click.echo(
                json.dumps(
                    {
                        "dry_run": True,
                        "periods": [
                            {
                                "job": p.job.name,
                                "period": _iso(p.period.start),
                                "attempt": None,
                                "status": p.state,
                            }
                            for p in result.plan
                        ],
                        "totals": {"planned": result.planned},
                    },
                    ensure_ascii=False,
                )
            )
        else:
            report.plan_lines(out, labels)
            out.print(f"{result.planned} period(s) would run; nothing was written")
        return
    if as_json:
        click.echo(report.batch_json(result.outcomes, result.totals))
    else:
        report.batch_summary(out, "replay", result.outcomes, result.totals)
    if result.interrupted:
        sys.exit(EXIT_INTERRUPTED)
    if result.errors:
        sys.exit(EXIT_DATABASE)
    if result.failed:
        sys.exit(EXIT_FAILED)


@cli.command(epilog=REPLAY_EXIT_CODES)
@click.option(
    "--job", "job_names", multiple=True, metavar="JOB", help="Only this job (repeatable)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the periods and totals as JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Also print the periods that were skipped.")
@pass_state
def tick(state: State, job_names: tuple[str, ...], as_json: bool, verbose: bool) -> None:
    """Run everything due, per each job's catch-up policy: what one scheduler calls.

    Call it every few minutes from one Kubernetes CronJob, systemd timer or cron entry. Each
    job runs the due periods its policy allows (catchup = all | latest | none, within
    catchup_window, at most max_per_tick), oldest first; paused jobs are skipped; failed
    periods wait for their backoff. Safe when several replicas tick at once.

    Example: */5 * * * * catchup -q tick
    """
    from . import report
    from .replay import tick as run_tick

    config = state.config()
    jobs = [config.job(name) for name in job_names] or list(config.jobs.values())
    out = console()

    def show(outcome: Any) -> None:
        if verbose or outcome.status != "skipped":
            report.outcome(out, outcome)

    with state.session() as session, _stop_signals() as stop:
        result = run_tick(session, jobs, interrupted=stop, on_done=None if as_json else show)
    if as_json:
        click.echo(report.batch_json(result.outcomes, result.totals))
    else:
        totals = result.totals
        out.print(
            f"tick: {totals['succeeded']} succeeded, {totals['failed']} failed, "
            f"{totals['skipped']} skipped, {totals['lost']} lost"
            + (f", {totals['error']} database error(s)" if totals["error"] else ""),
            highlight=False,
        )
    if result.interrupted:
        sys.exit(EXIT_INTERRUPTED)
    if result.errors:
        sys.exit(EXIT_DATABASE)
    if result.failed:
        sys.exit(EXIT_FAILED)


@cli.command(epilog=EXIT_CODES)
@click.argument("value")
@pass_state
def checkpoint(state: State, value: str) -> None:
    """From inside a running job: save progress for a later attempt of this period.

    Finds its run from CATCHUP_RUN_ID and CATCHUP_ATTEMPT (set for every job), and is fenced
    by the attempt: an attempt that lost its period cannot overwrite the newer one's progress.
    The next attempt of the period gets the value in CATCHUP_CHECKPOINT.

    Example: catchup checkpoint '{"cursor": 1234}'
    """
    import os

    try:
        run_id = int(os.environ["CATCHUP_RUN_ID"])
        attempt = int(os.environ["CATCHUP_ATTEMPT"])
    except (KeyError, ValueError):
        raise ConfigError(
            "catchup checkpoint runs inside a job: CATCHUP_RUN_ID and CATCHUP_ATTEMPT are not set"
        ) from None
    state.quiet = True
    with state.session(config_required=False) as session:
        saved = session.ledger.save_checkpoint(run_id, attempt, value)
    if not saved:
        click.echo(
            f"catchup: checkpoint not saved: attempt {attempt} no longer owns its period", err=True
        )
        sys.exit(EXIT_FAILED)


class _Progress:
    """A Rich progress bar on a terminal; plain log lines (on_done) otherwise."""

    def __init__(self, out: Console, enabled: bool) -> None:
        self.out = out
        self.enabled = enabled
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=self.out,
            )
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def plan(self, total: int) -> None:
        if self.bar is not None:
            self.task = self.bar.add_task("replay", total=total)

    def start(self, item: Any) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.update(
                self.task, description=f"{item.job.name} {_label(item.job, item.period.start)}"
            )

    def done(self, outcome: Any) -> None:
        from . import report

        if self.bar is not None and self.task is not None:
            self.bar.advance(self.task)
            if outcome.status in ("failed", "lost", "interrupted", "error"):
                report.outcome(self.bar.console, outcome)
        else:
            report.outcome(self.out, outcome)


def _label(job: Any, start: datetime) -> str:
    return str(job.label(start))


def _iso(t: datetime) -> str:
    from .schedule import iso_utc

    return iso_utc(t)


def _actor_option(f: Any) -> Any:
    return click.option(
        "--actor", metavar="WHO", help="Who made the change (default: $USER@host)."
    )(f)


@cli.command(epilog=EXIT_CODES)
@click.argument("job")
@click.argument("periods", nargs=-1, required=True, metavar="PERIOD...")
@click.option("--done", "kind", flag_value="done", help="It was done out of band.")
@click.option("--skip", "kind", flag_value="skip", help="It is deliberately not to be run.")
@click.option("--reason", type=Reason(), required=True, help="Why; kept in the history.")
@_actor_option
@pass_state
def mark(
    state: State,
    job: str,
    periods: tuple[str, ...],
    kind: str | None,
    reason: str,
    actor: str | None,
) -> None:
    """Record periods as waived: done out of band (--done) or skipped on purpose (--skip).

    PERIOD is a period start (2026-10-03) or a range with both ends included
    (2026-10-01..2026-10-07). Waived periods are never run and are not gaps. Refused, with
    nothing changed, when any of them is running. Every change is kept and shown by history.

    Example: catchup mark billing 2026-10-01..2026-10-03 --skip --reason "migration freeze"
    """
    from . import operations, report

    if kind is None:
        raise ConfigError("mark needs --done or --skip")
    spec = state.config().job(job)
    with state.session() as session:
        spec = session.resolve(spec, write=False)  # bad periods are refused before any write
        chosen = operations.parse_periods(spec, list(periods))
        changes = operations.mark(
            session,
            spec,
            chosen,
            skip=kind == "skip",
            reason=reason,
            actor=actor or operations.default_actor(),
        )
    report.changes(console(), f"marked {kind}", changes)


@cli.command(epilog=EXIT_CODES)
@click.argument("job")
@click.argument("periods", nargs=-1, required=True, metavar="PERIOD...")
@click.option("--reason", type=Reason(), required=True, help="Why; kept in the history.")
@_actor_option
@pass_state
def reset(state: State, job: str, periods: tuple[str, ...], reason: str, actor: str | None) -> None:
    """Make succeeded, waived or exhausted periods runnable again.

    They become failed with no failures counted and no backoff, so the next tick or replay runs
    them (as the next attempt). Refused, with nothing changed, when any of them is running.

    Example: catchup reset billing 2026-10-05 --reason "rates were wrong"
    """
    from . import operations, report

    spec = state.config().job(job)
    with state.session() as session:
        spec = session.resolve(spec, write=False)  # bad periods are refused before any write
        chosen = operations.parse_periods(spec, list(periods))
        changes = operations.reset(
            session, spec, chosen, reason=reason, actor=actor or operations.default_actor()
        )
    report.changes(console(), "reset", changes)


@cli.command(epilog=EXIT_CODES)
@click.argument("job")
@click.option("--reason", type=Reason(), help="Why; kept in the history.")
@_actor_option
@pass_state
def pause(state: State, job: str, reason: str | None, actor: str | None) -> None:
    """Suspend JOB: nothing claims its periods until it is resumed (running ones finish)."""
    from . import operations

    spec = state.config().job(job)
    with state.session() as session:
        since = operations.pause(
            session, spec, reason=reason, actor=actor or operations.default_actor()
        )
    from .schedule import iso_utc

    console().print(f"{job}: paused since {iso_utc(since)}")


@cli.command(epilog=EXIT_CODES)
@click.argument("job")
@click.option("--reason", type=Reason(), help="Why; kept in the history.")
@_actor_option
@pass_state
def resume(state: State, job: str, reason: str | None, actor: str | None) -> None:
    """Resume JOB. The next tick follows its catch-up policy: no flood of missed periods unless
    the policy (catchup = all, within catchup_window, at most max_per_tick) says so."""
    from . import operations
    from .schedule import span

    spec = state.config().job(job)
    with state.session() as session:
        who = actor or operations.default_actor()
        if not operations.resume(session, spec, reason=reason, actor=who):
            console().print(f"{job}: not paused; nothing to resume")
            return
    policy = {
        "all": f"every gap of the last {span(spec.catchup_window)}, at most "
        f"{spec.max_per_tick} a tick",
        "latest": "only the newest due period",
        "none": "only periods that become due from now on",
    }[spec.catchup]
    console().print(f"{job}: resumed; the next tick runs {policy} (catchup = {spec.catchup!r})")


_every_option = click.option(
    "--every",
    type=click.IntRange(1, 59),
    default=5,
    show_default=True,
    help="Minutes between ticks.",
)


@cli.group(epilog=EXIT_CODES)
def deploy() -> None:
    """Print what the one scheduler needs to call `catchup tick`: Kubernetes or systemd."""


@deploy.command("kubernetes")
@click.option("--name", default="catchup", show_default=True, help="The CronJob's name.")
@click.option(
    "--image",
    default="registry.example.com/app:latest",
    show_default=True,
    help="An image with catchup and your jobs installed.",
)
@_every_option
@click.option(
    "--secret",
    default="catchup-db",
    show_default=True,
    help="The Secret whose key 'dsn' holds the DSN.",
)
@click.option(
    "--config-map",
    default="catchup-config",
    show_default=True,
    help="The ConfigMap holding catchup.toml.",
)
@click.option("--namespace", help="The namespace, if not the current one.")
def deploy_kubernetes(
    name: str, image: str, every: int, secret: str, config_map: str, namespace: str | None
) -> None:
    """A CronJob that calls `catchup tick`: concurrencyPolicy Forbid, a starting deadline,
    timeZone Etc/UTC, a few minutes off the hour, history limits, the DSN from a Secret.

    Example: catchup deploy kubernetes --image ghcr.io/acme/billing:1.4 | kubectl apply -f -
    """
    from . import deploy as recipes

    click.echo(
        recipes.kubernetes(
            name=name,
            image=image,
            every=every,
            secret=secret,
            config_map=config_map,
            namespace=namespace,
        ).text(),
        nl=False,
    )


@deploy.command("systemd")
@click.option("--name", default="catchup", show_default=True, help="The unit names.")
@click.option(
    "--exec",
    "executable",
    default="/usr/local/bin/catchup",
    show_default=True,
    help="The catchup executable.",
)
@_every_option
@click.option("--user", default="catchup", show_default=True, help="The user to run as.")
@click.option("--workdir", default="/etc/catchup", show_default=True, help="Where catchup.toml is.")
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Write the unit files into DIR instead of printing them.",
)
def deploy_systemd(
    name: str, executable: str, every: int, user: str, workdir: str, output_dir: str | None
) -> None:
    """A service and a timer that call `catchup tick` (Persistent=true, RandomizedDelaySec).

    Example: catchup deploy systemd --output-dir /etc/systemd/system
    (then: systemctl enable --now catchup.timer)
    """
    from pathlib import Path

    from . import deploy as recipes

    recipe = recipes.systemd(
        name=name, executable=executable, every=every, user=user, workdir=workdir
    )
    if output_dir is None:
        click.echo(recipe.text(), nl=False)
        return
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for filename, body in recipe.files.items():
        (folder / filename).write_text(body)
        click.echo(f"wrote {folder / filename}")


@cli.command(epilog=EXIT_CODES)
@click.argument("job")
@click.option(
    "--from",
    "start",
    type=JobInstant(),
    help="Start at the period containing this, a date being in the job's time zone "
    "(default: the current period, on the database clock).",
)
@click.option("--count", type=click.IntRange(1, 1000), default=10, show_default=True)
@pass_state
def explain(state: State, job: str, start: str | None, count: int) -> None:
    """Spell out JOB's periods: UTC and local bounds, length, and when each falls due, with
    notes on what to watch: periods a DST change makes shorter or longer, local times a DST
    change skips or repeats in the 400 days from the first period shown (and what systemd and
    cron would do with them instead), a job due exactly on the hour with others.

    Example: catchup explain billing --count 5
    """
    from . import report
    from .explain import explain as spell

    config = state.config()
    spec = config.job(job)
    start_at = _in_zone(start, spec)
    with state.session() as session:
        everyone = session.resolve_all(list(config.jobs.values()), write=False)
        spec = session.resolve(spec, write=False)
        now = session.now()
    result = spell(spec, everyone, now=now, start=start_at, count=count)
    report.explanation(console(), result, now, label=spec.label)


DOCTOR_EXIT_CODES = """\b
Exit codes:
  0    nothing serious found
  1    something serious: the config, or the database
  130  interrupted"""


@cli.command(epilog=DOCTOR_EXIT_CODES)
@pass_state
def doctor(state: State) -> None:
    """Check the config, the database and its version, a pooler in the way, the host clock,
    jobs due on the hour, and whether one scheduler is ticking: one line per finding."""
    from rich.text import Text

    from .doctor import examine

    findings = examine(state.config_path, state.dsn)
    out = console()
    marks = {
        "ok": ("✓", "green"),
        "info": ("i", "blue"),
        "warning": ("!", "yellow"),
        "serious": ("✗", "bold red"),
    }
    for finding in findings:
        mark, style = marks[finding.level]
        line = Text(f"{mark} ", style=style)
        line.append(f"{finding.topic}: ", style="bold")
        line.append(finding.text)
        out.print(line, soft_wrap=True)
    if any(f.level == "serious" for f in findings):
        sys.exit(EXIT_FAILED)


@cli.command(epilog=EXIT_CODES)
@pass_state
def demo(state: State) -> None:
    """See catchup work in a minute: a throwaway ledger with two weeks of a nightly billing
    run and an hourly export, a host outage and a failing night; scan, replay, clean scan.

    Uses the embedded PostgreSQL (or --dsn) in a schema of its own, dropped at the end.
    """
    from . import db
    from .demo import run_demo

    config = state.config(required=False)
    target = db.resolve(state.dsn, config.dsn, embedded_allowed=config.embedded)
    result = run_demo(target, console())
    if result.gaps_after:
        sys.exit(EXIT_FAILED)


@cli.command(epilog=EXIT_CODES)
@pass_state
def migrate(state: State) -> None:
    """Create or upgrade the ledger schema (every command also does this on first use)."""
    with state.session(config_required=False, prepare=False) as session:
        applied = session.ledger.migrate()
        version = session.ledger.version()
    schema = session.config.schema
    if applied:
        click.echo(f"schema {schema}: applied {', '.join(applied)} (now at version {version})")
    else:
        click.echo(f"schema {schema}: up to date (version {version})")


@cli.group()
def server() -> None:
    """The embedded PostgreSQL used when no database is configured."""


@server.command("status")
def server_status() -> None:
    """Say whether the embedded server runs, and where its data is."""
    from . import embedded

    data = embedded.data_dir()
    running = embedded.running(data)
    if running:
        click.echo(f"running: {data} (socket {running.socket_dir}, port {running.port})")
    else:
        click.echo(f"stopped: {data}")


@server.command("stop")
def server_stop() -> None:
    """Stop the embedded server (the next command starts it again)."""
    from . import embedded

    click.echo("stopped" if embedded.stop() else "was not running")


def _json_str(value: str) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def main(argv: list[str] | None = None) -> None:
    """The console script: ``catchup``."""
    cli.main(args=argv, prog_name="catchup")
