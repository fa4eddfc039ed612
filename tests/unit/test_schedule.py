"""Period arithmetic: pure, so checked on many random schedules and instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from catchup.schedule import ScheduleError, parse_schedule, period_label

SCHEDULES = [
    "hourly",
    "daily",
    "weekly",
    "monthly",
    "every 15 minutes",
    "every 2 hours",
    "every 3 days",
    "every minute",
    "every 2 weeks",
]
instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@given(st.sampled_from(SCHEDULES), instants, instants)
def test_period_containing_contains(text: str, start: datetime, t: datetime) -> None:
    """The period containing t starts at or before t and ends after it."""
    schedule = parse_schedule(text)
    anchor = schedule.anchor(start)
    period = schedule.containing(anchor, t)
    assert period.start <= t < period.end
    assert schedule.is_boundary(anchor, period.start)


@given(st.sampled_from(SCHEDULES), instants, st.integers(-50, 500))
def test_periods_are_contiguous(text: str, start: datetime, k: int) -> None:
    """Period k ends exactly where period k + 1 starts, and has the schedule's length."""
    schedule = parse_schedule(text)
    anchor = schedule.anchor(start)
    here, after = schedule.period(anchor, k), schedule.period(anchor, k + 1)
    assert here.end == after.start
    assert here.start < here.end
    assert schedule.index(anchor, here.start) == k
    if not schedule.months:
        assert here.end - here.start == timedelta(seconds=schedule.seconds)


@given(st.sampled_from(SCHEDULES), instants)
def test_anchor_is_first_boundary_at_or_after_start(text: str, start: datetime) -> None:
    schedule = parse_schedule(text)
    anchor = schedule.anchor(start)
    assert anchor >= start
    assert schedule.nth(anchor, -1) < start


@given(st.sampled_from(SCHEDULES), instants, instants, st.integers(0, 7200))
def test_latest_due(text: str, start: datetime, now: datetime, delay_s: int) -> None:
    """The latest due period is due, and the one after it is not."""
    schedule = parse_schedule(text)
    anchor = schedule.anchor(start)
    delay = timedelta(seconds=delay_s)
    latest = schedule.latest_due(anchor, delay, now)
    first = schedule.period(anchor, 0)
    if latest is None:
        assert first.end + delay > now
        return
    assert latest.start >= anchor
    assert latest.end + delay <= now
    following = schedule.containing(anchor, latest.end)
    assert following.end + delay > now


@given(st.sampled_from(SCHEDULES), instants, st.integers(0, 300))
def test_count_until_and_periods_agree(text: str, start: datetime, n: int) -> None:
    schedule = parse_schedule(text)
    anchor = schedule.anchor(start)
    until = schedule.nth(anchor, n) + timedelta(seconds=1)
    periods = schedule.periods(anchor, anchor, until)
    assert len(periods) == schedule.count_until(anchor, until) == n + 1


def test_aligned_boundaries() -> None:
    start = datetime(2026, 10, 1, 5, 30, tzinfo=UTC)
    assert parse_schedule("hourly").anchor(start) == datetime(2026, 10, 1, 6, tzinfo=UTC)
    assert parse_schedule("daily").anchor(start) == datetime(2026, 10, 2, tzinfo=UTC)
    assert parse_schedule("weekly").anchor(start) == datetime(2026, 10, 5, tzinfo=UTC)  # Monday
    assert parse_schedule("monthly").anchor(start) == datetime(2026, 11, 1, tzinfo=UTC)
    # every-N schedules count from the start itself
    assert parse_schedule("every 15 minutes").anchor(start) == start


def test_monthly_periods_follow_the_calendar() -> None:
    schedule = parse_schedule("monthly")
    anchor = schedule.anchor(datetime(2026, 1, 1, tzinfo=UTC))
    feb = schedule.period(anchor, 1)
    assert (feb.start, feb.end) == (
        datetime(2026, 2, 1, tzinfo=UTC),
        datetime(2026, 3, 1, tzinfo=UTC),
    )


def test_period_label() -> None:
    daily, hourly = parse_schedule("daily"), parse_schedule("hourly")
    assert period_label(daily, datetime(2026, 10, 31, tzinfo=UTC)) == "2026-10-31"
    assert period_label(hourly, datetime(2026, 10, 31, 13, tzinfo=UTC)) == "2026-10-31T13:00:00Z"


@pytest.mark.parametrize(
    "text", ["sometimes", "every 0 minutes", "every -1 hours", "every 5", "30 2 * * *", ""]
)
def test_bad_schedules(text: str) -> None:
    with pytest.raises(ScheduleError):
        parse_schedule(text)
