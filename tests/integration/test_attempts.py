"""Every attempt on record (issue 55): the output of an attempt that failed before a retry
succeeded is found by ``history --period`` (each attempt's tail, newest first), by
``--attempt N``, in ``--json`` and on the period's page."""

from __future__ import annotations

import json
import signal
import urllib.request
from typing import Any

from fix_processes import wait_for
from fix_project import Project
from test_serve import free_port, get

# attempt 1 fails, saying why on stderr (with an escape sequence a terminal would obey);
# attempt 2 succeeds
SCRIPT = (
    'if [ "$CATCHUP_ATTEMPT" = 1 ]; then echo "billing globex"; '
    "printf 'payment provider said 502 for globex \\033[31mred\\n' >&2; exit 1; fi; "
    'echo "billed globex"'
)


def _failed_then_succeeded(project: Project, extra: str = "") -> None:
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-11-01"\nretry_backoff = "0s"\n'
        f"command = {json.dumps(['sh', '-c', SCRIPT])}\n{extra}"
    )
    assert project.cli("-q", "run", "billing", "--period", "2026-11-02").exit_code == 1
    assert project.cli("-q", "run", "billing", "--period", "2026-11-02").exit_code == 0


def test_a_failed_attempts_output_is_found_after_its_retry_succeeded(project: Project) -> None:
    _failed_then_succeeded(project)
    shown = project.cli("-q", "history", "billing", "--period", "2026-11-02")
    assert shown.exit_code == 0, shown.output
    out = shown.stdout
    # both attempts' tails, newest first, each under its own rule
    second, first = out.index("output of attempt 2"), out.index("output of attempt 1")
    assert second < out.index("billed globex") < first
    assert first < out.index("payment provider said 502 for globex") and "billing globex" in out
    assert "\x1b" not in out and "\\x1b[31mred" in out  # the job's escape shown, not obeyed
    assert "exited with 1" in out

    one = project.cli("-q", "history", "billing", "--period", "2026-11-02", "--attempt", "1")
    assert one.exit_code == 0, one.output
    assert "payment provider said 502" in one.stdout and "billed globex" not in one.stdout
    assert "output of attempt 2" not in one.stdout

    doc = json.loads(
        project.cli("-q", "history", "billing", "--period", "2026-11-02", "--json").stdout
    )
    tails = {a["attempt"]: (a["status"], a["exit_code"], a["output_tail"]) for a in doc["attempts"]}
    assert tails[2] == ("succeeded", 0, "billed globex\n")
    status, code, tail = tails[1]
    assert (status, code) == ("failed", 1)
    assert "payment provider said 502 for globex" in tail and "billing globex" in tail
    alone = json.loads(
        project.cli(
            "-q", "history", "billing", "--period", "2026-11-02", "--attempt", "1", "--json"
        ).stdout
    )
    assert [a["attempt"] for a in alone["attempts"]] == [1] and alone["total_attempts"] == 1


def test_an_attempt_needs_its_period(project: Project, sql: Any) -> None:
    """``--attempt`` without ``--period``: one line naming what is wrong, exit 2, nothing
    written (no job registered)."""
    _failed_then_succeeded(project)
    before = sql("SELECT count(*) FROM {schema}.history")
    result = project.run("history", "billing", "--attempt", "1")
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == "catchup: --attempt needs --period (the attempts are a period's)"
    assert "Traceback" not in result.stderr
    assert sql("SELECT count(*) FROM {schema}.history") == before
    huge = project.run("history", "billing", "--period", "2026-11-02", "--attempt", "2147483648")
    assert huge.returncode == 2 and "--attempt" in huge.stderr.splitlines()[-1], huge.stderr
    assert len(huge.stderr.strip().splitlines()) == 1 and "database" not in huge.stderr
    nothing = project.cli("-q", "history", "billing", "--period", "2026-11-02", "--attempt", "7")
    assert nothing.exit_code == 0, nothing.output
    assert nothing.stdout == "history of billing\nno attempt 7 of 2026-11-02 on record\n"


def test_several_attempts_show_the_end_of_each_and_how_to_see_one_whole(
    project: Project,
) -> None:
    """A long tail is cut to its last lines when several attempts are shown, with the
    command (quoted for a shell) that shows that attempt whole; alone, it is shown whole."""
    script = (
        'i=0; while [ $i -lt 50 ]; do echo "line $i of $CATCHUP_ATTEMPT"; i=$((i+1)); done; '
        '[ "$CATCHUP_ATTEMPT" != 1 ]'
    )
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-11-01"\nretry_backoff = "0s"\n'
        f"command = {json.dumps(['sh', '-c', script])}\n"
    )
    for _ in range(2):
        project.cli("-q", "run", "billing", "--period", "2026-11-02")
    both = project.cli("-q", "history", "billing", "--period", "2026-11-02").stdout
    assert "line 49 of 1" in both and "line 29 of 1" not in both and "line 30 of 1" in both
    assert (
        "… 30 earlier lines: catchup history billing --period 2026-11-02T00:00:00Z --attempt 1"
        in both
    )
    whole = project.cli("-q", "history", "billing", "--period", "2026-11-02", "--attempt", "1")
    assert "line 0 of 1" in whole.stdout and "line 49 of 1" in whole.stdout
    assert "earlier lines" not in whole.stdout


def test_the_period_page_shows_every_attempts_output(project: Project) -> None:
    _failed_then_succeeded(project)
    port = free_port()
    proc = project.spawn("serve", "--listen", f"127.0.0.1:{port}")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _up(base), timeout=60, what="serve's first scan")
        status, _, page = get(base + "/jobs/billing/2026-11-02T00%3A00%3A00Z")
        assert status == 200
        assert "payment provider said 502 for globex" in page and "billed globex" in page
        status, _, body = get(base + "/api/jobs/billing/2026-11-02T00%3A00%3A00Z")
        attempts = json.loads(body)["history"]["attempts"]
        assert "502 for globex" in next(a for a in attempts if a["attempt"] == 1)["output_tail"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def _up(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/api/scan", timeout=5) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def test_a_replayed_attempts_tail_keeps_stdout_and_stderr_in_the_order_written(
    project: Project,
) -> None:
    """Not streamed (replay, tick, the scheduler), a job's stdout and stderr share one pipe:
    its tail has them line for line as written, not as two readers happened to take them."""
    script = 'i=0; while [ $i -lt 300 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done'
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-11-01"\n'
        f"command = {json.dumps(['sh', '-c', script])}\n"
    )
    result = project.run("replay", "--since", "2026-11-02", "--until", "2026-11-03")
    assert result.returncode == 0, result.stderr
    doc = json.loads(
        project.cli("-q", "history", "billing", "--period", "2026-11-02", "--json").stdout
    )
    written = "".join(f"out {i}\nerr {i}\n" for i in range(300))
    assert doc["attempts"][0]["output_tail"] == written


def test_one_attempt_of_every_key_is_shown_whole(project: Project) -> None:
    """``--attempt 1`` of a keyed job's period without ``--key``: each key's attempt 1, each
    whole (one attempt asked for is never cut to its last lines)."""
    script = 'i=0; while [ $i -lt 50 ]; do echo "line $i of $CATCHUP_KEY"; i=$((i+1)); done'
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-11-01"\nkeys = ["acme", "globex"]\n'
        f"command = {json.dumps(['sh', '-c', script])}\n"
    )
    assert project.run("replay", "--since", "2026-11-02", "--until", "2026-11-03").returncode == 0
    out = project.cli("-q", "history", "billing", "--period", "2026-11-02", "--attempt", "1").stdout
    assert "line 0 of acme" in out and "line 0 of globex" in out, out
    assert "earlier lines" not in out
    missing = project.cli(
        "-q", "history", "billing", "--period", "2026-11-02", "--key", "globex", "--attempt", "2"
    )
    assert missing.stdout == "history of billing\nno attempt 2 of globex 2026-11-02 on record\n"


def test_a_period_is_asked_for_by_its_start_and_none_run_is_said(project: Project) -> None:
    """``history --period`` with a time inside a period is refused as ``why`` refuses it,
    naming the period's start (it answered an empty table); a job that never ran says so
    in words."""
    _failed_then_succeeded(project)
    inside = project.run("history", "billing", "--period", "2026-11-02T00:30:00Z")
    assert inside.returncode == 2 and "Traceback" not in inside.stderr
    (line,) = inside.stderr.strip().splitlines()[-1:]
    assert "the period containing it starts 2026-11-02" in line, inside.stderr
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-11-01"\ncommand = ["true"]\n'
        '[jobs.fresh]\nschedule = "daily"\nstart = "2026-11-01"\ncommand = ["true"]\n'
        "not_renamed = true\n"
    )
    fresh = project.cli("-q", "history", "fresh")
    assert fresh.exit_code == 0, fresh.output
    assert fresh.stdout == "history of fresh\nno attempt on record yet\n"


def test_a_period_whose_row_a_person_deleted_runs_again_as_its_next_attempt(
    project: Project, sql: Any
) -> None:
    """A person deletes a period's row to run it again (its history stays): the scan says it
    is missing, and the next run is attempt 3, after the two on record (claimed as attempt 1,
    it failed on history's unique attempt every time, and an old attempt 1 would have been
    let write into it). A mark made after such a delete carries the attempts on too: reset,
    the period runs as attempt 4."""
    _failed_then_succeeded(project)

    def deleted() -> None:
        sql("DELETE FROM {schema}.runs WHERE period_start = '2026-11-02T00:00:00Z'")

    deleted()
    window = ("--since", "2026-11-02", "--until", "2026-11-03", "--json")
    scanned = json.loads(project.cli("-q", "scan", "--job", "billing", *window).stdout)
    assert scanned["jobs"][0]["missing"] == 1, scanned
    again = project.cli("-q", "run", "billing", "--period", "2026-11-02")
    assert again.exit_code == 0, again.output
    row = "SELECT attempt, status FROM {schema}.runs WHERE period_start = '2026-11-02T00:00:00Z'"
    assert sql(row) == [(3, "succeeded")]
    attempts = "SELECT attempt, status FROM {schema}.history ORDER BY attempt"
    assert sql(attempts) == [(1, "failed"), (2, "succeeded"), (3, "succeeded")]

    deleted()
    marked = project.cli("-q", "mark", "billing", "2026-11-02", "--done", "--reason", "by hand")
    assert marked.exit_code == 0, marked.output
    assert sql(row) == [(3, "waived")]
    reset = project.cli("-q", "reset", "billing", "2026-11-02", "--reason", "run it")
    assert reset.exit_code == 0, reset.output
    assert project.cli("-q", "run", "billing", "--period", "2026-11-02").exit_code == 0
    assert sql(row) == [(4, "succeeded")]
    assert [a for a, _ in sql(attempts)] == [1, 2, 3, 4]
