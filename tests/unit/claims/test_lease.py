"""The heartbeat's retry policy, with a renew function standing in for the ledger call."""

from __future__ import annotations

import itertools
from datetime import timedelta

from hypothesis import given
from hypothesis import strategies as st

from catchup.claims.lease import LeaseKeeper, retry_wait
from catchup.ledger.rows import Renewed


def test_the_first_retry_is_immediate() -> None:
    """A cut connection is retried at once, not a beat later."""
    assert retry_wait(1, interval=10, left=20) == 0
    assert retry_wait(2, interval=10, left=20) > 0


@given(
    st.integers(1, 60),
    st.floats(0.2, 600, allow_nan=False),
    st.floats(0, 1800, allow_nan=False),
)
def test_retries_fit_inside_the_lease(failures: int, interval: float, left: float) -> None:
    """No wait is longer than a beat or than half of the lease that is left."""
    wait = retry_wait(failures, interval, left)
    assert 0 <= wait <= min(interval, left / 2)


def test_retries_stop_when_the_lease_runs_out() -> None:
    """A renewal that keeps failing is retried, each reconnect bounded by the lease left, and
    the keeper gives up (lost) once the lease has run out instead of spinning on."""
    calls: list[float] = []

    def renew(within: float) -> Renewed | None:
        calls.append(within)
        raise OSError("server unreachable")

    keeper = LeaseKeeper(renew, timedelta(seconds=1.5))
    keeper.start()
    keeper.join(timeout=20)
    assert not keeper.is_alive()
    assert keeper.lost is not None and "server unreachable" in keeper.lost
    assert keeper.expired() == keeper.lost
    assert len(calls) >= 3  # the beat, the immediate retry, at least one backed-off retry
    assert all(0 <= b <= a <= 1.5 for a, b in itertools.pairwise(calls))
