"""One name for each period, in every command, and one meaning for a bare date in every option:
a Europe/Berlin daily job is seen by its local dates everywhere, and ``--since 2026-11-25``
is Berlin's midnight."""

from __future__ import annotations

import json
import re
from typing import Any

from fix_project import Project

NIGHTLY = """
[jobs.nightly]
schedule = "daily"
start = "2026-11-01"
timezone = "Europe/Berlin"
command = ["true"]
"""


def test_a_berlin_day_has_one_name_everywhere(project: Project) -> None:
    project.write(NIGHTLY)
    ran = project.cli("-q", "replay", "--since", "2026-11-01", "--until", "2026-11-21")
    assert ran.exit_code == 0, ran.output
    # jobs: the last success by its local date
    jobs = project.cli("-q", "jobs", "--json")
    assert json.loads(jobs.stdout)[0]["last_success"] == "2026-11-20"
    table = project.cli("-q", "jobs").stdout
    assert "2026-11-20" in table and "2026-11-19T23:00:00Z" not in table
    # scan: the same name for the last success and the oldest gap, in the table and Markdown
    window = ("--since", "2026-11-01", "--until", "2026-11-26")
    scanned = project.cli("-q", "scan", *window)
    assert scanned.exit_code == 1
    summary = next(line for line in scanned.stdout.splitlines() if "nightly" in line)
    assert "2026-11-21" in summary and "2026-11-20" in summary, scanned.stdout
    rows = [line for line in scanned.stdout.splitlines() if line.startswith("│ nightly")]
    assert len(rows) == 2 and not any("T23:00:00Z" in row for row in rows), scanned.stdout
    markdown = project.cli("-q", "scan", "--format", "markdown", *window).stdout
    assert "| nightly | daily (Europe/Berlin) |" in markdown
    assert "| nightly | missing | 2026-11-21 | 2026-11-25 | 5 |" in markdown
    # scan JSON: UTC starts, and the label beside them
    (job,) = json.loads(project.cli("-q", "scan", "--json", *window).stdout)["jobs"]
    assert job["gaps"] == [
        {
            "status": "missing",
            "first": "2026-11-20T23:00:00Z",
            "last": "2026-11-24T23:00:00Z",
            "periods": 5,
            "first_label": "2026-11-21",
            "last_label": "2026-11-25",
        }
    ]
    # history
    history = project.cli("-q", "history", "nightly", "--limit", "1", "--json")
    (attempt,) = json.loads(history.stdout)["attempts"]
    assert (attempt["label"], attempt["period"]) == ("2026-11-20", "2026-11-19T23:00:00Z")


def test_since_and_until_are_the_jobs_local_midnight(project: Project) -> None:
    project.write(NIGHTLY)
    args = ("-q", "replay", "--since", "2026-11-25", "--until", "2026-11-27", "--dry-run")
    text = project.cli(*args, "--each")
    assert text.exit_code == 0, text.output
    assert re.findall(r"would run nightly (\S+)", text.stdout) == ["2026-11-25", "2026-11-26"]
    summary = project.cli(*args).stdout
    assert "would run nightly: 2 periods (2 missing), 2026-11-25 .. 2026-11-26" in summary
    assert "  nightly 2026-11-25 .. 2026-11-26 (2 missing)" in summary
    data = json.loads(project.cli(*args, "--json").stdout)
    assert [(p["label"], p["start"], p["end"]) for p in data["periods"]] == [
        ("2026-11-25", "2026-11-24T23:00:00Z", "2026-11-25T23:00:00Z"),
        ("2026-11-26", "2026-11-25T23:00:00Z", "2026-11-26T23:00:00Z"),
    ]
    # an absolute time is absolute: 00:00Z on the 25th is inside Berlin's 25th, which started
    # before it, so the first period start at or after it is the 26th's
    absolute = project.cli(
        "-q",
        "replay",
        "--since",
        "2026-11-25T00:00:00Z",
        "--until",
        "2026-11-27",
        "--dry-run",
        "--each",
    )
    assert re.findall(r"would run nightly (\S+)", absolute.stdout) == ["2026-11-26"]
    # scan reads the same window the same way
    scanned = project.cli("-q", "scan", "--json", "--since", "2026-11-25", "--until", "2026-11-27")
    assert json.loads(scanned.stdout)["jobs"][0]["expected"] == 2


def test_run_and_replay_name_a_period_alike(project: Project) -> None:
    project.write(NIGHTLY)
    ran = project.cli("-q", "run", "nightly", "--period", "2026-11-20", "--json")
    assert ran.exit_code == 0, ran.output
    outcome = json.loads(ran.stdout)
    assert (outcome["label"], outcome["start"], outcome["end"]) == (
        "2026-11-20",
        "2026-11-19T23:00:00Z",
        "2026-11-20T23:00:00Z",
    )
    replayed = project.cli("-q", "replay", "--since", "2026-11-21", "--until", "2026-11-22")
    assert "nightly 2026-11-21" in replayed.stdout, replayed.stdout


def test_an_hourly_berlin_period_shows_its_local_time(project: Project) -> None:
    project.write(NIGHTLY.replace("daily", "hourly").replace("nightly", "export"))
    text = project.cli(
        "-q",
        "replay",
        "--since",
        "2026-11-25T10:00:00Z",
        "--until",
        "2026-11-25T12:00:00Z",
        "--dry-run",
        "--each",
    )
    assert "would run export 2026-11-25T10:00:00Z (11:00 CET)" in text.stdout, text.stdout
    assert "2026-11-25T11:00:00Z (12:00 CET)" in text.stdout


def test_a_november_calendar_has_thirty_days(project: Project, sql: Any) -> None:
    project.write(NIGHTLY)
    scanned = project.cli(
        "-q", "scan", "--calendar", "--since", "2026-11-01", "--until", "2026-12-01"
    )
    november = next(line for line in scanned.stdout.splitlines() if "2026-11 " in line)
    assert len(november.split()[1:]) == 30, scanned.stdout
    assert "day of month (Europe/Berlin)" in scanned.stdout
    # the summary's state columns add up to expected, waived included
    project.cli("-q", "mark", "nightly", "2026-11-02", "--skip", "--reason", "holiday")
    window = ("--since", "2026-11-01", "--until", "2026-11-30")  # all due, on any day from now
    (job,) = json.loads(project.cli("-q", "scan", "--json", *window).stdout)["jobs"]
    table = project.cli("-q", "scan", *window).stdout
    header = next(line for line in table.splitlines() if "expected" in line)
    assert "waived" in header
    row = next(line for line in table.splitlines() if line.startswith("│ nightly"))
    numbers = [int(cell) for cell in row.split("│")[3:11]]
    assert numbers[0] == job["expected"] == 29 and sum(numbers[1:]) == numbers[0]
    assert numbers[2] == job["waived"] == 1
