"""Compaction's batch size: a batch holds its rows locked until it commits, so it shrinks while
batches take longer than BATCH_SECONDS and grows back, within its bounds, when they are quick."""

from __future__ import annotations

from catchup.maintenance.retention import BATCH_MIN, BATCH_PERIODS, BATCH_SECONDS, next_batch


def test_a_slow_batch_halves_the_next_down_to_the_floor() -> None:
    slow = BATCH_SECONDS * 2
    sizes = [BATCH_PERIODS]
    for _ in range(6):
        sizes.append(next_batch(sizes[-1], slow))
    assert sizes == [500, 250, 125, 62, 50, 50, 50]
    assert min(sizes) == BATCH_MIN


def test_a_quick_batch_doubles_the_next_up_to_the_most() -> None:
    quick = BATCH_SECONDS / 10
    assert next_batch(BATCH_MIN, quick) == 2 * BATCH_MIN
    assert next_batch(400, quick) == BATCH_PERIODS
    assert next_batch(BATCH_PERIODS, quick) == BATCH_PERIODS


def test_a_batch_in_between_keeps_the_size() -> None:
    assert next_batch(200, BATCH_SECONDS / 2) == 200
    assert next_batch(200, BATCH_SECONDS) == 200
