"""Which period a ping settles: the rule at its edges (on time, late, early, across DST), pure:
the moment a ping arrives is passed in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from catchup.config.loading import make_job
from catchup.errors import ConfigError
from catchup.pings.attribution import early, named_period, ping_period

UUID = "5bf66975-d4c7-4bf5-bcc8-b8d8a82ea278"


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def _start(job_text: str, at: str) -> str | None:
    """The start of the period a ping arriving at ``at`` settles, of a Berlin 02:30 job."""
    job = make_job("vendor", job_text, "2026-03-20", timezone="Europe/Berlin", ping=UUID)
    period = ping_period(job, _at(at))
    return None if period is None else f"{period.start:%Y-%m-%dT%H:%M}"


def test_an_observed_job_has_no_command_and_its_ping_is_kept_out_of_its_repr() -> None:
    job = make_job("vendor", "daily", "2026-03-20", ping=UUID.upper())
    assert job.observed and job.ping == UUID
    assert UUID not in repr(job)
    runs = make_job("export", "daily", "2026-03-20", command=["true"], ping=UUID)
    assert not runs.observed


@pytest.mark.parametrize(
    ("arrives", "settles"),
    [
        # 02:30 CET is 01:30Z: the run at 02:30 covers the day that ended then
        ("2026-03-25T01:30:00", "2026-03-24T01:30"),  # on time
        ("2026-03-25T01:29:30", "2026-03-24T01:30"),  # 30 s early: a clock a little ahead
        ("2026-03-25T01:28:59", "2026-03-23T01:30"),  # over a minute early: the day before's
        ("2026-03-26T01:28:59", "2026-03-24T01:30"),  # a day late, just before the next is due
        ("2026-03-26T01:29:00", "2026-03-25T01:30"),  # a minute before it: the next period's
    ],
)
def test_a_ping_settles_the_latest_period_due_a_minute_early_counting_as_on_time(
    arrives: str, settles: str
) -> None:
    assert _start("30 2 * * *", arrives) == settles


def test_across_the_spring_forward_night_the_rule_follows_the_periods() -> None:
    """2026-03-29 in Berlin: 02:30 does not exist, so the period that ends that night ends at
    03:30 CEST (01:30Z), and the next one, 23 hours long, at 02:30 CEST on the 30th (00:30Z)."""
    assert _start("30 2 * * *", "2026-03-29T01:29:30") == "2026-03-28T01:30"
    assert _start("30 2 * * *", "2026-03-29T01:28:00") == "2026-03-27T01:30"
    assert _start("30 2 * * *", "2026-03-30T00:29:30") == "2026-03-29T01:30"  # 23 h later
    assert _start("30 2 * * *", "2026-03-30T00:28:00") == "2026-03-28T01:30"


def test_across_the_fall_back_night_a_repeated_hour_is_the_second() -> None:
    """2026-10-25 in Berlin: 02:30 happens twice; the period ends at the second (01:30Z)."""
    assert _start("30 2 * * *", "2026-10-25T00:30:00") == "2026-10-23T00:30"  # the first 02:30
    assert _start("30 2 * * *", "2026-10-25T01:30:00") == "2026-10-24T00:30"  # the second


def test_early_is_at_most_a_quarter_of_the_period() -> None:
    minutely = make_job("often", "every 2 minutes", "2026-03-20", ping=UUID)
    assert early(minutely) == timedelta(seconds=30)
    daily = make_job("vendor", "daily", "2026-03-20", ping=UUID)
    assert early(daily) == timedelta(minutes=1)


def test_before_the_first_period_is_due_no_period_is_settled() -> None:
    assert _start("30 2 * * *", "2026-03-20T12:00:00") is None


def test_a_named_period_must_be_a_period_start_that_is_over() -> None:
    job = make_job("vendor", "daily", "2026-03-20", ping=UUID)
    at = _at("2026-03-25T00:00:30")
    assert named_period(job, _at("2026-03-22T00:00:00"), at).start == _at("2026-03-22T00:00:00")
    assert named_period(job, _at("2026-03-24T00:00:00"), at).end == _at("2026-03-25T00:00:00")
    with pytest.raises(ConfigError, match="a ping settles a period that is over"):
        named_period(job, _at("2026-03-25T00:00:00"), at)
    with pytest.raises(ConfigError, match="not a period start"):
        named_period(job, _at("2026-03-22T06:00:00"), at)
