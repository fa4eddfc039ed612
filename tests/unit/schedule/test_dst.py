"""DST edge cases that other schedulers (systemd, cron, croniter, zoneinfo) were compared on:
starts inside a gap, labels of a skipped midnight, exact lengths, clock changes at a boundary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from itertools import islice
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from catchup.config.loading import make_job
from catchup.reports.explain import explain
from catchup.schedule import span, transitions

# Zones with DST gaps of different lengths and times of day (Santiago skips midnight, Lord
# Howe half an hour). Not Pacific/Apia: the day it skipped whole would move dates, not times.
GAP_ZONES = [
    "Europe/Berlin",
    "America/New_York",
    "America/Santiago",
    "Australia/Lord_Howe",
    "America/Havana",
    "Asia/Tehran",
]


def pg_rule(wall: datetime, tz: ZoneInfo) -> datetime:
    """PostgreSQL's reading of a local time, written out again here: inside a gap the offset
    from before the change (the later instant), in an overlap the second occurrence."""
    return max(wall.replace(tzinfo=tz, fold=f).astimezone(UTC) for f in (0, 1))


@lru_cache(maxsize=256)
def gaps(name: str, year: int) -> tuple[tuple[datetime, datetime], ...]:
    """The local times skipped in ``year``: (first skipped, first after), found with zoneinfo
    by stepping through the year."""
    tz = ZoneInfo(name)
    found = []
    t = datetime(year, 1, 1, tzinfo=UTC)
    while t.year == year:
        a, b = t, t + timedelta(minutes=30)
        jump = (b.astimezone(tz).utcoffset() or timedelta()) - (
            a.astimezone(tz).utcoffset() or timedelta()
        )
        if jump > timedelta(0):
            while b - a > timedelta(minutes=1):  # changes fall on whole minutes
                mid = a + (b - a) / 2
                mid = mid.replace(second=0, microsecond=0)
                if mid <= a:
                    break
                if mid.astimezone(tz).utcoffset() == a.astimezone(tz).utcoffset():
                    a = mid
                else:
                    b = mid
            after = b.astimezone(tz).replace(tzinfo=None)
            found.append((after - jump, after))
        t = b
    return tuple(found)


@st.composite
def starts_in_a_gap(draw: st.DrawFn) -> tuple[str, datetime]:
    name = draw(st.sampled_from(GAP_ZONES))
    year = draw(st.integers(2005, 2035))
    options = gaps(name, year)
    if not options:
        return name, draw(st.nothing())
    lo, hi = draw(st.sampled_from(options))
    minutes = int((hi - lo).total_seconds() // 60)
    return name, lo + timedelta(minutes=draw(st.integers(0, minutes - 1)))


SCHEDULES = st.one_of(
    st.integers(1, 5).map(lambda n: f"every {n} days"),
    st.integers(1, 3).map(lambda n: f"every {n} weeks"),
    st.integers(1, 4).map(lambda n: f"RRULE:FREQ=DAILY;INTERVAL={n}"),
    st.just("RRULE:FREQ=WEEKLY"),
    st.just("RRULE:FREQ=MONTHLY;BYMONTHDAY=-1"),
    st.just("RRULE:FREQ=MONTHLY;BYDAY=1SU"),
)


@settings(max_examples=300, deadline=None)
@given(starts_in_a_gap(), SCHEDULES)
def test_a_start_inside_a_gap_keeps_its_written_local_time(
    case: tuple[str, datetime], text: str
) -> None:
    """A start written inside a DST gap begins the gap's length later, and every later period
    starts at the written local time (or, where that time is skipped too, where PostgreSQL's
    rule moves it): the gap does not shift the schedule for good."""
    name, written = case
    tz = ZoneInfo(name)
    job = make_job("j", text, written.isoformat(), command=["true"], timezone=name)
    periods = list(islice(job.timeline.periods(job.anchor, datetime(2100, 1, 1, tzinfo=UTC)), 40))
    assert periods[0].start >= pg_rule(written, tz)
    if text.startswith(("every", "RRULE:FREQ=DAILY")):  # these count from the start itself
        assert periods[0].start == pg_rule(written, tz)
    for period in periods:
        local = period.start.astimezone(tz).replace(tzinfo=None)
        meant = datetime.combine(local.date(), written.time())
        assert period.start == pg_rule(meant, tz), (
            f"{period.start:%Y-%m-%dT%H:%MZ} is {local:%H:%M} local, not {written:%H:%M}"
        )


def test_the_santiago_examples() -> None:
    """The issue's examples, before and after: `every 2 days` from the skipped midnight of
    2026-09-06 runs at 00:00 on later days, as it does from 2026-09-05."""
    tz = ZoneInfo("America/Santiago")
    for start in ("2026-09-05", "2026-09-06"):
        job = make_job("j", "every 2 days", start, command=["true"], timezone="America/Santiago")
        later = list(islice(job.timeline.periods(job.anchor, datetime(2027, 1, 1, tzinfo=UTC)), 6))
        assert [p.start.astimezone(tz).strftime("%H:%M") for p in later[1:]] == ["00:00"] * 5


def test_the_berlin_rrule_examples() -> None:
    """RRULEs counted from a start at 02:30 on the spring-forward night keep 02:30, and the
    first period (the moved 02:30, 01:30 UTC) is not dropped."""
    berlin = ZoneInfo("Europe/Berlin")
    monthly = make_job(
        "m",
        "RRULE:FREQ=MONTHLY;BYMONTHDAY=-1",
        "2026-03-29T02:30:00",
        command=["true"],
        timezone="Europe/Berlin",
    )
    ends = list(
        islice(monthly.timeline.periods(monthly.anchor, datetime(2027, 1, 1, tzinfo=UTC)), 4)
    )
    assert [p.start.astimezone(berlin).strftime("%m-%d %H:%M") for p in ends] == [
        "03-31 02:30",
        "04-30 02:30",
        "05-31 02:30",
        "06-30 02:30",
    ]
    daily = make_job(
        "d",
        "RRULE:FREQ=DAILY;BYHOUR=2;BYMINUTE=30",
        "2026-03-29T02:30:00",
        command=["true"],
        timezone="Europe/Berlin",
    )
    assert daily.anchor == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)


def test_a_skipped_midnight_still_labels_the_local_day() -> None:
    """A daily job's {period} is the local date every day, also on the day whose midnight the
    clocks skip (its period starts at 01:00)."""
    job = make_job("j", "daily", "2026-09-01", command=["true"], timezone="America/Santiago")
    start = job.timeline.floor(datetime(2026, 9, 6, 12, tzinfo=UTC))
    assert start == datetime(2026, 9, 6, 4, tzinfo=UTC)  # 01:00 -03
    labels = [
        job.label(p.start)
        for p in job.timeline.periods(
            datetime(2026, 9, 4, tzinfo=UTC), datetime(2026, 9, 9, tzinfo=UTC)
        )
    ]
    assert labels == [f"2026-09-{d:02d}" for d in range(4, 9)]
    # a 01:00 job is not a midnight job, on that day either
    one = make_job("o", "0 1 * * *", "2026-09-01", command=["true"], timezone="America/Santiago")
    assert one.period_value(datetime(2026, 9, 6, 4, tzinfo=UTC)) == "2026-09-06T04:00:00Z"
    # people see the local time beside it
    assert one.label(datetime(2026, 9, 6, 4, tzinfo=UTC)) == "2026-09-06T04:00:00Z (01:00 -03)"


def test_lengths_are_exact() -> None:
    assert [span(s) for s in (45, 90, 3600, 5400, 84600, 86400, 88200, 7 * 86400)] == [
        "45s",
        "1m30s",
        "1h",
        "1h30m",
        "23h30m",
        "24h",
        "24h30m",
        "7d",
    ]
    assert span(timedelta(days=6, hours=23)) == "6d23h"
    assert span(0.5) == "0.5s"


def test_lord_howe_days_are_23h30m_and_24h30m() -> None:
    job = make_job("lh", "daily", "2026-01-01", command=["true"], timezone="Australia/Lord_Howe")
    now = datetime(2026, 1, 10, tzinfo=UTC)
    spring = explain(job, [job], now=now, start=datetime(2026, 10, 3, 12, tzinfo=UTC), count=2)
    autumn = explain(job, [job], now=now, start=datetime(2027, 4, 3, 12, tzinfo=UTC), count=2)
    assert [span(r.period.end - r.period.start) for r in (*spring.rows, *autumn.rows)] == [
        "24h",
        "23h30m",
        "24h",
        "24h30m",
    ]


def test_a_clock_change_at_a_boundary_belongs_to_the_period_that_starts_there() -> None:
    """transitions() is [lo, hi): an hourly job's period that ends at the Berlin change does not
    report it; the one that starts there does."""
    berlin = ZoneInfo("Europe/Berlin")
    at = datetime(2027, 3, 28, 1, tzinfo=UTC)
    assert transitions(berlin, at - timedelta(hours=1), at) == []
    assert transitions(berlin, at, at + timedelta(hours=1)) == [(at, timedelta(hours=1))]
    job = make_job("h", "hourly", "2027-01-01", command=["true"], timezone="Europe/Berlin")
    rows = explain(job, [job], now=at, start=at - timedelta(hours=1), count=2).rows
    assert rows[0].dst is None
    assert rows[1].dst == "clocks go forward 1h at 2027-03-28T01:00:00Z"


def test_a_skipped_hour_that_lands_on_a_scheduled_one_is_said_plainly() -> None:
    """`0 * * * *` in Berlin: the skipped 02:00 falls on 03:00 CEST, which is scheduled anyway;
    explain says one boundary serves both instead of calling 03:00 CEST a missing 02:00."""
    job = make_job("h", "0 * * * *", "2027-01-01", command=["true"], timezone="Europe/Berlin")
    at = datetime(2027, 3, 28, 1, tzinfo=UTC)
    result = explain(job, [job], now=at, start=at, count=1)
    assert result.rows[0].dst == (
        "clocks go forward 1h at 2027-03-28T01:00:00Z; the period starts at 03:00 CEST: the "
        "scheduled 02:00 does not exist that night and falls on this 03:00, one boundary for both"
    )
    note = next(w for w in result.warnings if w.startswith("02:00 on 2027-03-28"))
    assert "it falls on 03:00 CEST (2027-03-28T01:00:00Z), which is scheduled too" in note
