"""The embedded server: started once however many processes race for it; old servers refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fix_processes import let_go_at_once, wait_for

PG15 = Path("/usr/lib/postgresql/15/bin")


def catchup(home: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k == "CATCHUP_PG_BIN" or not k.startswith(("CATCHUP_", "PG"))
    }
    clean.pop("DATABASE_URL", None)
    return subprocess.Popen(
        [sys.executable, "-m", "catchup", *args],
        cwd=home,
        text=True,
        env={**clean, "CATCHUP_HOME": str(home), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def stop(home: Path, **env: str) -> None:
    proc = catchup(home, "postgres", "stop", **env)
    proc.communicate(timeout=60)


@pytest.mark.slow
def test_racing_processes_share_one_new_server(server_home: Path) -> None:
    """Four processes on a fresh machine start the embedded server once and all succeed."""
    home = server_home
    try:
        procs = [catchup(home, "migrate") for _ in range(4)]
        results = [proc.communicate(timeout=180) for proc in procs]
        assert [proc.returncode for proc in procs] == [0] * 4, results
        assert sum("applied 0001_ledger" in out for out, _ in results) == 1
        assert all("embedded PostgreSQL in" in err for _, err in results)
        status = catchup(home, "postgres", "status")
        out, _ = status.communicate(timeout=60)
        assert out.startswith("running: ")
        assert len(list(home.glob("pg*/PG_VERSION"))) == 1
    finally:
        stop(home)
    out, _ = catchup(home, "postgres", "status").communicate(timeout=60)
    assert out.startswith("stopped: ")


@pytest.mark.slow
def test_a_server_whose_socket_vanished_is_restarted(server_home: Path) -> None:
    """A live server whose socket file was removed (say, by a tmp cleaner) is restarted."""
    home = server_home
    try:
        out, err = catchup(home, "migrate").communicate(timeout=180)
        (socket,) = (p for p in home.glob("pg*/.s.PGSQL.*") if p.suffix != ".lock")
        socket.unlink()
        proc = catchup(home, "migrate")
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        assert "up to date" in out
        assert list(home.glob("pg*/.s.PGSQL.*"))
    finally:
        stop(home)


@pytest.mark.slow
def test_server_older_than_17_is_refused(server_home: Path) -> None:
    """Pointed at PostgreSQL 15, catchup says so in one line and exits 3."""
    if not (PG15 / "postgres").exists():
        pytest.fail("needs Debian's postgresql-15 (.ci/run installs it)")
    home = server_home
    try:
        proc = catchup(home, "migrate", CATCHUP_PG_BIN=str(PG15))
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 3, out + err
        assert "runs PostgreSQL 15." in err and "needs PostgreSQL 17 or newer" in err
        assert len(err.strip().splitlines()) == 1
        assert "Traceback" not in err
    finally:
        stop(home, CATCHUP_PG_BIN=str(PG15))


@pytest.mark.slow
def test_a_server_that_died_with_the_host_starts_again(server_home: Path) -> None:
    """The server was SIGKILLed (a power cut, a host reboot): its postmaster.pid names a dead
    process. The next command starts the server again instead of mistaking that file for the
    new server giving up."""
    home = server_home
    try:
        proc = catchup(home, "migrate")
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        (pid_file,) = home.glob("pg*/postmaster.pid")
        pid = int(pid_file.read_text().splitlines()[0])
        os.kill(pid, signal.SIGKILL)
        # its backends notice the postmaster is gone and leave; the stale file stays
        assert wait_for(lambda: not _session(pid), timeout=30)
        assert int(pid_file.read_text().splitlines()[0]) == pid
        proc = catchup(home, "migrate")
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        assert "up to date" in out
        assert int(pid_file.read_text().splitlines()[0]) != pid
    finally:
        stop(home)


def _session(sid: int) -> list[int]:
    """Pids still in the session ``sid`` (setsid made the postmaster a session leader, and
    every backend it forked stays in that session)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == sid:
            found.append(int(entry.name))
    return found


RACE = "print(processes.server_user(name=sys.argv[1]).pw_uid)"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root makes system users")
def test_processes_started_at_once_on_a_fresh_machine_each_get_the_servers_user() -> None:
    """catchup's first commands on a fresh machine, started at once, each make the server's
    system user: every one gets it, and the same one (useradd run at once gave different uids
    for one name). Three races, each for a user of the test's own, removed after."""
    import pwd
    import uuid

    for _ in range(3):
        name = f"catchup_race_{uuid.uuid4().hex[:8]}"
        try:
            ran = let_go_at_once("from catchup.postgres import processes", RACE, [name])
            assert [code for code, _, _ in ran] == [0] * 4, ran
            uids = {out.strip() for _, out, _ in ran}
            assert uids == {str(pwd.getpwnam(name).pw_uid)}, ran  # one user, the one on file
        finally:
            for _ in range(4):  # an entry each, if useradd ran at once
                if subprocess.run(["userdel", name], check=False, capture_output=True).returncode:
                    break
