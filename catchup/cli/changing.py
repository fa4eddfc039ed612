"""``mark``, ``reset``, ``adopt``, ``pause``, ``resume``: the changes people make, audited; and
``checkpoint`` and ``migrate``, the two writes that are not about a job's periods."""

from __future__ import annotations

import os
import sys

import click

from ..errors import EXIT_FAILED
from .base import State, pass_state, show
from .options import (
    CANCEL_EXIT_CODES,
    EXIT_CODES,
    When,
    actor_option,
    jobs_option,
    json_option,
    one_key_option,
    reason_option,
    some_keys_options,
    window_options,
)

# Imports inside functions: at first use, so `catchup --help` and each command load only
# what they need.


@click.command(epilog=EXIT_CODES)
@click.argument("job")
@click.argument("periods", nargs=-1, required=True, metavar="PERIOD...")
@click.option("--done", "kind", flag_value="done", help="It was done out of band.")
@click.option("--skip", "kind", flag_value="skip", help="It is deliberately not to be run.")
@some_keys_options("The key whose periods these are (a job with keys needs one, or --all-keys)")
@reason_option(required=True)
@actor_option
@json_option("Print JSON instead of lines.")
@pass_state
def mark(
    state: State,
    job: str,
    periods: tuple[str, ...],
    kind: str | None,
    keys: tuple[str, ...],
    all_keys: bool,
    reason: str,
    actor: str | None,
    as_json: bool,
) -> None:
    """Record periods as waived: done out of band (--done) or skipped on purpose (--skip).

    PERIOD is a period start (2026-10-03, the job's local midnight) or a range with both ends
    included (2026-10-01..2026-10-07; a bare date ending it is that whole local day). Waived
    periods are never run and are not gaps. Refused,
    with nothing changed, when any of them is running. Every change is kept and shown by history.
    A period suspect after a database failover that did run: mark it --done. A job with
    keys: --key K (repeatable), or --all-keys for every key expected in those periods.

    Example: catchup mark billing 2026-10-01..2026-10-03 --skip --reason "migration freeze"
    """
    from ..errors import ConfigError
    from ..render import changes

    if kind not in ("done", "skip"):
        raise ConfigError("mark needs --done or --skip")
    result = state.app().mark(
        job,
        periods,
        kind="skip" if kind == "skip" else "done",
        reason=reason,
        actor=actor,
        keys=keys,
        all_keys=all_keys,
    )
    show(result, as_json, changes.changes_json, changes.changes)


@click.command(epilog=EXIT_CODES)
@click.argument("jobs", nargs=-1, metavar="[JOB]...")
@click.argument("window")
@click.option("--all", "all_jobs", is_flag=True, help="The window is every job's.")
@one_key_option("The one key whose periods it excludes (default: every key of the job)")
@click.option("--undo", is_flag=True, help="Undo the windows recorded within WINDOW.")
@reason_option(required=True)
@actor_option
@json_option("Print JSON instead of lines.")
@pass_state
def exclude(
    state: State,
    jobs: tuple[str, ...],
    window: str,
    all_jobs: bool,
    key: str | None,
    undo: bool,
    reason: str,
    actor: str | None,
    as_json: bool,
) -> None:
    """Record a window of periods nobody expected, afterwards: a maintenance window, an outage.

    WINDOW is a local date (2026-12-01, each job's own zone), dates with both ends included
    (2026-12-01..2026-12-02) or times, the end left out (2026-12-01T02:00Z..2026-12-01T04:00Z).
    A period whose start falls in it is excluded: never claimed, never a gap, never alerted;
    one that succeeded stays succeeded. Recorded with who and why, shown by history; --undo
    takes back the windows recorded within WINDOW (they are gaps again at the next scan).
    Days nobody ever expects (holidays) belong in the job's exclude, in catchup.toml.

    Example: catchup exclude billing 2026-12-01T02:00Z..2026-12-01T04:00Z --reason "db move"
    """
    from ..render import changes

    result = state.app().exclude(
        jobs, window, reason=reason, actor=actor, key=key, all_jobs=all_jobs, undo=undo
    )
    show(result, as_json, changes.windows_json, changes.windows)


@click.command(epilog=EXIT_CODES)
@click.argument("jobs", nargs=-1, required=True, metavar="JOB...")
@window_options()
@reason_option(required=True)
@actor_option
@json_option("Print JSON instead of lines.")
@pass_state
def adopt(
    state: State,
    jobs: tuple[str, ...],
    since: str | None,
    until: str | None,
    reason: str,
    actor: str | None,
    as_json: bool,
) -> None:
    """Record periods whose output exists but that the ledger never saw (untracked).

    For a job that ran elsewhere before catchup (the old cron job): every period in the
    window where the job's evidence query finds output and the ledger has no row is recorded
    as waived, with the reason, in the audit trail (shown by history). Replay and tick never
    run them. Needs an evidence query for each JOB.

    Example: catchup adopt export --since 2026-10-01 --reason "ran from cron before catchup"
    """
    from ..render import changes

    result = state.app().adopt(jobs, since=since, until=until, reason=reason, actor=actor)
    show(result, as_json, changes.adopted_json, changes.adopted)


@click.command(epilog=EXIT_CODES)
@click.argument("job")
@click.argument("periods", nargs=-1, required=True, metavar="PERIOD...")
@some_keys_options("The key whose periods these are (a job with keys needs one, or --all-keys)")
@reason_option(required=True)
@actor_option
@json_option("Print JSON instead of lines.")
@pass_state
def reset(
    state: State,
    job: str,
    periods: tuple[str, ...],
    keys: tuple[str, ...],
    all_keys: bool,
    reason: str,
    actor: str | None,
    as_json: bool,
) -> None:
    """Make succeeded, waived or exhausted periods runnable again.

    They become failed with no failures counted and no backoff, so the next tick or replay runs
    them (as the next attempt). Refused, with nothing changed, when any of them is running.
    PERIOD is as for mark. A period suspect after a database failover that is to run (again):
    reset it. A job with keys: --key K (repeatable), or --all-keys (every tenant of a day).

    Example: catchup reset billing 2026-10-05 --reason "rates were wrong"
    """
    from ..render import changes

    result = state.app().reset(
        job, periods, reason=reason, actor=actor, keys=keys, all_keys=all_keys
    )
    show(result, as_json, changes.changes_json, changes.changes)


@click.command(epilog=CANCEL_EXIT_CODES)
@click.argument("job")
@click.argument("period", type=When())
@one_key_option("The key whose period this is (a job with keys needs one).")
@reason_option(required=True)
@actor_option
@click.option(
    "--wait/--no-wait",
    default=True,
    show_default=True,
    help="Wait until the attempt is recorded cancelled (at most its lease, its kill_grace and "
    "5 s more).",
)
@json_option("Print JSON instead of a line.")
@pass_state
def cancel(
    state: State,
    job: str,
    period: str,
    key: str | None,
    reason: str,
    actor: str | None,
    wait: bool,
    as_json: bool,
) -> None:
    """Stop a running period, on whatever host it runs.

    The request goes through the ledger: the attempt's heartbeat sees it within a third of the
    lease, and its runner stops the job (SIGTERM, then SIGKILL after kill_grace; a Python call
    sees ctx.cancelled) and records the attempt cancelled: no failure counted, the period
    runnable again (the next tick or replay runs it as the next attempt). A runner that is
    gone renews nothing: once its lease has run out the cancel records it. Audited in history.
    PERIOD is the period's start or any instant in it (a date is the job's local midnight, a
    time with Z or an offset is absolute).

    Example: catchup cancel billing 2026-11-30 --reason "wrong rates file"
    """
    from ..render import running

    result = state.app().cancel(job, period, reason=reason, actor=actor, key=key, wait=wait)
    show(result, as_json, running.cancel_json, running.cancelled)
    if not result.done:
        sys.exit(EXIT_FAILED)


@click.command(epilog=EXIT_CODES)
@click.argument("job")
@one_key_option("Only this key of a job with keys.")
@reason_option(required=False)
@actor_option
@json_option("Print JSON instead of a line.")
@pass_state
def pause(
    state: State, job: str, key: str | None, reason: str | None, actor: str | None, as_json: bool
) -> None:
    """Suspend JOB: nothing claims its periods until it is resumed (running ones finish).

    Example: catchup pause billing --reason "gateway maintenance"
    """
    from ..render import changes

    result = state.app().pause(job, reason=reason, actor=actor, key=key)
    show(result, as_json, changes.paused_json, changes.paused)


@click.command(epilog=EXIT_CODES)
@click.argument("job")
@one_key_option("Only this key of a job with keys.")
@reason_option(required=False)
@actor_option
@json_option("Print JSON instead of a line.")
@pass_state
def resume(
    state: State, job: str, key: str | None, reason: str | None, actor: str | None, as_json: bool
) -> None:
    """Resume JOB. The next tick follows its catch-up policy: no flood of missed periods unless
    the policy (catchup = all, within catchup_window, at most max_per_tick) says so.

    Example: catchup resume billing --reason "gateway is back"
    """
    from ..render import changes

    result = state.app().resume(job, reason=reason, actor=actor, key=key)
    show(result, as_json, changes.resumed_json, changes.resumed)


@click.command(epilog=EXIT_CODES)
@click.argument("old")
@click.argument("new")
@reason_option(required=True)
@actor_option
@json_option("Print JSON instead of a line.")
@pass_state
def rename(state: State, old: str, new: str, reason: str, actor: str | None, as_json: bool) -> None:
    """Rename the ledger's job OLD to NEW: every run, attempt and change goes with it, so a
    renamed job never runs its done periods again. Rename [jobs.OLD] to [jobs.NEW] in
    catchup.toml too, in either order: until both say NEW, a tick or scheduler in between
    holds the job the config names and the ledger lacks (nothing of it runs, the other jobs
    do; tick exits 2; `catchup why` says held). The order that needs no second step while a
    scheduler runs: edit the config first, with renamed_from = "OLD" in [jobs.NEW]; the next
    command that writes renames it in the ledger itself.

    Example: catchup rename report weekly-report --reason "one name per team"
    """
    from ..render import changes

    state.notices = False  # the job it renames is not news
    result = state.app().rename(old, new, reason=reason, actor=actor)
    show(result, as_json, changes.renamed_json, changes.renamed)


@click.command(epilog=EXIT_CODES)
@click.argument("job")
@reason_option(required=True)
@actor_option
@json_option("Print JSON instead of a line.")
@pass_state
def retire(state: State, job: str, reason: str, actor: str | None, as_json: bool) -> None:
    """Record the ledger's job JOB, no longer in catchup.toml, as gone on purpose: commands stop
    saying the config lacks it; its history stays (a config naming it again brings it back).

    Example: catchup retire legacy-export --reason "replaced by the warehouse sync"
    """
    from ..render import changes

    state.notices = False
    result = state.app().retire(job, reason=reason, actor=actor)
    show(result, as_json, changes.retired_json, changes.retired)


@click.command(epilog=EXIT_CODES)
@click.argument("value")
@pass_state
def checkpoint(state: State, value: str) -> None:
    """From inside a running job: save progress for a later attempt of this period.

    Finds its run from CATCHUP_RUN_ID and CATCHUP_ATTEMPT (set for every job), and is fenced
    by the attempt: an attempt that lost its period cannot overwrite the newer one's progress.
    The next attempt of the period gets the value in CATCHUP_CHECKPOINT.

    Example: catchup checkpoint '{"cursor": 1234}'
    """
    state.quiet = True
    if not state.app(require_config=False).checkpoint(value):
        attempt = os.environ.get("CATCHUP_ATTEMPT", "?")
        click.echo(
            f"catchup: checkpoint not saved: attempt {attempt} no longer owns its period",
            err=True,
        )
        sys.exit(EXIT_FAILED)


@click.command(epilog=EXIT_CODES)
@jobs_option
@click.option(
    "--until",
    "--before",
    "before",
    type=When(),
    help="Compact runs that ended before this (UTC; default: now minus [ledger] keep_detail). "
    "(--before: its old name.)",
)
@click.option("--dry-run", is_flag=True, help="Only count what would go; change nothing.")
@json_option("Print JSON instead of a table.")
@pass_state
def compact(
    state: State, job_names: tuple[str, ...], before: str | None, dry_run: bool, as_json: bool
) -> None:
    """Drop the detail of settled periods whose run ended long ago (their attempts' history,
    output tails, checkpoints) and keep each one's fact: status, attempts, first claim, finish,
    a waiver's note. A compacted period is never claimed again; scan still counts it; a reset
    makes it runnable again. In batches, safe beside running ticks; resumes where it stopped.

    Example: catchup compact --until 2026-09-01 --dry-run
    """
    from ..render import compaction

    result = state.app().compact(jobs=job_names or None, before=before, dry_run=dry_run)
    show(result, as_json, compaction.compacted_json, compaction.compacted)


@click.command(epilog=EXIT_CODES)
@json_option("Print JSON instead of a line.")
@pass_state
def migrate(state: State, as_json: bool) -> None:
    """Create or upgrade the ledger schema (every command also does this on first use).

    Example: catchup migrate
    """
    from ..render import json, tables

    show(state.app(require_config=False).migrate(), as_json, json.migrated_json, tables.migrated)
