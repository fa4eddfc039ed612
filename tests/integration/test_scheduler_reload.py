"""`catchup scheduler --serve`, a real process: the page and probes are served from it, and its
config is read again without a restart: when the file changes (a job added runs at once) and on
SIGHUP (which no longer stops it). A version that does not load, or that names another ledger,
is refused: the last good config stays in use, and the log, the page and /readyz (503) say so
until the file loads again, while /healthz stays 200 (a restart would not load it either)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from datetime import timedelta
from typing import Any

import pytest
from fix_db import nothing_written
from fix_processes import wait_for
from fix_project import Project, job_toml


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Scheduler:
    def __init__(self, project: Project, *args: str) -> None:
        self.log = project.path / "scheduler.err"
        with self.log.open("w") as err:
            self.proc = subprocess.Popen(
                project.command("scheduler", "--lease", "3s", *args),
                cwd=project.path,
                env=project.env(),
                text=True,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def said(self) -> str:
        return self.log.read_text()

    def saying(self, text: str, what: str, timeout: float = 30) -> None:
        def seen() -> bool:
            assert self.proc.poll() is None, self.said()
            return text in self.said()

        try:
            wait_for(seen, timeout=timeout, what=what)
        except AssertionError as exc:  # what it said instead
            raise AssertionError(f"{exc}; the scheduler said:\n{self.said()}") from None

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


def start_of(sql: Any) -> str:
    """Three minutes before the database's now, on the minute: the start every job of one test
    is written with (each version of the file keeps it, so a job written again is unchanged)."""
    now = sql("SELECT clock_timestamp()")[0][0]
    return f"{(now - timedelta(minutes=3)).replace(second=0, microsecond=0):%Y-%m-%dT%H:%M:%SZ}"


def jobs(start: str, *names: str) -> str:
    return "".join(
        job_toml(name, schedule="every 1 minute", start=start, catchup="latest", command=["true"])
        for name in names
    )


def ran(sql: Any, job: str) -> int:
    rows = sql(
        "SELECT count(*) FROM {schema}.runs r JOIN {schema}.jobs j ON j.id = r.job_id"
        " WHERE j.name = %s",
        [job],
    )
    return int(rows[0][0])


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_the_config_is_reloaded_and_a_bad_one_refused_without_a_restart(
    project: Project, sql: Any
) -> None:
    start = start_of(sql)
    project.write(jobs(start, "bill"))
    scheduler = Scheduler(project, "--serve", f"127.0.0.1:{free_port()}", "--refresh", "1s")
    try:
        scheduler.saying("leading (term 1)", "the lead")
        found = re.search(r"serving (http://127\.0\.0\.1:\d+/)", scheduler.said())
        assert found is not None, scheduler.said()
        url = found.group(1)
        wait_for(lambda: get(url + "readyz")[0] == 200, timeout=30, what="ready")
        wait_for(lambda: ran(sql, "bill") >= 1, timeout=30, what="bill's latest period")
        # the page says who leads, from its next scan (one made before the lead was taken
        # names none: under load the page lagged the run, and an assertion at once failed)
        wait_for(lambda: "led by " in get(url)[1], timeout=30, what="the page naming the leader")

        # a version that does not load: refused, the last good one kept, said everywhere
        good = project.config.read_text()
        project.config.write_text(good + "\n[jobs.broken\n")
        scheduler.saying("config not reloaded: ", "the refusal in the log")
        line = next(line for line in scheduler.said().splitlines() if "config not reloaded" in line)
        assert re.search(r"catchup\.toml:\d+: ", line), line
        assert "still running on the config read at " in line
        status, body = get(url + "readyz")
        assert status == 503 and "catchup.toml:" in body and "the last good one" in body
        assert get(url + "healthz")[0] == 200  # alive: a restart would not load it either
        wait_for(
            lambda: "The config file does not load" in get(url)[1], timeout=30, what="the banner"
        )

        # fixed, with a job added: loaded, and the new job's latest period runs at once
        # bill as it was (the same start: a start computed again after the minute turned made
        # this reload say "changed bill" too, the flake of issue 46)
        project.write(jobs(start, "bill", "export"))
        scheduler.saying("config reloaded: 2 jobs (added export)", "the reload")
        wait_for(lambda: ran(sql, "export") == 1, timeout=30, what="the added job's run")
        wait_for(lambda: get(url + "readyz")[0] == 200, timeout=30, what="ready again")
        assert "The config file does not load" not in get(url)[1]

        # SIGHUP reads it again (and no longer stops the scheduler)
        scheduler.proc.send_signal(signal.SIGHUP)
        scheduler.saying("config reloaded: 2 jobs (no job changed)", "the SIGHUP's reload")
        assert scheduler.proc.poll() is None

        # another ledger is never switched to under a running scheduler
        text = project.config.read_text().replace(
            f'schema = "{project.schema}"', 'schema = "elsewhere"'
        )
        project.config.write_text(text)
        scheduler.saying("names another ledger: restart to use it", "the other ledger refused")
        assert "leading (term 1)" in scheduler.said() and "term 1 ended" not in scheduler.said()
    finally:
        code = scheduler.stop()
    assert code == 0, scheduler.said()
    assert "Traceback" not in scheduler.said()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_serve_port_that_cannot_be_bound_is_refused_before_anything_is_written(
    project: Project, sql: Any
) -> None:
    project.write(jobs(start_of(sql), "bill"))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = project.run("scheduler", "--serve", f"127.0.0.1:{port}", timeout=60)
    assert result.returncode == 2, result.stderr
    said = result.stderr.strip().splitlines()
    assert said[-1].startswith(f"catchup: --serve 127.0.0.1:{port}: "), result.stderr
    assert "Traceback" not in result.stderr
    assert nothing_written(project.database, project.schema)


def test_the_page_names_the_leader_once_its_own_process_leads(project: Project, sql: Any) -> None:
    """The page's first scan comes before the lead is taken (it is served first, so a bad port
    is refused before anything leads); taking the lead scans again at once, so the page never
    says "no leader" for a whole refresh (an hour here) beside the leader itself."""
    project.write(jobs(start_of(sql), "bill"))
    scheduler = Scheduler(project, "--serve", f"127.0.0.1:{free_port()}", "--refresh", "1h")
    try:
        scheduler.saying("leading (term 1)", "the lead")
        found = re.search(r"serving (http://127\.0\.0\.1:\d+/)", scheduler.said())
        assert found is not None, scheduler.said()
        wait_for(lambda: "led by " in get(found.group(1))[1], timeout=30, what="the leader named")
    finally:
        code = scheduler.stop()
    assert code == 0, scheduler.said()
