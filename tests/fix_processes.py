"""Processes in tests: every child reaped when its test ends, failures printed at once, and
waiting on a condition with a bound (never a fixed sleep)."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# Under a moved clock with a default libfaketime build (.ci/run builds a stateless one, see
# .ci/faketime), every process would share the semaphore libfaketime made for pytest
# (FAKETIME_SHARED, inherited), and one killed while holding it would stop every later one.
os.environ.pop("FAKETIME_SHARED", None)


@pytest.fixture(autouse=True)
def reap_children(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Every test reaps what it starts. A child process still running when its test ends is
    killed (with its process group when it leads one) and waited for, and every child's pipes
    are closed, so a failing test leaks nothing into the next; a test that passed while leaving
    one running fails here."""
    started: list[subprocess.Popen[Any]] = []
    original = subprocess.Popen.__init__

    def tracked(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        started.append(self)

    monkeypatch.setattr(subprocess.Popen, "__init__", tracked)
    yield
    monkeypatch.undo()
    left = []
    for proc in started:
        if proc.poll() is None:
            left.append(proc.args)
            try:
                if os.getpgid(proc.pid) == proc.pid:
                    os.killpg(proc.pid, signal.SIGKILL)
                else:
                    proc.kill()
            except ProcessLookupError:
                pass
            proc.wait(timeout=30)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    report = getattr(request.node, "rep_call", None)
    if left and report is not None and report.passed:
        pytest.fail(f"the test left {len(left)} child process(es) running: {left}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.rep_call = report  # type: ignore[attr-defined]
    if report.failed:
        # printed at once, not only in the summary at the end: a run that hangs later (and is
        # ended by faulthandler_timeout, which prints no summary) still shows why this failed
        sys.stderr.write(f"\n--- {item.nodeid} failed ({report.when}):\n{report.longreprtext}\n")
        sys.stderr.flush()
    return report


def wait_for(condition: Callable[[], Any], timeout: float = 30, what: str = "condition") -> Any:
    """Poll ``condition`` until it is truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def written_pid(path: Path) -> int | None:
    """The pid a job wrote to ``path`` with ``echo $$ > path``, once the whole line is there.

    The shell creates the file before it writes the line: a file that exists may still be
    empty, so waiting on ``path.exists`` and then reading it races the write."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return int(text) if text.endswith("\n") else None


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def timed_job(log: Path, sleep: str) -> list[str]:
    """A job that appends ``PERIOD START END`` (host clock, one host) to ``log``."""
    return [
        "sh",
        "-c",
        f'a=$(date +%s.%N); sleep {sleep}; echo "$CATCHUP_PERIOD $a $(date +%s.%N)" >> {log}',
    ]


def serial_periods(log: Path) -> list[str]:
    """The periods a :func:`timed_job` ran, in the order they ran, after checking that no two
    of them overlapped in time."""
    spans = sorted(
        (float(a), float(b), p)
        for p, a, b in (line.split() for line in log.read_text().splitlines())
    )
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        assert start >= end, f"{first} and {second} overlapped"
    return [p for _, _, p in spans]


def let_go_at_once(
    ready: str, code: str, args: list[str], racers: int = 4
) -> list[tuple[int, str, str]]:
    """``racers`` Pythons that each run ``ready`` (imports), say so, and wait; once every one
    is ready, all are let go together to run ``code`` (``args`` in sys.argv): each one's exit
    code, output and error."""
    barrier = 'import sys\nprint("ready", flush=True)\nsys.stdin.readline()\n'
    started = [
        subprocess.Popen(
            [sys.executable, "-c", f"{ready}\n{barrier}{code}", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(racers)
    ]
    try:
        for racer in started:
            assert racer.stdout is not None
            assert racer.stdout.readline() == "ready\n", racer.communicate(timeout=60)
        for racer in started:
            assert racer.stdin is not None
            racer.stdin.write("go\n")
            racer.stdin.flush()
        said = [racer.communicate(timeout=120) for racer in started]
        return [(r.returncode, out, err) for r, (out, err) in zip(started, said, strict=True)]
    finally:
        for racer in started:
            if racer.poll() is None:
                racer.kill()
                racer.wait()
