"""The clock the suite runs under reaches the server too (.ci/run's moved-clock legs)."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

import psycopg
from fix_db import Database


def test_the_server_keeps_the_test_process_clock(database: Database) -> None:
    """The server's now() agrees with this process's clock; under a moved-clock leg
    (CATCHUP_TEST_CLOCK_AHEAD days, CATCHUP_TEST_REAL_EPOCH the real time at its start) both are
    that far ahead of the real time."""
    with psycopg.connect(database.conninfo) as conn:
        before = datetime.now(UTC)
        row = conn.execute("SELECT clock_timestamp()").fetchone()
        after = datetime.now(UTC)
    assert row is not None
    server: datetime = row[0]
    assert before - timedelta(seconds=5) <= server <= after + timedelta(seconds=5), (
        f"server clock {server:%Y-%m-%dT%H:%M:%SZ}, test process {before:%Y-%m-%dT%H:%M:%SZ}"
    )
    ahead = os.environ.get("CATCHUP_TEST_CLOCK_AHEAD")
    if ahead:
        real = float(os.environ["CATCHUP_TEST_REAL_EPOCH"])
        moved = server.timestamp() - real
        days = int(ahead)
        # the real epoch was read before the run started; allow a day for the run itself
        assert days * 86400 <= moved + 60 <= (days + 1) * 86400, (
            f"the server is {moved / 86400:.2f} days ahead of the real clock, not {days}"
        )
        assert time.time() - real >= days * 86400 - 60, "this process's clock was not moved"
