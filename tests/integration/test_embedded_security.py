"""The embedded server is private to the user who started it: another local user reaches
nothing, a leaked socket still needs the password, and no path reaches a shell."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fix_db import Database, reachable
from fix_project import Project, job_toml

from catchup.postgres import datafolder, embedded, processes

INTRUDER = "catchup_intruder"


@pytest.fixture(scope="module")
def intruder() -> pwd.struct_passwd:
    """A second Unix user on this host (created here; the tests run as root)."""
    if os.geteuid() != 0:
        pytest.fail("these tests create a second Unix user: run them as root (CI does)")
    user = processes.server_user(name=INTRUDER)  # made as the server's is, under its lock
    assert user is not None
    return user


def psql_as(user: pwd.struct_passwd, conninfo: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """psql (the server's own) run as ``user``, with no password, against the server's socket."""
    return subprocess.run(
        [
            str(embedded.usable_bins() / "psql"),  # the copy the server runs, if there is one
            "-w",
            "-h",
            conninfo["host"],
            "-p",
            conninfo["port"],
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-Atc",
            "select current_user",
        ],
        user=user.pw_uid,
        group=user.pw_gid,
        extra_groups=[],
        env={"PATH": "/usr/bin:/bin", "HOME": "/"},
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_another_user_cannot_reach_the_server(
    database: Database, intruder: pwd.struct_passwd, project: Project
) -> None:
    """Through the private socket folder: refused. With that folder opened up (a leak): the
    server still asks for the password, and catchup itself refuses the opened folder."""
    if "CATCHUP_TEST_DSN" in os.environ:
        pytest.skip("the embedded server is not in use")  # pragma: no cover
    params = {k: str(v) for k, v in psycopg.conninfo.conninfo_to_dict(database.conninfo).items()}
    folder = Path(params["host"])
    assert (folder.stat().st_mode & 0o777) == 0o700
    denied = psql_as(intruder, params)
    assert denied.returncode != 0 and "Permission denied" in denied.stderr, denied
    mode = folder.stat().st_mode & 0o777
    folder.chmod(0o711)
    try:
        leaked = psql_as(intruder, params)
        assert leaked.returncode != 0, leaked
        assert "password" in leaked.stderr, leaked.stderr
        # and the owner, with the password, would get in: the refusal above is the password's
        with psycopg.connect(database.conninfo) as conn:
            assert conn.execute("select current_user").fetchone() == ("postgres",)
        project.write(job_toml("billing", command=["true"]))
        refused = project.cli("jobs")
        assert refused.exit_code == 3, refused.output
        assert "has mode 0711: others could reach the server" in refused.stderr
    finally:
        folder.chmod(mode)


def _hostile_homes() -> Iterator[tuple[str, Path, Path]]:
    short = Path(tempfile.mkdtemp(prefix="cq"))
    yield "short", short, short / "a b'c\"d$(id>proof)`id`"
    long = Path(tempfile.mkdtemp(prefix="cq"))
    yield "long", long, long / ("x" * 60) / f"a b'c\"d$(id>{long}/proof)" / "`touch z`"


@pytest.mark.slow
@pytest.mark.parametrize("case", list(_hostile_homes()), ids=lambda c: c[0])
def test_a_home_with_spaces_quotes_and_commands_is_a_plain_path(
    case: tuple[str, Path, Path], project: Project
) -> None:
    """CATCHUP_HOME with spaces, quotes, $(…) and backticks: the server starts in exactly that
    folder and nothing in it runs. A long one gets a private, unpredictable socket folder."""
    kind, root, home = case
    reachable(root)  # mkdtemp makes it 0700: the server's user must reach the home below it
    env = {
        k: v
        for k, v in os.environ.items()
        if k == "CATCHUP_PG_BIN" or not k.startswith(("CATCHUP_", "PG"))
    }
    env.pop("DATABASE_URL", None)
    env["CATCHUP_HOME"] = str(home)
    project.write(job_toml("billing", command=["true"]))
    env["CATCHUP_CONFIG"] = str(project.config)
    command = [sys.executable, "-m", "catchup"]
    try:
        ran = subprocess.run(
            [*command, "run", "billing", "--period", "2026-10-01"],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr
        assert "attempt 1: succeeded" in ran.stdout
        assert "(started it" in ran.stderr and "copied" not in ran.stderr
        (version,) = home.glob("pg*/PG_VERSION")
        data = version.parent
        pid_lines = (data / "postmaster.pid").read_text().splitlines()
        assert Path(pid_lines[1]) == data  # the folder it was given, character for character
        socket_dir = Path(pid_lines[4])
        info = os.lstat(socket_dir)
        assert (info.st_mode & 0o777) == 0o700
        assert info.st_uid == pwd.getpwnam(processes.SERVER_USER).pw_uid
        if kind == "long":
            assert socket_dir.parent == Path(tempfile.gettempdir()) and socket_dir != data
        else:
            assert socket_dir == data
        assert (data / datafolder.PASSWORD_FILE).stat().st_mode & 0o777 == 0o600
    finally:
        subprocess.run([*command, "postgres", "stop"], env=env, capture_output=True, timeout=120)
    assert not list(root.rglob("proof")) and not Path("/proof").exists()
    assert not list(root.rglob("z")) and not Path("/z").exists()
    shutil.rmtree(root, ignore_errors=True)


def test_a_home_that_is_a_file_is_one_line(project: Project, tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("not a folder")
    project.write(job_toml("billing", command=["true"]))
    result = project.cli("jobs", env={"CATCHUP_HOME": str(target)})
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        f"catchup: CATCHUP_HOME: cannot use {target} for the embedded server: not a folder"
    ]
