"""What stands between catchup and the test server: PgBouncer, and a proxy that cuts a
connection right after a chosen statement took effect."""

from __future__ import annotations

import os
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fix_db import Database
from fix_processes import wait_for


@dataclass(frozen=True)
class Pooler:
    dsn: str
    port: int


@pytest.fixture(scope="session")
def pgbouncer(database: Database) -> Iterator[Pooler]:
    """PgBouncer in transaction pooling mode in front of the test server (Debian's package,
    installed by .ci/run), run as the server's system user: PgBouncer refuses root."""
    with pooler_for(database.conninfo) as pooler:
        yield pooler


@contextmanager
def pooler_for(conninfo: str) -> Iterator[Pooler]:
    """PgBouncer in transaction pooling mode in front of ``conninfo``'s server, logging in as
    its role to any database asked for."""
    import pwd
    import shutil
    import socket

    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(binary).exists():
        pytest.fail("pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)")
    import tempfile

    params = psycopg.conninfo.conninfo_to_dict(conninfo)
    # not under pytest's own tmp (mode 700): the server's user must reach it
    folder = Path(tempfile.mkdtemp(prefix="catchup-pgbouncer-"))
    folder.chmod(0o777)
    server = f"host={params.get('host', 'localhost')} port={params.get('port', 5432)}"
    if params.get("password"):  # the embedded server's, generated at initdb
        server += f" password={params['password']}"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # the test database's own role and database (a team's role that owns only its schema, in
    # CATCHUP_TEST_TEAM): catchup's settings go through the pooler as a team's would
    role, dbname = params.get("user", "postgres"), params.get("dbname", "postgres")
    (folder / "pgbouncer.ini").write_text(
        textwrap.dedent(f"""\
        [databases]
        * = {server} user={role}
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
    dsn = f"host=127.0.0.1 port={port} user={role} dbname={dbname}"

    def ready() -> bool:
        try:
            with psycopg.connect(dsn, connect_timeout=2) as conn:
                conn.execute("select 1")
            return True
        except psycopg.Error:
            return proc.poll() is not None  # stop waiting if it died

    try:
        wait_for(ready, timeout=30, what="pgbouncer to accept connections")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {(folder / 'pgbouncer.log').read_text()[-2000:]}") from None
    assert proc.poll() is None, (folder / "pgbouncer.log").read_text()
    yield Pooler(dsn, port)
    proc.terminate()
    proc.wait(timeout=30)
    shutil.rmtree(folder, ignore_errors=True)


class CutAfter:
    """A TCP proxy in front of the test server that, once, lets a chosen statement through to
    PostgreSQL and cuts the client off as soon as PostgreSQL answers it: the statement took
    effect (its reply proves it) but the client never learns. ``arm`` is a marker in the
    statement that arms the proxy; ``cut`` the one whose reply is swallowed (the same
    statement, or the COMMIT that follows it in a transaction). With ``instead``, the chosen
    statement never reaches PostgreSQL: ``instead()`` runs (a server restart, say) and the
    client is cut off. With ``skip``, the first ``skip`` statements holding ``arm`` pass
    untouched (a marker every session sends, cut in the second session to send it)."""

    def __init__(
        self,
        upstream: str,
        arm: bytes,
        cut: bytes | None = None,
        instead: Callable[[], object] | None = None,
        skip: int = 0,
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
        self.skip = skip
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
                        state["armed"] = self.skip == 0
                        self.skip -= 1
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


class Gate:
    """A TCP proxy in front of a server that can be shut (``shut``): every connection through
    it is cut and new ones are refused, as when a host loses its network to the database."""

    def __init__(self, upstream: str) -> None:
        import socket
        import threading

        params = psycopg.conninfo.conninfo_to_dict(upstream)
        self.upstream_path = f"{params['host']}/.s.PGSQL.{params.get('port', 5432)}"
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self._open: list[Any] = []
        self._lock = threading.Lock()
        self._shut = False
        threading.Thread(target=self._accept, daemon=True).start()

    def dsn(self, upstream: str) -> str:
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
            with self._lock:
                if self._shut:  # accepted as the gate shut: refused like the rest
                    client.close()
                    return
                server = socket.socket(socket.AF_UNIX)
                server.connect(self.upstream_path)
                self._open += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: Any, sink: Any) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.close()
                except OSError:
                    pass

    def shut(self) -> None:
        import socket

        with self._lock:
            self._shut = True
            # a listener closed under a thread blocked in accept() still accepts (Linux):
            # shutdown wakes that thread, and a connection it took meanwhile is refused above
            try:
                self.listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.listener.close()
            for s in self._open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
                except OSError:
                    pass
