"""A team's first week with catchup (issue 23): what cannot start counts no attempt, and a job
runs in its config file's folder whatever folder the scheduler starts catchup in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import Project

DAILY = '[jobs.{name}]\nschedule = "daily"\nstart = "2026-10-01"\n'


def from_root(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """catchup started from / (as a CronJob or a systemd unit would), its config by path."""
    env = project.env()
    return subprocess.run(
        [sys.executable, "-m", "catchup", "--config", str(project.config), *args],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_relative_command_runs_in_the_config_files_folder(project: Project, sql: Any) -> None:
    """`command = ["./close.sh"]` run by a scheduler from / failed `cannot start`: the
    database was chosen by the config's folder, the command by the process's. Now both are
    the config's folder (the job runs there too)."""
    script = project.path / "close.sh"
    script.write_text('#!/bin/sh\npwd > ran-in\necho "$CATCHUP_PERIOD" >> ran-in\n')
    script.chmod(0o755)
    project.write(DAILY.format(name="close") + 'command = ["./close.sh"]\n')
    ran = from_root(project, "run", "close", "--period", "2026-10-02")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (project.path / "ran-in").read_text().split() == [
        str(project.path.resolve()),
        "2026-10-02",
    ]


def test_a_call_module_beside_the_config_is_found(project: Project, sql: Any) -> None:
    (project.path / "myjobs.py").write_text(
        "from pathlib import Path\n"
        "def export(ctx):\n"
        "    Path(__file__).with_name('exported').write_text(ctx.period)\n"
    )
    project.write(DAILY.format(name="export") + 'call = "myjobs:export"\n')
    ran = from_root(project, "run", "export", "--period", "2026-10-02")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (project.path / "exported").read_text() == "2026-10-02"


def test_what_cannot_start_counts_no_attempt(project: Project, sql: Any) -> None:
    """A missing module, a missing program, a missing folder: `run` exits 2 and claims
    nothing; `tick` runs the other jobs, reports those, exits 2; three ticks of a bad deploy
    leave no period exhausted; doctor names each."""
    project.write(
        DAILY.format(name="nomodule")
        + 'call = "no_such_module_here:export"\ncatchup = "latest"\n'
        + DAILY.format(name="noprogram")
        + 'command = ["./missing.sh"]\ncatchup = "latest"\n'
        + DAILY.format(name="nofolder")
        + 'command = ["true"]\nworkdir = "gone"\ncatchup = "latest"\n'
        + DAILY.format(name="fine")
        + 'command = ["true"]\ncatchup = "latest"\n'
    )
    ran = from_root(project, "run", "nomodule", "--period", "2026-10-02")
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "cannot load no_such_module_here:export: ModuleNotFoundError" in ran.stdout
    assert "no attempt counted" in ran.stdout
    for _ in range(3):
        ticked = from_root(project, "tick")
        assert ticked.returncode == 2, ticked.stdout + ticked.stderr
        assert "cannot start './missing.sh': not found" in ticked.stdout
        assert "its folder" in ticked.stdout and "gone does not exist" in ticked.stdout
        assert "3 could not start (no attempt counted)" in ticked.stdout
    rows = sql(
        "SELECT j.name, r.status, r.attempt, r.failures FROM {schema}.runs r "
        "JOIN {schema}.jobs j ON j.id = r.job_id ORDER BY 1"
    )
    assert rows == [("fine", "succeeded", 1, 0)]
    assert sql("SELECT count(*) FROM {schema}.history h") == [(1,)]
    doctor = from_root(project, "doctor")
    assert doctor.returncode == 1, doctor.stdout
    for name in ("nomodule", "noprogram", "nofolder"):
        assert f"✗ jobs: {name}: cannot" in doctor.stdout, doctor.stdout


def test_a_module_that_fails_to_import_is_reported_by_doctor_without_running_it(
    project: Project, tmp_path: Path
) -> None:
    """doctor imports every call in a child process: an import error is its finding, and
    what the module does at import time never happens in doctor's own process."""
    marker = tmp_path / "imported-in"
    (project.path / "broken.py").write_text(
        f"import os\nopen({str(marker)!r}, 'a').write(str(os.getpid()) + '\\n')\n"
        "raise ImportError('the vendored client is missing')\n"
    )
    project.write(DAILY.format(name="broken") + 'call = "broken:run"\n')
    doctor = project.cli("doctor")
    assert doctor.exit_code == 1, doctor.output
    assert "broken: cannot load broken:run: ImportError: the vendored client is missing" in (
        doctor.stdout
    )
    assert marker.read_text().split() != [str(os.getpid())]


# --- the smaller findings --------------------------------------------------------------------


def test_openmetrics_exits_0_with_gaps_so_a_textfile_collector_publishes(
    project: Project,
) -> None:
    project.write(DAILY.format(name="billing") + 'command = ["true"]\n')
    metrics = project.cli("scan", "--format", "openmetrics")
    assert metrics.exit_code == 0, metrics.output
    assert 'catchup_missing_periods{job="billing"}' in metrics.stdout
    assert project.cli("-q", "scan", "--format", "json").exit_code == 1  # the others still 1


def test_an_exhausted_period_says_how_to_run_it_again(project: Project, sql: Any) -> None:
    project.write(DAILY.format(name="billing") + 'command = ["false"]\nmax_attempts = 1\n')
    assert project.cli("run", "billing", "--period", "2026-10-02").exit_code == 1
    again = project.cli("run", "billing", "--period", "2026-10-02")
    assert again.exit_code == 0, again.output
    said = " ".join(again.stdout.split())
    assert "exhausted: failed 1 times" in said
    assert "catchup replay --job billing --since 2026-10-02 --max 1 --retry-exhausted" in said


def test_ages_are_whole_seconds_and_scan_json_has_the_scheduler(project: Project, sql: Any) -> None:
    """`(6.07292s ago)` became `(6s ago)`; scan --json now has the scheduler's pulse, which
    every other format had."""
    import json

    project.write(DAILY.format(name="billing") + 'command = ["true"]\n')
    assert project.cli("migrate").exit_code == 0
    sql(
        "INSERT INTO {schema}.ticks (host, at) VALUES "
        "('web-1', clock_timestamp() - interval '6.07292 seconds')"
    )
    table = project.cli("scan")
    assert "from web-1 (6s ago" in table.stdout or "from web-1 (7s ago" in table.stdout
    assert "6.07" not in table.stdout
    document = json.loads(project.cli("scan", "--json").stdout)
    assert document["scheduler"]["last_host"] == "web-1"
    assert document["scheduler"]["last_tick"].endswith("Z")


def test_global_options_are_accepted_after_the_command(project: Project) -> None:
    """`catchup tick -q` was `No such option: -q`; a command's own option keeps its value
    even when that value looks like a global option."""
    project.write(DAILY.format(name="billing") + 'command = ["true"]\n')
    quiet = project.cli("jobs", "-q")
    assert quiet.exit_code == 0, quiet.output
    assert "database:" not in quiet.stderr
    marked = project.cli("mark", "billing", "2026-10-02", "--skip", "--reason", "-q")
    assert marked.exit_code == 0, marked.output
    assert "database:" in marked.stderr  # -q was the reason, not the flag
    shown = project.cli("history", "billing", "--period", "2026-10-02", "-q", "--json")
    assert shown.exit_code == 0 and '"-q"' in shown.stdout


def test_doctor_suggests_a_delay_longer_than_the_one_the_job_has(project: Project) -> None:
    project.write(DAILY.format(name="billing") + 'command = ["true"]\ndelay = "2h"\n')
    doctor = project.cli("doctor")
    said = " ".join(doctor.stdout.split())
    assert 'for billing, delay = "2h7m"' in said, said
    assert 'delay = "7m")' not in said
