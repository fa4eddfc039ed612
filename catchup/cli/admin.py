"""``doctor``, ``demo``, ``deploy`` and ``postgres``: checking, showing, installing catchup and
its embedded PostgreSQL."""

from __future__ import annotations

import sys
import threading

import click

from ..errors import EXIT_FAILED, ConfigError
from .base import State, console, pass_state, show
from .options import (
    DOCTOR_EXIT_CODES,
    EXIT_CODES,
    Listen,
    deadline_option,
    every_option,
    json_option,
    refresh_option,
    scheduler_options,
)

# Imports inside functions: at first use, so `catchup --help` and each command load only
# what they need.


@click.command(epilog=DOCTOR_EXIT_CODES)
@json_option("Print JSON instead of lines.")
@pass_state
def doctor(state: State, as_json: bool) -> None:
    """Check the config, the database and its version, a pooler in the way, the host clock,
    jobs due on the hour, and whether one scheduler is ticking: one line per finding.

    Example: catchup doctor
    """
    from ..api import Catchup
    from ..render import json, tables

    found = Catchup.doctor(state.config_path, state.dsn)
    show(found, as_json, json.findings_json, tables.findings)
    if any(f.level == "serious" for f in found):
        sys.exit(EXIT_FAILED)


@click.command(epilog=EXIT_CODES)
@click.option(
    "--listen",
    type=Listen(),
    default="127.0.0.1:9187",
    show_default=True,
    help="Where to answer; other hosts only when asked (--listen 0.0.0.0:9187).",
)
@refresh_option
@pass_state
def serve(state: State, listen: tuple[str, int], refresh: float) -> None:
    """Serve a status page, /metrics, /api/scan, /healthz, /readyz and /ping until stopped.

    One long-running process, safe to run on every replica, that writes to the ledger only
    the pings of jobs with a ping (/ping/<uuid>, healthchecks' ping API: see catchup ping).
    It scans on its own timer, so a scrape or a page load never costs a scan, and an
    unreachable database makes the page say so and catchup_up 0. /metrics is Prometheus's
    text format, or OpenMetrics when the scraper asks for it; /api/scan is the scan --json
    document; /keys/JOB lists a keyed job's keys as recorded, 1,000 a page (?after=KEY:
    the next; /api/keys/JOB: their JSON); /readyz
    answers 503 unless the newest scan succeeded recently. The config file is read again
    on SIGHUP and when it changes (then scanned at once; a version that does not load is
    refused, said, and /readyz answers 503 until fixed). Stops on SIGINT or SIGTERM (exit 0).

    Example: catchup serve --listen 127.0.0.1:9187 --refresh 30s
    """
    from .base import stop_signals

    host, port = listen
    app = state.app()

    def listening(url: str) -> None:
        click.echo(f"catchup serve: {url} (scans every {refresh:g}s)", err=True)

    def say(line: str) -> None:  # a reload, or why not: the config's words are data
        from ..render.text import safe

        click.echo(f"catchup serve: {safe(line)}", err=True)

    hup = threading.Event()
    with stop_signals(reload=hup) as stop:
        app.serve(
            host=host,
            port=port,
            refresh=refresh,
            stop=stop,
            on_listening=listening,
            reload=hup,
            say=say,
        )


@click.command(epilog=EXIT_CODES)
@pass_state
def demo(state: State) -> None:
    """See catchup work in a minute: a throwaway ledger with two weeks of a nightly billing
    run and an hourly export, a host outage and a failing night; scan, replay, clean scan.

    Uses the embedded PostgreSQL (or --dsn) in a schema of its own, dropped at the end.

    Example: catchup demo
    """
    from ..deploy.demo import run_demo
    from ..postgres import database as db

    config = state.app(require_config=False).config
    target = db.resolve(state.dsn, config.dsn, embedded_allowed=config.embedded)
    result = run_demo(target, console())
    if result.gaps_after:
        sys.exit(EXIT_FAILED)


@click.group(epilog=EXIT_CODES)
def deploy() -> None:
    """Print what the one scheduler needs to call `catchup tick`: Kubernetes or systemd (or,
    with --scheduler, to run `catchup scheduler` on every replica).

    Example: catchup deploy systemd --every 5
    """


@deploy.command("kubernetes")
@click.option("--name", default="catchup", show_default=True, help="The CronJob's name.")
@click.option(
    "--image",
    required=True,
    help="The image with catchup and your jobs installed (required).",
)
@every_option
@deadline_option("activeDeadlineSeconds of each tick's Job")
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
@click.option(
    "--serve",
    is_flag=True,
    help="Also a Deployment and Service running `catchup serve` (with scrape annotations).",
)
@scheduler_options("a Deployment of 2 `catchup scheduler` replicas with a PodDisruptionBudget")
def deploy_kubernetes(
    name: str,
    image: str,
    every: int,
    deadline: float,
    secret: str,
    config_map: str,
    namespace: str | None,
    serve: bool,
    scheduler: bool,
    grace: float,
) -> None:
    """A CronJob that calls `catchup tick --max-time` (its interval): concurrencyPolicy Allow
    (the ledger makes concurrent ticks safe; a slow period never holds the next tick back), a
    deadline, timeZone Etc/UTC, a few minutes off the hour, a restrictive securityContext,
    resources, the DSN from a Secret; valid for Kubernetes 1.33 (checked in CI).

    Example: catchup deploy kubernetes --image ghcr.io/acme/billing:1.4 | kubectl apply -f -
    """
    from ..deploy import tick as recipes

    click.echo(
        recipes.kubernetes(
            name=name,
            image=image,
            every=every,
            deadline=round(deadline),
            secret=secret,
            config_map=config_map,
            namespace=namespace,
            serve=serve,
            scheduler=scheduler,
            grace=round(grace),
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
@every_option
@click.option(
    "--user",
    help="The user to run as (a sysusers.d file makes it; default: DynamicUser=yes).",
)
@deadline_option("TimeoutStartSec of a tick")
@click.option("--force", is_flag=True, help="With --output-dir: replace units already there.")
@click.option("--workdir", default="/etc/catchup", show_default=True, help="Where catchup.toml is.")
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False),
    metavar="DIR",
    help="Write the unit files into DIR (it must exist) instead of printing them.",
)
@click.option(
    "--serve", is_flag=True, help="Also a service running `catchup serve` on 127.0.0.1:9187."
)
@scheduler_options("a long-running `catchup scheduler` service, Restart=on-failure")
def deploy_systemd(
    name: str,
    executable: str,
    every: int,
    user: str | None,
    deadline: float,
    force: bool,
    workdir: str,
    output_dir: str | None,
    serve: bool,
    scheduler: bool,
    grace: float,
) -> None:
    """A service and a timer that call `catchup tick` (Persistent=true, RandomizedDelaySec).

    Example: catchup deploy systemd --output-dir /etc/systemd/system
    (then: systemctl enable --now catchup.timer)
    """
    from pathlib import Path

    from ..deploy import systemd as recipes

    recipe = recipes.systemd(
        name=name,
        executable=executable,
        every=every,
        user=user,
        workdir=workdir,
        serve=serve,
        deadline=round(deadline),
        scheduler=scheduler,
        grace=round(grace),
    )
    if output_dir is None:
        click.echo(recipe.text(), nl=False)
        return
    from . import files

    folder = Path(output_dir)
    if not folder.is_dir():  # a typo must not become a folder of units nobody loads
        raise ConfigError(f"--output-dir {folder}: no such folder")
    there = [n for n in recipe.files if (folder / n).exists() or (folder / n).is_symlink()]
    if there and not force:
        raise ConfigError(
            f"--output-dir {folder}: {', '.join(there)} already there (--force replaces them)"
        )
    for filename, body in recipe.files.items():
        files.replace_file(folder / filename, body, "--output-dir")
        click.echo(f"wrote {folder / filename}")


@click.group("postgres")
def postgres() -> None:
    """The embedded PostgreSQL used when no database is configured (`catchup postgres`, its
    old name, still works for a release and says so).

    Example: catchup postgres status
    """


@postgres.command("status")
def server_status() -> None:
    """Say whether the embedded server runs, and where its data is.

    Example: catchup postgres status
    """
    from ..postgres import embedded

    data = embedded.data_dir()
    running = embedded.running(data)
    if running:
        click.echo(f"running: {data} (socket {running.socket_dir}, port {running.port})")
    else:
        click.echo(f"stopped: {data}")


@postgres.command("start")
def server_start() -> None:
    """Start the embedded server (a command that needs it starts it too).

    Example: catchup postgres start
    """
    from ..postgres import embedded

    data = embedded.data_dir()
    if (up := embedded.running(data)) is not None:
        click.echo(f"already running: {data} (socket {up.socket_dir}, port {up.port})")
        return
    started = embedded.ensure_running()
    click.echo(f"started: {data} (socket {started.socket_dir}, port {started.port})")


@postgres.command("stop")
def server_stop() -> None:
    """Stop the embedded server (the next command that needs it starts it again; a
    running serve waits for `catchup postgres start`).

    Example: catchup postgres stop
    """
    from ..postgres import embedded

    click.echo("stopped" if embedded.stop() else "was not running")
