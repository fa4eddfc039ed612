"""spread: a stable per-job delay; explain: the periods spelled out (pure, now passed in)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from catchup.config import make_job, spread_offset
from catchup.errors import ConfigError
from catchup.explain import explain
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
        "from datetime import timedelta; from catchup.config import spread_offset; "
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
    assert past.rows[0].number == 4 and past.rows[0].is_due


def test_explain_flags_a_job_due_on_the_hour_with_others() -> None:
    jobs = [make_job(n, "daily", "2026-10-01", command=["true"]) for n in ("a", "b", "c")]
    spread = make_job("d", "daily", "2026-10-01", command=["true"], delay="7m")
    result = explain(jobs[0], [*jobs, spread], now=NOW, start=None, count=1)
    assert any("due exactly on the hour with 2 other job(s): b, c" in w for w in result.warnings)
    assert not any(
        "on the hour" in w for w in explain(spread, jobs, now=NOW, start=None, count=1).warnings
    )
