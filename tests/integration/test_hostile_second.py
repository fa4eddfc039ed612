"""Hostile input, the second corpus (issue 22): what a hostile or careless user does through the
CLI, each case once broken. One line and the documented exit code, no traceback, no secret
anywhere, and the ledger as it was, or, where a job misbehaves, its true outcome recorded."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from conftest import Project


def call_job(project: Project, monkeypatch: pytest.MonkeyPatch, body: str) -> str:
    """A ``call`` job whose module (beside catchup.toml) holds ``body``; its name."""
    module = f"hostile_{uuid.uuid4().hex[:8]}"
    (project.path / f"{module}.py").write_text(body)
    monkeypatch.syspath_prepend(str(project.path))
    project.write(
        f'[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncall = "{module}:run"\n'
    )
    return module


def run_row(sql: Any) -> tuple[Any, ...]:
    (row,) = sql("SELECT status, attempt, error FROM {schema}.runs")
    return row


UNRENDERABLE = [
    "class Weird:\n    def __str__(self):\n        raise RuntimeError('no')\n"
    "def run(ctx):\n    raise Exception(Weird())\n",
    "class Weird:\n    def __str__(self):\n        return 42\n"
    "def run(ctx):\n    raise Exception(Weird())\n",
    "class Loud(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\n"
    "def run(ctx):\n    raise Loud()\n",
]


@pytest.mark.parametrize("body", UNRENDERABLE, ids=["str-raises", "str-not-text", "own-str"])
def test_a_call_whose_exception_cannot_be_rendered_is_a_failure(
    project: Project, sql: Any, monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    """The handler that describes the exception must not fail in turn and leave "no error",
    which reads as success: the period is failed, exit 1, and runs again on the next try."""
    call_job(project, monkeypatch, body)
    ran = project.cli("run", "billing", "--period", "2026-10-02")
    assert ran.exit_code == 1, ran.output
    assert "Traceback" not in ran.output and "succeeded" not in ran.stdout
    status, attempt, error = run_row(sql)
    assert (status, attempt) == ("failed", 1)
    assert "could not be rendered" in error


@pytest.mark.parametrize(
    "text", ["'nul\\x00inside'", "'lone \\udc80 surrogate'", "'both\\x00\\ud800'"]
)
def test_a_call_error_with_a_nul_or_a_lone_surrogate_is_recorded(
    project: Project, sql: Any, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    """PostgreSQL stores no NUL in text and UTF-8 has no lone surrogates: the error and its
    traceback are cleaned like command output, so the finish is written (not left running)."""
    call_job(project, monkeypatch, f"def run(ctx):\n    raise ValueError({text})\n")
    ran = project.cli("run", "billing", "--period", "2026-10-02")
    assert ran.exit_code == 1, ran.output
    assert "database error" not in ran.output and "Traceback" not in ran.output
    status, attempt, error = run_row(sql)
    assert (status, attempt) == ("failed", 1)
    assert error.startswith("ValueError: ") and "\ufffd" in error
    (tail,) = sql("SELECT output_tail FROM {schema}.runs")[0]
    assert "\ufffd" in tail and "\x00" not in tail
