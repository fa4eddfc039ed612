"""``catchup scheduler``: the built-in scheduler, a long-running process for every replica."""

from __future__ import annotations

import sys
import threading

import click

from ..config.bounds import SCHEDULER_GRACE, SCHEDULER_LEASE, SCHEDULER_WORKERS
from ..render.text import safe
from .base import State, console, pass_state, stop_signals
from .options import Listen, Seconds, log_output_option, refresh_option, workers_option

# Imports inside functions: at first use, so `catchup --help` and each command load only
# what they need.


@click.command(
    epilog="Exit codes: 0 stopped on SIGINT or SIGTERM (the lead handed back), 2 bad input "
    "(a config that does not load at start, a --serve port that cannot be bound), 3 the "
    "database cannot be reached at start."
)
@workers_option(
    SCHEDULER_WORKERS,
    what=(
        "Periods the leader runs at once in the default lane (a long one holds one, never "
        "the others; [scheduler.lanes] have their own)"
    ),
)
@click.option(
    "--lease",
    type=Seconds(SCHEDULER_LEASE.low, SCHEDULER_LEASE.high),
    default=f"{SCHEDULER_LEASE.default:g}s",
    show_default=True,
    metavar="DURATION",
    help="How long the lead holds without renewal (renewed every third of it): a leader "
    "that dies is replaced within this plus a second.",
)
@click.option(
    "--grace",
    type=Seconds(SCHEDULER_GRACE.low, SCHEDULER_GRACE.high),
    default=f"{SCHEDULER_GRACE.default:g}s",
    show_default=True,
    metavar="DURATION",
    help="On a stop signal, how long what runs may finish before it is stopped (recorded "
    "interrupted, no failure counted).",
)
@click.option(
    "--serve",
    "serve_at",
    type=Listen(),
    default=None,
    metavar="HOST:PORT",
    help="Also serve what `catchup serve` serves (the status page, /metrics, /healthz, "
    "/readyz) from this process.",
)
@refresh_option
@log_output_option
@pass_state
def scheduler(
    state: State,
    workers: int,
    lease: float,
    grace: float,
    serve_at: tuple[str, int] | None,
    refresh: float,
    log_output: bool,
) -> None:
    """Run the built-in scheduler: run it on every replica, one of them leads.

    The replicas elect a leader through the ledger (a lease on the database clock and a term
    that fences a leader whose lease ran out). Only the leader runs what is due, as `catchup
    tick` does (each job's catch-up policy, the same claim path), and it wakes when the next
    period of any job falls due or a failed one's backoff ends, not on a fixed minute. It
    never waits for what runs: a period starts as it falls due on one of --workers while the
    others run (a two-hour job holds one worker, nothing else; a job with a lane runs on that
    lane's own workers, [scheduler.lanes] in catchup.toml). The others stand by and take over
    within --lease plus a second when it is gone. On SIGTERM (a rolling deploy) the leader
    hands the lead back at once, starts nothing new, lets what runs finish for up to --grace,
    and exits 0. The config file is read again on SIGHUP and when it changes (a ConfigMap
    update): a version that does not load is refused, the last good one kept, and that said
    in the log, on the page and by /readyz (503) until the file loads again. Outcomes go to
    stdout as `tick` prints them, the lead's changes and reloads to stderr.

    Example: catchup scheduler --workers 8 --serve 0.0.0.0:9187
    """
    from ..render import tables

    out = console()

    def say(line: str) -> None:
        sys.stderr.write(f"catchup scheduler: {safe(line)}\n")
        sys.stderr.flush()

    def listening(url: str) -> None:
        say(f"serving {url} (scans every {refresh:g}s)")

    app = state.app(log_output=log_output)
    reload = threading.Event()
    with stop_signals(reload=reload) as stop:
        app.scheduler(
            workers=workers,
            lease=lease,
            grace=grace,
            stopping=stop,
            say=say,
            on_done=lambda outcome: tables.outcome(out, outcome),
            reload=reload,
            serve=serve_at,
            refresh=refresh,
            on_listening=listening,
        )
