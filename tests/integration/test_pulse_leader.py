"""The pulse beside `catchup scheduler`: a `catchup tick` (a CronJob, a timer) that runs while
a scheduler leads is warned about; the scheduler's own ticks (recorded with their term) are
never a crowd, even two leaders' in one minute at a failover; a lead that ran out with no tick
since is warned about; and the due-to-start latency of the last hour's periods is in the scan's
JSON and its metrics."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from fix_processes import wait_for
from fix_project import Project, job_toml

from catchup.ledger import Ledger


def pulse(project: Project) -> dict[str, Any]:
    result = project.cli("scan", "--json")
    assert result.exit_code in (0, 1), result.output
    scheduler: dict[str, Any] = json.loads(result.stdout)["scheduler"]
    return scheduler


def minutely(project: Project, sql: Any) -> str:
    """A job every minute whose first period started two hours ago by the database clock;
    that period's start, as `run --period` takes it."""
    now = sql("SELECT clock_timestamp()")[0][0]
    start = (now - timedelta(hours=2)).replace(second=0, microsecond=0)
    project.write(
        job_toml(
            "pulse",
            schedule="every 1 minute",
            start=start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            catchup="latest",
            command=["true"],
        )
    )
    return f"{start:%Y-%m-%dT%H:%M:%SZ}"


def test_a_tick_beside_a_leading_scheduler_is_warned_about(
    project: Project, sql: Any, ledger: Ledger
) -> None:
    minutely(project, sql)
    assert ledger.lead("replica-a:1:abc", 0, timedelta(seconds=60)) is not None
    assert pulse(project)["ticks_beside_leader"] == []
    assert project.cli("tick").exit_code == 0  # a CronJob left beside the scheduler
    said = pulse(project)
    assert [b["host"] for b in said["ticks_beside_leader"]] != []
    assert said["ticks_beside_leader"][0]["ticks"] == 1
    (warning,) = [w for w in said["warnings"] if "while catchup scheduler leads" in w]
    assert warning.startswith("`catchup tick` ran 1 time from ")
    assert "(term 1)" in warning and "remove the CronJob or timer" in warning
    # the same words where people look: jobs, and scan's table
    assert "while catchup scheduler leads (term 1)" in project.cli("jobs").output


def test_the_schedulers_own_ticks_are_not_a_crowd(
    project: Project, sql: Any, ledger: Ledger
) -> None:
    minutely(project, sql)
    # a failover inside one minute: two leaders' ticks, each with its term
    ledger.record_tick("replica-a", 1)
    ledger.record_tick("replica-b", 2)
    said = pulse(project)
    assert not [w for w in said["warnings"] if "in the same minute" in w], said["warnings"]
    # two hosts' `catchup tick` in one minute still are
    ledger.record_tick("host-c")
    ledger.record_tick("host-d")
    said = pulse(project)
    assert [w for w in said["warnings"] if "ticks from 2 hosts in the same minute" in w]
    assert "host-c, host-d" in " ".join(said["warnings"])


def test_a_lead_that_ran_out_with_no_tick_since_is_warned_about(
    project: Project, sql: Any, ledger: Ledger
) -> None:
    minutely(project, sql)
    ledger.record_tick("replica-a", 1)
    assert ledger.lead("replica-a:1:abc", 0, timedelta(seconds=60)) is not None
    assert not [w for w in pulse(project)["warnings"] if "no catchup scheduler" in w]
    assert ledger.resign("replica-a:1:abc", 1)
    wait_for(lambda: not ledger.leader_now().live, timeout=10, what="the lease to end")  # type: ignore[union-attr]
    said = pulse(project)
    assert [w for w in said["warnings"] if w.startswith("no catchup scheduler has led for ")]
    # a `catchup tick` since (the team went back to a CronJob): nothing is left unstarted
    assert project.cli("tick").exit_code == 0
    assert not [w for w in pulse(project)["warnings"] if "no catchup scheduler" in w]


def test_due_to_start_latency_is_in_the_json_and_the_metrics(project: Project, sql: Any) -> None:
    first = minutely(project, sql)
    assert pulse(project)["due_to_start"] is None  # nothing started yet
    assert project.cli("tick").exit_code == 0  # the latest due period, started now
    late = pulse(project)["due_to_start"]
    ((started, due),) = sql(
        "SELECT r.claimed_at, r.period_end FROM {schema}.runs r WHERE r.attempt = 1"
    )
    waited = (started - due).total_seconds()
    assert late["periods"] == 1
    assert late["p50_seconds"] == late["p99_seconds"] == pytest.approx(waited, abs=0.002)
    assert 0 <= waited < 60
    metrics = project.cli("scan", "--format", "openmetrics").stdout
    assert "# TYPE catchup_due_to_start_seconds histogram" in metrics
    assert 'catchup_due_to_start_seconds_bucket{le="+Inf"} 1\n' in metrics
    assert 'catchup_due_to_start_seconds_bucket{le="60"} 1\n' in metrics  # waited below 60 s
    assert "catchup_due_to_start_seconds_count 1\n" in metrics
    # a period that fell due more than an hour ago, run now, is a replay, not a late start
    assert project.cli("run", "pulse", "--period", first).exit_code == 0
    assert pulse(project)["due_to_start"]["periods"] == 1


def test_periods_still_waiting_while_a_scheduler_leads_turn_the_pulse_red(
    project: Project, sql: Any, ledger: Ledger
) -> None:
    """Every worker busy for an hour: no period of the last hour started, so none has a
    due-to-start time; yet while a scheduler leads, those still waiting count as late as they
    are, and the pulse is red, never a green tick beside an hour of lateness."""
    now = sql("SELECT clock_timestamp()")[0][0]
    start = (now - timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    project.write(
        job_toml(
            "sixth",
            schedule="every 10 minutes",
            start=start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            command=["true"],
        )
    )
    assert project.cli("-q", "migrate").exit_code == 0
    assert project.cli("-q", "mark", "sixth", start.strftime("%Y-%m-%dT%H:%M:%SZ"), "--done",
                       "--reason", "registered").exit_code == 0  # fmt: skip
    assert pulse(project)["due_to_start"] is None  # no scheduler: a CronJob's interval decides
    assert ledger.lead("replica-a:1:abc", 0, timedelta(seconds=60)) is not None
    said = pulse(project)
    late = said["due_to_start"]
    assert late["waiting"] == late["periods"] >= 5, late  # six fell due in the hour (or five)
    assert late["p99_seconds"] > 15 * 60, late
    assert [w for w in said["warnings"] if w.startswith("the last hour's periods started late")]
    assert "still waiting" in project.cli("jobs").output
