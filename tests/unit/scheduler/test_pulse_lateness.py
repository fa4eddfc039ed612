"""The pulse is never a green tick beside an hour of periods started late (issue 49): amber
past a minute's p99, red past a quarter of an hour, with a warning that says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from catchup.render.web import pulse_line
from catchup.results import ScanReport
from catchup.scheduler.pulsefacts import Lateness, Pulse

NOW = datetime(2026, 10, 1, 12, tzinfo=UTC)


def pulse(waits: list[float]) -> Pulse:
    return Pulse(NOW - timedelta(seconds=30), "host", 60.0, False, (), NOW, late=Lateness.of(waits))


def report(p: Pulse) -> ScanReport:
    return ScanReport(generated_at=NOW, since=NOW, until=NOW, jobs=(), pulse=p)


def test_periods_started_on_time_keep_the_pulse_green() -> None:
    on_time = pulse([0.2] * 100)
    assert on_time.warnings == []
    assert pulse_line(report(on_time))["level"] == "ok"


def test_a_p99_past_a_minute_is_amber_and_past_a_quarter_hour_red() -> None:
    late = pulse([0.2] * 90 + [120.0] * 10)
    assert pulse_line(report(late))["level"] == "warn"
    (warning,) = late.warnings
    assert "p99 2m after falling due (over 1m" in warning
    hours = pulse([0.2] * 50 + [3600.0] * 50)
    line = pulse_line(report(hours))
    assert line["level"] == "bad" and line["glyph"] == "✖"
    assert "over 15m" in hours.warnings[0]


def test_the_periods_that_fell_due_in_the_hour_that_a_tick_would_start() -> None:
    """Every one a catch-up-all job's tick would start (newest first), the newest only of a
    catch-up-latest job's; none before the job's start, nor at `now` not yet due."""
    from catchup.config.loading import make_job
    from catchup.scheduler.pulsefacts import due_within

    now = NOW + timedelta(minutes=5)  # 12:05: due at 11:10 … 12:00 (11:05's end is 11:10)
    every = make_job("a", "every 10 minutes", "2026-10-01T09:00:00Z", command=["true"])
    dues = [p.end for p in due_within(every, now, timedelta(hours=1), 100)]
    assert dues == [NOW - timedelta(minutes=10 * n) for n in range(6)]
    assert len(due_within(every, now, timedelta(hours=1), 2)) == 2  # bounded
    latest = make_job(
        "b", "every 10 minutes", "2026-10-01T09:00:00Z", catchup="latest", command=["true"]
    )
    assert [p.end for p in due_within(latest, now, timedelta(hours=1), 100)] == [NOW]
    young = make_job("c", "every 10 minutes", "2026-10-01T11:40:00Z", command=["true"])
    assert [p.start for p in due_within(young, now, timedelta(hours=1), 100)] == [
        NOW - timedelta(minutes=10), NOW - timedelta(minutes=20)
    ]  # fmt: skip
