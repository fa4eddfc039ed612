"""What scans verified of each key (catchup/scan/verified.py), as plain arithmetic on period
starts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from catchup.scan.targets import KeyRange, KeyRow
from catchup.scan.verified import merged, unverified, verified_now

DAY0 = datetime(2026, 3, 1, tzinfo=UTC)
STARTS = [DAY0 + timedelta(days=n) for n in range(10)]
ENDS = [s + timedelta(days=1) for s in STARTS]
END = ENDS[-1]


def day(n: int) -> datetime:
    return DAY0 + timedelta(days=n)


def test_a_key_never_verified_is_looked_at_whole_from_when_it_is_expected() -> None:
    acme = KeyRow("acme", DAY0)
    newco = KeyRow("newco", day(4) + timedelta(hours=3))  # seen during day 4: from day 4
    gone = KeyRow("gone", DAY0, gone_at=day(6))
    assert unverified([acme, newco, gone], STARTS, ENDS, valid=False) == [
        ("acme", 0, 10),
        ("newco", 4, 10),
        ("gone", 0, 6),
    ]


def test_only_what_lies_outside_the_verified_ranges_is_looked_at_again() -> None:
    acme = KeyRow("acme", DAY0, verified=((day(0), day(3)), (day(4), day(8))))
    assert unverified([acme], STARTS, ENDS, valid=True) == [("acme", 3, 4), ("acme", 8, 10)]
    # ranges recorded for other schedules count for nothing
    assert unverified([acme], STARTS, ENDS, valid=False) == [("acme", 0, 10)]


def test_what_was_checked_and_held_no_hole_is_verified_and_the_holes_stay_out() -> None:
    acme = KeyRow("acme", DAY0, verified=((day(0), day(3)),))
    checked = [("acme", 3, 10)]
    found = [
        KeyRange("acme", "missing", day(5), day(6), 2),
        KeyRange("acme", "failed", day(8), day(8), 1),
    ]
    assert verified_now([acme], True, checked, found, STARTS, END) == [
        ("acme", ((day(0), day(5)), (day(7), END)))
    ]
    # nothing new: nothing to write
    again = KeyRow("acme", DAY0, verified=((day(0), day(5)), (day(7), END)))
    assert verified_now([again], True, [("acme", 5, 7)], found, STARTS, END) == []


def test_ranges_that_meet_are_one() -> None:
    assert merged([(day(3), day(5)), (day(0), day(3)), (day(7), day(8))]) == (
        (day(0), day(5)),
        (day(7), day(8)),
    )
