"""The test database: the embedded PostgreSQL in ``.catchup-test/`` (or ``CATCHUP_TEST_HOME``), or
the server at ``CATCHUP_TEST_DSN``.

Every test gets a schema of its own, so tests never see each other's ledgers. When the server
cannot be reached the whole run stops at once instead of failing every test.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result

ROOT = Path(__file__).resolve().parent.parent
# A run under a moved clock (.ci/run's faketime legs) keeps a server of its own, started under
# that clock: a server already running would keep the real one.


def reachable_place(path: Path) -> Path:
    """``path``, or where the tests keep it instead when the embedded server's user (root
    runs it as a user of its own) cannot reach it: a checkout in a 0700 folder (``mktemp -d``)
    is refused by catchup, which never opens a folder to everyone. Then a folder of the same
    name under /var/tmp/catchup-tests/, one per checkout."""
    import hashlib

    from catchup import embedded, processes

    user = processes.server_user()  # root: made now if need be, as catchup itself would
    if user is None or embedded.unreachable(path, user) is None:
        return path
    base = Path("/var/tmp/catchup-tests")
    base.mkdir(mode=0o755, exist_ok=True)
    base.chmod(0o755)
    digest = hashlib.sha256(str(path.parent).encode()).hexdigest()[:12]
    folder = base / digest
    folder.mkdir(mode=0o755, exist_ok=True)
    return folder / path.name


TEST_HOME = reachable_place(
    Path(os.environ.get("CATCHUP_TEST_HOME") or ROOT / ".catchup-test").resolve()
)


@dataclass(frozen=True)
class Database:
    conninfo: str = field(repr=False)  # its password is never printed, not even by a test
    env: dict[str, str] = field(repr=False)  # what a child needs to reach the same server


@pytest.fixture(scope="session")
def database() -> Iterator[Database]:
    explicit = os.environ.get("CATCHUP_TEST_DSN")
    if explicit:
        env = {"CATCHUP_DSN": explicit}
        conninfo = explicit
        started = False
    else:
        os.environ["CATCHUP_HOME"] = str(TEST_HOME)
        for name in ("CATCHUP_DSN", "DATABASE_URL", "PGHOST", "PGDATABASE", "PGUSER", "PGPORT"):
            os.environ.pop(name, None)
        from catchup import embedded

        TEST_HOME.mkdir(exist_ok=True)
        try:
            server = embedded.ensure_running()
        except Exception as exc:  # the whole run depends on it
            pytest.exit(f"cannot start the embedded PostgreSQL: {exc}", returncode=3)
        conninfo = server.conninfo
        env = {"CATCHUP_HOME": str(TEST_HOME)}
        started = True
    try:
        with psycopg.connect(conninfo, connect_timeout=10) as conn:
            conn.execute("select 1")
    except psycopg.Error as exc:
        pytest.exit(f"test database unreachable: {exc}", returncode=3)
    yield Database(conninfo, env)
    if started and not os.environ.get("CATCHUP_TEST_KEEP_SERVER"):
        from catchup import embedded

        embedded.stop()


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


@contextmanager
def throwaway_schema(database: Database) -> Iterator[str]:
    """A schema name of this test's own, dropped (with all in it) when the test ends."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield name
    finally:
        drop_schema(database.conninfo, name)


def drop_schema(conninfo: str, name: str) -> None:
    """Drop ``name`` with all in it, within a bound: a connection a failed test left open in
    a transaction (a worker thread still running, say) would hold the DROP, and with it the
    whole run, for ever. Such connections are ended, and the DROP tried again."""
    drop = psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(psycopg.sql.Identifier(name))
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=30) as conn:
        conn.execute("SET lock_timeout = '10s'")
        for _ in range(5):
            try:
                conn.execute(drop)
                return
            except psycopg.errors.LockNotAvailable:
                conn.execute(
                    "SELECT pg_terminate_backend(l.pid) FROM pg_locks l"
                    " LEFT JOIN pg_class c ON c.oid = l.relation"
                    " JOIN pg_namespace n ON n.oid = c.relnamespace"
                    "  OR (l.classid = 'pg_namespace'::regclass AND l.objid = n.oid)"
                    " WHERE n.nspname = %s AND l.pid <> pg_backend_pid()",
                    (name,),
                )
        conn.execute(drop)


@pytest.fixture
def schema(database: Database) -> Iterator[str]:
    with throwaway_schema(database) as name:
        yield name


def reachable(path: Path) -> Path:
    """``path`` (a test's own folder) and the folders above it opened for search (o+x): as
    root, the embedded server's user must reach a home below it, and catchup itself refuses to
    open a folder to everyone for that."""
    import stat

    for folder in [path, *path.parents]:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXOTH)
    return path


# Homes of the embedded servers tests start of their own: beside the project, not in pytest's
# tmp, which is 0700 (the server's user could not reach it) and whose mode another pytest
# session may reset at any moment.
HOMES = reachable_place(ROOT / ".catchup-test-homes")


@pytest.fixture
def server_home() -> Iterator[Path]:
    """An empty CATCHUP_HOME of this test's own that the server's user can reach."""
    import shutil
    import tempfile

    HOMES.mkdir(exist_ok=True)
    HOMES.chmod(0o755)
    folder = Path(tempfile.mkdtemp(dir=HOMES))
    folder.chmod(0o755)
    home = folder / "home"
    home.mkdir()
    yield home
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def private_server(server_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An embedded server of this test's own, to stop and restart at will."""
    from catchup import embedded

    monkeypatch.setenv("CATCHUP_HOME", str(server_home))
    server = embedded.ensure_running()
    yield server.conninfo
    embedded.stop()


@pytest.fixture
def sql(database: Database, schema: str) -> Iterator[Callable[..., list[tuple[Any, ...]]]]:
    """Run a statement against the test database with ``{schema}`` bound; returns the rows."""
    conn = psycopg.connect(database.conninfo, autocommit=True)

    def run(text: str, params: Any = None) -> list[tuple[Any, ...]]:
        query = psycopg.sql.SQL(text).format(schema=psycopg.sql.Identifier(schema))  # type: ignore[arg-type, unused-ignore]
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []

    yield run
    conn.close()


@dataclass
class Project:
    """A folder with a catchup.toml using this test's schema, and ways to call catchup in it."""

    path: Path
    schema: str
    database: Database
    jobs: dict[str, str] = field(default_factory=dict)

    @property
    def config(self) -> Path:
        return self.path / "catchup.toml"

    def write(self, jobs_toml: str) -> Path:
        body = f'[database]\nschema = "{self.schema}"\n\n' + textwrap.dedent(jobs_toml)
        self.config.write_text(body)
        return self.config

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k == "CATCHUP_PG_BIN" or not k.startswith(("CATCHUP_", "PG"))
        }
        env.pop("DATABASE_URL", None)
        env.update(self.database.env)
        env["CATCHUP_CONFIG"] = str(self.config)
        env.update(extra)
        return env

    def cli(self, *args: str, env: dict[str, str] | None = None) -> Result:
        """catchup in this process, through click's runner."""
        from catchup.cli import cli

        runner = CliRunner()
        return runner.invoke(
            cli,
            ["--config", str(self.config), *args],
            env={**self.database.env, **(env or {})},
            catch_exceptions=False,
        )

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "catchup", *args]

    def spawn(self, *args: str, **popen: Any) -> subprocess.Popen[str]:
        """catchup in a child process of its own."""
        return subprocess.Popen(
            self.command(*args),
            cwd=self.path,
            env=self.env(),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            **popen,
        )

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args),
            cwd=self.path,
            env=self.env(),
            text=True,
            capture_output=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture
def project(tmp_path: Path, schema: str, database: Database) -> Project:
    return Project(tmp_path, schema, database)


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


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


@dataclass(frozen=True)
class Pooler:
    dsn: str
    port: int


@pytest.fixture(scope="session")
def pgbouncer(database: Database, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pooler]:
    """PgBouncer in transaction pooling mode in front of the test server (Debian's package,
    installed by .ci/run), run as the server's system user: PgBouncer refuses root."""
    import pwd
    import shutil
    import socket

    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(binary).exists():
        pytest.fail("pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)")
    import tempfile

    params = psycopg.conninfo.conninfo_to_dict(database.conninfo)
    # not under pytest's own tmp (mode 700): the server's user must reach it
    folder = Path(tempfile.mkdtemp(prefix="catchup-pgbouncer-"))
    folder.chmod(0o777)
    server = f"host={params.get('host', 'localhost')} port={params.get('port', 5432)}"
    if params.get("password"):  # the embedded server's, generated at initdb
        server += f" password={params['password']}"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    (folder / "pgbouncer.ini").write_text(
        textwrap.dedent(f"""\
        [databases]
        * = {server} user={params.get("user", "postgres")}
        [pgbouncer]
        listen_addr = 127.0.0.1
        listen_port = {port}
        unix_socket_dir =
        auth_type = any
        pool_mode = transaction
        max_client_conn = 500
        default_pool_size = 20
        ignore_startup_parameters = extra_float_digits,options
        logfile = {folder}/pgbouncer.log
        pidfile = {folder}/pgbouncer.pid
        """)
    )
    user = pwd.getpwnam("embedded_postgres") if os.geteuid() == 0 else None
    proc = subprocess.Popen(
        [binary, str(folder / "pgbouncer.ini")],
        user=user.pw_uid if user else None,
        group=user.pw_gid if user else None,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"

    def ready() -> bool:
        try:
            with psycopg.connect(dsn, connect_timeout=2) as conn:
                conn.execute("select 1")
            return True
        except psycopg.Error:
            return proc.poll() is not None  # stop waiting if it died

    wait_for(ready, timeout=30, what="pgbouncer to accept connections")
    assert proc.poll() is None, (folder / "pgbouncer.log").read_text()
    yield Pooler(dsn, port)
    proc.terminate()
    proc.wait(timeout=30)
    shutil.rmtree(folder, ignore_errors=True)


def pytest_report_header(config: pytest.Config) -> str:
    if os.environ.get("CATCHUP_TEST_DSN"):
        return "catchup: CATCHUP_TEST_DSN"
    from catchup import embedded

    bins = embedded.bin_dir()
    return f"catchup: embedded PostgreSQL {embedded.major_version(bins)} from {bins}"


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


class CutAfter:
    """A TCP proxy in front of the test server that, once, lets a chosen statement through to
    PostgreSQL and cuts the client off as soon as PostgreSQL answers it: the statement took
    effect (its reply proves it) but the client never learns. ``arm`` is a marker in the
    statement that arms the proxy; ``cut`` the one whose reply is swallowed (the same
    statement, or the COMMIT that follows it in a transaction). With ``instead``, the chosen
    statement never reaches PostgreSQL: ``instead()`` runs (a server restart, say) and the
    client is cut off."""

    def __init__(
        self,
        upstream: str,
        arm: bytes,
        cut: bytes | None = None,
        instead: Callable[[], object] | None = None,
    ) -> None:
        import socket
        import threading

        params = psycopg.conninfo.conninfo_to_dict(upstream)
        self.upstream_path = f"{params['host']}/.s.PGSQL.{params.get('port', 5432)}"
        self.arm, self.cut_on, self.instead = arm, cut or arm, instead
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.spent = False
        self.cut = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def dsn(self, upstream: str) -> str:
        """``upstream`` reached through this proxy (password and all)."""
        params = psycopg.conninfo.conninfo_to_dict(upstream)
        return psycopg.conninfo.make_conninfo(
            "", **{**params, "host": "127.0.0.1", "port": str(self.port)}
        )

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.socket(socket.AF_UNIX)
            server.connect(self.upstream_path)
            state = {"armed": False, "swallow": False}
            lock = threading.Lock()
            for args in ((client, server, True), (server, client, False)):
                threading.Thread(target=self._pipe, args=(*args, state, lock), daemon=True).start()

    def _pipe(
        self, source: Any, sink: Any, upstream: bool, state: dict[str, bool], lock: Any
    ) -> None:
        import socket

        try:
            while data := source.recv(65536):
                with lock:
                    if upstream and not self.spent and self.arm in data:
                        state["armed"] = True
                    if upstream and state["armed"] and not self.spent and self.cut_on in data:
                        self.spent = True
                        if self.instead is not None:
                            self.instead()
                            self.cut.set()
                            return  # closing both ends: the statement never arrives
                        state["swallow"] = True  # its answer never reaches the client
                    if not upstream and state["swallow"]:
                        # PostgreSQL answered: the statement took effect; the client hangs up
                        self.cut.set()
                        sink.shutdown(socket.SHUT_RDWR)
                        return
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.close()
                except OSError:
                    pass

    def close(self) -> None:
        self.listener.close()
