"""The CLI's plumbing: the group that turns every failure into one line and its exit code, the
state every command shares (options of the group, the facade opened on demand), the consoles,
and the signals a running command listens to."""

from __future__ import annotations

import errno
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, cast

import click

from ..errors import (
    EXIT_DATABASE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CatchupError,
    first_line,
)
from ..vocabulary import OutcomeStatus

if TYPE_CHECKING:
    from rich.console import Console

    from ..api import Catchup
    from ..results import Batch, Outcome

# Imports inside functions: at first use, so `catchup --help` and each command load only
# what they need.


class State:
    """What every command shares: the options of the group, and the facade once opened."""

    def __init__(self, config_path: str | None, dsn: str | None, quiet: bool) -> None:
        self.config_path = config_path
        self.dsn = dsn
        self.quiet = quiet
        self.notices = True  # what the ledger has that the config lacks, said on connecting
        self._app: Catchup | None = None

    def app(self, *, require_config: bool = True, log_output: bool = False) -> Catchup:
        """The library facade for this invocation: the config is read now, the database is
        opened when an operation first needs it (and named once on stderr unless -q);
        ``log_output``: every job's output logged (--log-output)."""
        if self._app is None:
            from ..api import Catchup
            from ..render import tables

            def said(info: Any) -> None:
                if not self.quiet or info.relocated:  # a ledger moved: said even under -q
                    tables.connected(err_console(), info)
                if self.notices:  # a warning, so even under -q: periods may run twice
                    tables.unconfigured(err_console(), info)
                tables.moved(err_console(), info)  # said once, even under -q

            self._app = Catchup(
                self.config_path,
                dsn=self.dsn,
                require_config=require_config,
                on_connect=said,
            )
            self._app.log_output = log_output
            click.get_current_context().call_on_close(self._app.close)
        return self._app


pass_state = click.make_pass_decorator(State)


def console(stderr: bool = False) -> Console:
    """Rich on a terminal; on a pipe no colour codes and wide enough that tables do not fold."""
    from rich.console import Console

    # markup off: names, reasons and errors that users and jobs wrote are text, never markup
    out = Console(stderr=stderr, highlight=False, markup=False, emoji=False)
    if not out.is_terminal:
        # a pipe gets wide tables, unless COLUMNS says how wide the reader is, and no line
        # ends in the spaces Rich pads it with
        width = _columns() or max(out.width, 200)
        trimmed = cast("IO[str]", Trimmed(sys.stderr if stderr else sys.stdout))
        out = Console(file=trimmed, highlight=False, markup=False, emoji=False, width=width)
    return out


class Trimmed:
    """A pipe's stream that drops the spaces at the end of each line (held back until what
    follows shows whether a line ends there); anything else passes through."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream, self.spaces = stream, ""

    def write(self, text: str) -> int:
        text = self.spaces + text
        body = text.rstrip(" ")
        self.spaces = text[len(body) :]
        self.stream.write(re.sub(r" +\n", "\n", body))
        return len(text)

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _columns() -> int | None:
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return columns if 20 <= columns <= 10_000 else None


def err_console() -> Console:
    return console(stderr=True)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def stop_signals(*, reload: threading.Event | None = None) -> Iterator[threading.Event]:
    """SIGINT, SIGTERM and SIGHUP (the terminal or the ssh session went away) set an event the
    runner watches: the job is stopped and recorded as interrupted, no failure counted. Given
    ``reload``, SIGHUP sets that instead (a daemon's "read your config again")."""
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        if reload is not None and signum == signal.SIGHUP:
            reload.set()
        else:
            stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def show[R](
    result: R,
    as_json: bool,
    for_scripts: Callable[[R], str],
    for_people: Callable[[Console, R], None],
    out: Console | None = None,
) -> None:
    """Print ``result``: as JSON with ``--json``, else for people (on ``out``, or stdout)."""
    if as_json:
        click.echo(for_scripts(result))
    else:
        for_people(out or console(), result)


def exit_for_outcome(result: Outcome) -> None:
    """``run``: 130 when interrupted or cancelled (``catchup cancel``: the period was not done,
    though no failure is counted), 3 on a database error (as ``tick`` and ``replay``: its
    evidence query failed, its durable claim was not confirmed), 2 when the job cannot start
    (a configuration error), 1 when it failed, lost its period or waits for upstream periods
    not done, else 0. Run of one key whose job's keys query failed (it ran on the keys read
    last): the failure said in one line, and its exit code unless interrupted."""
    if result.keys_failed is not None:  # said even under -q: that job needs a person
        click.echo(f"catchup: {_safe(result.keys_failed.line)}", err=True)
    if result.status in (OutcomeStatus.interrupted, OutcomeStatus.cancelled):
        sys.exit(EXIT_INTERRUPTED)
    if result.keys_failed is not None:
        sys.exit(result.keys_failed.exit_code)
    if result.status == OutcomeStatus.error:
        sys.exit(EXIT_DATABASE)
    if result.status == OutcomeStatus.unstartable:
        sys.exit(EXIT_USAGE)
    if result.status.is_failure or result.status == OutcomeStatus.blocked:
        sys.exit(EXIT_FAILED)


def exit_for_batch(batch: Batch) -> None:
    """``tick`` and ``replay``: each keyed job whose keys query failed said in one line; then
    130 interrupted, 3 a database error (a keys query's too), 2 a job that cannot start, is
    held (catchup/changes/held.py) or had its keys refused (the other jobs ran), 1 a failure, else
    0."""
    for failure in batch.keys_failed:  # said even under -q: that job needs a person
        click.echo(f"catchup: {_safe(failure.line)}", err=True)
    if batch.interrupted:
        sys.exit(EXIT_INTERRUPTED)
    if batch.errors or any(f.database for f in batch.keys_failed):
        sys.exit(EXIT_DATABASE)
    if batch.unstartable or batch.held or batch.keys_failed:
        sys.exit(EXIT_USAGE)
    if batch.failed:
        sys.exit(EXIT_FAILED)


# what writing to a standard output that went away raises: its reader left (`| head -1`),
# or the descriptor was closed (a job's callable closed fd 1)
_GONE = frozenset({errno.EPIPE, errno.EBADF, errno.ECONNRESET})


class GuardedOutput:
    """Standard output that can go away without taking the command with it: the first write
    that fails says so in one line on stderr, points the descriptor at /dev/null (so nothing
    later, the interpreter's last flush included, fails on it) and drops the rest. A batch goes
    on, and records every outcome, when its reader stops reading."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.lost = False

    def write(self, text: str) -> int:
        if not self.lost:
            try:
                return int(self._stream.write(text))
            except (OSError, ValueError) as exc:
                self._lose(exc)
        return len(text)

    def flush(self) -> None:
        if not self.lost:
            try:
                self._stream.flush()
            except (OSError, ValueError) as exc:
                self._lose(exc)

    def _lose(self, exc: BaseException) -> None:
        if isinstance(exc, OSError) and exc.errno not in _GONE:
            raise exc
        if isinstance(exc, ValueError) and not getattr(self._stream, "closed", False):
            raise exc
        self.lost = True
        with _suppressed():
            fd = self._stream.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)
            os.close(devnull)
        with _suppressed():
            sys.stderr.write(
                "catchup: standard output was closed; the rest of the output is dropped, "
                "the command goes on\n"
            )
            sys.stderr.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def _suppressed() -> Iterator[None]:
    try:
        yield
    except (OSError, ValueError, AttributeError):
        pass


@contextmanager
def guarded_stdout() -> Iterator[None]:
    original = sys.stdout
    if original is None or isinstance(original, GuardedOutput):
        yield
        return
    sys.stdout = GuardedOutput(original)
    try:
        yield
    finally:
        if isinstance(sys.stdout, GuardedOutput):
            sys.stdout = original


def _own_option(command: click.Command | None, name: str) -> bool:
    return command is not None and any(
        isinstance(p, click.Option) and name in p.opts + p.secondary_opts for p in command.params
    )


def _takes_value(command: click.Command | None, name: str) -> bool:
    return command is not None and any(
        isinstance(p, click.Option) and name in p.opts and not p.is_flag and not p.count
        for p in command.params
    )


def _safe(text: str) -> str:
    from ..render.text import safe

    return safe(text)


class CatchupGroup(click.Group):
    """Turns every failure into one line on stderr and the documented exit code; lists its
    commands in ``sections`` (title, names) and takes the old names in ``aliases``."""

    sections: tuple[tuple[str, tuple[str, ...]], ...] = ()
    aliases: dict[str, str] = {}  # noqa: RUF012 (set once, on the top group)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if not self.sections:
            super().format_commands(ctx, formatter)
            return
        width = formatter.width - 6 - max(len(n) for _, names in self.sections for n in names)
        for title, names in self.sections:
            rows = [(n, self.commands[n].get_short_help_str(width)) for n in names]
            with formatter.section(title):
                formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, self.aliases.get(cmd_name, cmd_name))

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] in self.aliases:  # said once, where the command is chosen
            old, now = args[0], self.aliases[args[0]]
            click.echo(
                f"catchup: `catchup {old}` is now `catchup {now}` (the old name goes in a later"
                " release)",
                err=True,
            )
            args = [now, *args[1:]]
        return super().resolve_command(ctx, args)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        with guarded_stdout():
            return self._main(*args, **kwargs)

    def _main(self, *args: Any, **kwargs: Any) -> Any:
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
            said = _safe(exc.format_message())
            click.echo(f"catchup: {said} (see {_safe(command)} --help)", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            if not standalone:
                raise
            click.echo(f"Error: {_safe(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            if not standalone:
                raise
            click.echo("catchup: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        if not standalone:
            return value
        sys.exit(value if isinstance(value, int) else 0)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if ctx.parent is None:  # the top group: `catchup tick -q` as `catchup -q tick`
            args = self._globals_first(ctx, args)
        return super().parse_args(ctx, args)

    def _globals_first(self, ctx: click.Context, args: list[str]) -> list[str]:
        """The group's own options (-q, --config, --dsn), where they follow the command, moved
        before it; a value of a command's own option is left alone, and so is all after --."""
        takes_value = {
            name: not param.is_flag
            for param in self.params
            if isinstance(param, click.Option)
            for name in param.opts
        }
        head: list[str] = []
        rest = list(args)
        while rest and rest[0].startswith("-") and rest[0] != "--":  # the group's own, already
            token = rest.pop(0)
            head.append(token)
            if takes_value.get(token) and rest:
                head.append(rest.pop(0))
        command: click.Command | None = self
        moved: list[str] = []
        kept: list[str] = []
        while rest:
            token = rest.pop(0)
            if token == "--":
                kept += [token, *rest]
                break
            name = token.split("=", 1)[0]
            if name in takes_value and not _own_option(command, name):
                moved.append(token)
                if takes_value[name] and "=" not in token and rest:
                    moved.append(rest.pop(0))
                continue
            kept.append(token)
            if isinstance(command, click.Group) and not token.startswith("-"):
                command = command.get_command(ctx, token) or command
            elif token.startswith("-") and "=" not in token and _takes_value(command, token):
                if rest:
                    kept.append(rest.pop(0))  # the command's own option's value, whatever it is
        return head + moved + kept

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CatchupError as exc:
            # a message may quote what a user typed or a file holds: shown escaped, never raw
            for line in str(exc).splitlines() or [type(exc).__name__]:
                click.echo(f"catchup: {_safe(line)}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("catchup: interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except Exception as exc:
            psycopg = sys.modules.get("psycopg")
            if psycopg is not None and isinstance(exc, psycopg.Error):
                click.echo(f"catchup: database error: {_safe(first_line(exc))}", err=True)
                ctx.exit(EXIT_DATABASE)
            raise
