"""``run``, ``tick``, ``replay`` and ``ping``: the commands that run periods through the claim
path, or (``ping``) record a run that an observed job's own cron ran."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from ..config.bounds import MAX_TIME, REPLAY_WORKERS, TICK_WORKERS
from ..errors import EXIT_FAILED, EXIT_INTERRUPTED
from ..vocabulary import OutcomeStatus
from .base import (
    State,
    console,
    exit_for_batch,
    exit_for_outcome,
    pass_state,
    show,
    stop_signals,
)
from .options import (
    DATE_HELP,
    EXIT_CODES,
    Seconds,
    When,
    actor_option,
    jobs_option,
    json_option,
    keys_option,
    limit_options,
    log_output_option,
    one_key_option,
    reason_option,
    window_options,
    workers_option,
)

if TYPE_CHECKING:
    from rich.console import Console

    from ..results import Batch, Outcome

# Imports inside functions: at first use, so `catchup --help` and each command load only
# what they need.


@click.command(epilog=EXIT_CODES)
@click.argument("job")
@click.option(
    "--period",
    type=When(),
    help=f"The period start to run (default: the latest due); {DATE_HELP}.",
)
@click.option(
    "--ignore-evidence",
    is_flag=True,
    help="Run the period even when the job's evidence shows its output already exists.",
)
@click.option(
    "--include-excluded",
    is_flag=True,
    help="Run the period even when it is excluded (the job's exclude, or catchup exclude).",
)
@keys_option
@workers_option(REPLAY_WORKERS, what="Keys run at once, for a job with keys")
@json_option("Print the outcome as JSON.")
@pass_state
def run(
    state: State,
    job: str,
    period: str | None,
    ignore_evidence: bool,
    include_excluded: bool,
    keys: tuple[str, ...],
    workers: int,
    as_json: bool,
) -> None:
    """Run one period of JOB through the claim path.

    Without --period, runs the latest due period. Exits 0 when the period succeeded, was already
    done, another replica has it, its output already exists (untracked: the job's evidence
    shows it and the ledger has no run), it is excluded (a --period excluded is refused, exit
    2), or nothing is due yet; 1 when the job failed; 130 when it was interrupted or its
    period cancelled (catchup cancel: not done, no failure).

    A job with keys runs the period of every key expected to have it (or of each --key), on
    a pool of --workers, and exits as tick does.

    Example: catchup run billing --period 2026-10-31
    """
    from ..render import batches, json, tables
    from ..results import NotDue

    app = state.app()
    rules = {"ignore_evidence": ignore_evidence, "include_excluded": include_excluded}
    if app.job(job).keyed and len(keys) != 1:
        out = console()
        with stop_signals() as stop:
            batch = app.run_keys(job, period, keys=keys, workers=workers, interrupted=stop, **rules)
        if isinstance(batch, NotDue):
            show(batch, as_json, lambda r: json.dumps(json.not_due_json(r)), tables.not_due)
            return
        if not as_json:
            for outcome in batch.outcomes:
                tables.outcome(out, outcome)
        show(batch, as_json, json.batch_json, batches.run_summary, out)
        exit_for_batch(batch)
        if any(o.status == OutcomeStatus.cancelled for o in batch.outcomes):
            sys.exit(EXIT_INTERRUPTED)  # as run of one period: not done, asked to stop
        if any(o.status == OutcomeStatus.blocked for o in batch.outcomes):
            sys.exit(EXIT_FAILED)  # as run of one period: it waits for upstream periods
        return
    with stop_signals() as stop:
        key = keys[0] if keys else None
        result = app.run(job, period, interrupted=stop, stream=not as_json, key=key, **rules)
    if isinstance(result, NotDue):
        show(result, as_json, lambda r: json.dumps(json.not_due_json(r)), tables.not_due)
        return
    show(result, as_json, lambda r: json.dumps(json.outcome_json(r)), tables.outcome)
    exit_for_outcome(result)


@click.command(epilog=EXIT_CODES)
@jobs_option
@keys_option
@workers_option(TICK_WORKERS, what="Periods run at once, the jobs taking turns")
@json_option("Print the periods and totals as JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Also print the periods that were skipped.")
@click.option(
    "--max-time",
    type=Seconds(MAX_TIME.low, MAX_TIME.high),
    metavar="DURATION",
    help="Start nothing new after this long (what runs finishes); the rest is the next "
    "tick's. Set it to the scheduler's interval.",
)
@log_output_option
@pass_state
def tick(
    state: State,
    job_names: tuple[str, ...],
    keys: tuple[str, ...],
    workers: int,
    as_json: bool,
    verbose: bool,
    max_time: float | None,
    log_output: bool,
) -> None:
    """Run everything due, per each job's catch-up policy: what one scheduler calls.

    Call it every few minutes from one Kubernetes CronJob, systemd timer or cron entry. Each
    job runs the due periods its policy allows (catchup = all | latest | none, within
    catchup_window, at most max_per_tick), oldest first, on a pool of --workers: the
    connections it opens are the workers plus two, however many jobs are due. Paused jobs are
    skipped; failed periods wait for their backoff; a held job (a rename in progress: see
    catchup rename --help) runs nothing while the others run, and tick exits 2. Safe when
    several replicas tick at once.

    With --max-time (the recipes set it to their interval), nothing new starts once it has
    passed, so one job's backlog never makes the next tick late for another job's period.
    A line says which jobs max_per_tick left gaps of for later ticks, and one which have
    gaps before their catchup_window: no tick runs those, replay does.

    Example: */5 * * * * catchup -q tick --max-time 5m
    """
    from ..render import batches, json, tables

    out = console()

    def done(outcome: Outcome) -> None:
        if verbose or outcome.status != OutcomeStatus.skipped:
            tables.outcome(out, outcome)

    app = state.app(log_output=log_output)
    with stop_signals() as stop:
        result = app.tick(
            jobs=job_names,
            workers=workers,
            interrupted=stop,
            on_done=None if as_json else done,
            max_time=max_time,
            keys=keys,
            look_back=True,
        )
    show(result, as_json, json.batch_json, batches.tick_summary, out)
    exit_for_batch(result)


@click.command(epilog=EXIT_CODES)
@window_options(since_required=True)
@jobs_option
@keys_option
@click.option(
    "--max-periods",
    "--max",
    "limit",
    type=click.IntRange(min=1),
    help="Run at most this many periods. (--max: its old name.)",
)
@workers_option(REPLAY_WORKERS, what="Periods run at once in this process")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what would run (runs of periods per job), write nothing.",
)
@click.option("--each", is_flag=True, help="With --dry-run: one line per period, oldest first.")
@limit_options("runs of periods a dry run shows, oldest first")
@click.option("--stop-on-failure", is_flag=True, help="Start nothing new after a failure.")
@click.option(
    "--retry-exhausted", is_flag=True, help="Also run failed periods that have no attempts left."
)
@click.option(
    "--unverified",
    is_flag=True,
    help="Also run again succeeded periods that left no evidence (each reset, with --reason).",
)
@click.option(
    "--no-upstream",
    "no_upstream",
    is_flag=True,
    help="Do not also plan the missing upstream periods the planned ones wait for (after).",
)
@click.option(
    "--outdated",
    is_flag=True,
    help="Also run again succeeded periods an upstream re-run made outdated (each reset, "
    "with --reason).",
)
@reason_option(required=False)
@actor_option
@json_option("Print the periods and totals as JSON.")
@log_output_option
@pass_state
def replay(
    state: State,
    since: str,
    until: str | None,
    job_names: tuple[str, ...],
    keys: tuple[str, ...],
    limit: int | None,
    workers: int,
    dry_run: bool,
    stop_on_failure: bool,
    retry_exhausted: bool,
    unverified: bool,
    outdated: bool,
    no_upstream: bool,
    reason: str | None,
    actor: str | None,
    as_json: bool,
    each: bool,
    limit_shown: int,
    show_all: bool,
    log_output: bool,
) -> None:
    """Run the gaps that scan finds, oldest first, through the same claim path as run.

    Missing, failed and stale periods are run (a failed one at once, without waiting for its
    backoff); exhausted ones only with --retry-exhausted; succeeded ones without evidence of
    their output (unverified) only with --unverified --reason R, and those that finished before
    an upstream period they waited for ran again (outdated) only with --outdated --reason R,
    each reset (audited) first. The missing upstream periods the planned ones wait for (after)
    are planned too, upstream first (--no-upstream: not).
    Untracked periods (output exists, no run in the ledger) are never run. A period another
    process is running,
    or that succeeds meanwhile, is skipped, so several replays (and ticks) on several hosts can
    share one backlog. Ctrl-C stops the running periods, records them as interrupted (left for
    a retry) and exits 130. --since 2026-11-25 is each job's own local midnight.

    Example: catchup replay --since 2026-10-01 --job billing --workers 4
    """
    from ..render import batches

    out = console()
    app = state.app(log_output=log_output)
    progress = batches.Progress(out, out.is_terminal and not as_json and not dry_run)
    with stop_signals() as stop, progress as bar:
        result = app.replay(
            since=since,
            until=until,
            jobs=job_names,
            keys=keys,
            limit=limit,
            workers=workers,
            dry_run=dry_run,
            stop_on_failure=stop_on_failure,
            retry_exhausted=retry_exhausted,
            unverified=unverified,
            outdated=outdated,
            upstream=not no_upstream,
            reason=reason,
            actor=actor,
            interrupted=stop,
            on_plan=bar.plan,
            on_start=bar.start,
            on_done=None if as_json else bar.done,
        )
    _shown(out, result, as_json, dry_run, each, None if show_all else limit_shown)
    exit_for_batch(result)


def _shown(
    out: Console, result: Batch, as_json: bool, dry_run: bool, each: bool, limit: int | None
) -> None:
    """A replay's result as asked: JSON (written as it is made), its plan, or its summary."""
    from ..render import batches, json

    if as_json:
        for chunk in json.batch_json_chunks(result):
            click.echo(chunk, nl=False)
        click.echo()
    elif dry_run:
        batches.plan(out, result, each=each, limit=limit)
    else:
        batches.batch_summary(out, result)


@click.command(epilog=EXIT_CODES)
@click.argument("job")
@click.option("--start", "kind", flag_value="start", help="The run started (its period runs).")
@click.option("--fail", "kind", flag_value="fail", help="The run failed.")
@click.option("--log", "kind", flag_value="log", help="A line for the record; nothing settles.")
@click.option(
    "--exit",
    "exit_status",
    type=click.IntRange(0, 255),
    help="The run ended with this exit status: 0 a success, 1-255 a failure.",
)
@click.option(
    "--period",
    type=When(),
    help=f"The period the run was for (default: the latest due); {DATE_HELP}.",
)
@click.option("--rid", metavar="ID", help="The run's id: pairs a --start with its finish.")
@click.option("--body", metavar="TEXT", help="The run's output (kept as its tail); - reads stdin.")
@one_key_option("The key the run was for, for a job with keys")
@json_option("Print what the ping did as JSON.")
@pass_state
def ping(
    state: State,
    job: str,
    kind: str | None,
    exit_status: int | None,
    period: str | None,
    rid: str | None,
    body: str | None,
    key: str | None,
    as_json: bool,
) -> None:
    """Report a run of JOB that its own cron ran, as healthchecks' ping would.

    A job with ping = "<uuid>" in catchup.toml takes pings (tick leaves it to its own cron;
    with no command or call it is observed, and catchup never runs it): catchup serve
    answers them at /ping/<uuid> (and /start, /fail, /log, /<exit status>, ?rid=), and this
    command does the same from a host that reaches the database. A ping settles the
    latest period due (a minute early counts as on time); a finish settles the period its
    --start claimed (--rid pairs them). A period settled already, or running under another
    claim, stays as it is, and the ping is kept in its history. Exits 0 when the ping was
    recorded.

    Example: catchup ping vendor-export --exit 0
    """
    from ..render import json, tables

    said = "success" if kind is None and not exit_status else kind or "fail"
    text = _tail_of_stdin() if body == "-" else body
    result = state.app().ping(
        job, said, exit_status=exit_status, period=period, rid=rid, key=key, body=text
    )
    show(result, as_json, json.pinged_json, tables.pinged)


def _tail_of_stdin(keep: int = 100_000) -> str:
    """The last ``keep`` characters of stdin, read in pieces (a run's output may be huge)."""
    kept = ""
    while piece := sys.stdin.read(65_536):
        kept = (kept + piece)[-keep:]
    return kept
