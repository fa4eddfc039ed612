"""The periods mark and reset name, read in the job's zone, ranges included."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from catchup.changes.operations import parse_periods
from catchup.config.loading import make_job
from catchup.errors import ConfigError


def test_periods_are_parsed_in_the_jobs_zone_with_ranges() -> None:
    job = make_job("j", "daily", "2026-11-01", command=["true"], timezone="Europe/Berlin")
    chosen = parse_periods(job, ["2026-11-03..2026-11-05", "2026-11-04"])
    assert [p.start for p in chosen] == [datetime(2026, 11, d, 23, tzinfo=UTC) for d in (2, 3, 4)]
    # a bare date ending a range is that whole local day, in the job's zone
    hourly = make_job("h", "hourly", "2026-11-01", command=["true"], timezone="Europe/Berlin")
    day = parse_periods(hourly, ["2026-11-05..2026-11-05"])
    assert [day[0].start, day[-1].start, len(day)] == [
        datetime(2026, 11, 4, 23, tzinfo=UTC),
        datetime(2026, 11, 5, 22, tzinfo=UTC),
        24,
    ]
    with pytest.raises(ConfigError, match="ends before it starts"):
        parse_periods(job, ["2026-11-05..2026-11-03"])
    with pytest.raises(ConfigError, match="not a period start"):
        parse_periods(job, ["2026-11-03T00:00:00Z"])
    with pytest.raises(ConfigError, match="not a date"):
        parse_periods(job, ["yesterday"])
