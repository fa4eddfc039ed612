"""An excluded period is never alerted: the ranges alerts tell of are a job's gaps."""

from __future__ import annotations

from datetime import UTC, datetime

from catchup.reports.alerts import diff, per_state
from catchup.results import COUNTED_STATES, JobScan, Range
from catchup.vocabulary import PeriodState


def test_excluded_ranges_open_no_alert() -> None:
    first = datetime(2026, 12, 24, tzinfo=UTC)
    excluded = Range(PeriodState.excluded, first, datetime(2026, 12, 26, tzinfo=UTC), 3)
    missing = Range(
        PeriodState.missing,
        datetime(2026, 12, 27, tzinfo=UTC),
        datetime(2026, 12, 27, tzinfo=UTC),
        1,
    )
    counts = dict.fromkeys(COUNTED_STATES, 0) | {"excluded": 3, "missing": 1}
    scan = JobScan(
        job="billing",
        schedule="daily",
        timezone="UTC",
        daily_or_longer=True,
        paused=False,
        first=first,
        until=datetime(2026, 12, 28, tzinfo=UTC),
        expected=4,
        counts=counts,
        ranges=(excluded, missing),
        last_success=None,
    )
    assert per_state(scan) == [missing]
    _, events = diff([], {1: per_state(scan)}, {1: scan})
    assert [(e.event, e.state) for e in events] == [("opened", "missing")]
