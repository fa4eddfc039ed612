"""The README keeps up with the CLI: every command is documented, --help is shown as it is."""

from __future__ import annotations

import os
import subprocess
import sys

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
