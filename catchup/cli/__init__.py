"""The command line: a thin skin over the library facade (:class:`catchup.api.Catchup`).

Each command parses its options, makes one call on the facade, renders the result with
``catchup.render`` and maps it to an exit code. The commands live in small modules by what they
do (``running``, ``looking``, ``changing``, ``admin``); what they share is in ``options`` (value
types, option bundles, exit codes) and ``base`` (errors to exit codes, consoles, signals).
"""

from __future__ import annotations

import click

from .. import __version__
from .admin import demo, deploy, doctor, postgres, serve
from .base import CatchupGroup, State
from .changing import (
    adopt,
    cancel,
    checkpoint,
    compact,
    exclude,
    mark,
    migrate,
    pause,
    rename,
    reset,
    resume,
    retire,
)
from .looking import explain, history, jobs, keys, plan, ps, scan, why
from .options import EXIT_CODES
from .running import ping, replay, run, tick
from .scheduling import scheduler


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


# `catchup --help` lists them in these sections, in this order (click alone sorts them by name)
SECTIONS: tuple[tuple[str, tuple[click.Command, ...]], ...] = (
    ("Run periods", (run, tick, scheduler, replay, ping)),
    ("Look", (scan, jobs, ps, history, keys, why, explain, plan, serve)),
    (
        "Change the ledger",
        (mark, exclude, reset, cancel, adopt, rename, retire, pause, resume, checkpoint),
    ),
    ("Operate", (doctor, migrate, compact, deploy, postgres, demo)),
)
for _, commands in SECTIONS:
    for command in commands:
        cli.add_command(command)
cli.sections = tuple((title, tuple(c.name or "" for c in cs)) for title, cs in SECTIONS)
# old names that still work for a release, and say what they are now
cli.aliases = {"server": "postgres"}


def main(argv: list[str] | None = None) -> None:
    """The console script: ``catchup``."""
    cli.main(args=argv, prog_name="catchup")
