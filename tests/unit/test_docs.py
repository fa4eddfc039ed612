"""The README keeps up with the CLI: every command is documented, --help is shown as it is."""

from __future__ import annotations

import os
import subprocess
import sys

import click

from catchup.cli import cli

from conftest import ROOT

README = (ROOT / "README.md").read_text()


def test_every_command_is_in_the_readme() -> None:
    missing = [name for name in cli.commands if f"catchup {name}" not in README]
    assert not missing, f"README does not mention: {missing}"


def test_readme_shows_the_real_help() -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    result = subprocess.run(
        [sys.executable, "-m", "catchup", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert result.stdout in README


def test_every_command_documents_exit_codes() -> None:
    for name, command in cli.commands.items():
        if name == "server":
            continue
        assert command.epilog and "Exit codes" in command.epilog, name


def _every_command(group: click.Group, prefix: str = "catchup") -> list[tuple[str, click.Command]]:
    found: list[tuple[str, click.Command]] = []
    for name, command in group.commands.items():
        found.append((f"{prefix} {name}", command))
        if isinstance(command, click.Group):
            found += _every_command(command, f"{prefix} {name}")
    return found


def test_every_command_has_help_with_an_example() -> None:
    commands = _every_command(cli)
    assert len(commands) > 20  # the subcommands of deploy and server too
    for path, command in commands:
        assert command.help and len(command.help.split()) > 5, f"{path}: no help"
        examples = [line for line in command.help.splitlines() if line.startswith("Example: ")]
        assert examples, f"{path}: its --help shows no example"
        # the example runs the command it documents
        assert f"catchup {path.split()[1]}" in examples[0] or "catchup -q " in examples[0], (
            path,
            examples[0],
        )
