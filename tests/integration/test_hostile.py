"""Hostile input through the CLI: text that users and jobs wrote is printed as text."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from conftest import Project

ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"


def daily(command: str = '["true"]') -> str:
    return f'[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = {command}\n'


@pytest.mark.parametrize("reason", ["[/bogus] x", "[red]alert[/red] [link=http://e.x]l[/link]"])
def test_brackets_in_a_reason_are_text(project: Project, reason: str) -> None:
    """A reason that looks like Rich markup is stored and shown as written; history never
    crashes on it."""
    project.write(daily())
    marked = project.cli("mark", "billing", "2026-10-02", "--skip", "--reason", reason)
    assert marked.exit_code == 0, marked.output
    shown = project.cli("history", "billing")
    assert shown.exit_code == 0, shown.output
    assert reason in " ".join(shown.stdout.split()).replace("│ ", "")


def test_a_jobs_escape_sequences_are_shown_escaped(project: Project) -> None:
    """A job's output with a title change, a screen clear and an OSC 8 link reaches the
    terminal escaped, never raw."""
    project.write(daily(f'["printf", "%s", {json.dumps(ESCAPES)}]'))
    ran = project.cli("run", "billing", "--period", "2026-10-02")
    assert ran.exit_code == 0, ran.output
    shown = project.cli("history", "billing", "--period", "2026-10-02")
    assert shown.exit_code == 0, shown.output
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in shown.stdout


def test_a_callables_exception_text_is_shown_escaped(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = f"hostile_{uuid.uuid4().hex[:8]}"
    (project.path / f"{module}.py").write_text(
        f"def run(ctx):\n    raise ValueError({('[red]boom[/red] ' + ESCAPES)!r})\n"
    )
    monkeypatch.syspath_prepend(str(project.path))
    project.write(
        f'[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncall = "{module}:run"\n'
    )
    failed = project.cli("run", "billing", "--period", "2026-10-02")
    assert failed.exit_code == 1
    assert "ValueError: [red]boom[/red] \\x1b]0;pwned\\x07" in failed.stdout
    assert "\x1b" not in failed.stdout
    shown = project.cli("history", "billing")
    assert "\x1b" not in shown.stdout and "[red]boom[/red]" in shown.stdout.replace("\n", "")


def test_an_actor_and_a_pause_reason_are_text(project: Project, sql: Any) -> None:
    project.write(daily())
    paused = project.cli("pause", "billing", "--reason", "[bold]freeze\x1b[2J", "--actor", "[i]ops")
    assert paused.exit_code == 0, paused.output
    shown = project.cli("history", "billing")
    text = shown.stdout
    assert "\x1b" not in text
    assert "[bold]freeze\\x1b[2J" in text and "[i]ops" in text
