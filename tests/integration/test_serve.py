"""catchup serve: a real process on a free local port, its answers checked against
`scan --json` and parsed by the Prometheus client's own parsers."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fix_db import Database
from fix_processes import wait_for
from fix_project import Project, job_toml
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families
from psycopg.conninfo import conninfo_to_dict

from catchup.postgres import embedded


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def get(url: str, accept: str | None = None) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


@pytest.fixture
def served(project: Project, sql: Any) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """catchup serve on a ledger with a gap, a success, and a job whose evidence query fails
    with a <script> in its error."""
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        '[jobs.export]\nschedule = "hourly"\nstart = "2026-11-01"\ncommand = ["true"]\n'
        '[jobs.hostile]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        'evidence = "SELECT \\"<script>alert(1)</script>\\" FROM ' + project.schema + '.jobs"\n'
    )
    assert project.cli("-q", "run", "billing", "--period", "2026-10-02").exit_code == 0
    port = free_port()
    proc = project.spawn("serve", "--listen", f"127.0.0.1:{port}", "--refresh", "1s")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(base), timeout=60, what="serve to answer")
        yield base, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def _answers(base: str) -> bool:
    try:
        return get(base + "/healthz")[0] == 200 and get(base + "/api/scan")[0] == 200
    except OSError:
        return False


def test_api_scan_and_metrics_match_scan_json(
    served: tuple[str, subprocess.Popen[str]], project: Project, database: Database
) -> None:
    base, proc = served
    status, headers, body = get(base + "/api/scan")
    assert status == 200 and headers["Content-Type"] == "application/json"
    document = json.loads(body)
    cli = json.loads(project.cli("scan", "--json").stdout)
    volatile = ("generated_at", "until")
    assert {k: v for k, v in document.items() if k not in volatile} == {
        k: v for k, v in cli.items() if k not in volatile
    } or _a_period_ended_between(document, cli)

    status, headers, text = get(base + "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    values = {
        (sample.name, sample.labels.get("job")): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }
    assert values[("catchup_up", None)] == 1
    assert values[("catchup_scan_duration_seconds", None)] > 0
    for job in document["jobs"]:
        for state in ("missing", "failed", "exhausted", "stale", "running"):
            assert values[(f"catchup_{state}_periods", job["job"])] == job[state]
    sizes = {
        sample.labels["table"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "catchup_ledger_bytes"
    }
    assert sizes["runs"] > 0 and sizes["history"] > 0  # the ledger's size, table by table

    status, headers, text = get(base + "/metrics", "application/openmetrics-text; version=1.0.0")
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    names = {family.name for family in openmetrics_families(text)}  # type: ignore[no-untyped-call]
    assert {"catchup_up", "catchup_missing_periods", "catchup_scan_age_seconds"} <= names

    assert get(base + "/healthz")[0] == 200
    assert get(base + "/readyz") == (200, get(base + "/readyz")[1], "ready\n")
    assert get(base + "/nope")[0] == 404
    # read-only towards the ledger: nothing about it changed but what the CLI did
    password = str(conninfo_to_dict(database.conninfo).get("password") or "")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"catchup serve: {base}/ (scans every 1s)" in err
    assert not password or password not in err


def _a_period_ended_between(document: dict[str, Any], cli: dict[str, Any]) -> bool:
    """The two scans ran a moment apart: an hour may have ended between them."""
    return [j["job"] for j in document["jobs"]] == [j["job"] for j in cli["jobs"]] and any(
        a["expected"] != b["expected"] for a, b in zip(document["jobs"], cli["jobs"], strict=True)
    )


def test_the_page_shows_the_jobs_and_escapes_what_users_wrote(
    served: tuple[str, subprocess.Popen[str]], database: Database, sql: Any, project: Project
) -> None:
    base, _ = served
    wait_for(lambda: "hostile" in get(base + "/")[2], timeout=30, what="a scan on the page")
    # serve only reads: its scans recorded no coverage, no scan state, no evidence state
    for table in ("coverage", "scan_state", "evidence_state"):
        assert sql(f"SELECT count(*) FROM {{schema}}.{table}") == [(0,)], table
    status, headers, page = get(base + "/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert "script-src" not in headers["Content-Security-Policy"]
    assert headers["Content-Security-Policy"].startswith("default-src 'none'")
    # it reloads itself only when asked (a wall screen: ?auto=1); else a reader keeps their place
    assert 'http-equiv="refresh"' not in page and 'href="/?auto=1"' in page
    auto = get(base + "/?auto=1")[2]
    assert '<meta http-equiv="refresh" content="1">' in auto and 'href="/">stop</a>' in auto
    assert '<meta http-equiv="refresh" content="1">' in get(base + "/jobs/billing?auto=1")[2]
    # a verdict first, in the title too, under the deployment's name (its folder's)
    title = page.split("<title>", 1)[1].split("</title>", 1)[0]
    assert re.fullmatch(
        r"\d+ gap ranges in 3 jobs · " + re.escape(project.config.parent.name), title
    )
    for text in ("billing", "export", "hostile", "2026-10-01", "missing", 'href="/jobs/billing"'):
        assert text in page, text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script" not in page.lower()
    # nothing of the database: no DSN, user, host, socket path, database name
    parts = conninfo_to_dict(database.conninfo)
    for secret in ("postgresql://", parts.get("password"), parts.get("host"), parts.get("dbname")):
        assert not secret or str(secret) not in page, secret
    status, _, job = get(base + "/jobs/hostile")
    assert status == 200 and "&lt;script&gt;alert(1)&lt;/script&gt;" in job
    assert "<script" not in job.lower()


@pytest.mark.slow
def test_readyz_follows_the_database(project: Project, private_server: str) -> None:
    """The database stopped: /readyz says 503 and catchup_up 0 while the page says why, and
    the process keeps answering at once; started again, it is ready again."""
    project.database = Database(private_server, {"CATCHUP_DSN": private_server})
    project.write(job_toml("billing", command=["true"]))
    assert project.run("-q", "migrate").returncode == 0
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = project.spawn("serve", "--listen", f"127.0.0.1:{port}", "--refresh", "1s")
    try:
        wait_for(lambda: _ready(base), timeout=60, what="ready")
        embedded.stop()
        wait_for(lambda: not _ready(base), timeout=60, what="unready")
        status, _, body = get(base + "/readyz")
        assert status == 503 and body.startswith("not ready: ")
        metrics = get(base + "/metrics")[2]
        assert "catchup_up 0.0" in metrics
        assert "the newest scan failed" in get(base + "/")[2]

        def refused() -> bool:  # the first failure may be the cut connection itself
            return "cannot connect to the database" in get(base + "/")[2]

        wait_for(refused, timeout=60, what="the page to say it cannot connect")
        page = get(base + "/")[2]
        host = str(conninfo_to_dict(private_server).get("host") or "")
        assert host not in page and "postgresql://" not in page  # the operator's log says
        embedded.ensure_running()
        wait_for(lambda: _ready(base), timeout=60, what="ready again")
        assert "catchup_up 1.0" in get(base + "/metrics")[2]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def _ready(base: str) -> bool:
    try:
        return get(base + "/readyz")[0] == 200
    except OSError:
        return False


def test_bad_listen_and_refresh_are_one_line(project: Project) -> None:
    project.write(job_toml("billing", command=["true"]))
    for args, message in (
        (["--listen", "nowhere"], "is not HOST:PORT"),
        (["--listen", "127.0.0.1:70000"], "the port must be from 1 to 65535"),
        (["--refresh", "0s"], "must be longer than zero"),
        (["--refresh", "30d"], "from 1s to 86400s"),
    ):
        result = project.cli("serve", *args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.stderr and "Traceback" not in result.output


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_a_stopped_embedded_server_stays_stopped_while_serve_runs(
    project: Project, server_home: Path
) -> None:
    """`catchup postgres stop` was undone within seconds by a running `catchup serve`, which
    started the embedded server again on its next scan. Now serve says it is stopped and
    waits; `catchup postgres start` brings it back."""
    import sys

    env = {**project.env(), "CATCHUP_HOME": str(server_home)}
    env.pop("CATCHUP_DSN", None)

    def catchup(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "catchup", *args],
            cwd=project.path,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    project.write(job_toml("billing", command=["true"]))
    assert catchup("-q", "migrate").returncode == 0  # serve only reads
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "catchup",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
            "--refresh",
            "1s",
        ],
        cwd=project.path,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    data = server_home / f"pg{embedded.major_version(embedded.bin_dir())}"
    try:
        wait_for(lambda: _ready(base), timeout=120, what="ready")
        stopped = catchup("postgres", "stop")
        assert stopped.returncode == 0, stopped.stderr
        said = wait_for(
            lambda: "server is stopped" in (body := get(base + "/readyz")[2]) and body,
            timeout=60,
            what="serve to find the server stopped",
        )
        assert said.startswith("not ready: ")
        wait_for(  # scans every second came and went since, and none of them started it
            lambda: _scan_age(base) >= 4, timeout=60, what="more scans to fail"
        )
        assert embedded.running(data) is None
        assert catchup("postgres", "start").returncode == 0
        wait_for(lambda: _ready(base), timeout=60, what="ready again")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        if embedded.running(data) is not None:
            catchup("postgres", "stop")


def _scan_age(base: str) -> float:
    """Seconds since serve's newest good scan."""
    for family in text_string_to_metric_families(get(base + "/metrics")[2]):
        for sample in family.samples:
            if sample.name == "catchup_scan_age_seconds":
                return float(sample.value)
    return 0.0


def test_the_page_links_to_a_keyed_jobs_keys(project: Project, sql: Any) -> None:
    """A keyed job's line on the status page links to its keys (/keys/NAME, as the ledger
    recorded them, escaped) and their JSON (/api/keys/NAME); serve records none of them, and
    lists them once a read (`catchup keys`, a tick, a scan) has."""
    project.write(
        job_toml("invoice", "daily", "2026-10-01", keys=["acme", "<b>hooli</b>"], command=["true"])
    )
    assert project.cli("-q", "migrate").exit_code == 0  # serve only reads a ledger
    port = free_port()
    proc = project.spawn("serve", "--listen", f"127.0.0.1:{port}", "--refresh", "1s")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(base), timeout=60, what="serve to answer")
        wait_for(lambda: "/keys/invoice" in get(base + "/")[2], timeout=30, what="the link")
        page = get(base + "/")[2]
        assert '<a href="/keys/invoice"' in page and "keys of <bdi>invoice</bdi>: 2" in page
        status, headers, listed = get(base + "/keys/invoice")
        assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
        assert "<title>keys of invoice · " in listed and '<a href="/"' in listed
        assert '<a href="/jobs/invoice">' in listed
        assert "0 keys expected, 0 gone · none recorded yet" in listed
        assert sql("SELECT count(*) FROM {schema}.job_keys") == [(0,)]  # serve only reads
        assert project.cli("-q", "keys", "invoice").exit_code == 0
        wait_for(lambda: "acme" in get(base + "/keys/invoice")[2], timeout=30, what="the keys")
        listed = get(base + "/keys/invoice")[2]
        assert "acme" in listed and "&lt;b&gt;hooli&lt;/b&gt;" in listed
        assert "<b>" not in listed and "2 keys expected, 0 gone" in listed
        status, headers, body = get(base + "/api/keys/invoice")
        assert status == 200 and headers["Content-Type"] == "application/json"
        assert [k["key"] for k in json.loads(body)["keys"]] == ["<b>hooli</b>", "acme"]
        assert get(base + "/keys/nobody")[0] == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_the_keys_pages_list_a_thousand_keys_at_a_time(project: Project) -> None:
    """2,500 keys: /keys/NAME lists the first 1,000 and links the next page (?after=KEY), read
    when asked for, to the last, each page linking its own JSON and the first page;
    /api/keys/NAME (or Accept: application/json) pages alike with next_after; an ``after``
    that cannot be a key is refused with 400."""
    import re

    query = "SELECT 'k' || lpad(i::text, 4, '0') FROM generate_series(1, 2500) AS i"
    project.write(job_toml("invoice", "daily", "2026-10-01", keys=query, command=["true"]))
    assert project.cli("-q", "keys", "invoice").exit_code == 0
    port = free_port()
    proc = project.spawn("serve", "--listen", f"127.0.0.1:{port}", "--refresh", "1s")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(base), timeout=60, what="serve to answer")
        wait_for(lambda: get(base + "/keys/invoice")[0] == 200, timeout=30, what="the keys")
        path, seen = "/keys/invoice", []
        while path:
            status, _, page = get(base + path)
            assert status == 200 and "2,500 keys expected, 0 gone" in page
            seen += re.findall(r'<th scope="row"><bdi>(k\d+)</bdi>', page)
            found = re.search(r'<a href="([^"]+)" rel="next">', page)
            path = found.group(1) if found else ""
        assert seen == [f"k{i:04}" for i in range(1, 2501)]
        later = get(base + "/keys/invoice?after=k1000")[2]
        assert '<a href="/api/keys/invoice?after=k1000">this page as JSON' in later
        assert '<a href="/keys/invoice">the first page</a>' in later
        assert "after <bdi>k2000</bdi>" in later  # the next page's link, under the table too
        status, headers, _ = get(base + "/keys/invoice?after=k1000", accept="application/json")
        assert status == 200 and headers["Content-Type"] == "application/json"
        assert get(base + "/keys/invoice?after=%00")[0] == 400  # never a 503: not a key
        document = json.loads(get(base + "/api/keys/invoice")[2])
        assert len(document["keys"]) == 1000 and document["next_after"] == "k1000"
        after = json.loads(get(base + "/api/keys/invoice?after=k2000")[2])
        assert [k["key"] for k in after["keys"]][::499] == ["k2001", "k2500"]
        assert after["next_after"] is None and after["expected"] == 2500
        assert get(base + "/keys/invoice?after=" + "k" * 201)[0] == 400
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_the_keys_page_says_each_keys_state_and_nothing_before_the_jobs_start(
    project: Project,
) -> None:
    """A key's row says its gaps in the scan (globex failed twice), and no key is expected
    before the job's start, not even one recorded under an earlier start (`keys` neither)."""
    import contextlib

    from test_serve_period import serve

    def config(start: str) -> str:
        return job_toml(
            "invoice",
            "daily",
            start,
            keys=["acme", "globex"],
            command=["sh", "-c", 'test "$1" != globex', "sh", "{key}"],
        )

    project.write(config("2026-10-01"))
    window = ("--since", "2026-10-01", "--until", "2026-10-04")
    assert project.cli("-q", "replay", *window).exit_code == 1  # globex fails
    project.write(config("2026-10-02"))  # the start moves a day later
    listed = json.loads(project.cli("-q", "keys", "invoice", "--json").stdout)["keys"]
    assert {k["key"]: k["expected_from"] for k in listed} == {
        "acme": "2026-10-02T00:00:00Z",
        "globex": "2026-10-02T00:00:00Z",
    }
    with contextlib.contextmanager(serve)(project) as base:
        status, _, page = get(base + "/keys/invoice")
    assert status == 200, page
    assert "2026-10-01T00:00:00Z" not in page and "2026-10-02T00:00:00Z" in page
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(
            r'<bdi>(\w+)</bdi></th>.*?<td data-label="in the scan">([^<]*)</td>', page
        )
    }
    assert re.fullmatch(r"[\d,]+ missing", rows["acme"]), rows
    assert re.fullmatch(r"[\d,]+ missing, 2 failed", rows["globex"]), rows


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_sighup_reads_the_config_again_and_serve_goes_on(project: Project) -> None:
    """SIGHUP is a daemon's "read your config again", not a stop: a job added is scanned at
    once (well before the next refresh), a version that does not load is refused (said,
    /readyz 503, the last good jobs served), and a fix makes it ready again."""
    project.write(job_toml("billing", "daily", "2026-10-01", command=["true"]))
    assert project.cli("-q", "migrate").exit_code == 0  # serve only reads
    port = free_port()
    proc = project.spawn("serve", "--listen", f"127.0.0.1:{port}", "--refresh", "1h")
    base = f"http://127.0.0.1:{port}"

    def jobs() -> list[str]:
        assert proc.poll() is None, proc.communicate()[1]
        return [job["job"] for job in json.loads(get(base + "/api/scan")[2])["jobs"]]

    try:
        wait_for(lambda: _answers(base), timeout=60, what="serve to answer")
        assert jobs() == ["billing"]
        good = project.config.read_text() + job_toml(
            "export", "hourly", "2026-11-01", command=["true"]
        )
        project.config.write_text(good)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: jobs() == ["billing", "export"], timeout=30, what="the added job")
        assert get(base + "/readyz")[0] == 200
        project.config.write_text(good + "[jobs.broken]\nschedule = 3\n")
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: get(base + "/readyz")[0] == 503, timeout=30, what="not ready")
        assert jobs() == ["billing", "export"]  # the last good config, still served
        project.config.write_text(good)  # fixed: read again without a signal (it changed)
        wait_for(lambda: get(base + "/readyz")[0] == 200, timeout=30, what="ready again")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "catchup serve: config reloaded: 2 jobs (added export)" in err, err
    assert "catchup serve: config not reloaded: " in err and "jobs.broken" in err, err
    assert "Traceback" not in err
