"""Period arithmetic: pure, so checked on many random schedules, time zones and instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise

import pytest
from croniter import croniter
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from catchup.schedule import (
    Cron,
    Schedule,
    ScheduleError,
    Timeline,
    parse_schedule,
    period_label,
    to_utc,
    to_wall,
    zone,
)
from catchup.schedule.reconcile import Recorded, effective_from, reconcile, timeline_from

ZONES = [
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",  # a 30-minute DST shift
    "Asia/Kolkata",  # +05:30, no DST
    "Asia/Tokyo",  # no DST
    "Europe/Dublin",  # negative DST in the time zone database
    "America/Santiago",  # DST changes at midnight
    "Pacific/Apia",  # skipped all of 2011-12-30
]
SIMPLE = [
    "hourly",
    "daily",
    "weekly",
    "monthly",
    "every 15 minutes",
    "every 2 hours",
    "every 3 days",
    "every minute",
    "every 2 weeks",
]
RRULES = [
    "RRULE:FREQ=DAILY;BYHOUR=2;BYMINUTE=30",
    "RRULE:FREQ=WEEKLY;BYDAY=MO,TH;BYHOUR=6",
    "RRULE:FREQ=MONTHLY;BYMONTHDAY=1,15",
    "RRULE:FREQ=HOURLY;INTERVAL=5",
    "RRULE:FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=18",
]


def _cron_field(lo: int, hi: int) -> st.SearchStrategy[str]:
    number = st.integers(lo, hi)
    # Ranges of one value ("0-0") are left out: croniter reads "0-0" in day of week as every day.
    pair = st.lists(number, min_size=2, max_size=2, unique=True).map(sorted)
    return st.one_of(
        st.just("*"),
        number.map(str),
        pair.map(lambda ab: f"{ab[0]}-{ab[1]}"),
        st.integers(1, max(1, (hi - lo) // 2)).map(lambda s: f"*/{s}"),
        st.tuples(pair, st.integers(1, 5)).map(lambda p: f"{p[0][0]}-{p[0][1]}/{p[1]}"),
        st.lists(number, min_size=2, max_size=4, unique=True).map(
            lambda xs: ",".join(map(str, sorted(xs)))
        ),
    )


# Minutes and hours kept coarse enough that a cron fires a bounded number of times a day.
crons = st.tuples(
    st.one_of(st.integers(0, 59).map(str), st.sampled_from(["0,30", "*/20", "15-45/15"])),
    _cron_field(0, 23),
    st.one_of(st.just("*"), _cron_field(1, 28)),
    st.one_of(st.just("*"), _cron_field(1, 12)),
    st.one_of(st.just("*"), _cron_field(0, 6)),
).map(" ".join)
texts = st.one_of(st.sampled_from(SIMPLE), st.sampled_from(RRULES), crons)
instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)
)


def drawn(text: str, tz: str) -> Schedule:
    """A drawn schedule, parsed; one catchup refuses ('0 * */7 1 0': periods years apart) is
    not an example of any property here."""
    try:
        return parse_schedule(text, tz)
    except ScheduleError:
        assume(False)
        raise


def timeline(text: str, tz: str, start: datetime) -> Timeline:
    return Timeline.single(drawn(text, tz), start)


@settings(max_examples=150, deadline=None)
@given(texts, st.sampled_from(ZONES), instants, instants, st.integers(1, 40))
def test_periods_tile_time(text: str, tz: str, start: datetime, t: datetime, n: int) -> None:
    """Periods are contiguous, never overlap, and cover every instant exactly once: the period
    containing t holds t, its neighbours meet it, and walking forward or backward agrees."""
    line = timeline(text, tz, start)
    assert line.first >= start
    t = max(t, line.first)
    here = line.containing(t)
    assert here is not None
    assert here.start <= t < here.end
    ahead = list(islice(line.starts(here.start, datetime(9000, 1, 1, tzinfo=UTC)), n + 1))
    assert ahead[0] == here.start
    assert all(a < b for a, b in pairwise(ahead))  # strictly increasing: no overlap, no twins
    for a, b in pairwise(ahead):
        assert line.after(a) == b  # contiguous: each period ends where the next starts
        assert line.before(b) == a
        assert line.floor(b - timedelta(microseconds=1)) == a
        assert line.ceil(a + timedelta(microseconds=1)) == b
    assert line.count(ahead[0], ahead[-1]) == n
    # backward from the end gives the same periods
    back = []
    cursor: datetime | None = ahead[-1]
    while cursor is not None and cursor > ahead[0]:
        cursor = line.before(cursor)
        back.append(cursor)
    assert back[::-1] == ahead[:-1]


@settings(max_examples=100, deadline=None)
@given(texts, st.sampled_from(ZONES), instants, instants, st.integers(0, 7200))
def test_latest_due(text: str, tz: str, start: datetime, now: datetime, delay_s: int) -> None:
    """The latest due period is due, and the one after it is not."""
    line = timeline(text, tz, start)
    delay = timedelta(seconds=delay_s)
    latest = line.latest_due(delay, now)
    if latest is None:
        assert line.after(line.first) + delay > now
        return
    assert latest.start >= line.first
    assert latest.end + delay <= now
    assert line.after(latest.end) + delay > now


@settings(max_examples=200, deadline=None)
@given(crons, st.datetimes(min_value=datetime(2001, 1, 1), max_value=datetime(2039, 1, 1)))
def test_cron_agrees_with_croniter(expression: str, at: datetime) -> None:
    """The local wall-clock times a cron expression fires at, against an independent
    implementation (croniter, used only here), including cron's day-of-month/day-of-week rule."""
    try:
        cron = parse_schedule(expression)
    except ScheduleError as exc:
        # refused by catchup's own rule (tests of it: test_cron_extensions.py): days that can
        # be years apart ("0 * */7 1 0", a Sunday among 1, 8, … 29 January) make no schedule
        assert "days apart" in str(exc), exc
        assume(False)
    assert isinstance(cron, Cron)
    at = at.replace(second=0, microsecond=0)
    mine = list(islice(cron.walls_from(at + timedelta(minutes=1)), 12))
    # crontab(5): when both day fields are restricted, "i.e., don't start with *", either may
    # match. croniter counts "*/2" as restricted, so it is told which rule applies.
    dom, dow = expression.split(" ")[2], expression.split(" ")[4]
    either = not dom.startswith("*") and not dow.startswith("*")
    theirs = croniter(expression, at, day_or=either)
    assert mine == [theirs.get_next(datetime) for _ in range(12)]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        # day of month OR day of week when both are restricted: the 13th, and every Friday
        ("0 0 13 * 5", ["2026-02-06", "2026-02-13", "2026-02-20", "2026-02-27", "2026-03-06"]),
        # only Fridays when day of month is *
        ("0 0 * * fri", ["2026-02-06", "2026-02-13", "2026-02-20", "2026-02-27", "2026-03-06"]),
        ("0 0 13 * *", ["2026-02-13", "2026-03-13", "2026-04-13", "2026-05-13", "2026-06-13"]),
        ("0 0 1 jan,jul *", ["2026-07-01", "2027-01-01", "2027-07-01", "2028-01-01", "2028-07-01"]),
        ("@monthly", ["2026-03-01", "2026-04-01", "2026-05-01", "2026-06-01", "2026-07-01"]),
        ("0 0 * * 7", ["2026-02-08", "2026-02-15", "2026-02-22", "2026-03-01", "2026-03-08"]),
    ],
)
def test_cron_days(expression: str, expected: list[str]) -> None:
    cron = parse_schedule(expression)
    starts = islice(cron.asc(datetime(2026, 2, 1, 0, 1, tzinfo=UTC)), 5)
    assert [s.date().isoformat() for s in starts] == expected


@pytest.mark.parametrize(
    ("expression", "field"),
    [
        ("61 * * * *", "minute field '61': 61 is out of range 0-59"),
        ("0 24 * * *", "hour field '24'"),
        ("0 0 0 * *", "day of month field '0'"),
        ("0 0 * 13 *", "month field '13'"),
        ("0 0 * * 8", "day of week field '8'"),
        ("0 0 * foo *", "month field 'foo': 'foo' is not a number 1-12 or a name like jan"),
        ("*/0 * * * *", "minute field '*/0': step '0'"),
        ("5-1 * * * *", "range '5-1' runs backwards"),
        ("0 0 31 2 *", "would never run"),
        ("0 0 * *", "expected 5 fields"),
        ("0 0 * * * *", "expected 5 fields"),
        ("RRULE:FREQ=DAILLY", "invalid 'FREQ': DAILLY"),
        ("RRULE:FREQ=DAILY;COUNT=3", "COUNT is not supported"),
        ("RRULE:FREQ=DAILY;BYFOO=1", "unknown parameter 'BYFOO'"),
        ("sometimes", "unknown schedule"),
        ("every 0 minutes", "at least 1"),
        ("", "unknown schedule"),
    ],
)
def test_bad_schedules_name_the_field(expression: str, field: str) -> None:
    with pytest.raises(ScheduleError, match=None) as caught:
        parse_schedule(expression)
    assert field in str(caught.value)
    assert "\n" not in str(caught.value)


def test_unknown_time_zone_suggests() -> None:
    with pytest.raises(ScheduleError, match="did you mean 'Europe/Berlin'"):
        zone("Europe/Berln")


# -- DST: one daily period per local day, with the right lengths -----------------------------


@pytest.mark.parametrize("text", ["daily", "0 0 * * *", "RRULE:FREQ=DAILY"])
def test_daily_in_santiago_where_midnight_itself_is_skipped_or_repeated(text: str) -> None:
    """America/Santiago changes its clocks at midnight: 2026-04-05's midnight happens twice
    (2026-04-04 is 25 hours long) and 2026-09-06's is skipped (that day starts at 01:00 and is
    23 hours long). Still one period per local day, each labelled with its local date."""
    tz = zone("America/Santiago")
    schedule = parse_schedule(text, "America/Santiago")
    start = to_utc(datetime(2026, 1, 1), tz)
    line = Timeline.single(schedule, start)
    periods = list(line.periods(start, to_utc(datetime(2027, 1, 1), tz)))
    assert len(periods) == 365
    dates = [to_wall(p.start, tz).date() for p in periods]
    assert dates == [(datetime(2026, 1, 1) + timedelta(days=i)).date() for i in range(365)]
    assert [period_label(schedule, p.start) for p in periods] == [d.isoformat() for d in dates]
    odd = {
        to_wall(p.start, tz).date().isoformat(): p.end - p.start
        for p in periods
        if p.end - p.start != timedelta(hours=24)
    }
    assert odd == {"2026-04-04": timedelta(hours=25), "2026-09-06": timedelta(hours=23)}
    skipped = next(p for p in periods if to_wall(p.start, tz).date().isoformat() == "2026-09-06")
    assert to_wall(skipped.start, tz).hour == 1


@pytest.mark.parametrize(
    ("tz", "short", "long", "changes"),
    [
        ("Europe/Berlin", timedelta(hours=23), timedelta(hours=25), ["2026-03-29", "2026-10-25"]),
        (
            "America/New_York",
            timedelta(hours=23),
            timedelta(hours=25),
            ["2026-03-08", "2026-11-01"],
        ),
        (
            "Australia/Lord_Howe",
            timedelta(hours=23, minutes=30),
            timedelta(hours=24, minutes=30),
            ["2026-04-05", "2026-10-04"],
        ),
        ("Asia/Tokyo", None, None, []),
    ],
)
@pytest.mark.parametrize("text", ["daily", "0 0 * * *", "RRULE:FREQ=DAILY"])
def test_daily_in_a_zone_across_both_changes_of_2026(
    tz: str,
    short: timedelta | None,
    long: timedelta | None,
    changes: list[str],
    text: str,
) -> None:
    schedule = parse_schedule(text, tz)
    start = to_utc(datetime(2026, 1, 1), zone(tz))
    line = Timeline.single(schedule, start)
    end = to_utc(datetime(2027, 1, 1), zone(tz))
    periods = list(line.periods(start, end))
    assert len(periods) == 365  # exactly one per local day
    days = [to_wall(p.start, zone(tz)) for p in periods]
    assert days == [datetime(2026, 1, 1) + timedelta(days=i) for i in range(365)]
    odd = {to_wall(p.start, zone(tz)).date().isoformat(): p.end - p.start for p in periods}
    odd = {day: length for day, length in odd.items() if length != timedelta(hours=24)}
    if not changes:
        assert odd == {}
        return
    assert short is not None and long is not None
    assert sorted(odd.values()) == sorted([short, long])
    assert sorted(odd) == changes
    assert period_label(schedule, periods[0].start) == "2026-01-01"


def test_the_dst_rule_moves_a_skipped_time_forward_and_takes_the_second_of_a_repeated_one() -> None:
    berlin = zone("Europe/Berlin")
    # 02:30 does not exist on 2026-03-29: read with the winter offset, it is 03:30 CEST
    assert to_utc(datetime(2026, 3, 29, 2, 30), berlin) == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    # 02:30 happens twice on 2026-10-25: the second one, CET
    assert to_utc(datetime(2026, 10, 25, 2, 30), berlin) == datetime(
        2026, 10, 25, 1, 30, tzinfo=UTC
    )
    line = Timeline.single(
        parse_schedule("30 2 * * *", "Europe/Berlin"), datetime(2026, 1, 1, tzinfo=UTC)
    )
    spring = list(
        line.periods(datetime(2026, 3, 28, tzinfo=UTC), datetime(2026, 3, 31, tzinfo=UTC))
    )
    assert [p.end - p.start for p in spring] == [
        timedelta(hours=24),
        timedelta(hours=23),
        timedelta(hours=24),
    ]
    autumn = list(
        line.periods(datetime(2026, 10, 24, tzinfo=UTC), datetime(2026, 10, 26, tzinfo=UTC))
    )
    assert [p.end - p.start for p in autumn] == [timedelta(hours=25), timedelta(hours=24)]


def test_wall_clock_cron_on_a_spring_forward_night_makes_no_twins() -> None:
    """Every 30 minutes in Berlin: 02:00 and 02:30 do not exist; they land on 03:00 and 03:30,
    which the schedule has anyway, so each counts once."""
    line = Timeline.single(
        parse_schedule("*/30 * * * *", "Europe/Berlin"), datetime(2026, 3, 1, tzinfo=UTC)
    )
    starts = list(
        line.starts(datetime(2026, 3, 29, 0, tzinfo=UTC), datetime(2026, 3, 29, 2, tzinfo=UTC))
    )
    walls = [s.astimezone(zone("Europe/Berlin")).strftime("%H:%M") for s in starts]
    assert walls == ["01:00", "01:30", "03:00", "03:30"]


# -- other forms ---------------------------------------------------------------------------


def test_aligned_boundaries() -> None:
    start = datetime(2026, 10, 1, 5, 30, tzinfo=UTC)

    def first(text: str, tz: str = "UTC") -> datetime:
        return timeline(text, tz, start).first

    assert first("hourly") == datetime(2026, 10, 1, 6, tzinfo=UTC)
    assert first("daily") == datetime(2026, 10, 2, tzinfo=UTC)
    assert first("weekly") == datetime(2026, 10, 5, tzinfo=UTC)  # Monday
    assert first("monthly") == datetime(2026, 11, 1, tzinfo=UTC)
    assert first("every 15 minutes") == start  # every-N schedules count from the start
    assert first("hourly", "Asia/Kolkata") == datetime(2026, 10, 1, 5, 30, tzinfo=UTC)
    assert first("daily", "Europe/Berlin") == datetime(2026, 10, 1, 22, tzinfo=UTC)


def test_hourly_in_a_zone_counts_elapsed_hours() -> None:
    line = timeline("hourly", "Europe/Berlin", datetime(2026, 3, 29, tzinfo=UTC))
    lengths = {p.end - p.start for p in line.periods(line.first, line.first + timedelta(days=2))}
    assert lengths == {timedelta(hours=1)}


def test_period_labels() -> None:
    daily, hourly = parse_schedule("daily"), parse_schedule("hourly")
    assert period_label(daily, datetime(2026, 10, 31, tzinfo=UTC)) == "2026-10-31"
    assert period_label(hourly, datetime(2026, 10, 31, 13, tzinfo=UTC)) == "2026-10-31T13:00:00Z"
    berlin = parse_schedule("daily", "Europe/Berlin")
    assert period_label(berlin, datetime(2026, 10, 30, 23, tzinfo=UTC)) == "2026-10-31"
    late = parse_schedule("30 2 * * *", "Europe/Berlin")
    assert period_label(late, datetime(2026, 10, 31, 1, 30, tzinfo=UTC)) == "2026-10-31T01:30:00Z"


# -- schedule changes ------------------------------------------------------------------------

START = datetime(2026, 10, 1, tzinfo=UTC)


def test_a_change_takes_effect_after_the_period_in_progress() -> None:
    daily = Timeline.single(parse_schedule("daily"), START)
    seen = datetime(2026, 11, 29, 14, 23, tzinfo=UTC)
    assert effective_from(daily, parse_schedule("hourly"), seen, START) == datetime(
        2026, 11, 30, tzinfo=UTC
    )
    hourly = Timeline.single(parse_schedule("hourly"), START)
    # hourly to daily: the hours run on to the next midnight
    assert effective_from(hourly, parse_schedule("daily"), seen, START) == datetime(
        2026, 11, 30, tzinfo=UTC
    )
    weekly = Timeline.single(parse_schedule("weekly"), START)
    # weekly (Mondays) to monthly: the week in progress ends Monday 30th, months start on the 1st
    since = effective_from(weekly, parse_schedule("monthly"), seen, START)
    assert since == datetime(2026, 12, 1, tzinfo=UTC)


@settings(max_examples=100, deadline=None)
@given(texts, texts, st.sampled_from(ZONES), instants, st.integers(0, 10**8))
def test_a_change_never_alters_a_period_that_has_begun(
    old: str, new: str, tz: str, start: datetime, after_s: int
) -> None:
    """Whatever the two schedules, every period that began before the change was noticed is
    the same before and after it, and the timeline still tiles time."""
    before = timeline(old, tz, start)
    seen = before.first + timedelta(seconds=after_s)
    recorded = [Recorded(start, drawn(old, tz).canonical, tz)]
    chosen = reconcile(drawn(new, tz), start, recorded, seen)
    after = chosen.timeline
    began = list(before.starts(before.first, seen))[-200:]
    for s in began:
        assert after.is_boundary(s)
        assert after.after(s) == before.after(s) or after.after(s) > seen
    if chosen.add is not None and chosen.add.since > before.first:
        since = chosen.add.since
        assert since > seen
        assert after.is_boundary(since)
        rebuilt = timeline_from([*recorded, chosen.add], start)
        probe = list(
            islice(
                after.starts(began[-1] if began else after.first, since + timedelta(days=40)), 50
            )
        )
        assert probe == list(islice(rebuilt.starts(probe[0], since + timedelta(days=40)), 50))


def test_daily_to_hourly_keeps_every_past_day_daily() -> None:
    seen = datetime(2026, 11, 29, 14, 23, tzinfo=UTC)
    recorded = [Recorded(START, "daily", "UTC")]
    chosen = reconcile(parse_schedule("hourly"), START, recorded, seen)
    assert chosen.add == Recorded(datetime(2026, 11, 30, tzinfo=UTC), "hourly", "UTC")
    line = chosen.timeline
    assert line.count(START, datetime(2026, 11, 30, tzinfo=UTC)) == 60  # Oct 1 … Nov 29: days
    assert line.count(datetime(2026, 11, 30, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)) == 24
    # the same config seen again records nothing; going back before it takes effect drops it
    again = reconcile(parse_schedule("hourly"), START, [*recorded, chosen.add], seen)
    assert not again.writes
    undo = reconcile(parse_schedule("daily"), START, [*recorded, chosen.add], seen)
    assert undo.drop_after == seen and undo.add is None
    assert undo.timeline.count(START, datetime(2026, 12, 1, tzinfo=UTC)) == 61


@settings(max_examples=150, deadline=None)
@given(texts, st.sampled_from(ZONES), instants, st.integers(0, 3 * 366 * 24))
def test_count_is_the_number_of_starts(text: str, tz: str, a: datetime, hours: int) -> None:
    """count() takes shortcuts where the offset is steady; it must still equal a walk."""
    schedule = drawn(text, tz).bound(a)
    b = a + min(timedelta(hours=hours), schedule.typical() * 3000)  # walks stay short
    walked = sum(1 for _ in schedule.starts(a, b))
    assert schedule.count(a, b) == walked


def test_a_skipped_day_is_no_period() -> None:
    """Samoa skipped 2011-12-30: its midnight lands on the next one, and counts once."""
    apia = zone("Pacific/Apia")
    line = timeline("daily", "Pacific/Apia", to_utc(datetime(2011, 12, 28), apia))
    periods = list(line.periods(line.first, to_utc(datetime(2012, 1, 2), apia)))
    days = [to_wall(p.start, apia).date().isoformat() for p in periods]
    assert days == ["2011-12-28", "2011-12-29", "2011-12-31", "2012-01-01"]
    assert {p.end - p.start for p in periods} == {timedelta(hours=24)}


def test_periods_of_fixed_steps_are_the_periods_of_their_starts() -> None:
    """Timeline.periods adds fixed steps instead of asking the schedule for every boundary;
    it must give what the general path gives, across a schedule change too."""
    from random import Random

    from catchup.schedule.reconcile import changed

    rng = Random(7)
    for _ in range(300):
        first, second = (
            rng.choice(["hourly", "every 15 minutes", "every 2 hours", "daily", "every 3 days"]),
            rng.choice(["hourly", "every 45 minutes", "daily", "every 2 hours"]),
        )
        start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=rng.randrange(0, 5000))
        line = Timeline.single(parse_schedule(first), start)
        since = line.ceil(start + timedelta(hours=rng.randrange(1, 200)))
        line = changed(line, parse_schedule(second), since, start)
        a = start + timedelta(minutes=rng.randrange(-100, 3000))
        b = a + timedelta(minutes=rng.randrange(0, 20000))
        assert list(line.periods(a, b)) == [line.period(s) for s in line.starts(a, b)]
