"""Exactly once across a failover (issue 30), repeated: with durable_claims, a claim whose
commit the synchronous standby has not applied was never acknowledged, so its runner never
started the job; the primary crashes, the standby is promoted, and the period runs once on the
new primary. Zero periods run twice, zero lost, in every trial.

CATCHUP_FAILOVER_TRIALS sets the number of trials (50 by default: CI's fault leg);
benchmarks/failover.py runs 500 and prints the figures.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fix_db import Database
from fix_processes import wait_for
from fix_project import Project, job_toml
from fix_replica import Pair

pytestmark = [pytest.mark.faults, pytest.mark.slow]
TRIALS = int(os.environ.get("CATCHUP_FAILOVER_TRIALS", "50"))
ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)


def test_with_durable_claims_no_failover_runs_a_period_twice_or_loses_one(
    replica: Pair, tmp_path: Path
) -> None:
    replica.primary.set("synchronous_commit", "local")  # only claims ask
    replica.synchronous(True)
    marks = tmp_path / "ran"
    dsn = replica.dsn()
    project = Project(
        tmp_path, "catchup", Database(dsn, {"CATCHUP_DSN": dsn, "CATCHUP_DURABLE_CLAIMS": "true"})
    )
    project.write(
        job_toml(
            "billing",
            schedule="hourly",
            start="2026-01-01",
            command=["sh", "-c", f"echo $CATCHUP_PERIOD >> {marks}"],
        )
    )
    assert project.run("-q", "migrate").returncode == 0
    replica.caught_up()
    for trial in range(TRIALS):
        start = ORIGIN + timedelta(hours=trial)
        period = start.strftime("%Y-%m-%dT%H:%M:%SZ")
        replica.hold_wal_back(True)
        runner = project.spawn("-q", "run", "billing", "--period", period)

        def waits(runner: Any = runner) -> bool:
            return runner.poll() is not None or replica.primary.sql(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'"
            ) != [(0,)]

        try:
            wait_for(waits, 60, f"trial {trial}: the claim's commit to wait for the standby")
            assert runner.poll() is None, runner.communicate()
            replica.fail_over()
            runner.communicate(timeout=120)  # its claim's answer was lost: it did not run it
        finally:
            if runner.poll() is None:
                runner.kill()
        replay = project.cli(
            "-q", "replay", "--since", period, "--until", (start + timedelta(hours=1)).isoformat()
        )
        assert replay.exit_code == 0, replay.output
        ran = marks.read_text().split() if marks.exists() else []
        assert ran.count(period) == 1, (trial, ran)  # once: never twice, never lost
        assert replica.primary.sql(
            "SELECT status FROM catchup.runs WHERE period_start = %s", [start]
        ) == [("succeeded",)]
        replica.rebuild(sync=True)
    ran = marks.read_text().split()
    assert len(ran) == len(set(ran)) == TRIALS
