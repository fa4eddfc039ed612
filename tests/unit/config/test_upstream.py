"""catchup/config/upstream.py: which upstream periods a period needs (across zones, DST nights and
schedule changes), the order that runs upstream first, and the graphs a config is refused for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from catchup import ConfigError, make_job
from catchup.config.job import Job
from catchup.config.loading import load_config
from catchup.config.upstream import Dependency, graph_problems, needed, ranks
from catchup.schedule import Period, Segment, Timeline, parse_schedule


def utc(year: int, month: int, day: int, hour: int = 0) -> datetime:
    return datetime(year, month, day, hour, tzinfo=UTC)


def job(schedule: str, start: str = "2026-01-01", zone: str = "UTC") -> Job:
    return make_job("j", schedule, start, command=["true"], timezone=zone)


def test_the_same_schedule_needs_the_same_period() -> None:
    daily = job("daily")
    day = Period(utc(2026, 3, 5), utc(2026, 3, 6))
    assert needed(daily.timeline, day, "overlapping") == [day]


@pytest.mark.parametrize(
    ("day", "hours"),
    [("2026-03-28", 24), ("2026-03-29", 23), ("2026-10-25", 25), ("2026-10-26", 24)],
)
def test_a_berlin_day_needs_every_utc_hour_inside_it(day: str, hours: int) -> None:
    """23 hours on the spring-forward night, 25 on the fall-back one."""
    export = job("hourly")
    billing = job("daily", zone="Europe/Berlin")
    start = billing.timeline.floor(datetime.fromisoformat(day + "T12:00:00+00:00"))
    assert start is not None
    period = billing.timeline.period(start)
    found = needed(export.timeline, period, "overlapping")
    assert len(found) == hours
    assert found[0].start == period.start and found[-1].end == period.end


def test_an_hour_needs_the_day_that_holds_it() -> None:
    daily, hourly = job("daily"), job("hourly")
    hour = hourly.timeline.period(utc(2026, 5, 7, 13))
    assert needed(daily.timeline, hour, "overlapping") == [Period(utc(2026, 5, 7), utc(2026, 5, 8))]


def test_previous_is_the_latest_period_that_ends_by_the_start() -> None:
    daily = job("daily")
    day = Period(utc(2026, 3, 5), utc(2026, 3, 6))
    assert needed(daily.timeline, day, "previous") == [Period(utc(2026, 3, 4), utc(2026, 3, 5))]
    hour = Period(utc(2026, 3, 5, 7), utc(2026, 3, 5, 8))  # a day is not over inside it
    assert needed(daily.timeline, hour, "previous") == [Period(utc(2026, 3, 4), utc(2026, 3, 5))]


def test_nothing_before_the_upstream_start_is_needed() -> None:
    late = job("hourly", start="2026-03-05T06:00:00Z")
    day = Period(utc(2026, 3, 5), utc(2026, 3, 6))
    found = needed(late.timeline, day, "overlapping")
    assert len(found) == 18 and found[0].start == utc(2026, 3, 5, 6)
    first = Period(utc(2026, 1, 1), utc(2026, 1, 2))
    assert needed(job("daily").timeline, first, "previous") == []
    assert needed(late.timeline, first, "overlapping") == []


def test_the_upstream_schedule_history_is_respected() -> None:
    """Daily until March 10, hourly from then: a week's period needs the old days and then
    the new hours."""
    daily = parse_schedule("daily", "UTC").bound(utc(2026, 1, 1), None)
    hourly = parse_schedule("hourly", "UTC").bound(utc(2026, 3, 10), None)
    history = Timeline((Segment(None, daily), Segment(utc(2026, 3, 10), hourly)), utc(2026, 1, 1))
    week = Period(utc(2026, 3, 9), utc(2026, 3, 11))
    found = needed(history, week, "overlapping")
    assert found[0] == Period(utc(2026, 3, 9), utc(2026, 3, 10))
    assert len(found) == 1 + 24 and all(p.end - p.start == timedelta(hours=1) for p in found[1:])


def test_the_graph_problems_name_the_job_and_the_cycle() -> None:
    up = Dependency
    problems = graph_problems(
        {
            "a": (up("b"),),
            "b": (up("c"),),
            "c": (up("a"),),
            "d": (up("nope"),),
            "e": (up("e"),),
            "balance": (up("balance", "previous"), up("a")),
        }
    )
    assert problems["a"] == "a cycle: a → b → c → a"
    assert problems["d"] == "nope is not a job of this config"
    assert "cannot wait for its own periods" in problems["e"]
    assert "balance" not in problems  # its own previous day is no deadlock


def test_its_own_previous_period_needs_a_policy_that_runs_every_period() -> None:
    """With catchup = "latest" or "none", tick never runs the older periods it leaves, so a
    job waiting for its own previous period would wait for ever after the first it left."""
    own = {"balance": (Dependency("balance", "previous"),)}
    assert graph_problems(own, {"balance": "all"}) == {}
    for policy in ("latest", "none"):
        said = graph_problems(own, {"balance": policy})["balance"]
        assert said == (
            f'balance waits for its own previous period, but catchup = "{policy}" leaves older '
            'periods unrun, so each would wait for ever (catchup = "all")'
        )


def test_upstream_jobs_rank_first() -> None:
    order = ranks(
        {
            "balance": (Dependency("billing"), Dependency("balance", "previous")),
            "billing": (Dependency("export"),),
            "export": (),
        }
    )
    assert order == {"export": 0, "billing": 1, "balance": 2}


CHAIN = """\
[jobs.export]
schedule = "hourly"
start = "2026-10-01"
command = ["true"]

[jobs.billing]
schedule = "daily"
start = "2026-10-01"
command = ["true"]
after = ["export", "invoices"]
"""


@pytest.mark.parametrize(
    ("extra", "line", "said"),
    [
        ("", 10, "jobs.billing.after: invoices is not a job of this config"),
        (
            '\n[jobs.invoices]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
            'after = ["billing"]\n',
            10,
            "jobs.billing.after: a cycle: billing → invoices → billing",
        ),
        (
            '\n[jobs.invoices]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
            'after = [{ job = "export", periods = "next" }]\n',
            16,
            "jobs.invoices.after: entry 1: periods must be overlapping or previous, got 'next'",
        ),
        (
            '\n[jobs.invoices]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
            'catchup = "latest"\nafter = [{ job = "invoices", periods = "previous" }]\n',
            17,
            "jobs.invoices.after: invoices waits for its own previous period, but catchup = "
            '"latest" leaves older periods unrun, so each would wait for ever (catchup = "all")',
        ),
    ],
)
def test_a_bad_after_is_one_line_with_file_and_line(
    tmp_path: Path, extra: str, line: int, said: str
) -> None:
    path = tmp_path / "catchup.toml"
    path.write_text(CHAIN + extra)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert f"{path}:{line}: {said}" in caught.value.problems


def test_jobs_in_code_are_checked_too() -> None:
    from catchup import Catchup

    billing = make_job("billing", "daily", "2026-10-01", command=["true"], after=["export"])
    with pytest.raises(ConfigError) as caught:
        Catchup(jobs=[billing], dsn="postgresql://nobody@127.0.0.1:1/none")
    assert caught.value.problems == ["jobs.billing.after: export is not a job of this config"]
