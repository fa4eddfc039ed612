"""The plain detector's plan, without a database: each job's window and expected count, the
pieces SQL steps through and those whose starts Python lists, cut where a schedule changed."""

from __future__ import annotations

from datetime import UTC, datetime

from catchup.config.loading import make_job
from catchup.scan.targets import ScanTarget
from catchup.scan.unkeyed import plan

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def test_a_plan_steps_fixed_schedules_in_sql_and_lists_wall_clock_ones() -> None:
    hourly = make_job("export", "hourly", "2026-10-31", command=["true"])
    paris = make_job("billing", "daily", "2026-10-20", command=["true"], timezone="Europe/Paris")
    later = make_job("later", "daily", "2199-12-01", command=["true"])
    targets = [
        ScanTarget(hourly, 1, False),
        ScanTarget(paris, 2, False),
        ScanTarget(later, 3, False),
    ]
    chosen = plan(targets, NOW, None, None)
    assert chosen.expected == {1: 24, 2: 12, 3: 0}
    assert [t.job_id for t in chosen.active] == [1, 2]  # nothing expected: nothing read
    assert chosen.windows[1] == (datetime(2026, 10, 31, tzinfo=UTC), NOW)
    stepped = {t.job_id for t, _ in chosen.chosen(True)}
    listed = {t.job_id for t, _ in chosen.chosen(False)}
    # a local daily schedule has 23- and 25-hour days: its starts come from the schedule
    assert (stepped, listed) == ({1}, {2})
    assert chosen.piece_arrays(chosen.chosen(True))["job_ids"] == [1]
    assert chosen.arrays()["job_ids"] == [1, 2]
