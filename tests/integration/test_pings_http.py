"""``/ping/…`` on ``catchup serve``, spoken as healthchecks' clients speak it: the curl lines
of its docs (only the host changed), a POST with a body, HEAD, every endpoint and answer code;
a real process on a free local port."""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fix_processes import wait_for
from fix_project import Project, job_toml
from test_serve import free_port, get

# each starts a catchup serve of its own: run once, in the suite on PostgreSQL 18 (the SQL of a
# ping on a team's database is test_pings.py's, which every leg runs)
pytestmark = pytest.mark.slow

UUID = "5bf66975-d4c7-4bf5-bcc8-b8d8a82ea278"
RID = "3f6e2c1a-9a4b-4c7e-8f00-0123456789ab"
CURL = shutil.which("curl")


def _days_ago(sql: Any, days: int) -> str:
    (day,) = sql(f"SELECT (now() AT TIME ZONE 'UTC')::date - {days}")[0]
    return str(day)


@pytest.fixture
def served(project: Project, sql: Any) -> Iterator[str]:
    project.write(
        job_toml("vendor", "daily", _days_ago(sql, 3), ping=UUID)
        + job_toml("billing", "daily", _days_ago(sql, 3), command=["true"])
    )
    assert project.cli("-q", "migrate").exit_code == 0
    port = free_port()
    proc = project.spawn("serve", "--listen", f"127.0.0.1:{port}", "--refresh", "1s")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(base), timeout=60, what="serve to answer")
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def _answers(base: str) -> bool:
    try:
        return get(base + "/healthz")[0] == 200
    except OSError:
        return False


def curl(*args: str) -> tuple[int, str]:
    """curl as healthchecks' docs write it; the status code and the body."""
    assert CURL is not None, "curl is installed by .ci/run"
    done = subprocess.run(
        [CURL, "-sS", "-m", "10", "-w", "\n%{http_code}", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    body, _, code = done.stdout.rpartition("\n")
    return int(code), body


def _runs(sql: Any) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = sql(
        "SELECT period_start::date::text, status, attempt, owner, output_tail FROM {schema}.runs"
    )
    return rows


def test_the_curl_line_of_healthchecks_docs_settles_the_latest_period(
    served: str, sql: Any
) -> None:
    # https://healthchecks.io/docs/http_api/: curl -fsS -m 10 --retry 5 -o /dev/null URL
    done = subprocess.run(
        [
            CURL or "curl",
            "-fsS",
            "-m",
            "10",
            "--retry",
            "5",
            "-o",
            "/dev/null",
            f"{served}/ping/{UUID}",
        ],
        check=False,
        timeout=60,
    )
    assert done.returncode == 0
    assert _runs(sql) == [(_days_ago(sql, 1), "succeeded", 1, "ping", None)]


def test_start_and_finish_with_a_run_id_and_a_posted_body(served: str, sql: Any) -> None:
    code, body = curl(f"{served}/ping/{UUID}/start?rid={RID}")
    assert (code, body) == (200, "OK")
    assert _runs(sql)[0][1:4] == ("running", 1, f"ping {RID}")
    code, body = curl("--data-raw", "exported 17 rows", f"{served}/ping/{UUID}/0?rid={RID}")
    assert (code, body) == (200, "OK")
    assert _runs(sql) == [(_days_ago(sql, 1), "succeeded", 1, f"ping {RID}", "exported 17 rows")]


def test_fail_and_an_exit_status_fail_the_period(served: str, sql: Any) -> None:
    older = _days_ago(sql, 3)
    assert curl(f"{served}/ping/{UUID}/fail?period={older}") == (200, "OK")
    assert curl(f"{served}/ping/{UUID}/7") == (200, "OK")
    found = {row[0]: row[1:3] for row in _runs(sql)}
    assert found == {older: ("failed", 1), _days_ago(sql, 1): ("failed", 1)}
    (error,) = sql("SELECT error FROM {schema}.runs WHERE exit_code = 7")[0]
    assert error == "ping from 127.0.0.1: exit status 7"


def test_head_pings_and_log_is_kept(served: str, sql: Any) -> None:
    assert curl("-I", f"{served}/ping/{UUID}")[0] == 200
    assert _runs(sql)[0][1] == "succeeded"
    assert curl("--data-raw", "rotated the logs", f"{served}/ping/{UUID}/log") == (200, "OK")
    (reason,) = sql("SELECT reason FROM {schema}.events WHERE action = 'ping'")[0]
    assert reason == "log: rotated the logs"


@pytest.mark.parametrize(
    ("path", "code", "said"),
    [
        (f"/ping/{UUID}/256", 400, "invalid url format"),
        (f"/ping/{UUID}?rid=not-a-uuid", 400, "invalid uuid format"),
        ("/ping/07c2f548-9850-4b27-af5d-6c9dc157ec02", 404, "not found"),  # no such job
        ("/ping/not-uuid/", 404, "not found"),
        ("/ping/07c2f54898504b27af5d6c9dc157ec02", 404, "not found"),  # another uuid format
        (f"/ping/{UUID}/start/extra", 404, "not found"),
    ],
)
def test_answers_as_healthchecks_answers_and_writes_nothing(
    served: str, sql: Any, path: str, code: int, said: str
) -> None:
    assert curl(served + path) == (code, said)
    assert _runs(sql) == []
    assert sql("SELECT count(*) FROM {schema}.events WHERE action = 'ping'") == [(0,)]


def test_bodies_are_bounded_and_kept_as_healthchecks_keeps_them(
    served: str, sql: Any, tmp_path: Path
) -> None:
    code, headers, _ = get(f"{served}/ping/{UUID}/log")
    assert code == 200 and headers["Ping-Body-Limit"] == "10000"
    assert headers["Cache-Control"] == "no-store" and headers["Access-Control-Allow-Origin"] == "*"
    (tmp_path / "huge").write_text("x" * 200_000)
    code, _ = curl("--data-binary", f"@{tmp_path / 'huge'}", f"{served}/ping/{UUID}")
    assert code == 413
    assert _runs(sql) == []
    (tmp_path / "long").write_text("é" * 6000 + "end")
    code, _ = curl("--data-binary", f"@{tmp_path / 'long'}", f"{served}/ping/{UUID}")
    assert code == 200
    (tail,) = sql("SELECT output_tail FROM {schema}.runs")[0]
    assert len(tail.encode("utf-8", "replace")) <= 10_000 and not tail.endswith("end")


def test_a_ping_for_a_job_without_one_is_not_found_and_the_page_still_answers(
    served: str, sql: Any
) -> None:
    assert curl(f"{served}/ping/billing") == (404, "not found")
    code, _ = curl("-X", "PUT", f"{served}/ping/{UUID}")
    assert code == 405
    assert get(served + "/healthz")[0] == 200
    assert _runs(sql) == []


def test_a_flood_of_pings_never_keeps_the_page_from_answering(served: str, sql: Any) -> None:
    """Pings from one address as fast as sixteen connections send them, while the page, its
    JSON and /metrics are asked for: every page answers; every ping is answered (written,
    kept, slowed or told to wait), none is lost in between."""
    wait_for(lambda: get(served + "/api/scan")[0] == 200, timeout=60, what="a first scan")
    stop = threading.Event()
    answered: list[int] = []

    def flood() -> None:
        while not stop.is_set():
            answered.append(get(f"{served}/ping/{UUID}")[0])

    threads = [threading.Thread(target=flood) for _ in range(16)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: len(answered) >= 50, timeout=60, what="the flood to be under way")
        pages = [get(served + path)[0] for path in ("/", "/api/scan", "/metrics") * 3]
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert pages == [200] * 9
    assert set(answered) <= {200, 429, 503}, set(answered)
    assert _runs(sql)[0][1] == "succeeded"  # one settled the period; the rest were kept
