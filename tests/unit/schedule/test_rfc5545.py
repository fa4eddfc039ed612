"""RRULEs as RFC 5545 and libical read them: every case of libical's recurrence vectors
(rfc5545_cases.py) agrees, is refused by a documented rule, or is a documented difference;
the corrections catchup makes around python-dateutil, each as a named test."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path

import pytest
from rfc5545_cases import CASES

from catchup.schedule import ScheduleError, parse_rrule, parse_schedule
from catchup.schedule.reconcile import Recorded, timeline_from
from catchup.schedule.rfc5545 import week_year

DOC = Path(__file__).resolve().parents[3] / "docs" / "explanation" / "time-and-dst.md"


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def starts(rule: str, start: str, count: int, frm: str | None = None) -> list[str]:
    """The first ``count`` period starts of ``rule`` counted from ``start`` (UTC), from ``frm``."""
    schedule = parse_rrule(rule).bound(_moment(start))
    found = islice(schedule.asc(_moment(frm or start)), count)
    return [f"{t:%Y-%m-%dT%H:%M}" for t in found]


def verdict(rule: str, start: str) -> str | None:
    """What catchup says of the rule counted from ``start``: None, or its one-line refusal."""
    try:
        schedule = parse_rrule(rule).bound(_moment(start))
    except ScheduleError as exc:
        return str(exc)
    return schedule.refusal(date_only="T" not in start)


def test_the_table_holds_every_case_of_the_reference() -> None:
    counts: dict[str, int] = {}
    for *_, outcome in CASES:
        kind = outcome.partition(":")[0]
        counts[kind] = counts.get(kind, 0) + 1
    assert len(CASES) == 146
    assert counts == {"agrees": 131, "refused": 15}


@pytest.mark.parametrize(
    ("note", "rule", "start", "frm", "expected", "outcome"),
    CASES,
    ids=[f"{i}-{case[1][6:40]}" for i, case in enumerate(CASES)],
)
def test_each_reference_case(
    note: str, rule: str, start: str, frm: str | None, expected: str, outcome: str
) -> None:
    said = verdict(rule, start)
    if outcome == "agrees":
        assert said is None, note
        want = expected.split()
        assert starts(rule, start, len(want), frm) == want, note
    elif outcome.startswith("refused: "):
        assert said is not None and outcome.removeprefix("refused: ") in said, note
    else:
        assert said is None, note


@pytest.mark.parametrize(("note", "rule", "start", "frm", "expected", "outcome"), CASES[:60:3])
def test_counted_from_any_instance_the_rest_agree(
    note: str, rule: str, start: str, frm: str | None, expected: str, outcome: str
) -> None:
    """libical's own check: DTSTART moved to any instance lists the instances from there."""
    if outcome != "agrees" or frm is not None:
        return
    want = expected.split()
    for k, instance in enumerate(want[:4]):
        assert starts(rule, instance, len(want) - k) == want[k:], (note, instance)


@pytest.mark.parametrize(("note", "rule", "start", "frm", "expected", "outcome"), CASES[1::4])
def test_descending_lists_the_same_instances(
    note: str, rule: str, start: str, frm: str | None, expected: str, outcome: str
) -> None:
    if outcome != "agrees":
        return
    schedule = parse_rrule(rule).bound(_moment(start))
    up = list(islice(schedule.asc(_moment(start)), 8))
    down = list(islice(schedule.desc(up[-1] + timedelta(minutes=1)), len(up)))
    assert down[::-1] == up, note


def test_the_documented_refusals_and_differences_are_in_the_docs() -> None:
    doc = " ".join(DOC.read_text().split())
    for *_, outcome in CASES:
        if outcome != "agrees":
            assert outcome.partition(": ")[2] in doc, outcome


# -- BYSETPOS over the whole interval ----------------------------------------------------------


def test_bysetpos_counts_the_whole_week_when_start_falls_inside_it() -> None:
    # the first and third working days of each week, from a Wednesday: Wednesday is the third
    rule = "RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=1,3"
    assert starts(rule, "2024-10-23T00:00", 3) == [
        "2024-10-23T00:00",
        "2024-10-28T00:00",
        "2024-10-30T00:00",
    ]


def test_bysetpos_counts_the_week_from_wkst_when_start_is_a_tuesday() -> None:
    rule = "RRULE:FREQ=WEEKLY;BYDAY=MO,TU,SU,SA,TH;BYSETPOS=3,2"
    assert starts(rule, "2024-01-02T12:00", 4) == [
        "2024-01-02T12:00",
        "2024-01-04T12:00",
        "2024-01-09T12:00",
        "2024-01-11T12:00",
    ]


def test_bysetpos_counts_the_whole_month_and_year() -> None:
    # the second and last working day of the month, from the 20th of a month
    monthly = "RRULE:FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=2,-1"
    assert starts(monthly, "2026-11-20T00:00", 3) == [
        "2026-11-30T00:00",
        "2026-12-02T00:00",
        "2026-12-31T00:00",
    ]
    yearly = "RRULE:FREQ=YEARLY;BYYEARDAY=1,2,3,4,5,6,7;BYSETPOS=3,2"
    assert starts(yearly, "2024-01-03", 3) == [
        "2024-01-03T00:00",
        "2025-01-02T00:00",
        "2025-01-03T00:00",
    ]


def test_hourly_bysetpos_from_the_start_is_expanded_not_refused() -> None:
    # dateutil refuses it ("generates an empty set") when tried from midnight; from 15:40 it is
    # the 20th and 40th minutes of every other hour
    rule = "RRULE:FREQ=HOURLY;BYHOUR=15,17,19;BYMINUTE=0,10,20,30,40,50;BYSETPOS=-2,3;INTERVAL=2"
    assert verdict(rule, "2024-10-23T15:40") is None
    assert starts(rule, "2024-10-23T15:40", 3) == [
        "2024-10-23T15:40",
        "2024-10-23T17:20",
        "2024-10-23T17:40",
    ]


# -- the parts RFC 5545 takes from DTSTART -------------------------------------------------------


def test_yearly_by_week_number_takes_the_weekday_from_the_start() -> None:
    # Tuesdays of weeks 1 and 2, not every day of them; week 1 of 2014 begins in 2013
    assert starts("RRULE:FREQ=YEARLY;BYWEEKNO=1,2", "2013-01-01T00:00", 4) == [
        "2013-01-01T00:00",
        "2013-01-08T00:00",
        "2013-12-31T00:00",
        "2014-01-07T00:00",
    ]


def test_yearly_by_month_day_takes_the_month_from_the_start() -> None:
    assert starts("RRULE:FREQ=YEARLY;BYMONTHDAY=29", "2024-02-29", 3) == [
        "2024-02-29T00:00",
        "2028-02-29T00:00",
        "2032-02-29T00:00",
    ]
    assert starts("RRULE:FREQ=YEARLY;BYMONTHDAY=-29,-1", "2024-02-01", 4) == [
        "2024-02-01T00:00",
        "2024-02-29T00:00",
        "2025-02-28T00:00",
        "2026-02-28T00:00",
    ]


def test_by_week_number_with_interval_counts_week_numbering_years() -> None:
    # 2024-12-31 is in week 1 of 2025: three years on is 2028's week 1, then 2031's
    rule = "RRULE:FREQ=YEARLY;BYWEEKNO=1;BYDAY=MO,TU;INTERVAL=3"
    assert starts(rule, "2024-12-31", 5) == [
        "2024-12-31T00:00",
        "2028-01-03T00:00",
        "2028-01-04T00:00",
        "2030-12-30T00:00",
        "2030-12-31T00:00",
    ]
    assert week_year(datetime(2024, 12, 31).date(), 0) == 2025
    assert week_year(datetime(2027, 1, 2).date(), 0) == 2026


def test_time_parts_with_a_date_only_start_are_refused_saying_how_to_write_it() -> None:
    said = verdict("RRULE:FREQ=DAILY;BYMINUTE=1,2,3,4;INTERVAL=2", "2024-10-18")
    assert said is not None
    assert "BYMINUTE names a time of day" in said
    assert 'start = "2024-10-18T00:00"' in said
    assert verdict("RRULE:FREQ=DAILY;BYMINUTE=1,2,3,4;INTERVAL=2", "2024-10-18T00:00") is None


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ("RRULE:FREQ=WEEKLY;BYDAY=1MO", "goes only with FREQ=MONTHLY or FREQ=YEARLY"),
        ("RRULE:FREQ=MONTHLY;BYWEEKNO=2", "BYWEEKNO does not go with FREQ=MONTHLY"),
        ("RRULE:FREQ=WEEKLY;BYMONTHDAY=2", "BYMONTHDAY does not go with FREQ=WEEKLY"),
        ("RRULE:FREQ=DAILY;BYYEARDAY=2", "BYYEARDAY does not go with FREQ=DAILY"),
        ("RRULE:FREQ=DAILY;BYHOUR=24", "'24' is not a number 0-23"),
        ("RRULE:FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30", "no month in BYMONTH=2 has that day"),
        ("RRULE:FREQ=DAILY;FREQ=WEEKLY", "FREQ is given twice"),
        ("RRULE:BYHOUR=2", "FREQ is missing"),
        ("RRULE:FREQ=YEARLY;BYWEEKNO=2;BYSETPOS=1", "BYSETPOS with BYWEEKNO"),
        ("RRULE:FREQ=DAILY;RSCALE=HEBREW", "RSCALE and SKIP (RFC 7529) are not supported"),
        ("RRULE:FREQ=DAILY;BYEASTER=0", "unknown parameter 'BYEASTER'"),
    ],
)
def test_rules_rfc_5545_forbids_are_refused_in_one_line(rule: str, said: str) -> None:
    with pytest.raises(ScheduleError, match=re.escape(said)) as caught:
        parse_schedule(rule)
    assert "\n" not in str(caught.value)


def test_a_trailing_semicolon_is_nothing() -> None:
    assert starts("RRULE:FREQ=WEEKLY;INTERVAL=1;BYDAY=MO;", "2014-10-06T09:00", 2) == [
        "2014-10-06T09:00",
        "2014-10-13T09:00",
    ]


def test_by_week_number_keeps_only_the_weeks_named() -> None:
    # dateutil alone counts 1-2 January 2011 as a 53rd week (2010 has 52): not here
    found = starts("RRULE:FREQ=YEARLY;BYWEEKNO=53;BYDAY=SA", "2000-01-01", 4)
    assert found == ["2005-01-01T00:00", "2010-01-02T00:00", "2016-01-02T00:00", "2021-01-02T00:00"]
    assert all(datetime.fromisoformat(f).isocalendar().week == 53 for f in found)


def test_a_rule_an_older_catchup_recorded_is_still_read_from_the_ledger() -> None:
    # refused in a config now, but a job's schedule history may hold them: they stay readable
    start = datetime(2026, 1, 5, tzinfo=UTC)
    for old in ("RRULE:FREQ=WEEKLY;BYDAY=1MO", "0 0 */30 2 1"):
        with pytest.raises(ScheduleError):
            parse_schedule(old)
        timeline = timeline_from([Recorded(start, old, "UTC")], start)
        assert timeline.first >= start
