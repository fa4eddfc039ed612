"""A window's bounds: each job's local midnight, checked for every job."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from catchup.config.loading import make_job
from catchup.errors import ConfigError
from catchup.scan.window import bound, check_window


def test_a_window_bound_is_each_jobs_local_midnight() -> None:
    berlin = make_job("b", "daily", "2026-11-01", command=["true"], timezone="Europe/Berlin")
    utc = make_job("u", "daily", "2026-11-01", command=["true"])
    assert bound("2026-11-25", berlin) == datetime(2026, 11, 24, 23, tzinfo=UTC)
    assert bound("2026-11-25", utc) == datetime(2026, 11, 25, tzinfo=UTC)
    assert bound("2026-11-25T00:00:00Z", berlin) == datetime(2026, 11, 25, tzinfo=UTC)
    check_window([berlin, utc], "2026-11-25", "2026-11-26")
    # 23:30Z on the 25th is after Berlin's midnight of the 26th but before UTC's
    with pytest.raises(ConfigError, match="is not before"):
        check_window([utc, berlin], "2026-11-25T23:30:00Z", "2026-11-26")
    check_window([utc], "2026-11-25T23:30:00Z", "2026-11-26")
    with pytest.raises(ConfigError, match="1900-01-02 to 2199-12-30"):
        bound("2300-01-01", utc)
