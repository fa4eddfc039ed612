"""The dependency gate as a property: random graphs of up to five jobs with mixed schedules and
zones, jobs that fail at random, several `catchup tick` processes racing (one SIGKILLed in the
middle), and after each round, from the ledger alone: no attempt of a period ever started
before every upstream period it waits for had succeeded (or been waived). A fault test (it
kills a process), run with the fault suite on PostgreSQL 18 and 17. Two seeded graphs in
CI (its 40 minutes); more with::

    CATCHUP_TEST_CHAIN_SEEDS=1-50 uv run pytest tests/integration/test_chains_property.py
"""

from __future__ import annotations

import os
import random
import signal
import time
from datetime import UTC, timedelta
from typing import Any

import pytest
from fix_project import Project, job_toml

from catchup.config.loading import load_config
from catchup.config.upstream import needed

SCHEDULES = [
    ("hourly", "UTC"),
    ("daily", "UTC"),
    ("daily", "Europe/Berlin"),
    ("every 30 minutes", "UTC"),
]
# fails about one time in four, after a moment's work (1 before %N: no leading zero, no octal)
FLAKY = ["sh", "-c", "sleep 0.0$(( 1$(date +%N) % 7 )); test $(( 1$(date +%N) % 4 )) -ne 0"]


def graph(rng: random.Random, start: str) -> str:
    """Up to five jobs; each may wait for earlier ones (overlapping or previous) and for its
    own previous period: acyclic by construction."""
    n = rng.randint(2, 5)
    names = [f"j{i}" for i in range(n)]
    text = ""
    for i, name in enumerate(names):
        schedule, zone = rng.choice(SCHEDULES)
        after: list[object] = []
        for up in names[:i]:
            if rng.random() < 0.6 or (i == 1 and up == "j0"):  # j1 always waits for j0
                after.append(up if rng.random() < 0.7 else {"job": up, "periods": "previous"})
        if rng.random() < 0.2:
            after.append({"job": name, "periods": "previous"})
        keys: dict[str, object] = {
            "timezone": zone,
            "command": FLAKY,
            "max_attempts": 3,
            "retry_backoff": "0s",
            "lease": "3s",
            "catchup_window": "3d",
            "max_per_tick": 1000,
        }
        if after:
            keys["after"] = after
        text += job_toml(name, schedule, start, **keys)
    return text


def violations(project: Project, sql: Any) -> tuple[list[str], int]:
    """Every attempt whose upstream periods were not all done when it started; and how many
    attempts of jobs that wait for others there were (so the check is not vacuous)."""
    config = load_config(project.config)
    runs = {
        (name, start): (status, finished)
        for name, start, status, finished in sql(
            "SELECT j.name, r.period_start, r.status, r.finished_at"
            " FROM {schema}.runs r JOIN {schema}.jobs j ON j.id = r.job_id"
        )
    }
    wrong, checked = [], 0
    for name, start, started in sql(
        "SELECT j.name, h.period_start, h.started_at"
        " FROM {schema}.history h JOIN {schema}.jobs j ON j.id = h.job_id"
    ):
        job = config.job(name)
        if not job.after:
            continue
        checked += 1
        period = job.timeline.period(start)
        for dep in job.after:
            up = config.job(dep.job)
            for q in needed(up.timeline, period, dep.periods):
                status, finished = runs.get((up.name, q.start), (None, None))
                if status not in ("succeeded", "waived") or finished is None or finished > started:
                    wrong.append(f"{name} {start} started {started}: {up.name} {q.start} {status}")
    return wrong, checked


def seeds() -> list[int]:
    """``CATCHUP_TEST_CHAIN_SEEDS``: ``1-50`` or ``4,9``; two seeds by default."""
    text = os.environ.get("CATCHUP_TEST_CHAIN_SEEDS", "1-2")
    if "-" in text:
        lo, hi = text.split("-", 1)
        return list(range(int(lo), int(hi) + 1))
    return [int(n) for n in text.split(",")]


@pytest.mark.faults  # it SIGKILLs a tick: with the fault suite, not under a moved clock
@pytest.mark.parametrize("seed", seeds())
def test_no_claim_ever_starts_before_its_upstream_is_done(
    project: Project, sql: Any, seed: int
) -> None:
    rng = random.Random(seed)
    (now,) = sql("SELECT now()")[0]
    start = (now.astimezone(UTC) - timedelta(days=2)).date().isoformat()
    project.write(graph(rng, start))
    assert project.cli("-q", "migrate").exit_code == 0
    for round_ in range(3):
        ticks = [project.spawn("-q", "tick", "--workers", "2") for _ in range(3)]
        if round_ == 0:  # one tick killed in the middle of its work
            time.sleep(rng.uniform(0.3, 1.5))
            ticks[0].send_signal(signal.SIGKILL)
        for tick in ticks:
            tick.communicate(timeout=300)
        # checked after each round, from the ledger: a later round cannot hide an early slip
        wrong, checked = violations(project, sql)
        assert wrong == [], f"round {round_ + 1}:\n" + "\n".join(wrong[:20])
        if round_ < 2:
            time.sleep(3.5)  # the killed tick's leases run out; the next round takes them over
    assert checked > 0, "no job that waits for another ever started: the check saw nothing"
