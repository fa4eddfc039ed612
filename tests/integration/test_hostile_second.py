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


DAILY_ECHO = (
    '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\n'
    'command = ["sh", "-c", "echo ran $CATCHUP_PERIOD"]\n'
)


def test_a_reader_that_leaves_never_strands_a_claim(project: Project, sql: Any) -> None:
    """`catchup replay … | head -1`: the reader goes after one line. The batch goes on, every
    period is recorded (none left running with the claim handed over with a finish), and
    stderr says once that the output was dropped."""
    project.write(DAILY_ECHO)
    proc = project.spawn("-q", "replay", "--since", "2026-10-01", "--until", "2026-10-13")
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()  # as `head -1` does
    proc.wait(timeout=120)
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert err.count("standard output was closed") == 1, err
    assert sql("SELECT status, count(*) FROM {schema}.runs GROUP BY 1") == [("succeeded", 12)]


def test_a_failing_callback_gives_back_the_claim_it_was_handed(project: Project, sql: Any) -> None:
    """Through the API: the caller's on_done raises after a finish that claimed the next
    period. The error reaches the caller, and the next period is given back (an interrupted
    attempt, no failure), not left running."""
    from catchup import Catchup

    project.write(DAILY_ECHO)

    def broken(outcome: Any) -> None:
        raise BrokenPipeError("the reader left")

    with Catchup(str(project.config)) as app, pytest.raises(BrokenPipeError):
        app.replay(since="2026-10-01", until="2026-10-13", on_done=broken)
    assert sql("SELECT count(*) FROM {schema}.runs WHERE status = 'running'") == [(0,)]
    assert sql("SELECT status, failures FROM {schema}.runs ORDER BY period_start") == [
        ("succeeded", 0),
        ("failed", 0),
    ]
    assert sql("SELECT status FROM {schema}.history ORDER BY id") == [
        ("succeeded",),
        ("interrupted",),
    ]


def test_a_call_that_closes_standard_output_is_recorded_and_reported(
    project: Project, sql: Any
) -> None:
    """A ``call`` closes fd 1 (it runs in catchup's own process): its outcome is recorded, and
    printing it afterwards neither crashes catchup nor writes into whatever took fd 1."""
    (project.path / "closer.py").write_text("import os\ndef run(ctx):\n    os.close(1)\n")
    project.write('[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncall = "closer:run"\n')
    env = project.env(PYTHONPATH=str(project.path))
    import subprocess

    ran = subprocess.run(
        project.command("run", "billing", "--period", "2026-10-02"),
        cwd=project.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert "Traceback" not in ran.stderr and "Exception ignored" not in ran.stderr
    assert sql("SELECT status FROM {schema}.runs") == [("succeeded",)]
