"""The pure part of excluded periods (catchup/schedule/exclusions.py): each form read, the
spans it excludes on the job's clock, the one-line refusals; and Temporal's ExcludeCalendar
sequences (service/worker/scheduler/spec_test.go: TestSpecExclude and its neighbours) as
catchup reads them: a cron spec matching the minutes a period may not start in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from catchup.config.loading import make_job
from catchup.schedule.exclusions import (
    ExcludeError,
    entry_spans,
    excluded,
    read_entries,
    read_entry,
)


def _utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def _kept(
    schedule: str, start: str, exclude: list[str], lo: datetime, hi: datetime
) -> list[datetime]:
    """The period starts of a job in [lo, hi) that its exclude leaves expected."""
    job = make_job("j", schedule, start, command=["true"], exclude=exclude)
    gone = job.excluded(lo, hi)
    return [s for s in job.timeline.starts(lo, hi) if gone.at(s) is None]


def test_temporal_spec_exclude_every_90_minutes_but_hours_12_to_14() -> None:
    kept = _kept(
        "every 90 minutes",
        "2022-03-23T00:00Z",
        ["* 12-14 * * *"],
        _utc(2022, 3, 23, 8, 1),
        _utc(2022, 3, 23, 17),
    )
    assert kept == [
        _utc(2022, 3, 23, 9),
        _utc(2022, 3, 23, 10, 30),
        _utc(2022, 3, 23, 15),
        _utc(2022, 3, 23, 16, 30),
    ]


def test_temporal_overlapping_exclusions_join() -> None:
    kept = _kept(
        "every minute",
        "2024-01-01T00:00Z",
        ["* 0-2 * * *", "* 1-3 * * *"],
        _utc(2024, 1, 2),
        _utc(2024, 1, 2, 4, 1),
    )
    assert kept == [_utc(2024, 1, 2, 4)]


def test_temporal_upper_bound_finds_nothing_then_noon() -> None:
    args = ("every minute", "2024-01-01T00:00Z", ["* 0-11 * * *"])
    assert _kept(*args, _utc(2024, 1, 2, 1), _utc(2024, 1, 2, 1, 1)) == []
    assert _kept(*args, _utc(2024, 1, 2, 1), _utc(2024, 1, 2, 12, 1)) == [_utc(2024, 1, 2, 12)]


def test_temporal_exclude_all() -> None:
    assert _kept("weekly", "2022-03-21", ["* * * * *"], _utc(2022, 3, 21), _utc(2023, 3, 21)) == []


@pytest.mark.parametrize(
    ("entry", "spans"),
    [
        ("2026-12-24", [(_utc(2026, 12, 23, 23), _utc(2026, 12, 24, 23))]),
        ("2026-12-24..2026-12-26", [(_utc(2026, 12, 23, 23), _utc(2026, 12, 26, 23))]),
        ("2026-12-01T02:00Z..2026-12-01T04:00Z", [(_utc(2026, 12, 1, 2), _utc(2026, 12, 1, 4))]),
        (
            "2026-12-01T02:00+05:00..2026-12-01T03:00+05:00",
            [(_utc(2026, 11, 30, 21), _utc(2026, 11, 30, 22))],
        ),
        (
            "RRULE:FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=25",
            [(_utc(2026, 12, 24, 23), _utc(2026, 12, 25, 23))],
        ),
        # the clocks skip 02:00-03:00 on 29 March: a span from 02:30 starts where they jumped
        ("2026-03-29T02:30..2026-03-29T03:30", [(_utc(2026, 3, 29, 1), _utc(2026, 3, 29, 1, 30))]),
        # 02:00-03:00 happens twice on 25 October: both readings
        ("* 2 25 10 *", [(_utc(2026, 10, 25, 0), _utc(2026, 10, 25, 2))]),
        # a quarter of an hour in the repeated hour: that quarter in each reading, no more
        (
            "2026-10-25T02:30..2026-10-25T02:45",
            [
                (_utc(2026, 10, 25, 0, 30), _utc(2026, 10, 25, 0, 45)),
                (_utc(2026, 10, 25, 1, 30), _utc(2026, 10, 25, 1, 45)),
            ],
        ),
        # inside the hour the clocks skip: nothing
        ("2026-03-29T02:10..2026-03-29T02:40", []),
        ("* 2 29 3 *", []),
        # a range to the last day a date holds: to the end of the window asked about
        ("2026-12-01..9999-12-31", [(_utc(2026, 11, 30, 23), _utc(2027, 1, 1))]),
        ("0001-01-01", []),
    ],
)
def test_each_form_excludes_its_spans_on_the_job_clock(
    entry: str, spans: list[tuple[datetime, datetime]]
) -> None:
    found = entry_spans(
        (read_entry(entry),), ZoneInfo("Europe/Berlin"), _utc(2026, 1, 1), _utc(2027, 1, 1)
    )
    assert list(zip(found.los, found.his, strict=True)) == spans


def test_a_period_is_excluded_by_its_start_only() -> None:
    """A weekly period that starts before Christmas and runs through it is expected."""
    kept = _kept(
        "weekly", "2026-12-21", ["2026-12-24..2026-12-26"], _utc(2026, 12, 21), _utc(2027, 1, 4)
    )
    assert kept == [_utc(2026, 12, 21), _utc(2026, 12, 28)]


def test_overlapping_spans_keep_the_earlier_name() -> None:
    found = excluded(
        [(_utc(2026, 1, 1), _utc(2026, 1, 3), "a"), (_utc(2026, 1, 2), _utc(2026, 1, 5), "b")]
    )
    assert found.at(_utc(2026, 1, 2)) == "a" and found.at(_utc(2026, 1, 4)) == "b"
    assert found.at(_utc(2026, 1, 5)) is None


def test_calendars_are_read_by_name() -> None:
    calendars = {"holidays": (read_entry("2026-12-25", "calendar holidays"),)}
    (entry,) = read_entries(["calendar:holidays"], calendars)
    assert entry.by == "calendar holidays"
    with pytest.raises(ExcludeError, match="no calendar 'nope'"):
        read_entries(["calendar:nope"], calendars)


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("", "is empty"),
        ("tomorrow", "not a date"),
        ("2026-12-26..2026-12-24", "runs backwards"),
        ("2026-12-01T04:00Z..2026-12-01T02:00Z", "runs backwards"),
        ("2026-12-01T02:00Z..2026-12-01T04:00", "give both times an offset"),
        ("2026-12-01T02:00Z", "a time alone excludes nothing"),
        ("RRULE:FREQ=DAILY;BYHOUR=2", "an RRULE excludes whole days"),
        ("RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "never occurs"),
        ("0 0 30 2 *", "no such day"),
    ],
)
def test_an_entry_that_names_nothing_is_refused_in_one_line(entry: str, said: str) -> None:
    with pytest.raises(ExcludeError, match=said) as caught:
        read_entry(entry)
    assert "\n" not in str(caught.value)


def test_spans_are_cut_to_the_window() -> None:
    lo, hi = _utc(2026, 6, 1), _utc(2026, 6, 1) + timedelta(hours=12)
    found = entry_spans((read_entry("* * * * *"),), ZoneInfo("UTC"), lo, hi)
    assert list(zip(found.los, found.his, strict=True)) == [(lo, hi)]


def test_explain_names_the_periods_a_rule_excludes() -> None:
    from catchup.reports.explain import describe_due, explain

    job = make_job("j", "daily", "2026-12-20", command=["true"], exclude=["* * 25 12 *"])
    said = explain(job, [job], now=_utc(2026, 12, 1), start=_utc(2026, 12, 24), count=3)
    assert [row.excluded_by for row in said.rows] == [None, "exclude '* * 25 12 *'", None]
    assert describe_due(said.rows[1], said.now) == "due never: excluded by exclude '* * 25 12 *'"


def test_day_rules_name_the_same_days_counted_from_near_the_window() -> None:
    """A rule of INTERVAL 1 is expanded from the window's year, not from 1970 every time; one
    of INTERVAL 2 is still counted from 1970 (its years are 1970, 1972, …)."""
    tz = ZoneInfo("UTC")
    for rule, days in (
        ("RRULE:FREQ=YEARLY;BYMONTH=7;BYMONTHDAY=4", [(2030, 7, 4), (2031, 7, 4)]),
        ("RRULE:FREQ=YEARLY;INTERVAL=2;BYMONTH=7;BYMONTHDAY=4", [(2030, 7, 4)]),
        ("RRULE:FREQ=MONTHLY;INTERVAL=1", [(2031, m, 1) for m in range(1, 13)]),
    ):
        found = entry_spans((read_entry(rule),), tz, _utc(2030, 7, 1), _utc(2031, 12, 31))
        starts = [a for a in found.los]
        expected = [_utc(*d) for d in days]
        assert [s for s in starts if s >= _utc(2030, 7, 1)][-len(expected) :] == expected, rule
