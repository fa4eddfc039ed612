"""A failover without durable_claims (issue 30): the new primary lacks the old one's last claims
and finishes, and the ledger's timeline was not declared durable. Every period it does not show
settled is suspect: reported, not run until decided.
A job whose evidence (in a database the failover does not touch) shows its output is adopted,
never run twice; one without evidence waits for a person (reset), then runs once. A runner still
running when its claim was lost writes its row again and records its outcome.

CATCHUP_FAILOVER_TRIALS sets the number of trials (20 by default: CI's fault leg proves the
behaviour; the figures are the benchmark's);
benchmarks/failover.py runs 500 through ``trial`` and prints the figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fix_db import Database
from fix_processes import wait_for
from fix_project import Project, job_toml
from fix_replica import Pair
from psycopg import sql as pgsql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

pytestmark = [pytest.mark.faults, pytest.mark.slow]
TRIALS = int(os.environ.get("CATCHUP_FAILOVER_TRIALS", "20"))
ORIGIN = datetime(2026, 3, 1, tzinfo=UTC)  # the trials' periods: hours of a past month

# billing's program: its bill goes into the evidence database, its run into the marks file
BILL = """\
import sys, psycopg
dsn, period, marks = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
with psycopg.connect(dsn, autocommit=True) as conn:
    conn.execute("INSERT INTO bills (period) VALUES (%s)", [period])
with open(marks, "a") as f:
    f.write(f"billing {period}\\n")
"""


@dataclass(frozen=True)
class Trial:
    """What one failover without durable_claims did to its period of each job."""

    suspect: dict[str, bool]  # each job's period was suspect on the new primary
    billing: int  # how many times billing ran it: once, never again (its evidence adopts it)
    export_before: int  # export's runs before the decision: 1 (the lost one)
    export: int  # export's runs in all: 2 (the lost one, and once after the reset)
    status: dict[str, str | None]  # each job's row on the new primary at the end
    said: str  # what a scan's text said of the failover
    failover: dict[str, object] | None  # and its JSON
    first: str  # what the first command on the new primary said on stderr (its warning)
    next: str  # and the one after it (nothing of the move)


@pytest.fixture
def bills(database: Database) -> Iterator[str]:
    """A database of the suite's own server for billing's evidence: outside the pair."""
    name = "failover_bills"
    with psycopg.connect(database.conninfo, autocommit=True) as admin:
        drop = pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(pgsql.Identifier(name))
        admin.execute(drop)
        admin.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(name)))
    dsn = make_conninfo("", **{**conninfo_to_dict(database.conninfo), "dbname": name})
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE bills (period timestamptz)")
    try:
        yield dsn
    finally:
        with psycopg.connect(database.conninfo, autocommit=True) as admin:
            admin.execute(drop)


def suspects_project(
    pair: Pair, folder: Path, bills: str, *, schema: str = "catchup", lease: str = "60s"
) -> tuple[Project, Path]:
    """Hourly ``billing`` (evidence: its bills, outside the pair) and ``export`` (no evidence),
    their ledger on ``pair`` without durable_claims, migrated, the standby caught up."""
    marks = folder / "ran"
    (folder / "bills.dsn").write_text(bills)
    (folder / "bill.py").write_text(BILL)
    dsn = pair.dsn()
    project = Project(folder, schema, Database(dsn, {"CATCHUP_DSN": dsn}))
    project.write(
        job_toml(
            "billing",
            schedule="hourly",
            start="2026-03-01",
            lease=lease,
            command=[sys.executable, "bill.py", "bills.dsn", "{period}", str(marks)],
            evidence="SELECT period FROM bills",
            evidence_dsn=bills,
        )
        + job_toml(
            "export",
            schedule="hourly",
            start="2026-03-01",
            command=["sh", "-c", f"echo export $CATCHUP_PERIOD >> {marks}"],
        )
    )
    assert project.run("-q", "migrate").returncode == 0
    pair.caught_up()
    return project, marks


def scanned(project: Project, since: str, until: str) -> dict[str, Any]:
    return scanned_saying(project, since, until)[0]


def scanned_saying(project: Project, since: str, until: str) -> tuple[dict[str, Any], str]:
    """A scan's JSON, and the notes it said beside it."""
    scan = project.cli("-q", "scan", "--json", "--since", since, "--until", until)
    assert scan.exit_code in (0, 1), (scan.output, scan.exception)
    found: dict[str, Any] = json.loads(scan.stdout)
    return found, " ".join(scan.stderr.split())


def states(project: Project, since: str, until: str) -> dict[str, dict[str, int]]:
    return {job["job"]: job for job in scanned(project, since, until)["jobs"]}


def ran(marks: Path, job: str, period: str) -> int:
    return marks.read_text().split("\n").count(f"{job} {period}") if marks.exists() else 0


def let_go(runner: subprocess.Popen[str], go: Path) -> None:
    """The job its runner holds waits for ``go``: let it end; the runner exits 0."""
    go.touch()
    _, err = runner.communicate(timeout=60)
    assert runner.returncode == 0, err


def trial(pair: Pair, project: Project, marks: Path, n: int) -> Trial:
    """Period ``n`` of both jobs (export's decided first: missing at the previous failover, it is
    suspect since; billing's evidence decides its own) run on the primary while its WAL reaches
    nobody (claimed and finished there only), the primary killed and the standby promoted; a scan
    and a replay on the new one, export reset and replayed; then a standby rebuilt from it."""
    start = ORIGIN + timedelta(hours=n)
    period = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    until = (start + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    if n:  # the period was missing at the previous failover: suspect since, until decided
        decided = project.cli("-q", "reset", "export", period, "--reason", "never ran")
        assert decided.exit_code == 0, decided.output
    pair.hold_wal_back(True)
    for job in ("billing", "export"):
        done = project.cli("-q", "run", job, "--period", period)
        assert done.exit_code == 0, done.output
    pair.fail_over()
    document, first = scanned_saying(project, period, until)
    seen = {job["job"]: job for job in document["jobs"]}
    suspect = {job: seen[job]["suspect"] == 1 for job in ("billing", "export")}
    text = project.run("-q", "scan", "--since", period, "--until", until)
    assert text.returncode == 1, text.stderr  # suspect periods are gaps
    following = " ".join(text.stderr.split())
    said = " ".join(text.stdout.split())  # a piped console's 200 columns wrap long lines
    replay = project.cli("-q", "replay", "--since", period, "--until", until)
    assert replay.exit_code == 0, replay.output
    export_before = ran(marks, "export", period)
    reset = project.cli(
        "-q", "reset", "export", period, "--reason", "the failover lost it; run it again"
    )
    assert reset.exit_code == 0, reset.output
    replay = project.cli("-q", "replay", "--since", period, "--until", until)
    assert replay.exit_code == 0, replay.output
    runs = pgsql.Identifier(project.schema, "runs")
    jobs = pgsql.Identifier(project.schema, "jobs")
    found = pair.primary.sql(
        pgsql.SQL(
            "SELECT j.name, r.status FROM {} r JOIN {} j ON j.id = r.job_id"
            " WHERE r.period_start = %s"
        ).format(runs, jobs),
        [start],
    )
    pair.rebuild(sync=False)
    return Trial(
        suspect,
        ran(marks, "billing", period),
        export_before,
        ran(marks, "export", period),
        {job: dict(found).get(job) for job in ("billing", "export")},
        said,
        document.get("failover"),
        first,
        following,
    )


def test_without_durable_claims_every_lost_period_is_suspect_and_runs_once_after_its_decision(
    replica: Pair, tmp_path: Path, bills: str
) -> None:
    project, marks = suspects_project(replica, tmp_path, bills)
    for n in range(TRIALS):
        done = trial(replica, project, marks, n)
        # detected in every trial; with evidence never twice; without, once after the reset
        assert done.suspect == {"billing": True, "export": True}, (n, done)
        assert (done.billing, done.export_before, done.export) == (1, 1, 2), (n, done)
        assert done.status == {"billing": "succeeded", "export": "succeeded"}, (n, done)
        # the scan says so, with the window's length, and how to decide them
        assert "2 suspect periods: the ledger's server moved to timeline" in done.said, done
        assert "of the old primary's last writes" in done.said, done
        assert "`catchup reset JOB PERIOD --reason …`" in done.said, done
        assert done.failover is not None and done.failover["timeline"] == n + 2, done
        # the first command on the new primary warns of the move, once
        moved = f"warning: the ledger's server moved to timeline {n + 2}"
        assert moved in done.first and moved not in done.next, done


@pytest.mark.parametrize("registered", [True, False], ids=["registered", "new-job"])
def test_a_runner_whose_claim_a_failover_lost_writes_its_row_again_and_records_its_outcome(
    replica: Pair, tmp_path: Path, bills: str, registered: bool
) -> None:
    project, marks = suspects_project(replica, tmp_path, bills)
    go = tmp_path / "go"
    started = tmp_path / "started"
    period = "2026-03-02T05:00:00Z"
    until = "2026-03-02T06:00:00Z"
    jobs = pgsql.Identifier(project.schema, "jobs")
    if registered:  # both jobs registered, as in a ledger whose jobs ran before
        billed = project.run("-q", "run", "billing", "--period", "2026-03-02T04:00:00Z")
        assert billed.returncode == 0, billed.stderr
        assert replica.primary.sql(pgsql.SQL("SELECT count(*) FROM {}").format(jobs)) == [(2,)]
    else:  # new jobs: registered by the runner's command, and the failover loses them too
        assert replica.primary.sql(pgsql.SQL("SELECT count(*) FROM {}").format(jobs)) == [(0,)]
    export = job_toml(
        "export",
        schedule="hourly",
        start="2026-03-01",
        lease="15s",  # renewed every 5 s; outlives the failover
        # billing, which this config no longer names, has export's schedule: export is a job
        # of its own, not billing renamed (else it is held, and nothing of it runs)
        not_renamed=True,
        command=[
            "sh",
            "-c",
            f"touch {started}; while [ ! -e {go} ]; do sleep 0.1; done;"
            f" echo export $CATCHUP_PERIOD >> {marks}",
        ],
    )
    project.write(export)
    replica.caught_up()
    replica.hold_wal_back(True)
    runner = project.spawn("-q", "run", "export", "--period", period)
    try:
        wait_for(lambda: started.exists() or runner.poll() is not None, 60, "the job to start")
        assert runner.poll() is None, runner.communicate()
        replica.fail_over()
        runs = pgsql.Identifier(project.schema, "runs")
        row = pgsql.SQL("SELECT status, attempt FROM {} WHERE period_start = %s").format(runs)
        start = datetime(2026, 3, 2, 5, tzinfo=UTC)
        # its next heartbeat, on the new primary, finds the row gone and writes it again
        written = lambda: replica.primary.sql(row, [start]) != [] or runner.poll() is not None  # noqa: E731
        wait_for(written, 60, "the row written again")
        assert runner.poll() is None, runner.communicate()
        assert replica.primary.sql(row, [start]) == [("running", 1)]
        # a job added now, first of all, takes an id from the sequence past export's (written
        # again with the id its runner held, which the promoted sequence may not have reached)
        project.write(  # (first in the config: registered first)
            job_toml(
                "audit", schedule="hourly", start="2026-03-01", command=["true"], not_renamed=True
            )
            + export
        )
        reported = project.run("-q", "run", "audit", "--period", period)
        assert reported.returncode == 0, reported.stderr
        assert states(project, period, until)["export"]["running"] == 1
        doctor = project.run("doctor")
        assert "the ledger's server moved to timeline 2" in " ".join(doctor.stdout.split())
        replay = project.cli("-q", "replay", "--since", period, "--until", until)
        assert replay.exit_code == 0, replay.output
        let_go(runner, go)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert replica.primary.sql(row, [start]) == [("succeeded", 1)]
    assert ran(marks, "export", period) == 1  # the replay left it to its runner
    names = pgsql.SQL("SELECT name FROM {} WHERE name <> 'billing' ORDER BY name").format(jobs)
    assert replica.primary.sql(names) == [("audit",), ("export",)]


def test_a_keyed_jobs_lost_periods_are_suspect_in_its_scan_and_decided_per_key(
    replica: Pair, tmp_path: Path
) -> None:
    # one key's period claimed and finished on the primary only: after the failover it is
    # suspect in the keyed job's scan (with every other key's gap of the old timeline), not
    # run by a replay; a reset of that key's period runs it once more, the other key's once
    marks = tmp_path / "ran"
    dsn = replica.dsn()
    project = Project(tmp_path, "catchup", Database(dsn, {"CATCHUP_DSN": dsn}))
    project.write(
        job_toml(
            "feeds",
            schedule="hourly",
            start="2026-03-01",
            keys=["acme", "globex"],
            command=["sh", "-c", f"echo $CATCHUP_KEY $CATCHUP_PERIOD >> {marks}"],
        )
    )
    assert project.run("-q", "migrate").returncode == 0
    replica.caught_up()
    period, until = "2026-03-01T00:00:00Z", "2026-03-01T01:00:00Z"
    replica.hold_wal_back(True)
    done = project.cli("-q", "run", "feeds", "--key", "acme", "--period", period)
    assert done.exit_code == 0, done.output
    replica.fail_over()
    (feeds,) = scanned(project, period, until)["jobs"]
    assert (feeds["suspect"], feeds["missing"], feeds["succeeded"]) == (2, 0, 0), feeds
    text = project.run("-q", "scan", "--since", period, "--until", until)
    assert text.returncode == 1 and "2 suspect periods" in " ".join(text.stdout.split()), text
    replay = project.cli("-q", "replay", "--since", period, "--until", until)
    assert replay.exit_code == 0, replay.output
    assert marks.read_text().split("\n").count(f"acme {period}") == 1  # not run again
    for key in ("acme", "globex"):
        reset = project.cli("-q", "reset", "feeds", period, "--key", key, "--reason", "lost")
        assert reset.exit_code == 0, reset.output
    replay = project.cli("-q", "replay", "--since", period, "--until", until)
    assert replay.exit_code == 0, replay.output
    ran = marks.read_text().split("\n")
    assert (ran.count(f"acme {period}"), ran.count(f"globex {period}")) == (2, 1), ran
    (feeds,) = scanned(project, period, until)["jobs"]
    assert (feeds["suspect"], feeds["succeeded"]) == (0, 2), feeds


@pytest.mark.parametrize("at", ["heartbeat", "finish"])
def test_a_batchs_runner_whose_claims_a_failover_lost_writes_their_rows_again(
    replica: Pair, tmp_path: Path, at: str
) -> None:
    # a keyed job's first key runs alone (and claims the second with its finish), the next two
    # are claimed in one batch (the running one and the one waiting behind it); the failover
    # loses all four claims. The batch's runner writes both of its rows again (at its next
    # heartbeat with a short lease, at its finish with a long one) and records them; the first
    # two keys', finished, stay suspect
    marks, go = tmp_path / "ran", tmp_path / "go"
    dsn = replica.dsn()
    project = Project(tmp_path, "catchup", Database(dsn, {"CATCHUP_DSN": dsn}))
    wait = f"while [ ! -e {go} ]; do sleep 0.1; done"
    project.write(
        job_toml(
            "feeds",
            schedule="hourly",
            start="2026-03-01",
            keys=["acme", "beta", "globex", "initech"],
            # heartbeat: renewed every 5 s, outlives the failover; finish: first renewed after 20 s
            lease="15s" if at == "heartbeat" else "60s",
            command=[
                "sh",
                "-c",
                f"touch {tmp_path}/started.$CATCHUP_KEY;"
                f" case $CATCHUP_KEY in acme|beta) ;; *) {wait};; esac;"
                f" echo $CATCHUP_KEY $CATCHUP_PERIOD >> {marks}",
            ],
        )
    )
    assert project.run("-q", "migrate").returncode == 0
    # the job and its keys registered, as in a ledger whose job ran before
    earlier = project.run("-q", "run", "feeds", "--key", "acme", "--period", "2026-03-01")
    assert earlier.returncode == 0, earlier.stderr
    replica.caught_up()
    replica.hold_wal_back(True)
    period = "2026-03-02T05:00:00Z"
    start = datetime(2026, 3, 2, 5, tzinfo=UTC)
    runner = project.spawn("-q", "run", "feeds", "--period", period)
    runs = pgsql.Identifier(project.schema, "runs")
    rows = pgsql.SQL(
        "SELECT key, status, attempt, owner FROM {} WHERE period_start = %s ORDER BY key"
    ).format(runs)
    try:
        started = tmp_path / "started.globex"
        wait_for(lambda: started.exists() or runner.poll() is not None, 60, "globex to start")
        assert runner.poll() is None, runner.communicate()
        claimed = replica.primary.sql(rows, [start])
        # claimed together: globex runs, initech waits behind it with its lease held
        assert [(k, s) for k, s, _, _ in claimed] == [
            ("acme", "succeeded"),
            ("beta", "succeeded"),
            ("globex", "running"),
            ("initech", "running"),
        ], claimed
        replica.fail_over()
        assert replica.primary.sql(rows, [start]) == []  # the failover lost all four
        if at == "heartbeat":

            def written() -> bool:
                return len(replica.primary.sql(rows, [start])) == 2 or runner.poll() is not None

            wait_for(written, 60, "both rows written again")
            assert runner.poll() is None, runner.communicate()
            assert [r[:3] for r in replica.primary.sql(rows, [start])] == [
                ("globex", "running", 1),
                ("initech", "running", 1),
            ]
        let_go(runner, go)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert [r[:3] for r in replica.primary.sql(rows, [start])] == [
        ("globex", "succeeded", 1),
        ("initech", "succeeded", 1),
    ]
    (feeds,) = scanned(project, period, "2026-03-02T06:00:00Z")["jobs"]
    assert (feeds["suspect"], feeds["succeeded"]) == (2, 2), feeds  # acme's and beta's
    ran = marks.read_text().split("\n")
    assert [ran.count(f"{k} {period}") for k in ("acme", "beta", "globex", "initech")] == [1] * 4
