"""spread: a stable per-job delay; explain: the periods spelled out (pure, now passed in)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from catchup.config.loading import make_job
from catchup.config.values import spread_offset
from catchup.errors import ConfigError
from catchup.reports.explain import explain
from catchup.schedule import parse_schedule

NOW = datetime(2026, 11, 29, 14, 20, tzinfo=UTC)


def test_spread_is_stable_bounded_and_differs_by_name() -> None:
    hourly = parse_schedule("hourly")
    offsets = {
        name: spread_offset(name, timedelta(minutes=10), hourly)
        for name in ("billing", "export", "reports", "audit", "sync")
    }
    assert all(timedelta(0) <= o < timedelta(minutes=10) for o in offsets.values())
    assert len(set(offsets.values())) > 1
    # the same in another interpreter (a salted hash() would differ)
    code = (
        "from datetime import timedelta; from catchup.config.values import spread_offset; "
        "from catchup.schedule import parse_schedule; "
        "print(spread_offset('billing', timedelta(minutes=10), "
        "parse_schedule('hourly')).total_seconds())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345"},
    )
    assert float(other.stdout) == offsets["billing"].total_seconds()
    # never more than a quarter of the period
    short = spread_offset("billing", timedelta(hours=5), parse_schedule("every 4 minutes"))
    assert short < timedelta(minutes=1)


def test_spread_in_a_job() -> None:
    plain = make_job("billing", "daily", "2026-10-01", command=["true"], delay="30m")
    spread = make_job("billing", "daily", "2026-10-01", command=["true"], delay="30m", spread=True)
    assert spread.delay == plain.delay + spread.spread
    assert timedelta(0) <= spread.spread < timedelta(minutes=10)
    bounded = make_job("billing", "daily", "2026-10-01", command=["true"], spread="2m")
    assert bounded.spread < timedelta(minutes=2)
    with pytest.raises(ConfigError, match="spread"):
        make_job("billing", "daily", "2026-10-01", command=["true"], spread=5)


def test_explain_lists_periods_and_due_times() -> None:
    job = make_job("billing", "daily", "2026-10-01", command=["true"], delay="30m")
    result = explain(job, [job], now=NOW, start=None, count=3)
    assert [r.period.start.day for r in result.rows] == [29, 30, 1]
    assert result.rows[0].due == datetime(2026, 11, 30, 0, 30, tzinfo=UTC)
    assert not result.rows[0].is_due
    past = explain(job, [job], now=NOW, start=datetime(2026, 10, 5, tzinfo=UTC), count=2)
    assert past.rows[0].period.start == datetime(2026, 10, 5, tzinfo=UTC) and past.rows[0].is_due


def test_explain_flags_a_job_due_on_the_hour_with_others() -> None:
    jobs = [make_job(n, "daily", "2026-10-01", command=["true"]) for n in ("a", "b", "c")]
    spread = make_job("d", "daily", "2026-10-01", command=["true"], delay="7m")
    result = explain(jobs[0], [*jobs, spread], now=NOW, start=None, count=1)
    assert any("due exactly on the hour with 2 other job(s): b, c" in w for w in result.warnings)
    assert not any(
        "on the hour" in w for w in explain(spread, jobs, now=NOW, start=None, count=1).warnings
    )


def test_explain_flags_a_0230_berlin_daily_job() -> None:
    """02:30 does not exist on the spring-forward night and happens twice on the fall-back
    night: explain says so, and says which instant catchup uses; the periods that a change
    touches show their length."""
    job = make_job(
        "nightly", "30 2 * * *", "2026-01-01", command=["true"], timezone="Europe/Berlin"
    )
    jan = datetime(2026, 1, 10, tzinfo=UTC)
    result = explain(job, [job], now=jan, start=datetime(2026, 3, 27, tzinfo=UTC), count=4)
    skipped = [w for w in result.warnings if "does not exist" in w]
    repeated = [w for w in result.warnings if "happens twice" in w]
    # the DST nights of the 400 days from the first period shown, not from now
    assert [w[:16] for w in skipped] == ["02:30 on 2026-03", "02:30 on 2027-03"]
    assert skipped[0] == (
        "02:30 on 2026-03-29 does not exist in Europe/Berlin (clocks jump from 02:00 to 03:00): "
        "that period starts 1h later, at 03:30 CEST (2026-03-29T01:30:00Z) (systemd would skip "
        "it; cron and croniter run it at 03:00)"
    )
    assert repeated[0] == (
        "02:30 on 2026-10-25 happens twice in Europe/Berlin (clocks go back 1h at 03:00): "
        "the period starts at the second, 02:30 CET (2026-10-25T01:30:00Z) (systemd, cron and "
        "croniter take the first, 02:30 CEST)"
    )
    rows = [(r.period.end - r.period.start, r.dst) for r in result.rows]
    hours = timedelta(hours=1)
    assert rows == [
        (24 * hours, None),  # 03-26 02:30 CET → 03-27
        (24 * hours, None),
        (
            24 * hours,  # 03-28 02:30 CET → 03-29 03:30 CEST
            "clocks go forward 1h at 2026-03-29T01:00:00Z; "
            "the period runs until 03:30 CEST: the scheduled 02:30 does not exist that night and "
            "moves 1h later",
        ),
        (
            23 * hours,
            "the period starts at 03:30 CEST: the scheduled 02:30 does not exist that night and "
            "moves 1h later",
        ),
    ]
    assert result.rows[0].local_start.strftime("%H:%M %Z") == "02:30 CET"


def test_explain_midnight_in_berlin_has_no_skipped_times_but_shows_short_days() -> None:
    job = make_job("daily", "daily", "2026-01-01", command=["true"], timezone="Europe/Berlin")
    result = explain(
        job,
        [job],
        now=datetime(2026, 1, 10, tzinfo=UTC),
        start=datetime(2026, 3, 28, tzinfo=UTC),
        count=3,
    )
    assert not any("does not exist" in w or "twice" in w for w in result.warnings)
    assert [r.period.end - r.period.start for r in result.rows] == [
        timedelta(hours=24),
        timedelta(hours=23),
        timedelta(hours=24),
    ]
    assert result.rows[1].dst == "clocks go forward 1h at 2026-03-29T01:00:00Z"
