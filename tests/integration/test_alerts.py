"""Alerts on gap ranges: a real local HTTP receiver, real `catchup serve` replicas and
`scan --notify` processes; each range told once, retried on failure, never twice."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg
import pytest
from fix_db import Database
from fix_processes import wait_for
from fix_project import Project, job_toml
from test_serve import free_port

from catchup.reports.alerts import diff
from catchup.results import JobScan, Range

T = [datetime(2026, 10, d, tzinfo=UTC) for d in range(1, 31)]


class Receiver:
    """A webhook receiver on a free local port: keeps every body; answers ``fail`` times 500."""

    def __init__(self, fail: int = 0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.fail = fail
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                data = json.loads(self.rfile.read(length))
                receiver.paths.append(self.path)
                if receiver.fail > 0:
                    receiver.fail -= 1
                    self.send_response(500)
                    self.end_headers()
                    return
                receiver.bodies.append(data)
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/SECRET-TOKEN"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def events(self) -> list[tuple[str, str, str]]:
        return [
            (e["event"], e["job"], e["first_label"]) for body in self.bodies for e in body["events"]
        ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


def config(receiver: Receiver, fmt: str = "json") -> str:
    return (
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        f'[alerts]\nmax_per_minute = 30\n[alerts.webhooks.ops]\nurl = "{receiver.url}"\n'
        f'format = "{fmt}"\n'
    )


def job(name: str = "billing") -> JobScan:
    return JobScan(
        name,
        "daily",
        "UTC",
        True,
        False,
        T[0],
        T[-1],
        30,
        {},
        (),
        None,
        labeler=lambda t: t.date().isoformat(),
    )


def test_diff_opens_grows_closes_and_shrinks_quietly() -> None:
    jobs = {1: job()}
    told = [
        (10, 1, "missing", T[2], T[4], 3),  # grows at its end
        (11, 1, "missing", T[8], T[9], 2),  # replayed oldest first: shrinks, quietly
        (12, 1, "failed", T[14], T[14], 1),  # closed
    ]
    current = {
        1: [
            Range("missing", T[2], T[6], 5),
            Range("missing", T[9], T[9], 1),
            Range("stale", T[20], T[21], 2),  # new
        ]
    }
    actions, events = diff(told, current, jobs)
    assert [(e.event, e.first_label, e.periods) for e in events] == [
        ("grown", "2026-10-03", 5),
        ("closed", "2026-10-15", 1),
        ("opened", "2026-10-21", 2),
    ]
    assert ("update", (11, "missing", T[9], T[9], 1)) in actions
    assert ("close", (12,)) in actions
    # a job not in the scan is left alone
    assert diff(told, {}, {}) == ([], [])


def test_ranges_meet_by_state() -> None:
    """A missing period that failed is a failed range opened (the missing one shrank, quietly);
    a keyed job's missing and exhausted ranges over the same days, unchanged, tell nothing."""
    jobs = {1: job()}
    told = [(10, 1, "missing", T[2], T[4], 3)]
    current = {1: [Range("failed", T[2], T[2], 1), Range("missing", T[3], T[4], 2)]}
    actions, events = diff(told, current, jobs)
    assert [(e.event, e.state, e.first_label) for e in events] == [
        ("opened", "failed", "2026-10-03")
    ]
    assert ("update", (10, "missing", T[3], T[4], 2)) in actions
    told = [(10, 1, "missing", T[0], T[5], 21), (11, 1, "exhausted", T[1], T[1], 3)]
    current = {1: [Range("missing", T[0], T[5], 21), Range("exhausted", T[1], T[1], 3)]}
    assert diff(told, current, jobs) == ([], [])


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_two_serve_replicas_tell_each_gap_once(project: Project, receiver: Receiver) -> None:
    project.write(config(receiver))
    assert project.cli("-q", "migrate").exit_code == 0
    for day in ("2026-10-01", "2026-10-02", "2026-10-04"):
        assert project.cli("-q", "run", "billing", "--period", day).exit_code == 0
    procs, bases = [], []
    for _ in range(2):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        procs.append(project.spawn("serve", "--listen", f"127.0.0.1:{port}", "--refresh", "1s"))
        bases.append(f"http://127.0.0.1:{port}")
    try:
        wait_for(lambda: len(receiver.bodies) >= 1, timeout=60, what="a post")
        # both replicas scan (and compare) a few more times: still one post
        _more_scans(bases)
        assert [e[0] for e in receiver.events()] == ["opened", "opened"]
        assert {e[2] for e in receiver.events()} == {"2026-10-03", "2026-10-05"}
        assert len(receiver.bodies) == 1
        (told,) = receiver.bodies
        assert told["deployment"] == project.config.parent.name
        assert all("url" not in event for event in told["events"])  # no [serve] public_url
        # the gap of the 3rd closes: told once more, once
        assert project.cli("-q", "run", "billing", "--period", "2026-10-03").exit_code == 0
        wait_for(lambda: len(receiver.bodies) >= 2, timeout=60, what="the closing post")
        _more_scans(bases)
        assert receiver.events()[2:] == [("closed", "billing", "2026-10-03")]
        assert len(receiver.bodies) == 2
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        outputs = [proc.communicate(timeout=30) for proc in procs]
    for _, err in outputs:
        assert "SECRET-TOKEN" not in err


def _more_scans(bases: list[str]) -> None:
    """Wait until every replica has scanned (and compared) twice more."""
    for base in bases:
        # a replica that has not finished its first scan answers 503: wait for one
        seen = wait_for(lambda: _scans(base), timeout=60, what="a first scan")  # noqa: B023
        wait_for(lambda: _scans(base) >= seen + 2, timeout=60, what="more scans")  # noqa: B023


def _scans(base: str) -> float:
    """The database clock of the newest scan a replica serves, as a count of its scans; 0
    while it has none yet (it answers 503 until its first scan, and refuses connections until
    it listens: the other replica may have posted first)."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(base + "/api/scan", timeout=10) as answer:
            generated = json.loads(answer.read())["generated_at"]
    except urllib.error.HTTPError as exc:
        if exc.code == 503:
            return 0.0
        raise
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionRefusedError):
            return 0.0
        raise
    return datetime.fromisoformat(generated).timestamp()


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_a_failing_receiver_is_retried_and_nothing_is_posted_twice(
    project: Project, receiver: Receiver, sql: Any
) -> None:
    receiver.fail = 2
    project.write(
        config(receiver, "slack") + '[serve]\ntitle = "acme"\npublic_url = "https://ops.example/"\n'
    )
    assert project.cli("-q", "run", "billing", "--period", "2026-10-02").exit_code == 0
    until = ("--until", "2026-10-05")
    first = project.run("-q", "scan", *until, "--notify")
    assert first.returncode == 1  # gaps
    assert "catchup: webhook ops (127.0.0.1): attempt 1: HTTP 500 (tried again later)" in (
        first.stderr
    )
    assert "SECRET-TOKEN" not in first.stderr + first.stdout
    (row,) = sql(
        "SELECT attempts, delivered_at IS NULL, next_at > clock_timestamp()"
        " FROM {schema}.alert_outbox"
    )
    assert row == (1, True, True)  # backing off
    # inside the backoff, a new scan posts nothing
    project.run("-q", "scan", *until, "--notify")
    assert len(receiver.paths) == 1
    for attempt in (2, 3):
        sql("UPDATE {schema}.alert_outbox SET next_at = clock_timestamp()")  # backoff over
        project.run("-q", "scan", *until, "--notify")
        assert len(receiver.paths) == attempt
    (body,) = receiver.bodies
    assert body["text"].splitlines() == [  # named by [serve] title, linked to the job's page
        "catchup (acme):",
        "billing: new gap: 1 missing period(s), 2026-10-01"
        " <https://ops.example/jobs/billing|its page>",
        "billing: new gap: 2 missing period(s), 2026-10-03 .. 2026-10-04"
        " <https://ops.example/jobs/billing|its page>",
    ]
    assert sql("SELECT attempts, delivered_at IS NOT NULL FROM {schema}.alert_outbox") == [
        (3, True)
    ]
    # another process, later: nothing new to tell, nothing sent again
    project.run("-q", "scan", *until, "--notify")
    assert len(receiver.paths) == 3


def test_notify_without_alerts_and_bad_alerts_are_one_line(project: Project) -> None:
    project.write(job_toml("billing", command=["true"]))
    result = project.cli("scan", "--notify")
    assert result.exit_code == 2 and "--notify needs an [alerts] section" in result.stderr
    base = '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
    for extra, message in (
        ('[alerts]\n[alerts.webhooks.ops]\nurl = "ftp://x/SECRET"\n', "expected an http://"),
        (
            '[alerts]\n[alerts.webhooks.ops]\nurl = "https://h/SECRET"\nformat = "xml"\n',
            "json or slack",
        ),
        (
            '[alerts]\nmax_per_minute = 0\n[alerts.webhooks.ops]\nurl = "https://h/SECRET"\n',
            "1 to 600",
        ),
        ("[alerts]\n", "needs at least one [alerts.webhooks.NAME]"),
    ):
        project.write(base + extra)
        result = project.cli("scan")
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert message in line and "catchup.toml:" in line and "SECRET" not in line


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_eight_racing_notifiers_tell_a_gap_once(project: Project, receiver: Receiver) -> None:
    """Eight `scan --notify` processes at once on a ledger nothing was told of: the ledger's
    lock lets one of them record and post the new ranges; the others find them told."""
    project.write(config(receiver))
    assert project.cli("-q", "run", "billing", "--period", "2026-10-02").exit_code == 0
    barrier = project.path / "go"
    script = (
        "import os, sys, time\n"
        f"while not os.path.exists({str(barrier)!r}): time.sleep(0.005)\n"
        "from catchup.cli import main\n"
        "main(sys.argv[1:])\n"
    )
    args = ["--config", str(project.config), "-q", "scan", "--until", "2026-10-05", "--notify"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, *args],
            cwd=project.path,
            env=project.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    barrier.touch()
    results = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [1] * 8, results
    assert len(receiver.bodies) == 1
    assert sorted(e[2] for e in receiver.events()) == ["2026-10-01", "2026-10-03"]


def test_the_alert_lock_serialises_notifiers(
    project: Project, receiver: Receiver, database: Database, sql: Any
) -> None:
    """Another replica holds the alerts' lock while it records the new ranges: a notifier
    waits for it, then finds them told and posts nothing."""
    project.write(config(receiver))
    assert project.cli("-q", "run", "billing", "--period", "2026-10-02").exit_code == 0
    with psycopg.connect(database.conninfo) as other:  # a transaction, held open
        other.execute("SELECT pg_advisory_xact_lock(hashtext(%s), -1)", [project.schema])
        notifier = project.spawn("-q", "scan", "--until", "2026-10-05", "--notify")
        wait_for(
            lambda: (
                sql(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND application_name LIKE 'catchup%%'"
                )
                == [(1,)]
            ),
            timeout=60,
            what="the notifier waiting on the lock",
        )
        job_id = sql("SELECT id FROM {schema}.jobs WHERE name = 'billing'")[0][0]
        for first, last, periods in ((T[0], T[0], 1), (T[2], T[3], 2)):
            other.execute(
                psycopg.sql.SQL(
                    "INSERT INTO {}.alert_ranges (job_id, state, first, last, periods)"
                    " VALUES (%s, 'missing', %s, %s, %s)"
                ).format(psycopg.sql.Identifier(project.schema)),
                [job_id, first, last, periods],
            )
    _, err = notifier.communicate(timeout=120)
    assert notifier.returncode == 1, err
    assert receiver.paths == []


def test_posts_beyond_the_rate_wait_their_turn(
    project: Project, receiver: Receiver, sql: Any
) -> None:
    """max_per_minute = 1: a second round of news within the minute stays in the outbox."""
    project.write(config(receiver).replace("max_per_minute = 30", "max_per_minute = 1"))
    assert project.run("-q", "scan", "--until", "2026-10-03", "--notify").returncode == 1
    assert len(receiver.bodies) == 1
    assert project.run("-q", "scan", "--until", "2026-10-06", "--notify").returncode == 1
    assert len(receiver.bodies) == 1  # the gap grew: told, but not yet sent
    assert sql(
        "SELECT count(*) FILTER (WHERE delivered_at IS NULL), count(*) FROM {schema}.alert_outbox"
    ) == [(1, 2)]
    # a minute later (the delivery moved back a minute), the next round sends it
    sql("UPDATE {schema}.alert_outbox SET delivered_at = delivered_at - interval '1 minute'")
    assert project.run("-q", "scan", "--until", "2026-10-06", "--notify").returncode == 1
    assert [e[0] for e in receiver.events()] == ["opened", "grown"]


def test_a_job_with_keys_is_told_once_per_state_with_how_many_keys(
    project: Project, receiver: Receiver
) -> None:
    """Tenants whose gaps differ in span are one event per state, naming how many keys, not an
    event per span (or per key)."""
    keys = [f"t{n:02}" for n in range(12)]
    project.write(
        job_toml("invoice", "daily", "2026-10-01", keys=keys, command=["true", "{key}"])
        + f'[alerts]\nmax_per_minute = 30\n[alerts.webhooks.ops]\nurl = "{receiver.url}"\n'
        + 'format = "slack"\n'
    )
    # t00..t05 ran the first day: their gaps start a day later than the others'
    for key in keys[:6]:
        assert (
            project.cli("-q", "run", "invoice", "--period", "2026-10-01", "--key", key).exit_code
            == 0
        )
    assert project.run("-q", "scan", "--until", "2026-10-04", "--notify").returncode == 1
    (body,) = receiver.bodies
    assert body["text"].splitlines() == [
        f"catchup ({project.config.parent.name}):",  # the config's folder, without [serve] title
        "invoice: new gap: t00, t01, t02, … missing 2026-10-01 .. 2026-10-03"
        " · 12 of 12 key(s) · 30 period(s)",
    ]


def test_an_alert_names_the_failed_key_and_why_and_links_its_period(
    project: Project, receiver: Receiver
) -> None:
    """A failed key is named in the alert, with the first line of why (the job's own last
    line, after catchup's "exited with 1"), how many of the job's keys, and links to the
    period's page; a key that is Slack markup is shown, never obeyed."""
    script = (
        'if [ "$CATCHUP_KEY" != acme ]; then echo "billing $CATCHUP_KEY"; '
        'echo "payment provider said 502 for $CATCHUP_KEY" >&2; exit 1; fi'
    )
    keys = ["acme", "globex"]
    project.write(
        job_toml("billing", "daily", "2026-10-02", keys=keys, command=["sh", "-c", script])
        + f'[alerts]\nmax_per_minute = 30\n[alerts.webhooks.ops]\nurl = "{receiver.url}"\n'
        + 'format = "slack"\n[alerts.webhooks.raw]\n'
        + f'url = "{receiver.url}"\nformat = "json"\n'
        + '[serve]\npublic_url = "https://ops.example"\n'
    )
    # replayed, not run: the job's stdout and stderr share one pipe, its last line is stderr's
    project.run("-q", "replay", "--since", "2026-10-02", "--until", "2026-10-03")
    assert project.run("-q", "scan", "--until", "2026-10-03", "--notify").returncode == 1
    slack = next(b for b in receiver.bodies if "text" in b)
    period = "https://ops.example/jobs/billing/2026-10-02T00%3A00%3A00Z?key=globex"
    assert slack["text"].splitlines()[1:] == [
        "billing: new gap: globex failed 2026-10-02 (exited with 1: payment provider said 502"
        f" for globex) · 1 of 2 key(s) · 1 period(s) <{period}|the period>"
        " <https://ops.example/jobs/billing|its page>"
    ]
    (event,) = next(b for b in receiver.bodies if "events" in b)["events"]
    assert event["first_keys"] == ["globex"] and (event["keys"], event["keys_expected"]) == (1, 2)
    assert event["error"] == "exited with 1: payment provider said 502 for globex"
    assert event["period_url"] == period


def test_a_key_that_is_slack_markup_is_escaped(project: Project, receiver: Receiver) -> None:
    keys = ["<!channel>", "a&b", "<https://evil.example|click>"]
    project.write(
        job_toml("billing", "daily", "2026-10-02", keys=keys, command=["false"])
        + f'[alerts]\nmax_per_minute = 30\n[alerts.webhooks.ops]\nurl = "{receiver.url}"\n'
        + 'format = "slack"\n'
    )
    assert project.run("-q", "scan", "--until", "2026-10-03", "--notify").returncode == 1
    (body,) = receiver.bodies
    line = body["text"].splitlines()[1]
    assert "<!channel>" not in line and "&lt;!channel&gt;" in line, line
    assert "a&amp;b" in line and "<https://evil" not in line


@pytest.mark.slow  # 10,000 failing keys replayed: once, on PostgreSQL 18
def test_failed_keys_on_metrics_stay_bounded_at_ten_thousand(project: Project) -> None:
    """10,000 keys failed: ``catchup_failed_keys`` names ``[serve] metric_keys`` of them per
    job (the most failed first, then by key), in the textfile format and on /metrics."""
    project.write(
        job_toml(
            "billing",
            "daily",
            "2026-10-02",
            keys="SELECT 'k' || lpad(i::text, 5, '0') FROM generate_series(1, 10000) AS i",
            call="math:sqrt",  # fails: it takes no context
            max_attempts=1,
        )
        + "[serve]\nmetric_keys = 3\n"
    )
    replayed = project.run("-q", "replay", "--since", "2026-10-02", "--until", "2026-10-03")
    assert replayed.returncode == 1, replayed.stderr
    text = project.run("-q", "scan", "--until", "2026-10-03", "--format", "openmetrics").stdout
    named = [line for line in text.splitlines() if line.startswith("catchup_failed_keys{")]
    assert named == [f'catchup_failed_keys{{job="billing",key="k0000{n}"}} 1' for n in (1, 2, 3)]
    assert 'catchup_exhausted_periods{job="billing"} 10000' in text
    port = free_port()
    proc = project.spawn("serve", "--listen", f"127.0.0.1:{port}")
    try:
        wait_for(lambda: _scans(f"http://127.0.0.1:{port}") > 0, timeout=60, what="a scan")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            served = answer.read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert [ln for ln in served.splitlines() if ln.startswith("catchup_failed_keys{")] == [
        f'catchup_failed_keys{{job="billing",key="k0000{n}"}} 1.0' for n in (1, 2, 3)
    ]
