"""catchup/config/bounds.py: a number a command takes has one range and one default, which the
command line's option and the facade's check both read."""

from __future__ import annotations

from collections.abc import Callable

import click
import pytest

from catchup import Catchup, ConfigError, make_job
from catchup.cli import cli
from catchup.config.bounds import (
    EXPLAIN_COUNT,
    HISTORY_LIMIT,
    MAX_TIME,
    REPLAY_WORKERS,
    TICK_WORKERS,
    Bound,
)

NOWHERE = "postgresql://nobody@127.0.0.1:1/none"  # connecting would fail: nothing may connect


def option(command: str, name: str) -> click.Parameter:
    group = cli
    assert isinstance(group, click.Group)
    found = group.commands[command]
    return next(p for p in found.params if p.name == name)


@pytest.mark.parametrize(
    ("command", "name", "bound"),
    [
        ("tick", "workers", TICK_WORKERS),
        ("replay", "workers", REPLAY_WORKERS),
        ("history", "limit", HISTORY_LIMIT),
        ("explain", "count", EXPLAIN_COUNT),
    ],
)
def test_each_option_takes_its_range_and_default_from_its_bound(
    command: str, name: str, bound: Bound
) -> None:
    param = option(command, name)
    assert isinstance(param.type, click.IntRange)
    assert (param.type.min, param.type.max) == (bound.low, bound.high)
    assert param.default == bound.default


def test_max_time_takes_its_range_from_its_bound() -> None:
    param = option("tick", "max_time")
    low, high = getattr(param.type, "low", None), getattr(param.type, "high", None)
    assert (low, high) == (MAX_TIME.low, MAX_TIME.high)


def app() -> Catchup:
    job = make_job("export", "daily", "2026-10-01", command=["true"])
    return Catchup(jobs=[job], dsn=NOWHERE)


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (lambda a: a.tick(workers=65), "--workers 65: from 1 to 64"),
        (lambda a: a.tick(max_time=0.5), "--max-time 0.5s: from 1 second to 1 day"),
        (lambda a: a.replay(since="2026-10-01", workers=0), "--workers 0: from 1 to 64"),
        (lambda a: a.history("export", limit=100_001), "--limit 100001: from 1 to 100,000"),
        (lambda a: a.explain("export", count=0), "--limit 0: from 1 to 1,000"),
    ],
)
def test_the_facade_refuses_a_number_out_of_bounds_before_it_connects(
    call: Callable[[Catchup], object], said: str
) -> None:
    with app() as a, pytest.raises(ConfigError) as caught:
        call(a)
    assert str(caught.value) == said
