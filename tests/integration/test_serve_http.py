"""`catchup serve` as an HTTP server on the open internet: HEAD, conditional requests, gzip,
every page as JSON, filters, and the refusals (odd methods, bodies, huge request lines and
headers); with 200 idle connections held open it still answers; and config errors of
``[serve]`` are one line."""

from __future__ import annotations

import gzip
import http.client
import json
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from fix_processes import wait_for
from fix_project import Project

IDLE = 200


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def ask(
    port: int, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b""
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body or None, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        conn.close()


@pytest.fixture
def port(project: Project) -> Iterator[int]:
    project.write(
        '[serve]\ntitle = "acme billing"\n'
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        '[jobs.export]\nschedule = "hourly"\nstart = "2026-11-01"\ncommand = ["false"]\n'
    )
    assert project.cli("-q", "run", "billing", "--period", "2026-10-02").exit_code == 0
    assert project.cli("-q", "run", "export", "--period", "2026-11-01T03:00Z").exit_code == 1
    chosen = free_port()
    proc: subprocess.Popen[str] = project.spawn(
        "serve", "--listen", f"127.0.0.1:{chosen}", "--refresh", "1s"
    )
    try:

        def scanned() -> bool:
            try:
                return ask(chosen, "GET", "/api/scan")[0] == 200
            except OSError:
                return False

        wait_for(scanned, timeout=60, what="serve's first scan")
        yield chosen
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_head_etag_gzip_and_json(port: int) -> None:
    status, headers, page = ask(port, "GET", "/")
    assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
    assert b"<title>" in page and b" \xc2\xb7 acme billing</title>" in page
    assert headers["last-modified"].endswith(" GMT") and headers["etag"].startswith('"')
    # HEAD: the same headers, no body (uptime checkers and load balancers use it)
    status, head, body = ask(port, "HEAD", "/")
    assert status == 200 and body == b"" and head["content-type"] == headers["content-type"]
    # a page unchanged since the client's copy: 304, no body
    tag = ask(port, "GET", "/jobs/billing")[1]["etag"]
    status, _, body = ask(port, "GET", "/jobs/billing", {"If-None-Match": tag})
    assert (status, body) in ((304, b""), (200, body))  # 200 only if a scan changed the page
    again = ask(port, "GET", "/jobs/billing", {"If-None-Match": '"nope"'})
    assert again[0] == 200 and b"billing" in again[2]
    # gzip when asked, the same page
    status, zipped, body = ask(port, "GET", "/static/catchup.css", {"Accept-Encoding": "gzip"})
    assert status == 200 and zipped["content-encoding"] == "gzip"
    assert b"prefers-color-scheme" in gzip.decompress(body)
    assert "content-encoding" not in ask(port, "GET", "/static/catchup.css")[1]
    # every page as JSON, the CLI's shapes
    status, headers, body = ask(port, "GET", "/", {"Accept": "application/json"})
    assert status == 200 and headers["content-type"] == "application/json"
    assert [j["job"] for j in json.loads(body)["jobs"]] == ["billing", "export"]
    for asked in (("/api/jobs/export", {}), ("/jobs/export", {"Accept": "application/json"})):
        status, headers, body = ask(port, "GET", asked[0], asked[1])
        document = json.loads(body)
        assert status == 200 and headers["content-type"] == "application/json"
        assert [j["job"] for j in document["jobs"]] == ["export"]
        (failure,) = document["failures"]
        assert failure["period"]["start"] == "2026-11-01T03:00:00Z"
        assert failure["exit_code"] == 1 and failure["attempt"] == 1
        assert document["running"] == [] and document["next_due"].endswith("Z")
    assert ask(port, "GET", "/jobs/nosuch")[0] == 404
    assert ask(port, "GET", "/api/jobs/nosuch")[0] == 404
    assert ask(port, "GET", "/jobs/billing/extra/parts")[0] == 404


def test_filters_are_links(port: int) -> None:
    status, _, page = ask(port, "GET", "/?state=failed")
    assert status == 200
    text = page.decode()
    assert 'href="/jobs/export"' in text and 'href="/jobs/billing"' not in text.split("<h2>")[1]
    assert '<strong aria-current="page">failed</strong>' in text
    _, _, named = ask(port, "GET", "/?job=BILL")
    assert "1 job (filtered)" in named.decode()
    status, _, said = ask(port, "GET", "/?state=bogus")
    assert status == 400 and b"state: expected one of" in said


def test_what_the_internet_sends_is_refused(port: int) -> None:
    for method in ("POST", "PUT", "DELETE", "OPTIONS", "PATCH"):
        status, headers, _ = ask(port, method, "/")
        assert status == 405 and headers["allow"] == "GET, HEAD", method
    status, _, _ = ask(port, "GET", "/", body=b"x" * 100, headers={"Content-Length": "100"})
    assert status == 413
    assert ask(port, "GET", "/" + "a" * 9000)[0] == 414
    # a query of many fields: one line, 400, and the server answers on
    status, _, body = ask(port, "GET", "/?" + "&".join(f"f{i}=1" for i in range(50)))
    assert status == 400 and body == b"at most 4 fields in a query\n"
    assert ask(port, "GET", "/jobs/billing/2026-10-02?a=1&b=2&c=3&d=4&e=5")[0] == 400
    status = ask(port, "GET", "/", {"X-Big": "b" * 70_000})[0]
    assert status in (400, 431)  # a header line over 64 KiB
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(b"BREW /pot HTCPCP/1.0\r\n\r\n")
        assert raw.recv(200).startswith(b"400 Bad request version")  # as HTTP/0.9 would


def test_idle_connections_do_not_stop_it_answering(port: int) -> None:
    idle: list[socket.socket] = []
    try:
        for _ in range(IDLE):
            held = socket.create_connection(("127.0.0.1", port), timeout=10)
            held.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # a request that never ends
            idle.append(held)
        status, _, body = ask(port, "GET", "/metrics")
        assert status == 200 and b"catchup_up 1.0" in body
    finally:
        for held in idle:
            held.close()


def test_serve_config_errors_are_one_line(project: Project) -> None:
    job = '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
    cases: list[tuple[str, Any]] = [
        ('[serve]\ntitle = ""\n', "serve.title: expected 1 to 80 characters"),
        ("[serve]\ntitle = 3\n", "serve.title: expected a string, got a number"),
        (
            '[serve]\ntitle = "a\\u001bb"\n',
            "serve.title: one line of printable text",
        ),
        ('[serve]\npublic_url = "ftp://x"\n', "serve.public_url: expected an"),
        ('[serve]\ncolour = "red"\n', "serve.colour: unknown key"),
        (
            '[serve]\npublic_url = "https://u:pw@ops.example"\n',
            "serve.public_url: it holds a user or password",
        ),
        ('[serve]\npublic_url = "https://ops.example/?a=1"\n', "serve.public_url: expected the"),
        ('[serve]\nmetric_keys = "5"\n', "serve.metric_keys: expected a whole number, got a"),
        ("[serve]\nmetric_keys = 1000\n", "serve.metric_keys: expected 0 to 100, got 1000"),
    ]
    for text, said in cases:
        project.write(text + job)
        result = project.cli("scan")
        assert result.exit_code == 2, text
        assert re.search(r"catchup.toml:\d+: " + re.escape(said), result.output), result.output
        assert "Traceback" not in result.output and len(result.output.splitlines()) == 1


def test_without_a_serve_title_the_page_is_named_for_the_project(project: Project) -> None:
    """`[project] name` names the deployment on the page when `[serve] title` is not set (not
    the config's folder, which two checkouts of one project name differently)."""
    import contextlib

    from test_serve import get
    from test_serve_period import serve

    project.write(
        '[project]\nname = "acme-billing"\n'
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
    )
    assert project.cli("-q", "run", "billing", "--period", "2026-10-02").exit_code == 0
    with contextlib.contextmanager(serve)(project) as base:
        status, _, page = get(base + "/")
    assert status == 200, page
    title = page.split("<title>", 1)[1].split("</title>", 1)[0]
    assert title.endswith(" · acme-billing"), title
    assert project.config.parent.name not in title
