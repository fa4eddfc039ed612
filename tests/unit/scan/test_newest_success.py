"""A keyed job's newest succeeded period, from its scan's own ranges: the keys it read, and
the settled keys it only counted, whose rows that have not succeeded are among its ranges."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from catchup.scan.keyed import newest_success
from catchup.scan.targets import KeyRange, KeyRow, Settled

DAY = timedelta(days=1)
START = datetime(2026, 10, 1, tzinfo=UTC)
PERIODS = [(START + i * DAY, START + (i + 1) * DAY) for i in range(5)]
NEWEST = PERIODS[-1][0]


def failed(key: str, day: datetime) -> KeyRange:
    return KeyRange(key, "failed", day, day, 1)


def test_every_settled_key_failed_the_newest_day_so_the_day_before_is_the_newest_success() -> None:
    """Three keys settled (a row every day) and counted, not read; each failed the newest
    day: the newest success is the day before."""
    settled = Settled(((0, 3),), split=True)
    found = [failed(k, NEWEST) for k in ("a", "b", "c")]
    assert newest_success([], found, PERIODS, settled) == PERIODS[-2][0]


def test_one_settled_key_that_succeeded_the_newest_day_makes_it_the_newest_success() -> None:
    settled = Settled(((0, 3),), split=True)
    found = [failed(k, NEWEST) for k in ("a", "b")]
    assert newest_success([], found, PERIODS, settled) == NEWEST


def test_a_read_keys_failure_says_nothing_of_the_settled_keys() -> None:
    """A key read (not settled) failed the newest day, as did its settled peers but one: the
    one settled key that succeeded makes the newest day the newest success."""
    settled = Settled(((0, 2),), split=True)
    read = [KeyRow("r", START)]
    found = [failed("r", NEWEST), failed("a", NEWEST)]
    assert newest_success(read, found, PERIODS, settled) == NEWEST
    assert newest_success(read, [*found, failed("b", NEWEST)], PERIODS, settled) == PERIODS[-2][0]
