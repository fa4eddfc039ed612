"""Evidence per key: a keyed job's evidence query gives (key, date) rows, checked against the
ledger key by key. A key's succeeded period without its evidence is unverified; its evidence
without a ledger row is untracked, never run by a replay; ``verify`` fails a key's run that left
none. Real tables in the ledger's database."""

from __future__ import annotations

import json
from typing import Any

from fix_project import Project, job_toml

TENANTS = ["acme", "globex", "initech"]


def _job(project: Project, **extra: object) -> Any:
    log = project.path / "ran"
    evidence = f"SELECT tenant, day FROM {project.schema}.invoices"
    project.write(
        job_toml(
            "invoice",
            "daily",
            "2026-10-01",
            keys=TENANTS,
            command=["sh", "-c", f'echo "$0 $1" >> {log}', "{key}", "{period}"],
            evidence=evidence,
            **extra,
        )
    )
    return log


def _invoices(sql: Any, rows: list[tuple[str, str]]) -> None:
    sql("CREATE TABLE IF NOT EXISTS {schema}.invoices (tenant text, day date)")
    for tenant, day in rows:
        sql("INSERT INTO {schema}.invoices VALUES (%s, %s)", (tenant, day))


def _scan(project: Project) -> tuple[int, dict[str, Any]]:
    result = project.cli("-q", "scan", "--json", "--until", "2026-10-04")
    return result.exit_code, json.loads(result.stdout)


def _migrated(project: Project) -> None:
    project.write(job_toml("none", command=["true"]))
    assert project.cli("-q", "migrate").exit_code == 0


def test_a_keyed_jobs_evidence_is_checked_key_by_key(project: Project, sql: Any) -> None:
    """acme and globex ran all three days, initech none. acme left its invoices; globex's last
    day has none (unverified); initech's second day has one though catchup never ran it
    (untracked: not a gap), its first and third are missing."""
    _migrated(project)
    _invoices(sql, [])
    _job(project)
    for tenant in ("acme", "globex"):
        ran = project.cli(
            "-q", "replay", "--key", tenant, "--since", "2026-10-01", "--until", "2026-10-04"
        )
        assert ran.exit_code == 0, ran.output
    # what the runs left behind, and one invoice catchup never ran
    _invoices(sql, [("acme", f"2026-10-0{d}") for d in (1, 2, 3)])
    _invoices(sql, [("globex", "2026-10-01"), ("globex", "2026-10-02")])
    _invoices(sql, [("initech", "2026-10-02")])
    code, report = _scan(project)
    assert code == 1
    (job,) = report["jobs"]
    counts = {k: job[k] for k in ("expected", "succeeded", "missing", "unverified", "untracked")}
    assert counts == {
        "expected": 9,
        "succeeded": 5,
        "missing": 2,
        "unverified": 1,
        "untracked": 1,
    }
    gaps = sorted((g["status"], g["first"][:10], tuple(g["keys"])) for g in job["gaps"])
    assert gaps == [
        ("missing", "2026-10-01", ("initech",)),
        ("missing", "2026-10-03", ("initech",)),
        ("unverified", "2026-10-03", ("globex",)),
    ]


def test_a_replay_never_runs_a_keys_untracked_period(project: Project, sql: Any) -> None:
    """initech's invoice of 2026-10-02 exists though catchup has no run of it: a replay runs
    initech's two missing days and leaves that one alone (the claim path reads the key's
    evidence before it claims; acme's invoice of the first day is acme's, not initech's)."""
    _migrated(project)
    _invoices(sql, [("initech", "2026-10-02"), ("acme", "2026-10-01")])
    log = _job(project)
    ran = project.cli(
        "-q", "replay", "--key", "initech", "--since", "2026-10-01", "--until", "2026-10-04"
    )
    assert ran.exit_code == 0, ran.output
    assert sorted(log.read_text().split("\n")[:-1]) == ["initech 2026-10-01", "initech 2026-10-03"]
    said = " ".join(ran.output.split())
    assert "1 untracked period(s) left alone" in said, ran.output
    assert "a keyed job's: catchup mark JOB PERIOD --key K --done" in said, ran.output
    # and a run of that period by name says why it does not run it
    one = project.cli("-q", "run", "invoice", "--key", "initech", "--period", "2026-10-02")
    assert "untracked" in one.output, one.output
    assert sorted(log.read_text().split("\n")[:-1]) == ["initech 2026-10-01", "initech 2026-10-03"]


def test_verify_fails_a_keys_run_that_left_no_evidence(project: Project, sql: Any) -> None:
    """With verify = true, acme's run (its invoice exists) succeeds and globex's (none) fails:
    each key's run is checked against that key's evidence only."""
    _migrated(project)
    _invoices(sql, [])
    _job(project, verify=True)
    # acme's invoice appears as its run ends: the job wrote it (here, the test for it)
    _invoices(sql, [("acme", "2026-10-01")])
    acme = project.cli(
        "-q", "run", "invoice", "--key", "acme", "--period", "2026-10-01", "--ignore-evidence"
    )
    globex = project.cli("-q", "run", "invoice", "--key", "globex", "--period", "2026-10-01")
    assert globex.exit_code != 0
    assert "no evidence" in globex.output, globex.output
    rows = sql("SELECT key, status FROM {schema}.runs WHERE key <> '' ORDER BY key")
    assert rows == [("acme", "succeeded"), ("globex", "failed")], acme.output


def test_adopt_of_a_keyed_job_is_refused_with_what_to_do_instead(
    project: Project, sql: Any
) -> None:
    _migrated(project)
    _invoices(sql, [("initech", "2026-10-02")])
    _job(project)
    result = project.cli("adopt", "invoice", "--since", "2026-10-01", "--reason", "cron")
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "catchup: invoice has keys: adopt does not take a keyed job yet; `catchup mark invoice"
        " PERIOD --key K --done --reason …` records one key's periods"
    ]
    assert sql("SELECT count(*) FROM {schema}.runs") == [(0,)]


def test_a_key_that_never_ran_is_missing_in_every_scan(project: Project, sql: Any) -> None:
    """An evidence job's keys are looked at one by one (never settled in SQL): the scan that
    first moves the horizon writes what it found of each key the first read presumed
    complete, even a key with nothing found (no row at all: the presumption cut), so every
    later scan still looks for that key's days, and finds them missing."""
    _migrated(project)
    _invoices(sql, [])
    _job(project)
    for _ in range(2):
        code, data = _scan(project)
        assert (code, data["jobs"][0]["missing"]) == (1, len(TENANTS) * 3)
    assert sql("SELECT count(*) FROM {schema}.job_keys WHERE upper_inf(verified)") == [(0,)]
