"""``catchup scan`` as people and CI use it: tables, calendar, JSON, Markdown, OpenMetrics."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from fix_project import Project, job_toml

ANSI = re.compile(r"\x1b\[")


def setup(project: Project, sql: Any, *, start: str = "2026-10-01", extra: str = "") -> None:
    project.write(
        f'[jobs.billing]\nschedule = "daily"\nstart = "{start}"\ncommand = ["true"]\n'
        "max_attempts = 2\n"
        f'[jobs.export]\nschedule = "hourly"\nstart = "2026-11-20"\ncommand = ["true"]\n{extra}'
    )
    assert project.cli("migrate").exit_code == 0
    project.cli("run", "billing", "--period", "2026-10-01")  # registers the jobs


def put(
    sql: Any, job: str, start: datetime, status: str, *, failures: int = 0, lease: str = "-1 hour"
) -> None:
    end = start + (timedelta(days=1) if job == "billing" else timedelta(hours=1))
    sql(
        "INSERT INTO {schema}.runs (job_id, period_start, period_end, status, attempt, failures,"
        " lease_expires_at) SELECT id, %s, %s, %s, 1, %s, clock_timestamp() + %s::interval"
        " FROM {schema}.jobs WHERE name = %s ON CONFLICT DO NOTHING",
        [start, end, status, failures, lease, job],
    )


def day(n: int) -> datetime:
    return datetime(2026, 10, 1, tzinfo=UTC) + timedelta(days=n)


def test_json_shape_counts_and_exit_code(project: Project, sql: Any) -> None:
    setup(project, sql)
    for n in range(1, 10):
        put(sql, "billing", day(n), "succeeded")
    put(sql, "billing", day(4), "failed", failures=1)  # already succeeded: ignored
    put(sql, "billing", day(10), "failed", failures=1)
    put(sql, "billing", day(11), "failed", failures=2)  # exhausted (max_attempts = 2)
    put(sql, "billing", day(12), "running")  # stale: lease expired
    put(sql, "billing", day(13), "running", lease="1 hour")  # live: not a gap
    put(sql, "billing", day(14), "waived")
    result = project.cli("-q", "scan", "--json", "--job", "billing", "--until", "2026-10-20")
    assert result.exit_code == 1, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"generated_at", "since", "until", "jobs", "scheduler"}
    assert data["since"] == "2026-10-01T00:00:00Z" and data["until"] == "2026-10-20T00:00:00Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", data["generated_at"])
    (job,) = data["jobs"]
    assert {
        k: job[k]
        for k in (
            "expected",
            "succeeded",
            "waived",
            "running",
            "missing",
            "failed",
            "exhausted",
            "stale",
        )
    } == {
        "expected": 19,
        "succeeded": 10,
        "waived": 1,
        "running": 1,
        "missing": 4,
        "failed": 1,
        "exhausted": 1,
        "stale": 1,
    }
    assert job["gaps"] == [
        {
            "status": "failed",
            "first": "2026-10-11T00:00:00Z",
            "last": "2026-10-11T00:00:00Z",
            "periods": 1,
            "first_label": "2026-10-11",
            "last_label": "2026-10-11",
        },
        {
            "status": "exhausted",
            "first": "2026-10-12T00:00:00Z",
            "last": "2026-10-12T00:00:00Z",
            "periods": 1,
            "first_label": "2026-10-12",
            "last_label": "2026-10-12",
        },
        {
            "status": "stale",
            "first": "2026-10-13T00:00:00Z",
            "last": "2026-10-13T00:00:00Z",
            "periods": 1,
            "first_label": "2026-10-13",
            "last_label": "2026-10-13",
        },
        {
            "status": "missing",
            "first": "2026-10-16T00:00:00Z",
            "last": "2026-10-19T00:00:00Z",
            "periods": 4,
            "first_label": "2026-10-16",
            "last_label": "2026-10-19",
        },
    ]


def test_no_gaps_exits_0(project: Project, sql: Any) -> None:
    setup(project, sql)
    for n in range(5):
        put(sql, "billing", day(n), "succeeded")
    result = project.cli("-q", "scan", "--job", "billing", "--until", "2026-10-06")
    assert result.exit_code == 0, result.output
    assert "no gaps" in result.stdout


def test_since_until_edges(project: Project, sql: Any) -> None:
    setup(project, sql)
    since_mid_day = project.cli(
        "-q",
        "scan",
        "--json",
        "--job",
        "billing",
        "--since",
        "2026-10-03T12:00:00Z",
        "--until",
        "2026-10-06",
    )
    (job,) = json.loads(since_mid_day.stdout)["jobs"]
    assert job["expected"] == 2  # 10-04 and 10-05: --since inclusive, --until exclusive
    assert job["gaps"][0]["first"] == "2026-10-04T00:00:00Z"
    backwards = project.cli("scan", "--since", "2026-10-05", "--until", "2026-10-01")
    assert backwards.exit_code == 2 and "is not before --until" in backwards.stderr
    future = project.cli("-q", "scan", "--json", "--job", "billing", "--since", "2099-01-01")
    assert json.loads(future.stdout)["jobs"][0]["expected"] == 0
    assert future.exit_code == 0


def test_paused_job_is_reported_not_a_gap(project: Project, sql: Any) -> None:
    setup(project, sql)
    sql("UPDATE {schema}.jobs SET paused_at = clock_timestamp() WHERE name = 'billing'")
    result = project.cli("-q", "scan", "--json", "--job", "billing", "--until", "2026-10-05")
    (job,) = json.loads(result.stdout)["jobs"]
    assert job["paused"] is True and job["missing"] == 3 and job["gaps"] == []
    assert result.exit_code == 0


def test_tables_are_plain_on_a_pipe(project: Project, sql: Any) -> None:
    setup(project, sql)
    result = project.run("scan", "--until", "2026-11-25")
    assert result.returncode == 1
    assert not ANSI.search(result.stdout)
    assert "gaps, oldest first" in result.stdout
    assert "2026-10-02" in result.stdout  # daily periods shown as dates
    assert "2026-11-20T00:00:00Z" in result.stdout  # hourly ones as times


def test_calendar_renders_a_month_of_days_and_a_week_of_hours(project: Project, sql: Any) -> None:
    setup(project, sql, start="2026-10-01")
    for n in range(31):
        if n not in (3, 4, 10):
            put(sql, "billing", day(n), "succeeded")
    put(sql, "billing", day(10), "failed", failures=1)
    hour0 = datetime(2026, 11, 20, tzinfo=UTC)
    for h in range(7 * 24):
        if h != 30:
            put(sql, "export", hour0 + timedelta(hours=h), "succeeded")
    result = project.cli(
        "-q",
        "scan",
        "--calendar",
        "--since",
        "2026-10-01",
        "--until",
        "2026-11-01",
        "--job",
        "billing",
    )
    lines = result.stdout.splitlines()
    october = next(line for line in lines if line.strip().startswith("2026-10 "))
    cells = october.split()[1:]
    assert len(cells) == 31
    assert cells[3] == cells[4] == "□"  # missing
    assert cells[10] == "✗"  # failed
    assert cells.count("■") == 28
    assert "legend:" in result.stdout
    hourly = project.cli("-q", "scan", "--calendar", "--job", "export", "--until", "2026-11-27")
    rows = [
        line.split() for line in hourly.stdout.splitlines() if re.match(r"\s+2026-11-\d\d ", line)
    ]
    assert [row[0] for row in rows] == [f"2026-11-{d}" for d in range(20, 27)]
    assert all(len(row) == 25 for row in rows)
    assert rows[1][1 + 6] == "□"  # hour 30 = day 2, 06:00
    assert sum(row.count("■") for row in rows) == 7 * 24 - 1


def test_markdown_and_openmetrics(project: Project, sql: Any) -> None:
    setup(project, sql)
    put(sql, "billing", day(1), "failed", failures=1)
    md = project.cli("-q", "scan", "--format", "markdown", "--until", "2026-10-04")
    assert md.stdout.startswith("### catchup scan: ")
    # expected, then succeeded waived missing failed exhausted stale running: they add up
    assert (
        "| billing | daily | 3 | 1 | 0 | 1 | 1 | 0 | 0 | 0 | 2026-10-02 | 2026-10-01 |" in md.stdout
    )
    om = project.cli(
        "-q", "scan", "--format", "openmetrics", "--job", "billing", "--until", "2026-10-04"
    )
    assert 'catchup_missing_periods{job="billing"} 1' in om.stdout
    assert 'catchup_failed_periods{job="billing"} 1' in om.stdout
    expected_ts = int(day(0).timestamp())
    assert f'catchup_last_success_timestamp_seconds{{job="billing"}} {expected_ts}' in om.stdout
    assert om.stdout.endswith("# EOF\n")
    assert om.exit_code == 0  # gaps are in the metrics: a textfile collector publishes them


def test_scan_errors(project: Project) -> None:
    project.write(job_toml("billing", command=["true"]))
    unknown = project.cli("scan", "--job", "nope")
    assert unknown.exit_code == 2 and "unknown job 'nope'" in unknown.stderr
    down = project.cli("--dsn", "postgresql://x:pw@127.0.0.1:1/x", "scan")
    assert down.exit_code == 3 and "pw" not in down.stderr.replace("postgresql", "")
    bad = project.cli("scan", "--format", "yaml")
    assert bad.exit_code == 2


def test_output_saves_svg_html_and_text(project: Project, sql: Any) -> None:
    setup(project, sql)
    for name, marker in (("r.svg", "<svg"), ("r.html", "<html"), ("r.txt", "gaps, oldest first")):
        path = project.path / name
        result = project.cli("-q", "scan", "--until", "2026-10-04", "--output", str(path))
        assert result.exit_code == 1  # gaps, as ever
        text = path.read_text()
        assert marker in text and "billing" in text
    assert "legend:" in (project.path / "r.txt").read_text()
    bad = project.cli("-q", "scan", "--output", str(project.path / "r.pdf"))
    assert bad.exit_code == 2 and "must end in .svg, .html or .txt" in bad.stderr


def test_piped_output_has_no_trailing_spaces(project: Project, sql: Any) -> None:
    """Rich pads a table's title and its lines to the width: on a pipe no line ends in a space
    (a diff, a grep for `$`, a doc example, each see what was written), at any width."""
    setup(project, sql)
    put(sql, "billing", day(3), "failed", failures=1)
    commands = [
        ["scan", "--until", "2026-10-20"],
        ["jobs"],
        ["history", "billing"],
        ["why", "billing", "2026-10-04"],
        ["explain", "billing", "--count", "3"],
    ]
    for columns in ("200", "80"):
        for args in commands:
            result = project.cli(*args, env={"COLUMNS": columns})
            assert result.exit_code in (0, 1), result.output
            padded = [line for line in result.stdout.splitlines() if line != line.rstrip()]
            assert padded == [], (args, columns, padded)
            assert result.stdout.strip(), args


def test_a_title_at_80_columns_breaks_between_its_phrases(project: Project, sql: Any) -> None:
    """Too narrow for the table, scan's title goes on two lines broken at a `·`, never inside
    "database clock 2026-…" (nor inside the window)."""
    setup(project, sql)
    result = project.cli("scan", "--until", "2026-10-20", env={"COLUMNS": "80"})
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "catchup scan · 2026-10-01T00:00:00Z .. 2026-10-20T00:00:00Z", lines[:3]
    assert re.fullmatch(r"database clock \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", lines[1]), lines[:3]
