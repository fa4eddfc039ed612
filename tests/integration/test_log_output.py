"""A job's output in catchup's own log (issue 55): ``log_output = true`` on a job, or
``--log-output`` on tick, replay and the scheduler, writes what the job prints to catchup's
stderr a line at a time after ``job= key= period= attempt=`` (logfmt), so a team's log search
finds "502 globex"; each line whole (never two workers' text in one line), at most 1,000 lines
of 4 KiB per attempt (the rest counted in one line), control characters escaped. The ledger
keeps the tail as before."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import threading

from fix_project import Project
from test_scheduler_reload import Scheduler, start_of

# one logfmt line of a job's output: the fields, then " | " and the line
LOGGED = re.compile(
    r'^job=\S+ (?:key=(?:[^\s"=\\]+|"(?:[^"\\]|\\.)*") )?period=\S+ attempt=\d+ \| (.*)$'
)


def logged(stderr: str) -> list[str]:
    """The lines of ``stderr`` that are a job's output (the others are catchup's own)."""
    return [line for line in stderr.splitlines() if line.startswith("job=")]


def job(name: str, script: str, extra: str = "") -> str:
    return (
        f'[jobs.{name}]\nschedule = "daily"\nstart = "2026-11-01"\nmax_attempts = 1\n'
        f"command = {json.dumps(['sh', '-c', script])}\n{extra}\n"
    )


def test_a_jobs_output_is_logged_with_its_period_and_attempt(project: Project) -> None:
    """replay: the job with log_output has each line it printed, stdout and stderr in the order
    written, on catchup's stderr after its fields; an escape sequence shown, not obeyed; the
    job without it logs nothing; the ledger keeps the tail all the same."""
    project.write(
        job(
            "billing",
            "echo billing $CATCHUP_PERIOD; printf 'payment provider said 502 \\033[31mred\\n' >&2;"
            " printf 'one \\342\\200\\250 line\\n'; printf 'no newline at the end'; exit 1",
            "log_output = true",
        )
        + job("quiet", "echo quiet one")
    )
    ran = project.run("-q", "replay", "--since", "2026-11-01", "--until", "2026-11-03")
    assert ran.returncode == 1, ran.stderr
    lines = logged(ran.stderr)
    first = [line for line in lines if "period=2026-11-01 " in line]
    assert first == [
        "job=billing period=2026-11-01 attempt=1 | billing 2026-11-01",
        "job=billing period=2026-11-01 attempt=1 | payment provider said 502 \\x1b[31mred",
        "job=billing period=2026-11-01 attempt=1 | one \\u2028 line",  # a separator, escaped
        "job=billing period=2026-11-01 attempt=1 | no newline at the end",
    ]
    assert "\x1b" not in ran.stderr and "\u2028" not in ran.stderr
    assert "quiet one" not in ran.stderr and all(LOGGED.match(line) for line in lines)
    assert "│ billing 2026-11-01" in ran.stdout  # the failure's tail, as replay shows it
    assert "job=" not in ran.stdout
    shown = project.cli("-q", "history", "billing", "--period", "2026-11-01")
    assert "payment provider said 502" in shown.stdout


def test_log_output_logs_every_jobs_keys_whole_lines_quoted(project: Project, sql: object) -> None:
    """tick --log-output, two workers, keys that need quoting: every line of stderr that is
    a job's is one whole logfmt line (never another worker's text in it), each key quoted so
    it reads back as itself, and every line each attempt printed is there."""
    keys = ["acme", "a b", 'x"y=z', "initech", "umbrella", "hooli"]
    long = "x" * 3000
    script = f"for i in 1 2 3 4 5 6 7 8; do echo {long}$i; done"
    project.write(
        '[jobs.billing]\nschedule = "every 1 minute"\ncatchup = "latest"\n'
        f'start = "{start_of(sql)}"\nkeys = {json.dumps(keys)}\n'
        f"command = {json.dumps(['sh', '-c', script])}\n"
    )
    ran = project.run("-q", "tick", "--workers", "2", "--log-output")
    assert ran.returncode == 0, ran.stderr
    lines = logged(ran.stderr)
    assert len(lines) == len(keys) * 8, ran.stderr[-2000:]
    seen: dict[str, int] = {}
    for line in lines:
        found = LOGGED.match(line)
        assert found is not None and re.fullmatch(r"x{3000}[1-8]", found.group(1)), line[:200]
        key = re.match(r'^job=billing key=("(?:[^"\\]|\\.)*"|\S+)', line)
        assert key is not None
        value = key.group(1)
        read = json.loads(value) if value.startswith('"') else value
        seen[read] = seen.get(read, 0) + 1
    assert seen == {key: 8 for key in keys}


def test_logged_lines_are_bounded_per_attempt(project: Project) -> None:
    """1,500 lines, the first 10,000 bytes long and the second 5,000 NULs: 1,000 lines logged,
    the long ones cut at 4 KiB as logged (and said), then one line counting the 500 left out;
    the ledger's tail still ends with the last line."""
    script = "head -c 10000 /dev/zero | tr '\\0' y; echo; head -c 5000 /dev/zero; echo; i=3; " + (
        "while [ $i -le 1500 ]; do echo line $i; i=$((i+1)); done"
    )
    project.write(job("chatty", script, "log_output = true"))
    ran = project.run("-q", "run", "chatty", "--period", "2026-11-01")
    assert ran.returncode == 0, ran.stderr
    assert logged(ran.stderr) == []  # run streams the output as it is, never logged twice
    ran = project.run("-q", "replay", "--since", "2026-11-02", "--until", "2026-11-03")
    lines = [line for line in logged(ran.stderr) if "period=2026-11-02 " in line]
    assert len(lines) == 1001, ran.stderr[-500:]
    prefix = "job=chatty period=2026-11-02 attempt=1 | "
    assert lines[0] == prefix + "y" * 4096 + " [catchup: the rest of this line not logged]"
    # 5,000 NULs, escaped, would be 20,000 characters: cut at 4 KiB as escaped
    assert lines[1] == prefix + "\\x00" * 1024 + " [catchup: the rest of this line not logged]"
    assert lines[2] == prefix + "line 3" and lines[999] == prefix + "line 1000"
    assert lines[1000] == prefix + "[catchup: 500 more lines not logged; the ledger keeps the tail]"
    shown = project.cli("-q", "history", "chatty", "--period", "2026-11-02", "--json")
    assert json.loads(shown.stdout)["attempts"][0]["output_tail"].endswith("line 1500\n")


def test_a_calls_output_and_traceback_are_logged(project: Project) -> None:
    """A Python call, alone (tick of one key) and in a batch (a replay of several periods of
    several keys): what its own thread prints and, when it raises, its traceback, logged
    after its fields; nothing another thread prints is."""
    (project.path / "billjobs.py").write_text(
        "import sys\n\n"
        "def run(ctx):\n"
        "    print('billing', ctx.key, ctx.period)\n"
        "    sys.stdout.buffer.write(b'bytes ' + ctx.key.encode() + b'\\n')\n"
        "    sys.stdout.writelines(['lines ', ctx.key, '\\n'])\n"
        "    if ctx.key == 'globex':\n"
        "        raise RuntimeError('payment provider said 502 for ' + ctx.key)\n"
    )
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-11-01"\nmax_attempts = 1\n'
        'keys = ["acme", "globex"]\ncall = "billjobs:run"\nlog_output = true\n'
    )
    ran = project.run("-q", "replay", "--since", "2026-11-01", "--until", "2026-11-04")
    assert ran.returncode == 1, ran.stderr
    lines = logged(ran.stderr)
    for day in ("2026-11-01", "2026-11-02", "2026-11-03"):
        for key in ("acme", "globex"):
            line = f"job=billing key={key} period={day} attempt=1 | billing {key} {day}"
            assert line in lines, ran.stderr
        said = f"job=billing key=globex period={day} attempt=1 | RuntimeError: payment provider"
        assert any(line.startswith(said) for line in lines), ran.stderr
    assert not any("key=acme" in line and "Traceback" in line for line in lines)
    for key in ("acme", "globex"):  # bytes and writelines from its own thread, caught too
        day = "period=2026-11-01 attempt=1 | "
        assert f"job=billing key={key} {day}bytes {key}" in lines, ran.stderr
        assert f"job=billing key={key} {day}lines {key}" in lines, ran.stderr
    assert "\nbytes" not in ran.stdout  # only in a failure's tail, as replay shows it
    assert "catchup/execution" not in ran.stderr  # the traceback from its own frames
    assert all(LOGGED.match(line) for line in lines)


def test_the_scheduler_logs_its_jobs_output(project: Project, sql: object) -> None:
    """scheduler --log-output: a period it runs has its line in the scheduler's log."""
    start = start_of(sql)
    project.write(
        '[jobs.bill]\nschedule = "every 1 minute"\ncatchup = "latest"\n'
        f'start = "{start}"\ncommand = ["sh", "-c", "echo billed $CATCHUP_PERIOD"]\n'
    )
    scheduler = Scheduler(project, "--log-output")
    try:
        scheduler.saying("attempt=1 | billed ", "the job's line in the log")
        line = next(line for line in logged(scheduler.said()) if "| billed " in line)
        found = re.fullmatch(r"job=bill period=(\S+) attempt=1 \| billed (\S+)", line)
        assert found is not None and found.group(1) == found.group(2), line
    finally:
        assert scheduler.stop() == 0, scheduler.said()


def test_logged_lines_go_to_stderr_whole_while_a_progress_bar_draws(project: Project) -> None:
    """replay on a terminal draws a progress bar, and Rich takes sys.stderr over while it
    does: the logged lines still go to catchup's own stderr, each whole (not onto the
    terminal, not wrapped at its 40 columns)."""
    project.write(job("billing", "echo billing $CATCHUP_PERIOD", "log_output = true"))
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        project.command("-q", "replay", "--since", "2026-11-01", "--until", "2026-11-04"),
        cwd=project.path,
        env=project.env(COLUMNS="40", TERM="xterm"),
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(follower)
    shown: list[bytes] = []

    def drain() -> None:  # the terminal's side, read until the process lets go of it
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        reader.join(timeout=10)
        os.close(leader)
    assert proc.returncode == 0, err
    assert b"job=billing" not in b"".join(shown)
    assert logged(err) == [
        f"job=billing period=2026-11-0{day} attempt=1 | billing 2026-11-0{day}" for day in (1, 2, 3)
    ], err
