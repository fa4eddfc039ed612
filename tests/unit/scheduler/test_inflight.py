"""The ticks a scheduler leader has running at once (catchup/scheduler/inflight.py): a later tick
never
plans what an earlier one holds, nor another period of a job (or key) that forbids overlap
while one of its periods is held; the workers they keep busy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from catchup.config.job import Job
from catchup.config.loading import make_job
from catchup.results import Planned
from catchup.scheduler.inflight import InFlight

DAY = datetime(2026, 10, 1, tzinfo=UTC)


def planned(job: Job, days: int = 0) -> Planned:
    return Planned(job, job.timeline.period(DAY + timedelta(days=days)), "due")


def names(items: list[Planned]) -> list[tuple[str, str, int]]:
    return [(i.job.name, i.job.key or "", (i.period.start - DAY).days) for i in items]


def test_a_later_tick_plans_nothing_an_earlier_one_holds_nor_its_lane() -> None:
    billing = make_job("billing", "daily", "2026-09-01", command=["true"])  # overlap forbidden
    export = make_job("export", "daily", "2026-09-01", command=["true"], overlap="allow")
    flight = InFlight(8)
    with flight.tick(8) as first:
        assert names(first.plan([planned(billing), planned(export)])) == [
            ("billing", "", 0),
            ("export", "", 0),
        ]
        with flight.tick(8) as second:
            chosen = [planned(billing), planned(billing, 1), planned(export), planned(export, 1)]
            # billing's next period would only wait for the running one; export's may run
            assert names(second.plan(chosen)) == [("export", "", 1)]
            first.done("billing", "", DAY)
            assert names(second.plan([planned(billing, 1)])) == [("billing", "", 1)]
    with flight.tick(8) as third:  # the ticks ended: what they held is free
        assert len(third.plan([planned(billing), planned(export)])) == 2


def test_a_keyed_job_holds_its_keys_one_by_one() -> None:
    invoice = make_job("invoice", "daily", "2026-09-01", command=["true"], keys=["a", "b"])
    flight = InFlight(8)
    with flight.tick(8) as first, flight.tick(8) as second:
        first.plan([planned(invoice.for_key("a"))])
        later = [planned(invoice.for_key("a"), 1), planned(invoice.for_key("b"), 1)]
        assert names(second.plan(later)) == [("invoice", "b", 1)]


def test_a_tick_keeps_a_worker_per_period_it_holds_up_to_its_own() -> None:
    job = make_job("j", "daily", "2026-09-01", command=["true"], overlap="allow")
    flight = InFlight(4)
    with flight.tick(2) as first:
        first.plan([planned(job, n) for n in range(5)])
        assert flight.free() == 2  # five periods held, two workers: two busy
        for n in range(4):
            first.done("j", "", DAY + timedelta(days=n))
        assert flight.free() == 3  # one period left: one worker
    assert flight.free() == 4


def test_each_lane_has_its_own_workers_and_says_when_one_is_freed() -> None:
    """Lanes: the default lane's workers are --workers, another's the config's (resized as it
    is read again); a period done, or a tick ended, tells which lane freed a worker."""
    from catchup.scheduler.inflight import Lanes

    freed: list[str] = []
    lanes = Lanes(8, freed.append)
    found = lanes.of({"slow": 1}, ["default", "slow"])
    assert {n: f.workers for n, f in found.items()} == {"default": 8, "slow": 1}
    slow = found["slow"]
    job = make_job("billing", "daily", "2026-09-01", command=["true"], lane="slow")
    with slow.tick(1) as holding:
        holding.plan([planned(job)])
        assert slow.free() == 0 and found["default"].free() == 8  # never another lane's
        assert lanes.loads() == {"default": (8, 0), "slow": (1, 1)}
        holding.done("billing", "", DAY)
        assert freed == ["slow"] and slow.free() == 1
    assert freed == ["slow", "slow"]  # the tick ended too
    assert lanes.of({"slow": 3}, ["slow"])["slow"] is slow and slow.workers == 3  # resized
