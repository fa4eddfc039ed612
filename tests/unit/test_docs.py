"""The README keeps up with the CLI: every command is documented, --help is shown as it is."""

from __future__ import annotations

import re

import click
from paths import ROOT

from catchup.cli import cli

README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
PROSE = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def test_the_readme_is_short_and_points_to_the_docs() -> None:
    """What, why, the two commands, one example, where to go next: the rest is in docs/."""
    assert len(README.splitlines()) <= 150
    for folder in ("tutorial.md", "how-to/", "reference/", "explanation/"):
        assert f"](docs/{folder}" in README, folder


def test_the_command_reference_is_generated_from_the_help() -> None:
    """docs/reference/cli.md is every command's --help as it is: it cannot drift."""
    from cli_reference import reference

    written = (DOCS / "reference" / "cli.md").read_text()
    assert written == reference(), (
        "docs/reference/cli.md is out of date: "
        "uv run python tests/cli_reference.py > docs/reference/cli.md"
    )


def test_every_command_is_in_the_reference_and_in_a_guide() -> None:
    reference = (DOCS / "reference" / "cli.md").read_text()
    for path, _ in _every_command(cli):
        assert f"## `{path}`" in reference, path
    guides = "\n".join(p.read_text() for p in PROSE if p.name != "cli.md")
    missing = [name for name in cli.commands if f"catchup {name}" not in guides]
    assert not missing, f"no guide, explanation or README mentions: {missing}"


def test_the_job_keys_table_is_generated_from_the_one_table_of_keys() -> None:
    from config_reference import PAGE, rewrite

    text = PAGE.read_text()
    assert rewrite(text) == text, (
        "docs/reference/config.md's job keys drifted from catchup/config/settings.py: run "
        "uv run python tests/config_reference.py"
    )


def test_every_config_key_is_in_the_configuration_reference() -> None:
    from catchup.config.job import JOB_KEY as JOB_KEYS
    from catchup.config.loading import ALERT_KEYS, DATABASE_KEYS, WEBHOOK_KEYS

    text = (DOCS / "reference" / "config.md").read_text()
    keys = {*JOB_KEYS, *DATABASE_KEYS, *ALERT_KEYS, *WEBHOOK_KEYS, "name"}
    missing = sorted(key for key in keys if not re.search(rf"(^|\W){key}(\s*=|\.)", text, re.M))
    assert not missing, f"docs/reference/config.md shows no {missing}"


def test_every_relative_link_in_the_docs_leads_somewhere() -> None:
    broken = []
    for page in PROSE:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_every_command_documents_exit_codes() -> None:
    for name, command in cli.commands.items():
        if name == "postgres":
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
    assert len(commands) > 20  # the subcommands of deploy and postgres too
    for path, command in commands:
        assert command.help and len(command.help.split()) > 5, f"{path}: no help"
        examples = [line for line in command.help.splitlines() if line.startswith("Example: ")]
        assert examples, f"{path}: its --help shows no example"
        # the example runs the command it documents
        assert f"catchup {path.split()[1]}" in examples[0] or "catchup -q " in examples[0], (
            path,
            examples[0],
        )


def test_the_exit_codes_in_the_conventions_are_the_commands_own() -> None:
    from catchup.cli.options import EXIT_CODES

    text = (DOCS / "reference" / "conventions.md").read_text()
    assert EXIT_CODES.removeprefix("\b\n") in text
