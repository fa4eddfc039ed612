"""``explain --json``: a period's bounds, label, local bounds, length, due moment and its DST
notes as data as well as words; which clock it was read by; and the words of a spring-forward
night, which never say "ends" (issue 51). Pure: ``now`` passed in."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from rich.console import Console

from catchup.config.job import Job
from catchup.config.loading import make_job
from catchup.render.explain import explanation, explanation_json
from catchup.reports.explain import Explanation, explain

JAN = datetime(2027, 1, 10, tzinfo=UTC)  # the clock: before the nights asked about
# Europe/Helsinki: EET (+02:00), EEST (+03:00) from the last Sunday of March, 03:00 → 04:00 local
SPRING = datetime(2027, 3, 28, 1, tzinfo=UTC)
OLD_KEYS = {
    "period",
    "start",
    "end",
    "label",
    "local_start",
    "local_end",
    "due",
    "is_due",
    "dst",
    "waits",
}


def helsinki(schedule: str) -> Job:
    return make_job("nightly", schedule, "2027-01-01", command=["true"], timezone="Europe/Helsinki")


def as_json(ex: Explanation) -> Any:
    return json.loads(explanation_json(ex))


def shown(ex: Explanation, width: int) -> str:
    out = io.StringIO()
    explanation(Console(file=out, width=width, markup=False, highlight=False), ex)
    return out.getvalue()


def test_a_period_in_json_has_its_length_due_moment_and_the_clock() -> None:
    job = make_job("billing", "daily", "2026-10-01", command=["true"], delay="30m")
    ex = explain(job, [job], now=JAN, start=datetime(2026, 10, 24, tzinfo=UTC), count=2)
    said = as_json(ex)
    assert said["clock"] == "database" and said["now"] == "2027-01-10T00:00:00Z"
    first = said["periods"][0]
    assert OLD_KEYS <= set(first)  # the keys scripts read stay; the rest are added
    assert first["start"] == "2026-10-24T00:00:00Z" and first["end"] == "2026-10-25T00:00:00Z"
    assert first["label"] == "2026-10-24" and first["local_start"] == "2026-10-24T00:00:00+00:00"
    assert (first["length_seconds"], first["due"], first["is_due"]) == (
        86400,
        "2026-10-25T00:30:00Z",
        True,
    )
    assert (first["clock_changes"], first["moved"]) == ([], [])
    assert said["dst_changes"] == []  # UTC: none
    host = explain(job, [job], now=JAN, start=None, count=1, clock="host")
    assert as_json(host)["clock"] == "host"
    assert "due (this host's clock)" in shown(host, 200)
    assert "due (this host's clock)" not in shown(ex, 200)


def test_a_spring_forward_night_in_helsinki_as_data() -> None:
    """`30 3 * * *`: 03:30 does not exist on 2027-03-28; that day's boundary is 04:30 EEST, so the
    period before it runs until 04:30 EEST, and the one after starts there (23 hours)."""
    job = helsinki("30 3 * * *")
    said = as_json(explain(job, [job], now=JAN, start=SPRING.replace(day=27, hour=12), count=2))
    before, after = said["periods"]
    assert (before["length_seconds"], after["length_seconds"]) == (86400, 23 * 3600)
    assert before["local_end"] == "2027-03-28T04:30:00+03:00"
    assert before["clock_changes"] == [
        {"at": "2027-03-28T01:00:00Z", "offset_change_seconds": 3600}
    ]
    moved = {
        "scheduled_local": "2027-03-28T03:30:00",
        "at": "2027-03-28T01:30:00Z",
        "at_local": "2027-03-28T04:30:00+03:00",
        "later_seconds": 3600,
        "one_boundary_for_both": False,
    }
    assert before["moved"] == [{"edge": "end", **moved}]
    assert after["moved"] == [{"edge": "start", **moved}] and after["clock_changes"] == []
    spring, autumn, *_ = said["dst_changes"]
    assert spring == {
        "at": "2027-03-28T01:00:00Z",
        "offset_change_seconds": 3600,
        "local_before": "2027-03-28T03:00:00",
        "local_after": "2027-03-28T04:00:00",
        "local_times": [
            {
                "scheduled_local": "2027-03-28T03:30:00",
                "kind": "skipped",
                "start": "2027-03-28T01:30:00Z",
                "start_local": "2027-03-28T04:30:00+03:00",
                "one_period_for_both": False,
            }
        ],
    }
    assert autumn["offset_change_seconds"] == -3600
    assert (autumn["local_before"], autumn["local_after"]) == (
        "2027-10-31T04:00:00",
        "2027-10-31T03:00:00",
    )
    assert autumn["local_times"] == [
        {
            "scheduled_local": "2027-10-31T03:30:00",
            "kind": "repeated",
            "start": "2027-10-31T01:30:00Z",  # the second 03:30, EET
            "start_local": "2027-10-31T03:30:00+02:00",
            "one_period_for_both": False,
        }
    ]
    # the words stay beside the data
    assert len(said["warnings"]) == 3 and said["warnings"][0].startswith("03:30 on 2027-03-28")


def test_a_skipped_hour_that_lands_on_a_scheduled_one_as_data() -> None:
    """`0 * * * *`: the skipped 03:00 falls on 04:00 EEST, scheduled anyway: one boundary."""
    job = helsinki("0 * * * *")
    said = as_json(explain(job, [job], now=JAN, start=SPRING.replace(hour=0), count=2))
    ending, starting = said["periods"]
    assert ending["clock_changes"] == [] and ending["moved"][0]["edge"] == "end"
    assert ending["moved"][0]["one_boundary_for_both"] is True
    assert starting["clock_changes"] == [
        {"at": "2027-03-28T01:00:00Z", "offset_change_seconds": 3600}
    ]
    assert starting["moved"][0]["at_local"] == "2027-03-28T04:00:00+03:00"
    (skipped,) = said["dst_changes"][0]["local_times"]
    assert skipped["scheduled_local"] == "2027-03-28T03:00:00"
    assert skipped["one_period_for_both"] is True


def test_a_schedule_of_elapsed_time_has_the_changes_but_no_local_times() -> None:
    job = helsinki("hourly")
    said = as_json(explain(job, [job], now=JAN, start=SPRING, count=1))
    assert said["periods"][0]["clock_changes"] == [
        {"at": "2027-03-28T01:00:00Z", "offset_change_seconds": 3600}
    ]
    assert said["periods"][0]["moved"] == []
    assert [c["offset_change_seconds"] for c in said["dst_changes"][:2]] == [3600, -3600]
    assert all(c["local_times"] == [] for c in said["dst_changes"])


@pytest.mark.parametrize("schedule", ["30 3 * * *", "0 * * * *", "hourly"])
@pytest.mark.parametrize("width", [80, 200])
def test_helsinki_spring_forward_is_never_called_dst_ending(schedule: str, width: int) -> None:
    """Issue 51: a note called the spring-forward change "DST ends" at 04:00 EEST. Every line,
    as a table or as blocks, says the clocks go forward and the period runs until or starts at
    a time, never that something ends."""
    job = helsinki(schedule)
    start = datetime(2027, 3, 27, tzinfo=UTC)  # the day before the change
    ex = explain(job, [job], now=JAN, start=start, count=3 if schedule == "30 3 * * *" else 30)
    text = shown(ex, width)
    flat = " ".join(text.split())
    assert "ends" not in flat, text
    assert "clocks go forward 1h at 2027-03-28T01:00:00Z" in flat
    if schedule == "30 3 * * *":
        assert "the period runs until 04:30 EEST: the scheduled 03:30 does not exist" in flat
        assert "the period starts at 04:30 EEST: the scheduled 03:30 does not exist" in flat
        assert "(clocks jump from 03:00 to 04:00)" in flat
        assert "(clocks go back 1h at 04:00)" in flat
    if schedule == "0 * * * *":
        assert "the period runs until 04:00 EEST: the scheduled 03:00 does not exist" in flat
        assert "falls on this 04:00, one boundary for both" in flat
