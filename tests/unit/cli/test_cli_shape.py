"""The command line's shape (issue 50): `catchup --help` in sections that name every command
once, one window vocabulary (`--since`/`--until`), `--limit` for how much is shown and `--max-*`
for how much is done, the old spellings and `catchup server` still taken for a release."""

from __future__ import annotations

import click
from click.testing import CliRunner

from catchup.cli import cli
from catchup.cli.changing import compact
from catchup.cli.looking import explain
from catchup.cli.running import replay


def test_the_help_lists_every_command_once_in_its_section() -> None:
    listed = [name for _, names in cli.sections for name in names]
    assert sorted(listed) == sorted(cli.commands)
    shown = CliRunner().invoke(cli, ["--help"], terminal_width=80).output
    assert shown.index("Run periods:") < shown.index("Look:") < shown.index("Operate:")
    for title, names in cli.sections:
        section = shown.split(f"{title}:\n", 1)[1].split("\n\n", 1)[0]
        assert [line.split()[0] for line in section.splitlines()] == list(names)
    assert "server" not in cli.commands and "\n  server " not in shown


def _params(command: click.Command, args: list[str]) -> dict[str, object]:
    return command.make_context(command.name or "", args).params


def test_the_old_spellings_mean_what_the_new_ones_do() -> None:
    assert _params(explain, ["billing", "--from", "2026-10-01", "--count", "3"]) == _params(
        explain, ["billing", "--since", "2026-10-01", "--limit", "3"]
    )
    assert _params(compact, ["--before", "2026-10-01"]) == _params(
        compact, ["--until", "2026-10-01"]
    )
    old = _params(replay, ["--since", "2026-10-01", "--max", "2"])
    assert old == _params(replay, ["--since", "2026-10-01", "--max-periods", "2"])
    assert old["limit"] == 2


def test_catchup_server_is_catchup_postgres_and_says_so() -> None:
    result = CliRunner().invoke(cli, ["server", "--help"], prog_name="catchup")
    assert result.exit_code == 0
    assert "Usage: catchup postgres" in result.stdout
    assert "`catchup server` is now `catchup postgres`" in result.stderr
