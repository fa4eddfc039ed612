"""The worker pool's dispatcher: oldest first, never two periods of a job that forbids overlap
at once, the limit, a stop."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from catchup.config.loading import make_job
from catchup.replay.dispatch import Dispatcher
from catchup.results import Planned
from catchup.schedule import Period
from catchup.vocabulary import PeriodState

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def planned(job_name: str, k: int, overlap: str = "forbid") -> Planned:
    job = make_job(job_name, "hourly", "2026-11-01", command=["true"], overlap=overlap)
    start = T0 + timedelta(hours=k)
    return Planned(job, Period(start, start + timedelta(hours=1)), PeriodState.missing)


def test_the_dispatcher_never_hands_out_two_periods_of_a_forbid_job_at_once() -> None:
    items = [planned("a", 0), planned("a", 1), planned("b", 0)]
    dispatcher = Dispatcher(iter(items), None)
    first = dispatcher.take()
    second = dispatcher.take()
    assert (first, second) == (items[0], items[2])  # a's second waits for a's first
    taken: list[Planned | None] = []
    waiter = threading.Thread(target=lambda: taken.append(dispatcher.take()))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and taken == []  # blocked, not handed a's second period
    assert first is not None
    dispatcher.done(first)
    waiter.join(5)
    assert taken == [items[1]]


def test_the_dispatcher_lets_allow_jobs_overlap_and_honours_the_limit() -> None:
    items = [planned("a", k, overlap="allow") for k in range(5)]
    dispatcher = Dispatcher(iter(items), 3)
    assert [dispatcher.take() for _ in range(4)] == [*items[:3], None]


def test_a_stopped_dispatcher_hands_out_nothing() -> None:
    dispatcher = Dispatcher(iter([planned("a", 0)]), None)
    dispatcher.stop()
    assert dispatcher.take() is None
