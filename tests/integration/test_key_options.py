"""Keys on the command line: ``--key`` repeatable where several make sense and refused twice
where one is meant (click kept the last one, without a word); ``--all-keys`` for ``mark``,
``reset`` and ``why``; ``why`` of a keyed day without a key sums its keys up; a paused key
shown wherever keys are; and keys with invisible or direction-changing characters refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fix_db import Database, ledger_contents, nothing_written
from fix_project import Project, job_toml

TENANTS = ["acme", "globex", "initech"]


def invoice(project: Project, keys: list[str] = TENANTS, failing: str = "") -> None:
    script = f'test "$0" != "{failing}"' if failing else "true"
    project.write(
        job_toml("invoice", "daily", "2026-03-01", keys=keys, command=["sh", "-c", script, "{key}"])
    )


def states(project: Project, day: str) -> dict[str, str]:
    """Each key's state of ``day``, one ``why --key`` each."""
    found = {}
    for key in TENANTS:
        said = project.cli("-q", "why", "invoice", day, "--key", key, "--json")
        found[key] = json.loads(said.stdout)["state"]
    return found


@pytest.mark.parametrize(
    "args",
    [
        ("pause", "invoice", "--reason", "x"),
        ("resume", "invoice"),
        ("history", "invoice"),
        ("cancel", "invoice", "2026-03-01", "--reason", "x"),
    ],
    ids=lambda args: args[0],
)
def test_two_keys_where_one_is_meant_are_refused(
    project: Project, sql: Any, args: tuple[str, ...]
) -> None:
    invoice(project)
    assert project.cli("-q", "keys", "invoice").exit_code == 0
    before = ledger_contents(sql, project.schema)
    refused = project.cli("-q", *args, "--key", "acme", "--key", "globex")
    assert refused.exit_code == 2, refused.output
    assert "one key here, not 2 ('acme', 'globex')" in refused.output
    assert ledger_contents(sql, project.schema) == before
    same = project.cli("-q", "history", "invoice", "--key", "acme", "--key", "acme")
    assert same.exit_code == 0, same.output  # the same key twice is that key


def test_reset_and_mark_take_several_keys_or_every_key(project: Project, sql: Any) -> None:
    invoice(project)
    window = ("--since", "2026-03-01", "--until", "2026-03-03")
    assert project.cli("-q", "replay", *window).exit_code == 0
    every = project.cli("-q", "reset", "invoice", "2026-03-01", "--all-keys", "--reason", "rates")
    assert every.exit_code == 0, every.output
    assert "reset: 3 of 3 period(s)" in every.output
    assert states(project, "2026-03-01") == dict.fromkeys(TENANTS, "failed")
    two = project.cli(
        "-q", "mark", "invoice", "2026-03-02", "--skip", "--key", "acme", "--key", "globex",
        "--reason", "moved",
    )  # fmt: skip
    assert two.exit_code == 0, two.output
    assert "marked skip: 2 of 2 period(s)" in two.output
    assert states(project, "2026-03-02") == {
        "acme": "waived",
        "globex": "waived",
        "initech": "succeeded",
    }
    changes = json.loads(project.cli("-q", "history", "invoice", "--json").stdout)["changes"]
    assert sorted((c["key"], c["action"]) for c in changes) == [
        ("acme", "reset"),
        ("acme", "skip"),
        ("globex", "reset"),
        ("globex", "skip"),
        ("initech", "reset"),
    ]
    before = ledger_contents(sql, project.schema)
    for args, said in [
        (("--all-keys", "--key", "acme"), "--all-keys or --key, not both"),
        ((), "invoice has keys: name the key with --key, or --all-keys"),
    ]:
        refused = project.cli("-q", "reset", "invoice", "2026-03-01", *args, "--reason", "x")
        assert (refused.exit_code, refused.output.strip()) == (2, f"catchup: {said}")
    assert ledger_contents(sql, project.schema) == before


def test_all_keys_of_a_job_without_keys_is_refused(project: Project) -> None:
    project.write(job_toml("export", "daily", "2026-03-01", command=["true"]))
    refused = project.cli("-q", "reset", "export", "2026-03-01", "--all-keys", "--reason", "x")
    assert (refused.exit_code, refused.output.strip()) == (
        2,
        "catchup: --all-keys: export has no keys",
    )


def test_why_of_a_keyed_day_without_a_key_sums_up_its_keys(project: Project) -> None:
    invoice(project, failing="globex")
    assert project.cli("-q", "run", "invoice", "--period", "2026-03-01").exit_code == 1
    assert project.cli("-q", "pause", "invoice", "--key", "initech").exit_code == 0
    said = project.cli("-q", "why", "invoice", "2026-03-01")
    assert said.exit_code == 0, said.output
    lines = said.output.splitlines()
    assert lines[:4] == [
        "invoice 2026-03-01: failed",
        "  3 key(s): 1 failed, 2 succeeded",
        "  failed: globex",
        "  paused: initech",
    ], said.output
    assert "  catchup why invoice 2026-03-01 --key globex" in lines
    assert "  catchup resume invoice --key initech" in lines
    shown = json.loads(project.cli("-q", "why", "invoice", "2026-03-01", "--json").stdout)
    assert shown["keys"] == [
        {"state": "failed", "count": 1, "first": ["globex"]},
        {"state": "succeeded", "count": 2, "first": []},
        {"state": "paused", "count": 1, "first": ["initech"]},
    ]
    every = json.loads(
        project.cli("-q", "why", "invoice", "2026-03-01", "--all-keys", "--json").stdout
    )
    assert every == shown
    two = project.cli("-q", "why", "invoice", "2026-03-01", "--key", "acme", "--key", "globex")
    assert "  2 key(s): 1 failed, 1 succeeded" in two.output.splitlines(), two.output
    one = project.cli("-q", "why", "invoice", "2026-03-01", "--key", "globex")
    assert one.output.splitlines()[0] == "invoice globex 2026-03-01: failed", one.output


@pytest.mark.parametrize(
    "key",
    ["ac\u200bme", "ac\u202eme", "ac\u2066me", "\u3164"],
    ids=["zwsp", "rlo", "lri", "filler"],
)
def test_a_key_with_an_invisible_or_direction_changing_character_is_refused(
    project: Project, key: str
) -> None:
    invoice(project, keys=["acme", key])
    listed = project.cli("-q", "scan", "--until", "2026-03-02")
    assert listed.exit_code == 2, listed.output
    assert "invisible or direction-changing character" in listed.output
    invoice(project)
    typed = project.cli("-q", "scan", "--until", "2026-03-02", "--key", key)
    assert typed.exit_code == 2, typed.output
    assert "invisible or direction-changing character" in typed.output


def test_a_paused_key_shows_in_keys_jobs_scan_and_the_pages(project: Project) -> None:
    from catchup import Catchup
    from catchup.render.jobpage import job_page
    from catchup.render.page import keys_page
    from catchup.render.web import Site, home

    invoice(project)
    assert project.cli("-q", "pause", "invoice", "--key", "initech").exit_code == 0
    listed = json.loads(project.cli("-q", "keys", "invoice", "--json").stdout)["keys"]
    assert [k["key"] for k in listed if k["paused_at"]] == ["initech"]
    table = project.cli("-q", "keys", "invoice", env={"COLUMNS": "200"}).output
    assert "3 keys expected, 0 gone, 1 paused" in table
    initech = next(line for line in table.splitlines() if "initech" in line)
    assert f"since {listed[2]['paused_at']}" in initech, table
    jobs = json.loads(project.cli("-q", "jobs", "--json").stdout)
    assert [(j["job"], j["paused"], j["paused_keys"]) for j in jobs] == [
        ("invoice", False, ["initech"])
    ]
    assert "invoice (1 key paused)" in project.cli("-q", "jobs", env={"COLUMNS": "200"}).output
    scanned = project.cli("-q", "scan", "--until", "2026-03-02", "--json")
    assert json.loads(scanned.stdout)["jobs"][0]["paused_keys"] == ["initech"]
    only = project.cli("-q", "scan", "--until", "2026-03-02", "--json", "--key", "acme")
    assert json.loads(only.stdout)["jobs"][0]["paused_keys"] == []
    shown = project.cli("-q", "scan", "--until", "2026-03-02", env={"COLUMNS": "200"})
    assert "invoice (1 key paused)" in shown.output
    with Catchup(str(project.config), dsn=project.database.conninfo) as app:
        site = Site("t", 5)
        report = app.scan(until="2026-03-02", calendars=True)
        keys = keys_page(app.keys("invoice"), site)
        page = job_page(report, None, site, "invoice")
        front = home(report, None, site)
    assert "3 keys expected, 0 gone, 1 paused" in keys and "paused since" in keys
    assert page is not None and "; paused: <bdi>initech</bdi>" in page
    assert '<span class="tag">1 key paused</span>' in front


def test_a_change_of_every_key_is_refused_whole_when_one_key_runs(
    project: Project, sql: Any
) -> None:
    """The keys' changes are one transaction: initech's period running (last of the three)
    refuses the reset of acme's and globex's too."""
    invoice(project)
    assert (
        project.cli("-q", "replay", "--since", "2026-03-01", "--until", "2026-03-02").exit_code == 0
    )
    sql(
        "UPDATE {schema}.runs SET status = 'running', owner = 'elsewhere:1', "
        "lease_expires_at = clock_timestamp() + interval '1 hour' WHERE key = 'initech'"
    )
    before = ledger_contents(sql, project.schema)
    refused = project.cli("-q", "reset", "invoice", "2026-03-01", "--all-keys", "--reason", "x")
    assert refused.exit_code == 2, refused.output
    assert "invoice: refusing: 2026-03-01 is running; nothing was changed" in refused.output
    assert ledger_contents(sql, project.schema) == before


def test_a_keys_period_before_it_was_expected_is_not_expected_nor_run(
    project: Project, sql: Any
) -> None:
    """A key added today is expected from today: `why` of an earlier day with `--key` says not
    expected (it said missing, with a `run` to paste) and that `run` refuses in one line,
    nothing claimed (it ran it); a key expected then is explained and run as before."""
    invoice(project, keys=["acme"])
    assert (
        project.cli("-q", "run", "invoice", "--period", "2026-03-02", "--key", "acme").exit_code
        == 0
    )
    invoice(project, keys=["acme", "newco"])  # newco first read now: expected from now
    said = json.loads(
        project.cli("-q", "why", "invoice", "2026-03-03", "--key", "newco", "--json").stdout
    )
    assert said["state"] == "not expected" and said["commands"] == [], said
    assert "newco is expected from " in said["said"][0]
    refused = project.cli("-q", "run", "invoice", "--period", "2026-03-03", "--key", "newco")
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.strip().endswith("this period is not one of its own; nothing was run")
    assert len(refused.stderr.strip().splitlines()) == 1
    assert sql("SELECT count(*) FROM {schema}.runs WHERE key = 'newco'") == [(0,)]
    # acme, expected from the job's start, as before
    acme = json.loads(
        project.cli("-q", "why", "invoice", "2026-03-03", "--key", "acme", "--json").stdout
    )
    assert acme["state"] == "missing"


def test_keys_timeout_bounds_a_read_of_the_keys_query(
    project: Project, sql: Any, database: Database, schema: str
) -> None:
    """`keys_timeout` is how long one read of a job's keys query may take: past it the read
    fails (one line, exit 3, nothing written); a longer one lets the same query be read."""
    slow = "SELECT k FROM (VALUES ('acme'), ('globex')) AS v (k) WHERE pg_sleep(1.5) IS NOT NULL"
    project.write(
        job_toml("invoice", "daily", "2026-10-01", keys=slow, keys_timeout="1s", command=["true"])
    )
    failed = project.cli("-q", "scan", "--until", "2026-10-03")
    assert failed.exit_code == 3, failed.output
    assert "jobs.invoice.keys: the keys query failed: ran longer than 1 s" in failed.output
    assert "Traceback" not in failed.output
    assert nothing_written(database, schema)
    project.write(
        job_toml("invoice", "daily", "2026-10-01", keys=slow, keys_timeout="20s", command=["true"])
    )
    assert project.cli("-q", "scan", "--until", "2026-10-03").exit_code in (0, 1)
    assert sql("SELECT key FROM {schema}.job_keys ORDER BY 1") == [("acme",), ("globex",)]
