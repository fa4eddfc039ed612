"""Exactly once across a failover (issue 30), repeated: with durable_claims, a claim whose
commit the synchronous standby has not applied was never acknowledged, so its runner never
started the job; the primary crashes, the standby is promoted, and the period runs once on the
new primary. Zero periods run twice, zero lost, in every trial.

CATCHUP_FAILOVER_TRIALS sets the number of trials (20 by default: CI's fault leg proves the
behaviour; the figures are the benchmark's);
benchmarks/failover.py runs 500 through ``trial`` and prints the figures.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fix_db import Database
from fix_processes import wait_for
from fix_project import Project, job_toml
from fix_replica import Pair
from psycopg import sql as pgsql

pytestmark = [pytest.mark.faults, pytest.mark.slow]
TRIALS = int(os.environ.get("CATCHUP_FAILOVER_TRIALS", "20"))
ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)  # the trials' periods: hours of a past year


@dataclass(frozen=True)
class Trial:
    """What one failover did to its period."""

    runs: int  # how many times the job ran the period, in all
    first: bool  # the runner started on the old primary ran it (before or after the failover)
    status: str | None  # the period's row on the new primary, after a replay


def failover_project(
    pair: Pair, folder: Path, *, durable: bool, schema: str = "catchup"
) -> tuple[Project, Path]:
    """An hourly job that appends its period to a file, its ledger on ``pair`` (migrated; the
    standby caught up); for synchronous claims, the server commits locally by default and the
    standby is synchronous for the transactions that ask."""
    marks = folder / "ran"
    dsn = pair.dsn()
    env = {"CATCHUP_DSN": dsn, "CATCHUP_DURABLE_CLAIMS": "true" if durable else "false"}
    project = Project(folder, schema, Database(dsn, env))
    project.write(
        job_toml(
            "billing",
            schedule="hourly",
            start="2026-01-01",
            command=["sh", "-c", f"echo $CATCHUP_PERIOD >> {marks}"],
        )
    )
    pair.primary.set("synchronous_commit", "local")
    pair.synchronous(durable)
    assert project.run("-q", "migrate").returncode == 0
    pair.caught_up()
    return project, marks


def trial(pair: Pair, project: Project, marks: Path, n: int, *, durable: bool) -> Trial:
    """Period ``n``: the standby's WAL held back, a runner started on the primary (with
    durable_claims: until its claim's commit waits for the standby; without: until it ran),
    the primary killed and the standby promoted, a replay of the period on the new one; then
    a standby rebuilt from it. Returns what happened to the period."""
    start = ORIGIN + timedelta(hours=n)
    period = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    pair.hold_wal_back(True)
    runner = project.spawn("-q", "run", "billing", "--period", period)

    def waits(runner: Any = runner) -> bool:
        return runner.poll() is not None or pair.commit_waiting()

    try:
        if durable:
            wait_for(waits, 60, f"trial {n}: the claim's commit to wait for the standby")
            assert runner.poll() is None, runner.communicate()
            pair.fail_over()
            # its claim's answer was lost: it ran the period only if, reconnected to the new
            # primary, it claimed it there
            runner.communicate(timeout=120)
        else:
            _, err = runner.communicate(timeout=60)
            assert runner.returncode == 0, err  # ran and recorded, on the old primary only
            pair.fail_over()
    finally:
        if runner.poll() is None:
            runner.kill()
    first = marks.exists() and period in marks.read_text().split()
    until = (start + timedelta(hours=1)).isoformat()
    replay = project.cli("-q", "replay", "--since", period, "--until", until)
    assert replay.exit_code == 0, replay.output
    ran = marks.read_text().split() if marks.exists() else []
    runs = pgsql.Identifier(project.schema, "runs")
    found = pair.primary.sql(
        pgsql.SQL("SELECT status FROM {} WHERE period_start = %s").format(runs), [start]
    )
    pair.rebuild(sync=durable)
    return Trial(ran.count(period), first, found[0][0] if found else None)


def test_with_durable_claims_no_failover_runs_a_period_twice_or_loses_one(
    replica: Pair, tmp_path: Path
) -> None:
    project, marks = failover_project(replica, tmp_path, durable=True)
    for n in range(TRIALS):
        done = trial(replica, project, marks, n, durable=True)
        assert done.runs == 1 and done.status == "succeeded", (n, done)  # never twice, never lost
    ran = marks.read_text().split()
    assert len(ran) == len(set(ran)) == TRIALS
    # one more failover: the first command on the new primary says so, and that it opens no
    # suspect window (every claim before it waited for the standby); the next one does not
    replica.fail_over()
    for n, expected in enumerate((True, False)):
        scan = project.cli("-q", "scan", "--since", "2026-01-01", "--until", "2026-01-02")
        said = " ".join(scan.output.split())
        assert (f"note: the ledger's server moved to timeline {TRIALS + 2}" in said) is expected
        assert "nothing is suspect" in said if expected else "suspect" not in said, (n, said)


def test_a_claim_that_does_not_wait_for_the_standby_opens_the_suspect_window_again(
    replica: Pair, tmp_path: Path
) -> None:
    # a durable ledger trusts its promoted standby (the trials above: nothing suspect); one
    # host without durable_claims makes a claim that does not wait, and from then on a
    # failover may have lost claims: the periods the new primary does not show settled are
    # suspect, not run
    project, marks = failover_project(replica, tmp_path, durable=True)
    hasty = tmp_path / "hasty"
    hasty.mkdir()
    env = {"CATCHUP_DSN": replica.dsn(), "CATCHUP_DURABLE_CLAIMS": "false"}
    other = Project(hasty, project.schema, Database(replica.dsn(), env))
    other.config.write_text(project.config.read_text())
    done = other.run("-q", "run", "billing", "--period", "2026-01-01T00:00:00Z")
    assert done.returncode == 0, done
    replica.caught_up()
    replica.fail_over()
    said = project.run(
        "replay", "--since", "2026-01-01T00:00:00Z", "--until", "2026-01-01T02:00:00Z"
    )
    assert said.returncode == 0, said
    assert "suspect: the ledger's server moved to timeline 2" in " ".join(said.stdout.split())
    # the first command on the new primary says so on stderr (the next ones do not)
    warned = " ".join(said.stderr.split())
    assert "warning: the ledger's server moved to timeline 2" in warned, warned
    assert "are suspect, not run until decided (`catchup scan` lists them)" in warned, warned
    assert marks.read_text().split() == ["2026-01-01T00:00:00Z"]  # the suspect one not run
    why = project.run("why", "billing", "2026-01-01T01:00:00Z")
    words = " ".join(why.stdout.split())
    assert why.returncode == 0 and "suspect: the ledger's server moved to timeline 2" in words, why
    assert 'catchup reset billing 2026-01-01T01:00:00Z --reason "…"' in words, why
