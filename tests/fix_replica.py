"""A real replica: two embedded PostgreSQL servers of the test's own, a primary and a standby
made from it by ``pg_basebackup`` (a replication slot, streaming), each on a Unix socket of
its own folder, run as the embedded server's user. Synchronous or not, promoted, killed,
restarted and made a standby again by the tests themselves (issue 30: failover)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fix_db import HOMES
from psycopg import sql as pgsql
from psycopg.conninfo import make_conninfo

from catchup.postgres import datafolder, embedded, processes

STANDBY_NAME = "catchup_standby"  # its application_name, as synchronous_standby_names names it


@dataclass
class Node:
    """One server: its data folder, reached on the socket in that folder."""

    data: Path
    bins: Path

    @property
    def log(self) -> Path:
        """The server's log, beside its folder (pg_basebackup copies what is inside)."""
        return self.data.with_name(self.data.name + ".log")

    @property
    def password(self) -> str:
        secret = datafolder.password(self.data)
        assert secret is not None
        return secret

    def conninfo(self, dbname: str = "postgres", **extra: Any) -> str:
        return make_conninfo(
            host=str(self.data),
            port=5432,
            user="postgres",
            dbname=dbname,
            password=self.password,
            **extra,
        )

    def up(self) -> bool:
        try:
            with psycopg.connect(self.conninfo(), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def start(self) -> None:
        user = processes.server_user()
        datafolder.settings(self.data, user)
        log = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            processes.launch([str(self.bins / "postgres"), "-D", str(self.data)], user, log)
        finally:
            os.close(log)
        deadline = time.monotonic() + 60
        while not self.up():
            if time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace").splitlines()[-5:]
                raise AssertionError(f"{self.data.name} did not start: {' / '.join(tail)}")
            time.sleep(0.05)

    def stop(self, mode: str = "fast") -> None:
        """``immediate`` is a crash: no shutdown checkpoint, what was not sent is lost."""
        if (self.data / "postmaster.pid").exists():
            processes.pg_ctl(self.bins, self.data, ["-w", "-m", mode, "stop"])

    def sql(self, text: str | pgsql.Composed, params: Any = None) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.conninfo(), autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(text, params)
            return cur.fetchall() if cur.description else []

    def set(self, name: str, value: str) -> None:
        """``ALTER SYSTEM SET name = value`` (no parameters there: a literal) and a reload."""
        with psycopg.connect(self.conninfo(), autocommit=True, connect_timeout=5) as conn:
            query = pgsql.SQL("ALTER SYSTEM SET {} = {}")
            conn.execute(query.format(pgsql.Identifier(name), pgsql.Literal(value)))
            conn.execute("SELECT pg_reload_conf()")

    def promote(self) -> None:
        self.sql("SELECT pg_promote(true, 60)")

    def in_recovery(self) -> bool:
        return bool(self.sql("SELECT pg_is_in_recovery()")[0][0])


@dataclass
class Pair:
    """A primary and its streaming standby (their roles swap at a failover)."""

    primary: Node
    standby: Node
    home: Path
    made: int = 0
    _source: str = ""  # the standby's primary_conninfo while its WAL is held back

    def dsn(self, *, both: bool = True) -> str:
        """The ledger's DSN: the standby listed first, then the primary, and libpq told to
        take the one that accepts writes (what a team lists for a failover pair)."""
        nodes = [self.standby, self.primary] if both else [self.primary]
        return make_conninfo(
            host=",".join(str(n.data) for n in nodes),
            port=",".join("5432" for _ in nodes),
            user="postgres",
            dbname="postgres",
            password=self.primary.password,
            target_session_attrs="read-write",
        )

    def synchronous(self, on: bool) -> None:
        """The standby as the primary's synchronous standby (on), or asynchronous."""
        names = STANDBY_NAME if on else ""
        self.primary.set("synchronous_standby_names", names)
        want = "sync" if on else "async"
        wait_until(
            lambda: (
                self.primary.sql(
                    "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s",
                    [STANDBY_NAME],
                )
                == [(want,)]
            ),
            30,
            f"the standby to be {want}",
        )

    def caught_up(self) -> None:
        """Wait until the standby has replayed everything the primary has written."""
        ((lsn,),) = self.primary.sql("SELECT pg_current_wal_lsn()")
        wait_until(
            lambda: (
                self.standby.sql("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [lsn])
                == [(True,)]
            ),
            30,
            "the standby to replay the primary's WAL",
        )

    def hold_wal_back(self, held: bool) -> None:
        """Stop the standby's WAL receiver (held: what the primary writes now reaches nobody)
        or start it again, and wait until it has."""
        if held:
            ((self._source,),) = self.standby.sql("SHOW primary_conninfo")
        self.standby.set("primary_conninfo", "" if held else self._source)
        wait_until(
            lambda: (
                self.standby.sql("SELECT count(*) FROM pg_stat_wal_receiver") == [(int(not held),)]
            ),
            30,
            "the WAL receiver to " + ("stop" if held else "start"),
        )

    def commit_waiting(self) -> bool:
        """Whether a commit on the primary waits for the synchronous standby now."""
        waiting = self.primary.sql(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
        )
        return waiting != [(0,)]

    def fail_over(self) -> None:
        """The primary crashes; the standby is promoted: the roles swap, the old primary's
        folder kept aside (it is rebuilt as a standby by ``rebuild``)."""
        self.primary.stop("immediate")
        self.standby.promote()
        wait_until(lambda: not self.standby.in_recovery(), 60, "the promotion")
        self.primary, self.standby = self.standby, self.primary
        # alone now: a synchronous standby named in the settings it was copied with would make
        # every commit that asks for one wait for nobody
        self.primary.set("synchronous_standby_names", "")

    def rebuild(self, *, sync: bool) -> None:
        """The standby's folder made anew from the primary (after a failover: the old primary
        as the new standby), streaming again."""
        self.standby.stop("immediate")
        shutil.rmtree(self.standby.data, ignore_errors=True)
        self.standby = standby_of(self.primary, self.home, self.standby.data.name, self.made)
        self.made += 1
        self.synchronous(sync)


def wait_until(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while True:
        with contextlib.suppress(psycopg.Error):
            if condition():
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds:.0f}s waiting for {what}")
        time.sleep(0.05)


def primary_in(home: Path, name: str) -> Node:
    bins, _ = embedded.reachable_bins(embedded.bin_dir())
    data = home / name
    datafolder.create(bins, data, processes.server_user())
    with open(data / "pg_hba.conf", "a") as hba:
        hba.write("local replication all scram-sha-256\n")
    with open(data / "postgresql.conf", "a") as conf:
        conf.write(
            "\n# the tests' replica pair\n"
            "wal_level = replica\nmax_wal_senders = 5\nmax_replication_slots = 5\n"
            "wal_keep_size = '64MB'\nfsync = off\n"
        )
    node = Node(data, bins)
    node.start()
    return node


def standby_of(primary: Node, home: Path, name: str, made: int) -> Node:
    data = home / name
    user = processes.server_user()
    slot = f"standby_{made}"
    with contextlib.suppress(psycopg.Error):
        primary.sql("SELECT pg_drop_replication_slot(%s)", [slot])
    source = make_conninfo(primary.conninfo(), application_name=STANDBY_NAME)
    aside = Path(tempfile.mkdtemp(dir=home))
    if user is not None:
        os.chown(aside, user.pw_uid, user.pw_gid)
    try:
        processes.run(
            primary.bins,
            "pg_basebackup",
            [
                "-D",
                str(aside / "data"),
                "-d",
                source,
                "-R",
                "-C",
                "-S",
                slot,
                "-X",
                "stream",
                "--no-sync",
                "--checkpoint=fast",  # not a spread checkpoint: seconds, not half a minute
            ],
            user,
        )
        # the primary's socket lock file is copied with its folder (the socket is not): it
        # names the primary's live postmaster, and the standby would refuse to start
        for lock in (aside / "data").glob(".s.PGSQL.*.lock"):
            lock.unlink()
        os.rename(aside / "data", data)
    finally:
        shutil.rmtree(aside, ignore_errors=True)
    node = Node(data, primary.bins)
    node.start()
    return node


@contextlib.contextmanager
def replica_pair(parent: Path) -> Iterator[Pair]:
    """A primary and an asynchronous streaming standby in a new folder under ``parent``
    (reachable by the server's user), both stopped and removed at the end."""
    parent.mkdir(exist_ok=True)
    parent.chmod(0o755)
    home = Path(tempfile.mkdtemp(dir=parent, prefix="replica-"))
    home.chmod(0o755)
    user = processes.server_user()
    if user is not None:
        os.chown(home, user.pw_uid, user.pw_gid)
    pair: Pair | None = None
    nodes: list[Node] = []
    try:
        primary = primary_in(home, "a")
        nodes.append(primary)
        standby = standby_of(primary, home, "b", 0)
        nodes.append(standby)
        pair = Pair(primary, standby, home, made=1)
        pair.synchronous(False)
        yield pair
    finally:
        for node in [*nodes, *([pair.primary, pair.standby] if pair else [])]:
            with contextlib.suppress(Exception):
                node.stop("immediate")
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def replica() -> Iterator[Pair]:
    """A primary and an asynchronous streaming standby, both stopped when the test ends."""
    with replica_pair(HOMES) as pair:
        yield pair
