"""A keyed job's later reads and scans write what changed, nothing per key that did not
(issue 54): the job's row says when its keys were read, and the job's horizon says how far
the keys that follow it were verified; a key row is written when the key appears, comes back,
goes, or has a new hole."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from fix_project import Project, job_toml

KEYS = 40


def keys_query(first: int, last: int) -> str:
    return f"SELECT 't' || lpad(i::text, 3, '0') FROM generate_series({first}, {last}) AS i"


def today(sql: Any) -> datetime:
    """The database clock's UTC midnight: dates are built from it, never from today."""
    ((now,),) = sql("SELECT date_trunc('day', clock_timestamp(), 'UTC')")
    return now  # type: ignore[no-any-return]


def invoice(project: Project, start: datetime, keys: str) -> None:
    """A daily job of a no-op call per key, from ``start``."""
    toml = job_toml("invoice", "daily", start.strftime("%Y-%m-%d"), keys=keys)
    project.write(toml + 'call = "operator:truth"\n')


def row_versions(sql: Any) -> dict[str, tuple[str, str, str]]:
    """Each key row's place and the transactions that wrote and locked it: any update or row
    lock of a key changes them."""
    rows = sql("SELECT key, ctid::text, xmin::text, xmax::text FROM {schema}.job_keys")
    return {key: (ctid, xmin, xmax) for key, ctid, xmin, xmax in rows}


def cli(project: Project, *args: str) -> dict[str, Any]:
    result = project.cli("-q", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_a_later_scan_or_tick_of_keys_that_did_not_change_writes_no_key_row(
    project: Project, sql: Any
) -> None:
    """Every key ran every day and was scanned once: a later scan, a tick with nothing due,
    a scan of a day every key ran, and `keys` then write no key row, not even a lock, yet
    each read is recorded (the job's keys_read_at), and a key still held was last seen at the
    last read."""
    start = today(sql) - timedelta(days=4)
    invoice(project, start, keys_query(1, KEYS))
    assert cli(project, "replay", "--since", start.strftime("%Y-%m-%d"))["totals"]["failed"] == 0
    first = cli(project, "scan")["jobs"][0]
    assert (first["expected"], first["missing"]) == (KEYS * 4, 0)
    before = row_versions(sql)
    ((read_before,),) = sql("SELECT keys_read_at FROM {schema}.jobs WHERE name = 'invoice'")
    later = cli(project, "scan")["jobs"][0]
    assert (later["succeeded"], later["missing"]) == (KEYS * 4, 0)
    assert cli(project, "tick")["totals"]["succeeded"] == 0  # nothing due
    assert row_versions(sql) == before  # no key row updated, none locked
    # a day later, once every key ran its new day: the horizon a day behind, a scan looks at
    # that day for every key, finds a row each, and moves the horizon, writing no key row
    ((horizon,),) = sql("SELECT keys_horizon FROM {schema}.scan_state")
    sql("UPDATE {schema}.scan_state SET keys_horizon = %s", [horizon - timedelta(days=1)])
    assert cli(project, "scan")["jobs"][0]["missing"] == 0
    assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(horizon,)]
    assert row_versions(sql) == before
    ((read_after,),) = sql("SELECT keys_read_at FROM {schema}.jobs WHERE name = 'invoice'")
    assert read_after > read_before  # the reads were recorded, on the job's row
    shown = cli(project, "keys", "invoice")["keys"]  # a read of its own
    ((read_last,),) = sql("SELECT keys_read_at FROM {schema}.jobs WHERE name = 'invoice'")
    assert read_last > read_after
    assert {k["last_seen"] for k in shown} == {read_last.strftime("%Y-%m-%dT%H:%M:%SZ")}
    assert row_versions(sql) == before


def test_a_later_read_of_a_keys_list_writes_no_key_row(project: Project, sql: Any) -> None:
    """A job whose keys are a list (or come from keys_dsn) has every key read and recorded by
    catchup, not compared on the server: once a scan recorded what it verified, a later read
    of the same keys, by `keys` or a tick with nothing due, writes no key row, not even a
    lock; a key added is the one row written."""
    start = today(sql) - timedelta(days=2)
    names = [f"t{n:02}" for n in range(12)]

    def listed(keys: list[str]) -> None:
        toml = job_toml("invoice", "daily", start.strftime("%Y-%m-%d"), keys=keys)
        project.write(toml + 'call = "operator:truth"\n')

    listed(names)
    assert cli(project, "replay", "--since", start.strftime("%Y-%m-%d"))["totals"]["failed"] == 0
    assert cli(project, "scan")["jobs"][0]["missing"] == 0  # what it verified, recorded once
    before = row_versions(sql)
    assert len(cli(project, "keys", "invoice")["keys"]) == len(names)
    assert cli(project, "tick")["totals"]["succeeded"] == 0  # nothing due
    assert row_versions(sql) == before  # no key row updated, none locked
    listed([*names, "t99"])
    assert len(cli(project, "keys", "invoice")["keys"]) == len(names) + 1
    after = row_versions(sql)
    assert {k: v for k, v in after.items() if k != "t99"} == before


def test_only_the_keys_that_appear_or_go_are_written(project: Project, sql: Any) -> None:
    """t001 is gone and t041 new: a scan writes those two key rows and no other."""
    start = today(sql) - timedelta(days=3)
    invoice(project, start, keys_query(1, KEYS))
    cli(project, "replay", "--since", start.strftime("%Y-%m-%d"))
    cli(project, "scan")
    before = row_versions(sql)
    invoice(project, start, keys_query(2, KEYS + 1))
    found = cli(project, "scan")["jobs"][0]
    assert found["missing"] == 0  # t041 is expected from now: none of its periods is due
    after = row_versions(sql)
    changed = {k for k in after if after[k] != before.get(k)}
    assert changed == {"t001", "t041"}
    ((gone,),) = sql("SELECT gone_at IS NOT NULL FROM {schema}.job_keys WHERE key = 't001'")
    assert gone


def test_a_key_back_after_being_gone_is_looked_at_for_the_days_it_was_away(
    project: Project, sql: Any
) -> None:
    """t002 ran the first two days only, and went then; the others ran every day and the
    horizon moved past its absence, t002's ranges following it. Back, its days away are gaps
    again: what was verified of it is cut at when it went."""
    start = today(sql) - timedelta(days=5)
    two = start + timedelta(days=2)
    invoice(project, start, keys_query(1, 3))
    since = start.strftime("%Y-%m-%d")
    cli(project, "replay", "--since", since, "--key", "t001", "--key", "t003")
    cli(project, "replay", "--since", since, "--until", two.strftime("%Y-%m-%d"), "--key", "t002")
    invoice(project, start, "SELECT unnest(ARRAY['t001', 't003'])")
    project.cli("-q", "scan")  # t002 is gone (from now: its days after the second are gaps)
    sql(  # gone then, its range following the horizon past its absence (as a scan records it)
        "UPDATE {schema}.job_keys SET gone_at = %s, verified = tstzmultirange(tstzrange(%s, NULL))"
        " WHERE key = 't002'",
        [two, start],
    )
    assert cli(project, "scan")["jobs"][0]["missing"] == 0
    held = "SELECT verified @> tstzrange(%s, %s) FROM {schema}.job_keys WHERE key = 't002'"
    assert sql(held, [start, two]) == [(True,)]  # its two days verified, up to when it went
    invoice(project, start, keys_query(1, 3))
    back = project.cli("-q", "scan", "--json")
    assert back.exit_code == 1, back.output
    gaps = [
        (g["status"], g["first"], g["last"], g.get("keys"))
        for g in json.loads(back.stdout)["jobs"][0]["gaps"]
    ]
    iso = "%Y-%m-%dT%H:%M:%SZ"
    yesterday = (today(sql) - timedelta(days=1)).strftime(iso)
    assert gaps == [("missing", two.strftime(iso), yesterday, ["t002"])]


def scan_json(project: Project, *args: str) -> dict[str, Any]:
    """`scan --json`, gaps or none (exit 1 or 0)."""
    result = project.cli("-q", "scan", *args, "--json")
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["jobs"][0]  # type: ignore[no-any-return]


@pytest.mark.parametrize("how", ["scan", "replay"])
def test_a_scan_of_one_key_leaves_the_jobs_horizon_where_it_was(
    project: Project, sql: Any, how: str
) -> None:
    """Every key ran all days but yesterday; t001 then runs yesterday, and a scan of t001
    alone (`scan --key`, or a replay of it) finds no hole: the job's horizon is every key's,
    so it stays, and a scan of all still finds t002's and t003's yesterday missing."""
    start, last = today(sql) - timedelta(days=4), today(sql) - timedelta(days=1)
    invoice(project, start, keys_query(1, 3))
    since, yesterday = start.strftime("%Y-%m-%d"), last.strftime("%Y-%m-%d")
    cli(project, "replay", "--since", since, "--until", yesterday)
    assert scan_json(project)["missing"] == 3
    cli(project, "replay", "--since", yesterday, "--key", "t001")
    if how == "scan":
        scan_json(project, "--key", "t001")
    else:  # nothing to run: its scan of t001 finds no hole
        cli(project, "replay", "--since", yesterday, "--key", "t001")
    assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(last,)]
    assert scan_json(project)["missing"] == 2


def gone_two_days_in(project: Project, sql: Any) -> datetime:
    """t002 ran the first two of five days and went then; t001 and t003 ran every day, and
    a scan moved the horizon past t002's absence. Returns the job's start."""
    start = today(sql) - timedelta(days=5)
    two = start + timedelta(days=2)
    invoice(project, start, keys_query(1, 3))
    since = start.strftime("%Y-%m-%d")
    cli(project, "replay", "--since", since, "--key", "t001", "--key", "t003")
    cli(project, "replay", "--since", since, "--until", two.strftime("%Y-%m-%d"), "--key", "t002")
    invoice(project, start, "SELECT unnest(ARRAY['t001', 't003'])")
    project.cli("-q", "scan")
    # gone then, its range following the horizon past its absence (as a scan that reads a gone
    # key records a range that reaches when it went)
    sql(
        "UPDATE {schema}.job_keys SET gone_at = %s, verified = tstzmultirange(tstzrange(%s, NULL))"
        " WHERE key = 't002'",
        [two, start],
    )
    assert scan_json(project)["missing"] == 0
    return start


def test_a_key_back_is_looked_at_for_its_days_away_by_a_dry_run_too(
    project: Project, sql: Any
) -> None:
    """A dry run reads the keys without recording them: t002, back, has its three days away
    planned as the replay then runs them."""
    start = gone_two_days_in(project, sql)
    invoice(project, start, keys_query(1, 3))
    since = start.strftime("%Y-%m-%d")
    dry = project.cli("-q", "replay", "--since", since, "--dry-run", "--json")
    real = project.cli("-q", "replay", "--since", since, "--json")
    assert json.loads(real.stdout)["totals"]["succeeded"] == 3
    assert json.loads(dry.stdout)["totals"]["planned"] == 3


def test_a_scan_records_nothing_of_a_key_that_came_back_since_it_read_it(
    project: Project, sql: Any, monkeypatch: Any
) -> None:
    """A scan reads t002 gone (its range bounded, as a ledger from before migration 0027
    holds it); before it records, a read of the keys brings t002 back. The scan leaves t002
    as that read made it: its days away are still gaps."""
    from catchup.ledger.keys import Keys

    start = gone_two_days_in(project, sql)
    sql(  # its first day verified: the scan finds its second, and records its range
        "UPDATE {schema}.job_keys SET verified = tstzmultirange(tstzrange(%s, %s))"
        " WHERE key = 't002'",
        [start, start + timedelta(days=1)],
    )
    ((horizon,),) = sql("SELECT keys_horizon FROM {schema}.scan_state")
    sql("UPDATE {schema}.scan_state SET keys_horizon = %s", [horizon - timedelta(days=1)])
    original = Keys.record_verified
    recorded: list[bool] = []

    def after_a_read(self: Keys, *args: Any, **kwargs: Any) -> bool:
        monkeypatch.setattr(Keys, "record_verified", original)
        invoice(project, start, keys_query(1, 3))
        assert project.cli("-q", "keys", "invoice").exit_code == 0  # t002 back, recorded
        recorded.append(original(self, *args, **kwargs))
        return recorded[-1]

    monkeypatch.setattr(Keys, "record_verified", after_a_read)
    invoice(project, start, "SELECT unnest(ARRAY['t001', 't003'])")
    stale = project.cli("-q", "scan")  # reads t002 gone, records after it is back
    assert stale.exit_code == 0, stale.output
    assert recorded == [True]  # the scan recorded (the horizon moved): t002 was left alone
    assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(horizon,)]
    invoice(project, start, keys_query(1, 3))
    assert scan_json(project)["missing"] == 3  # its three days away


def test_a_scan_before_the_tick_runs_the_new_day_writes_no_key_row(
    project: Project, sql: Any
) -> None:
    """Every key ran every day but yesterday, which is due and not run yet (a tick about to
    run it): a scan leaves the horizon at yesterday's start and writes no key row (cutting
    every key's range would be written again once the day ran); once every key ran it, a
    scan moves the horizon to today and still writes no key row."""
    start = today(sql) - timedelta(days=4)
    yesterday = today(sql) - timedelta(days=1)
    invoice(project, start, keys_query(1, KEYS))
    since, until = start.strftime("%Y-%m-%d"), yesterday.strftime("%Y-%m-%d")
    assert cli(project, "replay", "--since", since, "--until", until)["totals"]["failed"] == 0
    assert scan_json(project)["missing"] == KEYS  # yesterday, every key
    assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(yesterday,)]
    before = row_versions(sql)
    assert scan_json(project)["missing"] == KEYS
    assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(yesterday,)]
    assert row_versions(sql) == before  # nothing cut, nothing locked
    # the horizon a day further behind: the day before yesterday, which every key ran, is
    # vouched for by moving it back to yesterday's start, still cutting nothing
    sql("UPDATE {schema}.scan_state SET keys_horizon = %s", [yesterday - timedelta(days=1)])
    assert scan_json(project)["missing"] == KEYS
    assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(yesterday,)]
    assert row_versions(sql) == before
    assert cli(project, "replay", "--since", until)["totals"]["failed"] == 0
    assert scan_json(project)["missing"] == 0
    assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(today(sql),)]
    assert row_versions(sql) == before
