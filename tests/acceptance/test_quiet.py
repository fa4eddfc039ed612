"""No output the user did not ask for: `uv run catchup …` prints only what catchup prints (it
once printed uv's `Bytecode compiled 1332 files` on stderr, into every cron log of `tick`)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from paths import ROOT


@pytest.mark.network  # uv may consult the package index to check the lock
def test_uv_run_prints_nothing_of_its_own() -> None:
    uv = shutil.which("uv")
    assert uv is not None, "uv is how the README runs catchup; install it (pip install uv)"
    result = subprocess.run(
        [uv, "run", "--locked", "catchup", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("catchup, version ")
    assert result.stderr == ""
