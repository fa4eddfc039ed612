"""Schedules and time on the real PostgreSQL: the SQL generator against Python's arithmetic,
local-time jobs end to end, and a schedule change that must not invent past gaps."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from fix_db import Database, nothing_written
from fix_project import Project
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catchup.ledger import Ledger
from catchup.schedule import Timeline, WallStep, parse_schedule

ZONES = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "Europe/Dublin",
    "America/Santiago",
    "Pacific/Chatham",
    "UTC",
]
# Not Africa/Casablanca: the time zone database inside the embedded PostgreSQL 18 puts
# 2026-10-01 at +00 where Python's tzdata says +01; `catchup doctor` reports such a disagreement.


@pytest.fixture
def ledger(database: Database, schema: str) -> Iterator[Ledger]:
    conn = psycopg.connect(database.conninfo, autocommit=True)
    conn.execute("SET TimeZone = 'Asia/Tokyo'")  # a session zone that must not matter
    ledger = Ledger(conn, schema)
    ledger.migrate()
    yield ledger
    conn.close()


calendar_cases = st.tuples(
    st.sampled_from(["daily", "weekly", "monthly", "every 2 days", "every 3 weeks"]),
    st.sampled_from(ZONES),
    st.datetimes(min_value=datetime(2005, 1, 1), max_value=datetime(2035, 1, 1)),
    st.integers(0, 400),  # window start, in days after the start
    st.integers(1, 200),  # periods in the window
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=calendar_cases)
def test_sql_generator_agrees_with_python(ledger: Ledger, case: Any) -> None:
    """local_series (sql/migrations/0005) and catchup.schedule give the same period starts for
    wall-clock calendar schedules, across DST changes, whatever the local time of the start
    (every-N schedules start at it, so it may fall into a DST gap or overlap)."""
    text, tz, start_wall, offset_days, n = case
    schedule = parse_schedule(text, tz)
    start = start_wall.replace(tzinfo=UTC)
    line = Timeline.single(schedule, start)
    bound = line.segments[0].schedule
    assert isinstance(bound, WallStep) or tz == "UTC"
    if not isinstance(bound, WallStep):
        return  # in UTC, daily and weekly are fixed steps that SQL adds itself
    lo = line.ceil(line.first + timedelta(days=offset_days))
    python = []
    for s in line.starts(lo, datetime(2100, 1, 1, tzinfo=UTC)):
        python.append(s)
        if len(python) == n:
            break
    rows = ledger.conn.execute(
        ledger._q("local_series"),
        {
            "origin": bound.origin,
            "step": bound.interval_sql,
            "k0": bound.k_of(lo),
            "n": n,
            "tz": tz,
        },
    ).fetchall()
    assert [r[0] for r in rows] == python


def _config(schedule: str, *, tz: str = "UTC", start: str = "2026-10-01") -> str:
    return (
        f'[jobs.billing]\nschedule = "{schedule}"\nstart = "{start}"\ntimezone = "{tz}"\n'
        'command = ["true"]\n'
    )


def test_daily_to_hourly_creates_no_past_gaps(project: Project, sql: Any) -> None:
    (now,) = sql("SELECT clock_timestamp()")[0]
    today = now.astimezone(UTC).date()
    start = today - timedelta(days=60)
    project.write(_config("daily", start=start.isoformat()))
    done = project.cli(
        "mark", "billing", f"{start}..{today - timedelta(days=2)}", "--done", "--reason", "t"
    )
    assert done.exit_code == 0, done.output
    assert project.cli("run", "billing").exit_code == 0  # the latest due day
    clean = project.cli("-q", "scan", "--json")
    assert clean.exit_code == 0, clean.output
    expected_days = json.loads(clean.stdout)["jobs"][0]["expected"]

    project.write(_config("hourly", start=start.isoformat()))
    # two replicas notice the change at once: it is recorded once
    procs = [project.spawn("-q", "jobs") for _ in range(2)]
    for proc in procs:
        _out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    rows = sql(
        "SELECT since, schedule, timezone FROM {schema}.schedules s "
        "JOIN {schema}.jobs j ON j.id = s.job_id ORDER BY since"
    )
    assert [(r[1], r[2]) for r in rows] == [("daily", "UTC"), ("hourly", "UTC")]
    (now,) = sql("SELECT clock_timestamp()")[0]
    midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    assert rows[1][0] == midnight + timedelta(days=1)  # after the day in progress ends
    events = sql("SELECT action, previous, reason FROM {schema}.events WHERE action = 'schedule'")
    assert events == [
        ("schedule", "daily (UTC)", f"hourly (UTC) from {rows[1][0]:%Y-%m-%dT%H:%M:%SZ}")
    ]

    after = project.cli("-q", "scan", "--json")
    assert after.exit_code == 0, after.output  # no gaps: the past stays daily
    job = json.loads(after.stdout)["jobs"][0]
    assert job["expected"] == expected_days and job["missing"] == 0
    assert job["schedule"] == "hourly"
    full = project.cli("-q", "scan", "--json", "--full")
    assert json.loads(full.stdout)["jobs"][0]["expected"] == expected_days
    replay = project.cli("-q", "replay", "--since", start.isoformat(), "--json")
    assert replay.exit_code == 0, replay.output
    assert json.loads(replay.stdout)["periods"] == []
    history = project.cli("-q", "history", "billing")
    assert "daily (UTC)" in history.stdout and "hourly (UTC) from" in history.stdout
    # explain shows the day in progress (still daily), then hours
    explained = project.cli("-q", "explain", "billing", "--count", "3")
    assert explained.exit_code == 0, explained.output
    lines = [line for line in explained.stdout.splitlines() if line.startswith("│")]
    assert "│ 24h " in lines[0] and "│ 1h " in lines[1], explained.stdout
    assert "'daily' until" in " ".join(explained.stdout.split())


def test_a_local_daily_job_runs_local_days(project: Project, sql: Any, tmp_path: Any) -> None:
    log = tmp_path / "periods.log"
    project.write(
        '[jobs.billing]\nschedule = "daily"\nstart = "2026-10-20"\ntimezone = "Europe/Berlin"\n'
        f'command = ["sh", "-c", "echo {{period}} {{period_start}} >> {log}"]\n'
    )
    ran = project.cli("run", "billing", "--period", "2026-10-25")  # the 25-hour day
    assert ran.exit_code == 0, ran.output
    assert log.read_text().split() == ["2026-10-25", "2026-10-24", "22:00:00+00:00"]
    assert sql("SELECT period_start, period_end FROM {schema}.runs") == [
        (datetime(2026, 10, 24, 22, tzinfo=UTC), datetime(2026, 10, 25, 23, tzinfo=UTC))
    ]
    wrong = project.cli("run", "billing", "--period", "2026-10-25T00:00:00Z")
    assert wrong.exit_code == 2
    assert "not a period start" in wrong.stderr and "2026-10-25" in wrong.stderr
    scan = project.cli("-q", "scan", "--json", "--until", "2026-10-28")
    job = json.loads(scan.stdout)["jobs"][0]
    assert job["timezone"] == "Europe/Berlin"
    assert [(g["first"], g["last"], g["periods"]) for g in job["gaps"]] == [
        ("2026-10-19T22:00:00Z", "2026-10-23T22:00:00Z", 5),
        # --until is the job's local midnight: the 28th in Berlin is not included
        ("2026-10-25T23:00:00Z", "2026-10-26T23:00:00Z", 2),
    ]


@pytest.mark.parametrize("full", [False, True])
def test_a_cron_job_in_new_york_scans_like_brute_force(
    project: Project, sql: Any, full: bool
) -> None:
    """A 02:30 weekday cron across the November fall-back: one period per weekday."""
    project.write(_config("30 2 * * 1-5", tz="America/New_York", start="2026-10-26"))
    marked = project.cli("mark", "billing", "2026-10-26T06:30:00Z", "--done", "--reason", "t")
    assert marked.exit_code == 0, marked.output
    marked = project.cli(
        "mark", "billing", "2026-10-30T06:30:00Z..2026-11-04T07:30:00Z", "--skip", "--reason", "t"
    )
    assert marked.exit_code == 0, marked.output
    args = ["-q", "scan", "--json", "--until", "2026-11-07"] + (["--full"] if full else [])
    job = json.loads(project.cli(*args).stdout)["jobs"][0]
    # Oct 26 … Nov 6, weekdays: 10 periods; EDT until Nov 1, EST after
    assert job["expected"] == 10 and job["waived"] == 4 + 1
    assert [(g["first"], g["last"], g["periods"]) for g in job["gaps"]] == [
        ("2026-10-27T06:30:00Z", "2026-10-29T06:30:00Z", 3),
        ("2026-11-05T07:30:00Z", "2026-11-06T07:30:00Z", 2),
    ]


def test_bad_time_zone_is_one_line_and_writes_nothing(project: Project, sql: Any) -> None:
    project.write(_config("daily", tz="Europe/Berln"))
    result = project.cli("scan")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"catchup: {project.config}:7: jobs.billing.timezone: unknown time zone "
        "'Europe/Berln' (did you mean 'Europe/Berlin'?); use an IANA name like Europe/Berlin"
    ]
    assert nothing_written(project.database, project.schema)


def test_explain_flags_a_0230_berlin_job(project: Project) -> None:
    project.write(_config("30 2 * * *", tz="Europe/Berlin"))
    result = project.cli("-q", "explain", "billing", "--from", "2027-03-27", "--count", "3")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "02:30 on 2027-03-28 does not exist in Europe/Berlin" in text
    assert "02:30 on 2027-10-31 happens twice in Europe/Berlin" in text
    assert "start (Europe/Berlin)" in text
    assert "03:30 CEST" in text
    # the spring-forward night: the period's end moves, DST does not end (it starts); no
    # "ends" that could read as DST ending after the DST column's name
    assert (
        "DST clocks go forward 1h at 2027-03-28T01:00:00Z; the period runs until 03:30 CEST" in text
    )
    assert "DST the period starts at 03:30 CEST" in text
    assert "ends 03:30" not in text and "ends at" not in text and "DST starts" not in text


def test_explain_at_the_southern_spring_forward_says_the_period_moves(project: Project) -> None:
    """Sydney's clocks go forward in October: the same words, no hemisphere assumed."""
    project.write(_config("30 2 * * *", tz="Australia/Sydney"))
    result = project.cli("-q", "explain", "billing", "--from", "2027-10-02", "--count", "3")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert (
        "DST clocks go forward 1h at 2027-10-02T16:00:00Z; the period runs until 03:30 AEDT" in text
    )
    assert "DST the period starts at 03:30 AEDT" in text
    assert "DST ends" not in text and "ends 03:30" not in text and "ends at" not in text


def test_listed_starts_in_small_batches_give_the_same_gaps(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The starts of wall-clock schedules go to the server in batches; runs of missing periods
    cut by a batch boundary are joined again."""
    from catchup.scan import unkeyed

    project.write(_config("0 */6 * * *", tz="Europe/Berlin", start="2026-11-01"))
    marked = project.cli(
        "mark", "billing", "2026-11-03T05:00:00Z..2026-11-05T23:00:00Z", "--done", "--reason", "t"
    )
    assert marked.exit_code == 0, marked.output
    full = json.loads(project.cli("-q", "scan", "--json", "--full").stdout)["jobs"][0]["gaps"]
    monkeypatch.setattr(unkeyed, "LISTED_BATCH", 3)
    small = json.loads(project.cli("-q", "scan", "--json").stdout)["jobs"][0]["gaps"]
    assert small == full
    assert len(full) == 2 and full[0]["periods"] == 9  # Nov 1 00:00 … Nov 3 00:00 local


def test_a_period_that_is_not_a_local_boundary_writes_nothing(project: Project, sql: Any) -> None:
    project.write(_config("daily", tz="America/New_York"))
    said = []
    for args in (
        ("run", "billing", "--period", "2026-10-25T00:00:00Z"),  # 20:00 the day before, local
        ("mark", "billing", "2026-10-25T00:00:00Z", "--done", "--reason", "x"),
        ("reset", "billing", "2026-09-30", "--reason", "x"),  # before the first period
    ):
        result = project.cli("-q", *args)
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        said.append(line)
    assert said[0].endswith(
        "is not a period start of schedule 'daily'; the period containing it starts 2026-10-24"
    )
    assert "is before the job's first period (2026-10-01)" in said[2]
    assert sql("SELECT count(*) FROM {schema}.jobs") == [(0,)]
    assert sql("SELECT count(*) FROM {schema}.schedules") == [(0,)]
