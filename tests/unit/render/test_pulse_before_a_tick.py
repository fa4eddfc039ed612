"""The page's scheduler line names the leader before the leader's first tick is recorded: the
page scans again when the lead is taken, and that scan may come before the tick (a CI run,
its clock moved, waited 30 s for "led by" that only the next refresh, an hour on, would say)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from catchup.render.web import pulse_line
from catchup.results import ScanReport
from catchup.scheduler.leadership import Leader
from catchup.scheduler.pulsefacts import Pulse

NOW = datetime(2026, 10, 1, 12, tzinfo=UTC)


def test_the_leader_is_named_before_its_first_tick_is_recorded() -> None:
    lead = Leader("host-a:41", 1, NOW, NOW + timedelta(seconds=30), NOW, live=True, now=NOW)
    line = pulse_line_of(Pulse(None, None, None, False, (), NOW, lead))
    assert "no tick recorded yet" in line and "led by host-a:41 (term 1" in line


def test_without_a_leader_the_line_asks_what_calls_tick() -> None:
    line = pulse_line_of(Pulse(None, None, None, False, (), NOW))
    assert line == "no tick recorded yet (is something calling `catchup tick`?)"


def pulse_line_of(pulse: Pulse) -> str:
    report = ScanReport(NOW, NOW - timedelta(days=1), NOW, (), pulse)
    return str(pulse_line(report)["text"])
