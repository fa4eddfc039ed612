"""Cron's common day extensions (L, LW, nW, nL, n#k) and nicknames, against the expectations of
cronsim (https://github.com/cuu508/cronsim, release 2.7), an independent implementation used by
Healthchecks: each row says which of cronsim's tests (tests/test_cronsim.py) its facts come from.
cronsim has no ``nW``: those rows follow Quartz's definition (its CronTrigger tutorial: the weekday
nearest day n, never into another month, so 1W on a Saturday is Monday the 3rd)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise, takewhile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catchup.schedule import ScheduleError, parse_schedule, to_utc, to_wall, zone


def local_starts(expression: str, tz: str, start: str, n: int) -> list[str]:
    """The first ``n`` period starts at or after the local time ``start``, as local times."""
    begin = to_utc(datetime.fromisoformat(start), zone(tz))
    schedule = parse_schedule(expression, tz).bound(begin)
    return [
        to_wall(t, zone(tz)).isoformat(timespec="minutes") for t in islice(schedule.asc(begin), n)
    ]


def utc_starts(expression: str, tz: str, start: str, n: int) -> list[str]:
    begin = to_utc(datetime.fromisoformat(start), zone(tz))
    schedule = parse_schedule(expression, tz).bound(begin)
    return [t.strftime("%Y-%m-%dT%H:%MZ") for t in islice(schedule.asc(begin), n)]


CASES = [
    # test_it_handles_l (the first; the others are the months' last days, as cronsim gives them)
    (
        "1 1 L * *",
        "2020-01-01T00:00",
        ["2020-01-31T01:01", "2020-02-29T01:01", "2020-03-31T01:01", "2020-04-30T01:01"],
    ),
    # test_it_parses_day_lowercase_l: lower case is read alike
    ("1 1 l * *", "2020-01-01T00:00", ["2020-01-31T01:01", "2020-02-29T01:01"]),
    # test_it_accepts_l_with_step: a step after L changes nothing
    ("1 1 L/2 * *", "2020-01-01T00:00", ["2020-01-31T01:01", "2020-02-29T01:01"]),
    # test_it_handles_lw (the first): 2020-05-31 is a Sunday, so Friday the 29th; then the 31sts
    (
        "1 1 LW 5 *",
        "2020-01-01T00:00",
        ["2020-05-29T01:01", "2021-05-31T01:01", "2022-05-31T01:01"],
    ),
    # test_it_parses_day_lowercase_lw; 2022-04-30 is a Saturday, so Friday the 29th
    ("0 9 lw 4 *", "2022-01-01T00:00", ["2022-04-29T09:00", "2023-04-28T09:00"]),
    # test_it_handles_last_friday
    (
        "1 1 * * 5L",
        "2020-01-01T00:00",
        [
            "2020-01-31T01:01",
            "2020-02-28T01:01",
            "2020-03-27T01:01",
            "2020-04-24T01:01",
            "2020-05-29T01:01",
            "2020-06-26T01:01",
            "2020-07-31T01:01",
            "2020-08-28T01:01",
            "2020-09-25T01:01",
            "2020-10-30T01:01",
            "2020-11-27T01:01",
            "2020-12-25T01:01",
        ],
    ),
    # test_it_handles_last_sunday_two_notations: 0L and 7L
    ("1 1 * * 0L", "2020-01-01T00:00", ["2020-01-26T01:01"]),
    ("1 1 * * 7L", "2020-01-01T00:00", ["2020-01-26T01:01"]),
    # test_it_handles_nth_weekday (the first; then each month's second Monday)
    ("1 1 * * 1#2", "2020-01-01T00:00", ["2020-01-13T01:01", "2020-02-10T01:01"]),
    # test_it_parses_symbolic_weekday with '#' (cronsim reads names before '#')
    ("1 1 * * mon#2", "2020-01-01T00:00", ["2020-01-13T01:01", "2020-02-10T01:01"]),
    # test_it_handles_a_mix_of_ints_and_tuples: Mondays, Tuesdays and the first Wednesday
    (
        "1 1 * * 1,2,3#1",
        "2020-01-01T00:00",
        ["2020-01-01T01:01", "2020-01-06T01:01", "2020-01-07T01:01", "2020-01-13T01:01"],
    ),
    # n#5 skips months without a fifth one (cronsim's match_dow): no fifth Friday in January to
    # March 2022; April 2022 has five (1, 8, 15, 22, 29)
    (
        "0 0 * * 5#5",
        "2022-01-01T00:00",
        ["2022-04-29T00:00", "2022-07-29T00:00", "2022-09-30T00:00"],
    ),
    # test_it_handles_dow_star: day of week starts with '*', so both must match (first Sundays)
    (
        "1 1 1-7 * */7",
        "2020-01-01T00:00",
        ["2020-01-05T01:01", "2020-02-02T01:01", "2020-03-01T01:01", "2020-04-05T01:01"],
    ),
    # test_it_handles_dom_star: day of month starts with '*' (first Mondays)
    (
        "1 1 */100,1-7 * MON",
        "2020-01-01T00:00",
        ["2020-01-06T01:01", "2020-02-03T01:01", "2020-03-02T01:01", "2020-04-06T01:01"],
    ),
    # L with a restricted day of week: either matches (cronsim's match_day, Debian's rule):
    # Fridays, and Monday 2022-01-31
    (
        "0 0 L * 5",
        "2022-01-20T00:00",
        ["2022-01-21T00:00", "2022-01-28T00:00", "2022-01-31T00:00", "2022-02-04T00:00"],
    ),
    # LW or Sundays: 2022-04-29 is April's last weekday (the 30th is a Saturday)
    (
        "0 0 LW * 0",
        "2022-04-20T00:00",
        ["2022-04-24T00:00", "2022-04-29T00:00", "2022-05-01T00:00", "2022-05-08T00:00"],
    ),
    # Quartz's nW. 15W in 2022: Saturday 15 January is Friday the 14th, Tuesday 15 February
    # itself, Sunday 15 May Monday the 16th
    (
        "0 0 15W 1,2,5 *",
        "2022-01-01T00:00",
        ["2022-01-14T00:00", "2022-02-15T00:00", "2022-05-16T00:00"],
    ),
    # 1W: 2022-01-01 is a Saturday, so Monday the 3rd (not Friday 31 December); Sunday
    # 2022-05-01 is Monday the 2nd
    (
        "0 0 1W 1,2,5 *",
        "2022-01-01T00:00",
        ["2022-01-03T00:00", "2022-02-01T00:00", "2022-05-02T00:00"],
    ),
    # 31W: Sunday 2021-10-31 is Friday the 29th; November has no 31st; Friday 2021-12-31
    # itself; Saturday 2021-07-31 would be Friday the 30th
    (
        "0 0 31W * *",
        "2021-07-01T00:00",
        ["2021-07-30T00:00", "2021-08-31T00:00", "2021-10-29T00:00", "2021-12-31T00:00"],
    ),
]


@pytest.mark.parametrize(("expression", "start", "expected"), CASES)
def test_day_extensions_read_as_cronsim_and_quartz_read_them(
    expression: str, start: str, expected: list[str]
) -> None:
    assert local_starts(expression, "UTC", start, len(expected)) == expected


# Across DST changes in Europe/Riga (2021: clocks go forward at 03:00 EET on 28 March and back at
# 04:00 EEST on 31 October, as cronsim's TestDstTransitions notes) and Europe/Berlin, on
# catchup's documented rule: a skipped local time moves later by the gap, a repeated one means
# the second occurrence (cronsim, like Debian's cron, runs a skipped time at the jump and a
# repeated one at the first).
DST_CASES = [
    # the last Sunday of March 2021 is the 28th, whose 03:30 is skipped: 04:30 EEST
    ("30 3 * * 0L", "Europe/Riga", "2021-03-01T00:00", ["2021-03-28T01:30Z", "2021-04-25T00:30Z"]),
    # the 4th Sunday, 03:00 skipped: 04:00 EEST (where cronsim's test_011_at_3_mar also lands)
    ("0 3 * 3 7#4", "Europe/Riga", "2021-03-01T00:00", ["2021-03-28T01:00Z", "2022-03-27T01:00Z"]),
    # the last day of October 2021 is the 31st, whose 03:30 happens twice: the second, EET
    ("30 3 L 10 *", "Europe/Riga", "2021-10-01T00:00", ["2021-10-31T01:30Z", "2022-10-31T01:30Z"]),
    # Berlin's last Sunday of October 2021: 02:30 twice, the second is 02:30 CET
    # (and of 2022, the 30th: the clocks go back that night too)
    (
        "30 2 * 10 0L",
        "Europe/Berlin",
        "2021-10-01T00:00",
        ["2021-10-31T01:30Z", "2022-10-30T01:30Z"],
    ),
    # Berlin's 4th Sunday of March, the night the clocks go forward in 2021 and 2022: 02:30 is
    # skipped, so 03:30 CEST
    (
        "30 2 * 3 SUN#4",
        "Europe/Berlin",
        "2021-03-01T00:00",
        ["2021-03-28T01:30Z", "2022-03-27T01:30Z"],
    ),
]


@pytest.mark.parametrize(("expression", "tz", "start", "expected"), DST_CASES)
def test_day_extensions_across_dst_follow_catchups_rule(
    expression: str, tz: str, start: str, expected: list[str]
) -> None:
    assert utc_starts(expression, tz, start, len(expected)) == expected


EXPRESSIONS = [
    "1 1 L * *",
    "0 */6 LW * *",
    "30 2 15W * *",
    "0 0 1W,31W * *",
    "30 3 * * 5L",
    "0 3 * * 0L",
    "15 2 * * 1#2",
    "0 0 * * 5#5",
    "30 2 L * 5",
    "0 4 LW 3,10 1#1",
    "*/30 2-3 * * 0L",
]


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(EXPRESSIONS),
    st.sampled_from(["UTC", "Europe/Riga", "Europe/Berlin", "America/Santiago"]),
    st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)
    ),
)
def test_desc_and_count_agree_with_asc_over_a_year(expression: str, tz: str, a: datetime) -> None:
    """Walking back (desc, from walls_before) and counting (count_walls on steady stretches)
    give the periods walking forward gives, over a year from any instant."""
    schedule = parse_schedule(expression, tz).bound(a)
    b = a + timedelta(days=366)
    ahead = list(takewhile(lambda t: t < b, schedule.asc(a)))
    back = list(takewhile(lambda t: t >= a, schedule.desc(b)))
    assert back[::-1] == ahead
    assert schedule.count(a, b) == len(ahead)
    assert all(x < y for x, y in pairwise(ahead))


def test_nicknames() -> None:
    for nickname, same in [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@DAILY", "0 0 * * *"),
    ]:
        assert local_starts(nickname, "UTC", "2021-03-01T00:01", 3) == local_starts(
            same, "UTC", "2021-03-01T00:01", 3
        )


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("@reboot", "'@reboot': catchup runs a job once for each period of a schedule, and "),
        ("@every 5m", "unknown nickname: use one of @yearly, @annually, @monthly"),
        # cronsim's test_it_rejects_bad_values, test_it_rejects_zero_nth, test_it_rejects_big_nth,
        # test_it_rejects_dow_l_range, _hash, _slash, test_it_rejects_symbolic_dow_l
        ("0 0 * * 1#0", "day of week field '1#0': '#0' must be #1-#5"),
        ("0 0 * * 1#6", "day of week field '1#6': '#6' must be #1-#5 (for the last"),
        ("0 0 * * 5L-6", "day of week field '5L-6': '5L-6' is not a day"),
        ("0 0 * * 5L#1", "day of week field '5L#1'"),
        ("0 0 * * 5L/3", "day of week field '5L/3': '5L/3' is not a day"),
        ("0 0 * * MONL", "day of week field 'MONL': 'MONL': write the day as a number, 1L"),
        ("0 0 * * L", "day of week field 'L': 'L' is not a day"),
        ("0 0 * * 2#", "day of week field '2#'"),
        ("¹ * * * *", "minute field '¹': '¹' is not a number 0-59"),
        ("0 0 * * 1#٣", "day of week field '1#٣': '1#٣' is not a day"),
        ("0 0 LL * *", "day of month field 'LL': 'LL' is not a day: write a number 1-31, L"),
        ("0 0 LWX * *", "day of month field 'LWX': 'LWX' is not a day"),
        ("0 0 L/0 * *", "day of month field 'L/0': step '0' must be"),
        ("0 0 1-5W * *", "day of month field '1-5W': '1-5W' is not a day"),
        ("0 0 32W * *", "day of month field '32W': 32 is out of range 1-31"),
        ("0 0 ? * MON", "day of month field '?': '?' is Quartz's 'no particular day': write '*'"),
        # test_it_checks_day_of_month_range
        ("0 0 30 2 *", "day of month field '30': no such day in the month field '2'"),
        ("0 0 30W 2 *", "day of month field '30W': the days it picks in month field '2': there"),
        # test_it_handles_no_matches (cronsim gives up after 50 years)
        (
            "1 1 */100 * MON#4",
            "day of week field 'MON#4': the days in month field '*' that are also day of month "
            "field '*/100': there are none, so it would never run",
        ),
        # cronsim's README: every minute of the 1st and 21st if it is the last Monday
        ("* * */20 * 1L", "so it would never run"),
        # cronsim's README: Monday 29 February, 2044, 2072, …: decades apart
        ("0 0 * 2 MON#5", "are up to 14609 days apart: periods are at most 3650 days long"),
        # Quartz's L-n: the RRULE that says the same is named
        (
            "15 10 L-2 * *",
            "day of month field 'L-2': 'L-2' (Quartz's n days before the last) is not supported; "
            "'RRULE:FREQ=MONTHLY;BYMONTHDAY=-3;BYHOUR=10;BYMINUTE=15' says the same, from a start "
            "with its time of day",
        ),
        ("0 0 L-2 * 1", "'L-2' (Quartz's n days before the last) is not supported"),
    ],
)
def test_refusals_are_one_line_naming_the_field(expression: str, says: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_schedule(expression)
    message = str(caught.value)
    assert message.startswith(f"cron {expression!r}: ")
    assert says in message
    assert "\n" not in message


def test_the_rrule_a_refusal_names_says_the_same() -> None:
    """Quartz's L-2 at 10:15 fires on 2010-10-29 (its testLastDayOffset); the RRULE the refusal
    names does too."""
    with pytest.raises(ScheduleError) as caught:
        parse_schedule("15 10 L-2 * *")
    rrule = str(caught.value).split("'")[-2]
    start = datetime(2010, 10, 1, tzinfo=UTC)
    first = next(parse_schedule(rrule).bound(start).asc(start))
    assert first == datetime(2010, 10, 29, 10, 15, tzinfo=UTC)
