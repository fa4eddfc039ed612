"""The ledger on a real primary and its streaming standby (issue 30): a read-only server is
not a ledger (refused in one line within the bound), a multi-host DSN with
target_session_attrs=read-write follows a failover and a switchover, and durable_claims makes
a claim wait until the synchronous standby has applied it.

Run alone with ``uv run pytest -m faults tests/faults/test_replica.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fix_db import Database
from fix_processes import wait_for
from fix_project import Project, job_toml
from fix_replica import Node, Pair

pytestmark = [pytest.mark.faults, pytest.mark.slow]


def on(tmp_path: Path, dsn: str, name: str = "p", *, durable: bool = False) -> Project:
    folder = tmp_path / name
    folder.mkdir()
    env = {"CATCHUP_DSN": dsn} | ({"CATCHUP_DURABLE_CLAIMS": "true"} if durable else {})
    return Project(folder, "catchup", Database(dsn, env))


def rows(node: Node, dbname: str = "postgres") -> list[tuple[Any, ...]]:
    return node.sql(
        "SELECT j.name, r.period_start::date::text, r.status FROM catchup.runs r"
        " JOIN catchup.jobs j ON j.id = r.job_id ORDER BY 1, 2"
    )


def test_a_standby_or_a_read_only_primary_is_refused_in_one_line(
    replica: Pair, tmp_path: Path
) -> None:
    project = on(tmp_path, replica.standby.conninfo())
    project.write(job_toml("export", start="2026-03-01", command=["true"]))
    said = project.run("replay", "--since", "2026-03-01", "--until", "2026-03-03", timeout=60)
    assert said.returncode == 3, said
    lines = said.stderr.strip().splitlines()
    assert len(lines) == 1 and "is read-only (a standby in recovery)" in lines[0], lines
    assert "target_session_attrs=read-write" in lines[0]
    assert replica.standby.password not in said.stderr + said.stdout
    # a primary its failover manager fenced (read-only by default) is no ledger either
    replica.primary.set("default_transaction_read_only", "on")
    fenced = on(tmp_path, replica.primary.conninfo(), "fenced")
    fenced.write(job_toml("export", start="2026-03-01", command=["true"]))
    said = fenced.run("replay", "--since", "2026-03-01", "--until", "2026-03-03", timeout=60)
    assert said.returncode == 3 and "default_transaction_read_only is on" in said.stderr, said
    assert replica.primary.sql("SELECT count(*) FROM pg_namespace WHERE nspname = 'catchup'") == [
        (0,)
    ]  # nothing written


def test_a_multi_host_dsn_follows_a_failover_and_a_switchover(
    replica: Pair, tmp_path: Path
) -> None:
    project = on(tmp_path, replica.dsn())  # the standby listed first
    project.write(job_toml("export", start="2026-03-01", command=["true"]))
    first = project.run("-q", "replay", "--since", "2026-03-01", "--until", "2026-03-03")
    assert first.returncode == 0, first
    replica.caught_up()
    assert [r[1] for r in rows(replica.standby)] == ["2026-03-01", "2026-03-02"]
    replica.fail_over()  # the primary crashes, the standby is promoted: the same DSN goes on
    # its claims were asynchronous: the periods it does not show settled are suspect (it may
    # lack a claim of them) and not run until a person decides
    then = project.run("replay", "--since", "2026-03-01", "--until", "2026-03-05")
    assert then.returncode == 0, then
    said = " ".join(then.stdout.split())
    assert said.count("suspect: the ledger's server moved to timeline 2") == 2, then
    assert [r[1] for r in rows(replica.primary)] == ["2026-03-01", "2026-03-02"]
    # (the standby had caught up: they never ran; nor did 2026-03-05, which ended before the
    # failover too, so it is suspect as well)
    reset = project.run(
        "-q", "reset", "export", "2026-03-03", "2026-03-04", "2026-03-05", "--reason", "never ran"
    )
    assert reset.returncode == 0, reset
    then = project.run("-q", "replay", "--since", "2026-03-01", "--until", "2026-03-05")
    assert then.returncode == 0, then
    assert [r[1:] for r in rows(replica.primary)] == [
        ("2026-03-01", "succeeded"),
        ("2026-03-02", "succeeded"),
        ("2026-03-03", "succeeded"),
        ("2026-03-04", "succeeded"),
        ("2026-03-05", "failed"),  # reset: runnable, not replayed (after --until)
    ]
    # the old primary comes back as a standby: the DSN that named only it lands on a standby
    # and is refused within the bound; the listed pair goes on with the new primary
    old = replica.standby.data
    replica.rebuild(sync=False)
    assert replica.standby.data == old and replica.standby.in_recovery()
    stale = on(tmp_path, replica.standby.conninfo(), "stale")
    stale.write(job_toml("export", start="2026-03-01", command=["true"]))
    refused = stale.run("-q", "run", "export", "--period", "2026-03-05", timeout=60)
    assert refused.returncode == 3 and "a standby in recovery" in refused.stderr, refused
    again = project.run("-q", "run", "export", "--period", "2026-03-05")
    assert again.returncode == 0, again
    assert rows(replica.primary)[-1] == ("export", "2026-03-05", "succeeded")


def test_durable_claims_wait_for_the_synchronous_standby(replica: Pair, tmp_path: Path) -> None:
    # what durable_claims is for: a server whose commits are local by default, a synchronous
    # standby for the transactions that ask for it
    replica.primary.set("synchronous_commit", "local")
    replica.synchronous(True)
    marks = tmp_path / "ran"
    job = job_toml(
        "billing", start="2026-03-01", command=["sh", "-c", f"echo $CATCHUP_PERIOD >> {marks}"]
    )
    project = on(tmp_path, replica.dsn())
    project.write(job)
    assert project.run("-q", "migrate").returncode == 0
    replica.caught_up()
    replica.hold_wal_back(True)
    # without durable_claims the claim commits at once: the period runs with the standby away
    quick = project.run("-q", "run", "billing", "--period", "2026-03-01", timeout=60)
    assert quick.returncode == 0, quick
    assert marks.read_text().split() == ["2026-03-01"]
    durable = on(tmp_path, replica.dsn(), "durable", durable=True)
    durable.write(job)
    slow = durable.spawn("-q", "run", "billing", "--period", "2026-03-02")
    try:
        wait_for(
            lambda: slow.poll() is not None or replica.commit_waiting(),
            60,
            "the claim's commit to wait for the standby",
        )
        assert slow.poll() is None, slow.communicate()
        assert marks.read_text().split() == ["2026-03-01"]  # not started: its claim waits
        replica.hold_wal_back(False)
        _, err = slow.communicate(timeout=60)
    finally:
        if slow.poll() is None:
            slow.kill()
    assert slow.returncode == 0, err
    assert marks.read_text().split() == ["2026-03-01", "2026-03-02"]
    replica.caught_up()
    assert rows(replica.standby)[-1] == ("billing", "2026-03-02", "succeeded")
    doctor = durable.run("doctor", timeout=60)
    assert "durable_claims: 1 synchronous standby(s) apply each claim" in doctor.stdout, doctor
    # the quick claim above did not wait: the timeline is not durable, and doctor says so
    said = " ".join(doctor.stdout.split())
    assert "a claim on the server's timeline did not wait for a synchronous standby" in said


def test_a_durable_claim_the_standby_never_confirms_is_not_started(
    replica: Pair, tmp_path: Path
) -> None:
    # the synchronous standby stops applying (down, or cut off) and no failover manager takes
    # it out of synchronous_standby_names: a claim waits at most its lease, then is not used
    replica.primary.set("synchronous_commit", "local")
    replica.synchronous(True)
    marks = tmp_path / "ran"
    project = on(tmp_path, replica.dsn(), durable=True)
    project.write(
        job_toml(
            "billing",
            start="2026-03-01",
            lease="5s",
            command=["sh", "-c", f"echo $CATCHUP_PERIOD >> {marks}"],
        )
    )
    assert project.run("-q", "migrate").returncode == 0
    replica.caught_up()
    replica.hold_wal_back(True)
    said = project.run("run", "billing", "--period", "2026-03-02", timeout=60)
    assert said.returncode == 3, (said.stdout, said.stderr)
    assert "did not confirm the claim within its lease (5s)" in said.stdout + said.stderr, said
    assert "not started" in said.stdout + said.stderr
    assert not marks.exists()  # the job never ran
    # committed on the primary alone: running until its lease runs out, then claimable again
    assert rows(replica.primary) == [("billing", "2026-03-02", "running")]
    replica.hold_wal_back(False)
    replica.caught_up()
    wait_for(
        lambda: project.run("-q", "run", "billing", "--period", "2026-03-02").returncode == 0,
        60,
        "the period to be claimed again once its lease ran out",
    )
    assert marks.read_text().split() == ["2026-03-02"]
