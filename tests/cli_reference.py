"""Print docs/reference/cli.md anew: every command's ``--help``, as a console 80 columns wide
prints it. ``tests/unit/test_docs.py`` fails when the file and the commands drift apart.

    uv run python tests/cli_reference.py > docs/reference/cli.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catchup.cli import cli

HEADER = """\
# Command reference

Every command's `--help`, as printed on a console 80 columns wide. Generated, never edited:
`uv run python tests/cli_reference.py > docs/reference/cli.md` (`tests/unit/test_docs.py` fails
when this file and the commands drift apart). What the options mean in practice is in the
[tutorial](../tutorial.md) and the [how-to guides](../how-to/); dates, periods and exit codes
are the same in every command ([conventions](conventions.md)).
"""


def paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path, the group first, subcommands after their group."""
    found = [prefix]
    for name in sorted(group.commands):
        command = group.commands[name]
        if isinstance(command, click.Group):
            found += paths(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


def reference() -> str:
    runner = CliRunner()
    parts = [HEADER]
    for path in paths(cli):
        shown = " ".join(("catchup", *path))
        result = runner.invoke(cli, [*path, "--help"], prog_name="catchup", terminal_width=80)
        assert result.exit_code == 0, (shown, result.output)
        parts.append(
            f"## `{shown}`\n\n```console\n$ {shown} --help\n{result.output.rstrip()}\n```\n"
        )
    return "\n".join(parts)


if __name__ == "__main__":
    sys.stdout.write(reference())
