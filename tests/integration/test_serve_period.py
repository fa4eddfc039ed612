"""A period's page on the status page (``/jobs/NAME/PERIOD``): what `catchup why` and
`catchup history --period` say, every attempt with its host, exit code, error and output tail
(escaped), its checkpoint, the changes by hand, who runs it now and the `catchup cancel` that
would stop it; its JSON; the job page's grid cells linking to it; and its refusals."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Generator, Iterator
from typing import Any
from urllib.parse import quote

import pytest
from fix_processes import wait_for
from fix_project import Project, job_toml
from test_serve import _answers, free_port, get

# a serve process each (5 s to start here): once, on PostgreSQL 18
pytestmark = pytest.mark.slow

HOSTILE = "<script>alert(1)</script> \"quoted\" 'single' \u202eevil\u202c"
OUTPUT = f"printf '%s\\n' \"$1\"; {sys.executable} -m catchup checkpoint page-41; exit 3"


def serve(project: Project) -> Generator[str]:
    port = free_port()
    proc = project.spawn("serve", "--listen", f"127.0.0.1:{port}", "--refresh", "1s")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(base), timeout=60, what="serve to answer")
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


@pytest.fixture
def served(project: Project) -> Iterator[str]:
    """A job whose 2026-10-02 failed once (hostile output, exit 3, a checkpoint), was reset by
    hand (a hostile reason), then succeeded; and a keyed job."""
    project.write(
        job_toml(
            "bill",
            start="2026-10-01",
            command=["sh", "-c", "if [ -e ok ]; then exit 0; fi; " + OUTPUT, "sh", HOSTILE],
        )
        + job_toml("invoice", start="2026-10-01", keys=["acme", "beta"], command=["true"])
    )
    assert project.run("-q", "run", "bill", "--period", "2026-10-02").returncode == 1
    said = project.run(
        "-q", "reset", "bill", "2026-10-02", "--reason", HOSTILE, "--actor", "ana@ops"
    )
    assert said.returncode == 0, said.stderr
    (project.path / "ok").write_text("")
    assert project.run("-q", "run", "bill", "--period", "2026-10-02").returncode == 0
    yield from serve(project)


def test_a_period_page_says_why_and_every_attempt_escaped(served: str, project: Project) -> None:
    status, headers, page = get(served + "/jobs/bill/2026-10-02")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8", page
    title = page.split("<title>", 1)[1].split("</title>", 1)[0]
    assert title.startswith("2026-10-02 of bill: succeeded · ")
    for text in (
        "Attempt 1:",
        "Attempt 2:",
        "exit code 3",
        "Checkpoint:",
        "page-41",
        "ana@ops",
        "catchup reset bill 2026-10-02",
        'href="/jobs/bill"',
    ):
        assert text in page, text
    # what users and jobs wrote stays text: escaped, the bidi override shown, never obeyed
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script" not in page.lower() and "\u202e" not in page
    assert "&#34;quoted&#34;" in page or "&quot;quoted&quot;" in page

    # its JSON: why --json and history --json of the period (each attempt with its tail)
    status, headers, body = get(served + "/api/jobs/bill/2026-10-02")
    assert status == 200 and headers["Content-Type"] == "application/json"
    document = json.loads(body)
    why = json.loads(project.run("why", "bill", "2026-10-02", "--json").stdout)
    assert document["why"] == why
    history = json.loads(project.run("history", "bill", "--period", "2026-10-02", "--json").stdout)
    assert document["history"] == history
    tails = [a["output_tail"] for a in history["attempts"]]
    assert [a["status"] for a in history["attempts"]] == ["succeeded", "failed"]
    assert HOSTILE in tails[1] and document["checkpoint"] == "page-41"
    assert document["running"] is False
    # Accept: application/json on the page's own address gives the same
    assert get(served + "/jobs/bill/2026-10-02", accept="application/json")[2] == body


def test_the_job_page_links_each_period_and_the_links_answer(served: str, sql: Any) -> None:
    # the grid shows the recent months: a period of yesterday on the database clock is in it
    day = sql("SELECT (clock_timestamp() AT TIME ZONE 'UTC')::date - 1")[0][0].isoformat()
    status, _, page = get(served + "/jobs/bill")
    assert status == 200
    assert f'href="/jobs/bill/{day}"' in page
    # a missing period's page, through its cell's link: missing, and the command that runs it
    status, _, period = get(served + f"/jobs/bill/{day}")
    assert status == 200 and f"{day} of bill" in period and "missing" in period
    assert f"catchup run bill --period {day}" in period
    status, _, period = get(served + "/jobs/bill/2026-10-02")
    assert status == 200 and "2026-10-02 of bill" in period
    # a keyed job's grid cells hold every key: they link nowhere; a key's period has a page
    status, _, page = get(served + "/jobs/invoice")
    assert status == 200 and 'href="/jobs/invoice/' not in page
    status, _, period = get(served + "/jobs/invoice/2026-10-02?key=acme")
    assert status == 200 and "acme 2026-10-02" in period


def test_a_bad_period_address_is_one_line_and_the_server_holds(served: str) -> None:
    for path, code, said in (
        ("/jobs/nope/2026-10-02", 404, "no such job"),
        ("/jobs/bill/2026-13-45", 400, "is not a date"),
        ("/jobs/bill/1999-01-01", 400, "before the job's first period"),
        ("/jobs/invoice/2026-10-02", 400, "has keys"),
        ("/jobs/invoice/2026-10-02?key=zed", 400, "zed"),
        ("/jobs/bill/" + quote("2026-10-02\x1b[31m"), 400, "\\x1b"),
        ("/jobs/bill/" + "9" * 300, 404, "not found"),
    ):
        status, headers, body = get(served + path)
        assert status == code and said in body, (path, status, body)
        assert headers["Content-Type"].startswith("text/plain") and body.count("\n") == 1
        assert "Traceback" not in body and "\x1b" not in body
    assert get(served + "/jobs/bill/2026-10-02")[0] == 200


def test_a_running_periods_page_says_who_runs_it_and_how_to_stop_it(
    project: Project, sql: Any
) -> None:
    day = sql("SELECT (clock_timestamp() AT TIME ZONE 'UTC')::date - 1")[0][0]
    pid = project.path / "pid"
    project.write(
        job_toml("slow", start=day.isoformat(), command=["sh", "-c", f"echo $$ > {pid}; sleep 60"])
    )
    runner = project.spawn("-q", "run", "slow")
    try:
        wait_for(pid.exists, what="the job to start")
        base = next(pages := serve(project))
        try:
            status, _, page = get(f"{base}/jobs/slow/{day.isoformat()}")
            assert status == 200 and "Running now" in page, page
            assert f":{runner.pid}" in page and "Attempt 1" in page
            assert f"catchup cancel slow {day.isoformat()} --reason" in page
            # the home page's running row links to it
            home = get(base + "/")[2]
            assert f'href="/jobs/slow/{day.isoformat()}T00%3A00%3A00Z"' in home
        finally:
            pages.close()
    finally:
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=30)


def test_a_period_read_that_fails_is_503_uncached_and_the_next_reconnects(
    served: str, sql: Any
) -> None:
    """The period pages' own connection cut (pg_terminate_backend): an answer is 503 with
    Retry-After (never a hung request or a 500), and a later one reads again."""
    assert get(served + "/jobs/bill/2026-10-03")[0] == 200  # the reader's connection is open
    cut = sql(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name LIKE 'catchup%%' AND pid <> pg_backend_pid()"
    )
    assert cut[0][0] >= 1
    answers = []

    def read_again() -> bool:
        status, headers, _ = get(served + "/jobs/bill/2026-10-04")
        answers.append((status, headers.get("Retry-After")))
        return status == 200

    wait_for(read_again, timeout=30, what="a period page after the cut")
    # the first read after the cut meets the dead connection: 503, not cached; then it reads
    assert answers[0] == (503, "1") and answers[-1] == (200, None), answers
    assert all(a in ((503, "1"), (200, None)) for a in answers), answers


def test_the_facade_names_the_period_any_time_inside_it_falls_in(
    served: str, project: Project
) -> None:
    """`Catchup.period` (what the page shows, for Python): a time inside a period names that
    period; a keyed job needs its key."""
    from catchup.api import Catchup
    from catchup.errors import ConfigError

    with Catchup(str(project.config), dsn=project.database.conninfo) as app:
        report = app.period("bill", "2026-10-02T13:45:00Z")
        assert report.why.label == "2026-10-02" and report.why.state == "succeeded"
        assert [a.attempt for a in report.history.attempts] == [2, 1]
        assert report.row is not None and report.row.checkpoint == "page-41"
        assert report.value == "2026-10-02" and report.key == ""
        keyed = app.period("invoice", "2026-10-02", key="beta")
        assert keyed.key == "beta" and keyed.why.label == "beta 2026-10-02"
        with pytest.raises(ConfigError, match="has keys"):
            app.period("invoice", "2026-10-02")
