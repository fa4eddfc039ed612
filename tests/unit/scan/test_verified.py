"""What scans verified of each key (catchup/scan/verified.py), as plain arithmetic on period
starts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from catchup.scan.targets import KeyRange, KeyRow
from catchup.scan.verified import Read, merged, unverified
from catchup.scan.verified import verified_now as lazily

DAY0 = datetime(2026, 3, 1, tzinfo=UTC)
STARTS = [DAY0 + timedelta(days=n) for n in range(10)]
ENDS = [s + timedelta(days=1) for s in STARTS]
END = ENDS[-1]


def verified_now(*args: Any) -> tuple[list[tuple[KeyRow, Any]], datetime | None]:
    """What :func:`lazily` writes, taken whole, and where the horizon moves."""
    written, horizon = lazily(*args)
    return list(written), horizon


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
    assert verified_now([acme], Read(True, None), checked, found, STARTS, ENDS, END) == (
        [(acme, (((day(0), day(5)), (day(7), END)), True))],
        END,  # the horizon: every key's newest period has a row
    )
    # nothing new: nothing to write
    again = KeyRow("acme", DAY0, verified=((day(0), day(5)), (day(7), END)), follows=True)
    assert verified_now([again], Read(True, END), [("acme", 5, 7)], found, STARTS, ENDS, END) == (
        [],
        END,
    )


def following(key: str, upto: datetime) -> KeyRow:
    """A key whose every period up to ``upto`` (the horizon) has a row."""
    return KeyRow(key, DAY0, verified=((DAY0, upto),), follows=True)


def test_keys_whose_new_periods_all_have_a_row_are_not_written_the_horizon_moves() -> None:
    keys = [following(k, day(8)) for k in ("acme", "globex", "initech")]
    checked = [(k.key, 8, 10) for k in keys]
    # globex has no row on day 8: only globex is written, the horizon moves to the end
    found = [KeyRange("globex", "missing", day(8), day(8), 1)]
    written, horizon = verified_now(keys, Read(True, day(8)), checked, found, STARTS, ENDS, END)
    assert horizon == END
    assert written == [(keys[1], (((DAY0, day(8)), (day(9), END)), True))]
    # nothing missing: nothing written, and the horizon moves
    assert verified_now(keys, Read(True, day(8)), checked, [], STARTS, ENDS, END) == ([], END)


def test_a_tick_about_to_run_the_newest_period_writes_no_key_and_keeps_the_horizon() -> None:
    keys = [following(f"t{n}", day(9)) for n in range(20)]
    checked = [(k.key, 9, 10) for k in keys]
    found = [KeyRange(k.key, "missing", day(9), day(9), 1) for k in keys[:15]]
    # 15 of 20 keys lack the newest period: the horizon stays at its start, nobody is written
    assert verified_now(keys, Read(True, day(9)), checked, found, STARTS, ENDS, END) == ([], day(9))
    # one of 20 lacks it: the horizon moves past it, and that key alone is written
    written, horizon = verified_now(keys, Read(True, day(9)), checked, found[:1], STARTS, ENDS, END)
    assert (horizon, written) == (END, [(keys[0], (((DAY0, day(9)),), False))])


def test_a_window_starting_after_the_horizon_does_not_move_it() -> None:
    late = [(d, e) for d, e in zip(STARTS, ENDS, strict=True)][5:]
    starts, ends = [s for s, _ in late], [e for _, e in late]
    keys = [following("acme", day(3))]
    written, horizon = verified_now(
        keys, Read(True, day(3)), [("acme", 0, 5)], [], starts, ends, END
    )
    assert (written, horizon) == ([], day(3))  # days 3 and 4 were not looked at


def test_a_gone_key_keeps_following_once_its_last_period_has_a_row() -> None:
    gone = KeyRow("gone", DAY0, gone_at=day(6), verified=((DAY0, day(4)),), follows=True)
    written, horizon = verified_now(
        [gone], Read(True, day(4)), [("gone", 4, 6)], [], STARTS, ENDS, END
    )
    assert horizon == END
    assert written == []  # its ranges reach its last expected period: they still follow


def test_ranges_that_meet_are_one() -> None:
    assert merged([(day(3), day(5)), (day(0), day(3)), (day(7), day(8))]) == (
        (day(0), day(5)),
        (day(7), day(8)),
    )
