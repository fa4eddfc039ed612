"""A later scan of a keyed job reads from the ledger only the keys with something to find in its
window (issue 54): the others, settled there (every period they are expected in has a
succeeded row, and what scans verified of them follows the job's horizon past the window),
are counted in SQL. What the scan reports is what reading every key would have reported."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fix_db import Database, waits_holding_only_the_first
from fix_project import Project, job_toml

from catchup import Catchup, ConfigError, make_job
from catchup.ledger.keys import Keys
from catchup.scan.detector import scan
from catchup.scan.keyed import window_keys

KEYS = [f"t{n:02}" for n in range(20)]


def today(sql: Any) -> datetime:
    """The database clock's UTC midnight: dates are built from it, never from today."""
    ((now,),) = sql("SELECT date_trunc('day', clock_timestamp(), 'UTC')")
    return now  # type: ignore[no-any-return]


def gaps(app: Catchup) -> list[tuple[str, str, str]]:
    """Every (key, state, first day) of the scan's ranges of one key, sorted."""
    (job,) = app.scan().jobs
    return sorted((r.key, r.state, f"{r.first:%m-%d}") for r in job.key_ranges)


def test_a_later_scan_reads_only_the_keys_with_something_to_find(
    database: Database, schema: str, sql: Any
) -> None:
    """Twenty keys ran every day of a week; then one's first days were never run, one failed
    its newest day, one is paused. A later scan reads only the first and the last, counts the
    eighteen others (the failed day found in SQL), and reports what a scan of every key
    does."""
    start = today(sql) - timedelta(days=7)
    job = make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=KEYS, call="operator:truth")
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        assert gaps(app) == []  # what scans verified of each key now follows the horizon
        sql("DELETE FROM {schema}.runs WHERE key = 't03' AND period_start < %s", [start + 2 * DAY])
        newest = today(sql) - DAY
        sql(
            "UPDATE {schema}.runs SET status = 'failed', failures = 1, error = 'boom'"
            " WHERE key = 't07' AND period_start = %s",
            [newest],
        )
        app.pause("invoice", key="t11")
        assert gaps(app) == [
            ("t03", "missing", f"{start:%m-%d}"),
            ("t07", "failed", f"{newest:%m-%d}"),
        ]
        t03 = "SELECT ctid::text, xmin::text FROM {schema}.job_keys WHERE key = 't03'"
        holed = sql(t03)
        again = gaps(app)  # the holes stay outside what is verified: looked at again
        assert again == [("t03", "missing", f"{start:%m-%d}"), ("t07", "failed", f"{newest:%m-%d}")]
        assert sql(t03) == holed  # read again, and not written: nothing of it changed
        session = app.session
        (row,) = sql("SELECT id FROM {schema}.jobs WHERE name = 'invoice'")
        resolved = session.resolve_all([job], write=False)[0]
        periods = [(p.start, p.end) for p in resolved.timeline.periods(start, today(sql))]
        read, settled = window_keys(session.ledger, resolved, row[0], periods)
        assert sorted(k.key for k in read) == ["t03", "t11"]  # t07's failed row: read in SQL
        assert settled.count == len(KEYS) - 2
        assert settled.expected(len(periods)) == (len(KEYS) - 2) * 7
        (scanned,) = app.scan().jobs
        assert (scanned.keys, scanned.expected) == (len(KEYS), len(KEYS) * 7)
        assert scanned.paused_keys == ("t11",)
        assert scanned.last_success == newest


DAY = timedelta(days=1)


GOOD = "SELECT k FROM (VALUES ('acme'), ('globex')) AS v (k)"


def _values(*keys: str) -> str:
    return "SELECT k FROM (VALUES " + ", ".join(f"({k})" for k in keys) + ") AS v (k)"


@pytest.mark.parametrize(
    ("query", "said"),
    [
        (_values("'acme'", "'b'", "'acme'"), "the key 'acme' is returned twice"),
        (_values("'acme'", "'acme'"), "the key 'acme' is returned twice"),
        (_values("'acme'", "'evil' || chr(27) || '[31m'"), "row 2: the key 'evil\\x1b[31m'"),
        (_values("'acme'", "NULL"), "row 2: the key expected text, got NoneType"),
        (_values("'acme'", "''"), "row 2: the key is empty"),
        (_values("'acme'", "repeat('x', 201)"), "row 2: the key 'xxxx"),
        # the first problem by row: a key returned twice at row 3 before a bad one at row 4
        (_values("'a'", "'b'", "'a'", "'c' || chr(7)"), "the key 'a' is returned twice"),
        (_values("'a'", "'c' || chr(7)", "'a'"), "row 2: the key 'c\\x07'"),
        # a line break in a key: never taken for two lines, "+new" and "-globex" gone
        (_values("'acme'", "'globex'", "'new' || chr(10) || '-globex'"), "row 3: the key 'new\\n"),
        (_values("'acme'", "'globex'", "'cr' || chr(13)"), "row 3: the key 'cr\\r'"),
    ],
)
def test_keys_read_as_what_changed_are_refused_as_every_key_read_is(
    project: Project, sql: Any, query: str, said: str
) -> None:
    """A later read of a keys query on the ledger's database leaves on the server the keys
    that did not change, yet every key it returns is checked: the same refusal, the same row,
    nothing of the job's keys written."""
    project.write(job_toml("invoice", "daily", "2026-10-01", keys=GOOD, command=["true"]))
    assert project.cli("-q", "scan", "--until", "2026-10-03").exit_code in (0, 1)
    before = sql("SELECT key, xmin::text, gone_at FROM {schema}.job_keys ORDER BY 1")
    assert [k for k, _, _ in before] == ["acme", "globex"]
    project.write(job_toml("invoice", "daily", "2026-10-01", keys=query, command=["true"]))
    refused = project.cli("-q", "scan", "--until", "2026-10-03")
    assert refused.exit_code == 2, refused.output
    assert f"jobs.invoice.keys: {said}" in refused.output
    assert "\x1b" not in refused.output and "\x07" not in refused.output
    assert sql("SELECT key, xmin::text, gone_at FROM {schema}.job_keys ORDER BY 1") == before


@pytest.mark.parametrize(
    ("query", "said"),
    [
        (_values("'acme'", "'new' || chr(10) || '-acme'"), "row 2: the key 'new\\n-acme'"),
        (_values("'acme'", "'tab' || chr(9) || 'x'"), "row 2: the key 'tab\\tx'"),
        (_values("'acme'", "'zero' || chr(8203) || 'width'"), "row 2: the key 'zero\\u200bwidth'"),
        (_values("'acme'", "''"), "row 2: the key is empty"),
        (_values("'acme'", "NULL"), "row 2: the key expected text, got NoneType"),
        (_values("'acme'", "repeat('x', 201)"), "row 2: the key 'xxxx"),
        # returned twice, apart: side by side once the read sorts them
        (_values("'acme'", "'b'", "'acme'"), "the key 'acme' is returned twice"),
    ],
)
def test_a_first_read_refuses_what_every_read_refuses(
    project: Project, sql: Any, query: str, said: str
) -> None:
    """A first read (no key held: every key new) is checked as a later one: each refused in
    one line naming its row, and nothing of the job's keys written."""
    project.write(job_toml("invoice", "daily", "2026-10-01", keys=query, command=["true"]))
    assert project.cli("-q", "migrate").exit_code == 0  # the ledger there, no key read yet
    refused = project.cli("-q", "scan", "--until", "2026-10-03")
    assert refused.exit_code == 2, refused.output
    assert f"jobs.invoice.keys: {said}" in refused.output
    assert sql("SELECT count(*) FROM {schema}.job_keys") == [(0,)]


def test_keys_read_as_what_changed_record_what_changed(project: Project, sql: Any) -> None:
    """Keys that are not plain ASCII are checked here and kept; a key gone and those new are
    written, the one that stayed is neither written nor locked."""
    project.write(job_toml("invoice", "daily", "2026-10-01", keys=GOOD, command=["true"]))
    assert project.cli("-q", "scan", "--until", "2026-10-03").exit_code in (0, 1)
    versions = "SELECT ctid::text, xmin::text, xmax::text FROM {schema}.job_keys WHERE key = 'acme'"
    kept = sql(versions)  # any update or row lock changes them
    changed = _values("'acme'", "'café'", "'Ünïcode tenant'")
    project.write(job_toml("invoice", "daily", "2026-10-01", keys=changed, command=["true"]))
    assert project.cli("-q", "scan", "--until", "2026-10-03").exit_code in (0, 1)
    rows = sorted(sql("SELECT key, gone_at IS NOT NULL FROM {schema}.job_keys"))
    assert rows == [("acme", False), ("café", False), ("globex", True), ("Ünïcode tenant", False)]
    assert sql(versions) == kept


def _dated(*pairs: tuple[str, str]) -> str:
    rows = ", ".join(f"('{key}', DATE '{day}')" for key, day in pairs)
    return f"SELECT k, d FROM (VALUES {rows}) AS v (k, d)"


@pytest.mark.parametrize(
    ("reads", "held"),
    [
        # one key for another: as many keys as before
        ([_values("'a'", "'b'"), _values("'a'", "'c'")], ["a 10-01", "b gone", "c new"]),
        # a key expected from another date
        (
            [
                _dated(("a", "2026-10-01"), ("b", "2026-10-01")),
                _dated(("a", "2026-10-01"), ("b", "2026-10-02")),
            ],
            ["a 10-01", "b 10-02"],
        ),
        # a key back: the keys returned are every key the ledger ever held
        (
            [_values("'a'", "'b'", "'c'"), _values("'a'", "'b'"), _values("'a'", "'b'", "'c'")],
            ["a 10-01", "b 10-01", "c 10-01"],
        ),
    ],
    ids=["swapped", "moved", "back"],
)
def test_keys_compared_whole_find_each_change(
    project: Project, sql: Any, reads: list[str], held: list[str]
) -> None:
    """A later read first compares the keys query's rows with the keys held as a whole (a
    count and sums of hashes): a change that keeps the count, or that only a key's date or
    absence shows, is still found and recorded."""
    for query in reads:
        project.write(job_toml("invoice", "daily", "2026-10-01", keys=query, command=["true"]))
        assert project.cli("-q", "scan", "--until", "2026-10-03").exit_code in (0, 1)
    rows = sql(
        "SELECT key, CASE WHEN gone_at IS NOT NULL THEN 'gone'"
        " WHEN expected_from > now() - interval '1 day' THEN 'new'"  # first seen by this test
        " ELSE to_char(expected_from AT TIME ZONE 'UTC', 'MM-DD') END"
        " FROM {schema}.job_keys ORDER BY 1"
    )
    assert [f"{key} {when}" for key, when in rows] == held


def test_a_first_scan_writes_what_it_verified_of_complete_keys_in_one_statement(
    database: Database, schema: str, sql: Any
) -> None:
    """The schedules the scan state was recorded for changed (what was verified says nothing
    now, the horizon is gone): a scan of every key writes, in one statement, a range that
    follows the new horizon for each key with a row every day, and reads only the others (a
    key that never ran its first days, one whose newest day failed); its report is a scan of
    every key's."""
    start = today(sql) - timedelta(days=7)
    job = make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=KEYS, call="operator:truth")
    newest = today(sql) - DAY
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        sql("DELETE FROM {schema}.runs WHERE key = 't03' AND period_start < %s", [start + 2 * DAY])
        sql(
            "UPDATE {schema}.runs SET status = 'failed', failures = 1, error = 'boom'"
            " WHERE key = 't07' AND period_start = %s",
            [newest],
        )
        sql("UPDATE {schema}.scan_state SET signature = 'other schedules'")
        session = app.session
        ((job_id,),) = sql("SELECT id FROM {schema}.jobs WHERE name = 'invoice'")
        resolved = session.resolve_all([job], write=False)[0]
        periods = [(p.start, p.end) for p in resolved.timeline.periods(start, today(sql))]
        read, settled = window_keys(session.ledger, resolved, job_id, periods, settle=True)
        assert sorted(k.key for k in read) == ["t03"]  # t07's failed day: found in SQL
        assert settled.count == len(KEYS) - 1
        assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(today(sql),)]
        spans = sql(
            "SELECT key, verified::text FROM {schema}.job_keys WHERE upper_inf(verified)"
            " AND lower(verified) = %s ORDER BY key",
            [start],
        )
        assert [k for k, _ in spans] == [k for k in KEYS if k != "t03"]
        assert gaps(app) == [
            ("t03", "missing", f"{start:%m-%d}"),
            ("t07", "failed", f"{newest:%m-%d}"),
        ]
        (scanned,) = app.scan().jobs
        assert (scanned.keys, scanned.expected) == (len(KEYS), len(KEYS) * 7)


def test_a_first_reads_keys_are_presumed_complete_until_the_first_scan_judges_them(
    database: Database, schema: str, sql: Any
) -> None:
    """The job's keys read for the first time (none recorded, no horizon): each is recorded
    following the horizon from the job's start, a presumption that counts for nothing until
    the scan that first moves the horizon judges every key. That scan writes no row of a key
    with a row every day (each still as its read wrote it); it cuts t03 (one day without a
    row) and t05 (no row at all), and finds their gaps, as does every scan after it."""
    start = today(sql) - timedelta(days=7)
    job = make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=KEYS, call="operator:truth")
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        sql("DELETE FROM {schema}.runs WHERE key = 't03' AND period_start = %s", [start + DAY])
        sql("DELETE FROM {schema}.runs WHERE key = 't05'")
        sql("DELETE FROM {schema}.job_keys")  # as before the job's first read of its keys
        sql("UPDATE {schema}.scan_state SET keys_horizon = NULL")
        first = gaps(app)
        assert first == [
            ("t03", "missing", f"{start + DAY:%m-%d}"),
            ("t05", "missing", f"{start:%m-%d}"),
        ]
        as_read = sql(  # the job's row and its keys' written by the read (its keys_read_at)
            "SELECT k.key FROM {schema}.job_keys k JOIN {schema}.jobs j ON j.id = k.job_id"
            " WHERE k.xmin = j.xmin AND k.verified = tstzmultirange(tstzrange(%s, NULL))"
            " ORDER BY k.key",
            [start],
        )
        assert [k for (k,) in as_read] == [k for k in KEYS if k not in ("t03", "t05")]
        assert gaps(app) == first


def test_a_first_scan_after_rows_were_removed_forgets_nothing_no_scan_recorded(
    database: Database, schema: str, sql: Any
) -> None:
    """Rows of a job removed before any scan recorded what it verified of its keys (the scan
    state the removal made holds no schedules): its first scan has nothing to forget, so the
    keys its first read presumes complete stay as the read wrote them, as in any first scan
    (forgotten, every key's row was locked and written twice over: a million keys, seconds)."""
    start = today(sql) - timedelta(days=7)
    job = make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=KEYS, call="operator:truth")
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        sql("DELETE FROM {schema}.job_keys")  # as before the job's first read of its keys
        sql("DELETE FROM {schema}.scan_state")  # and before any scan of it
        sql("DELETE FROM {schema}.runs WHERE key = 't03' AND period_start = %s", [start + DAY])
        assert sql("SELECT signature, keys_horizon FROM {schema}.scan_state") == [("", None)]
        assert gaps(app) == [("t03", "missing", f"{start + DAY:%m-%d}")]
        as_read = sql(  # the job's row and its keys' written by the read (its keys_read_at)
            "SELECT k.key FROM {schema}.job_keys k JOIN {schema}.jobs j ON j.id = k.job_id"
            " WHERE k.xmin = j.xmin AND k.verified = tstzmultirange(tstzrange(%s, NULL))"
            " ORDER BY k.key",
            [start],
        )
        assert [k for (k,) in as_read] == [k for k in KEYS if k != "t03"]
        assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(today(sql),)]
        assert gaps(app) == [("t03", "missing", f"{start + DAY:%m-%d}")]


def test_a_first_scan_before_the_newest_day_ran_writes_no_key_and_judges_them_later(
    database: Database, schema: str, sql: Any
) -> None:
    """A new job's first scan, its one day not run yet by any key (a first tick, a replay):
    the horizon stops at that day's start and vouches for no day, so each key the first read
    presumed complete follows it from there, vouching for nothing: no key row is written, not
    in SQL and not in Python (which wrote each key again, empty: a million rows before a first
    tick of a million keys). The scan after the day ran for all keys but t03 judges them."""
    newest = today(sql) - DAY
    job = make_job("invoice", "daily", f"{newest:%Y-%m-%d}", keys=KEYS, call="operator:truth")
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert [s for _, s, _ in gaps(app)] == ["missing"] * len(KEYS)
        as_read = sql(  # the job's row and its keys' written by the read (its keys_read_at)
            "SELECT k.key FROM {schema}.job_keys k JOIN {schema}.jobs j ON j.id = k.job_id"
            " WHERE k.xmin = j.xmin AND k.verified = tstzmultirange(tstzrange(%s, NULL))",
            [newest],
        )
        assert len(as_read) == len(KEYS)
        assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(newest,)]
        sql(
            "INSERT INTO {schema}.runs (job_id, key, period_start, period_end, status, attempt,"
            " finished_at) SELECT j.id, k.key, %s, %s, 'succeeded', 1, now()"
            " FROM {schema}.jobs j JOIN {schema}.job_keys k ON k.job_id = j.id"
            " WHERE k.key <> 't03'",
            [newest, newest + DAY],
        )
        assert gaps(app) == [("t03", "missing", f"{newest:%m-%d}")]
        assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(today(sql),)]
        assert sql("SELECT key FROM {schema}.job_keys WHERE NOT upper_inf(verified)") == [("t03",)]
        assert gaps(app) == [("t03", "missing", f"{newest:%m-%d}")]


def test_a_first_scan_of_the_newest_day_alone_vouches_for_no_earlier_day(
    database: Database, schema: str, sql: Any
) -> None:
    """A first read's keys, presumed complete, and a first scan of yesterday alone with a
    quarter of the keys yet to run it: the horizon stops at yesterday's start, and no key is
    expected in a period that scan vouches for, so none is judged; each presumed range is
    cut, and a scan of every day still finds t03's hole of a week ago."""
    start = today(sql) - timedelta(days=7)
    newest = today(sql) - DAY
    job = make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=KEYS, call="operator:truth")
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        sql("DELETE FROM {schema}.runs WHERE key = 't03' AND period_start = %s", [start + DAY])
        sql("DELETE FROM {schema}.runs WHERE key < 't05' AND period_start = %s", [newest])
        sql("DELETE FROM {schema}.job_keys")  # as before the job's first read of its keys
        sql("UPDATE {schema}.scan_state SET keys_horizon = NULL")
        assert app.scan(since=f"{newest:%Y-%m-%d}").jobs[0].counts["missing"] == 5
        assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(newest,)]
        assert sql("SELECT count(*) FROM {schema}.job_keys WHERE upper_inf(verified)") == [(0,)]
        assert ("t03", "missing", f"{start + DAY:%m-%d}") in gaps(app)


def test_a_scan_of_no_key_sets_no_horizon(database: Database, schema: str, sql: Any) -> None:
    """A keys query that returns no key yet: its scan moves no horizon, so the keys of the
    job's first read, recorded by another process meanwhile and presumed complete, are judged
    by the scan that moves it first."""
    start = today(sql) - timedelta(days=3)
    none = "SELECT 'acme' WHERE false"
    job = make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=none, call="operator:truth")
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.scan().jobs[0].expected == 0
        assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(None,)]


def test_a_scan_past_the_horizon_cuts_what_a_key_without_its_new_day_verified(
    database: Database, schema: str, sql: Any
) -> None:
    """Every key's days were verified up to yesterday's start (the horizon); every key but
    t05 has a row for yesterday. A scan of every key moves the horizon in one statement, and
    t05's range, which followed it, is cut where the horizon was: yesterday is its gap, found
    now and by every later scan."""
    start = today(sql) - timedelta(days=7)
    newest = today(sql) - DAY
    job = make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=KEYS, call="operator:truth")
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        sql("DELETE FROM {schema}.runs WHERE key = 't05' AND period_start = %s", [newest])
        sql("UPDATE {schema}.job_keys SET verified = NULL")
        sql("UPDATE {schema}.scan_state SET keys_horizon = NULL")
        assert app.scan(until=f"{newest:%Y-%m-%d}").jobs[0].counts["missing"] == 0
        assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(newest,)]
        assert gaps(app) == [("t05", "missing", f"{newest:%m-%d}")]
        assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(today(sql),)]
        t05 = "SELECT verified = tstzmultirange(tstzrange(%s, %s)) FROM {schema}.job_keys"
        assert sql(t05 + " WHERE key = 't05'", [start, newest]) == [(True,)]
        following = sql("SELECT count(*) FROM {schema}.job_keys WHERE upper_inf(verified)")
        assert following == [(len(KEYS) - 1,)]
        assert gaps(app) == [("t05", "missing", f"{newest:%m-%d}")]  # and again


def test_a_read_only_scan_takes_unchanged_keys_as_recorded_and_reads_a_new_one(
    database: Database, schema: str, sql: Any
) -> None:
    """The page's scan writes nothing: of keys that did not change it reads only those with
    something to find, as recorded; when the keys query returns a key the ledger has not
    recorded, that key's days are gaps all the same (every key read, merged, not written)."""
    start = today(sql) - timedelta(days=7)

    def invoice(keys: str) -> Any:
        query = f"SELECT k, DATE '{start:%Y-%m-%d}' FROM (VALUES {keys}) AS v (k)"
        return make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=query, call="operator:truth")

    versions = "SELECT key, ctid::text, xmin::text, xmax::text FROM {schema}.job_keys ORDER BY 1"
    with Catchup(jobs=[invoice("('a'), ('b')")], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        assert gaps(app) == []
        before = sql(versions)
        (seen,) = scan(
            app.session, list(app.config.jobs.values()), since=None, until=None, read_only=True
        ).jobs
        assert (seen.keys, seen.expected, seen.key_ranges) == (2, 14, ())
    job = invoice("('a'), ('b'), ('c')")
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        (seen,) = scan(app.session, [job], since=None, until=None, read_only=True).jobs
        assert (seen.keys, seen.expected) == (3, 21)
        assert [(r.key, r.state, r.first, r.periods) for r in seen.key_ranges] == [
            ("c", "missing", start, 7)
        ]
    assert sql(versions) == before  # nothing written, nothing locked


def test_a_key_whose_ranges_were_cut_between_period_starts_is_settled(
    database: Database, schema: str, sql: Any
) -> None:
    """A key that came back after being gone has what was verified of it cut at when it went,
    between two period starts, and a range from the next start on: every start of the window
    is verified, so a later scan counts it like the others instead of reading it every time."""
    start = today(sql) - timedelta(days=7)
    job = make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=KEYS, call="operator:truth")
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        assert gaps(app) == []
        went = start + 2 * DAY + timedelta(hours=5)  # not a period start
        sql(
            "UPDATE {schema}.job_keys SET verified = tstzmultirange(tstzrange(%s, %s),"
            " tstzrange(%s, NULL)) WHERE key = 't04'",
            [start, went, start + 3 * DAY],
        )
        session = app.session
        ((job_id,),) = sql("SELECT id FROM {schema}.jobs WHERE name = 'invoice'")
        resolved = session.resolve_all([job], write=False)[0]
        periods = [(p.start, p.end) for p in resolved.timeline.periods(start, today(sql))]
        read, settled = window_keys(session.ledger, resolved, job_id, periods)
        assert (read, settled.count) == ([], len(KEYS))


def test_a_read_recorded_a_block_at_a_time_is_one_read(
    project: Project, sql: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that changed many keys is held as text and recorded a block at a time, in one
    transaction: every block is the same read, its first block's (the job's first read: each
    key expected from the job's start; later, the keys new and gone at one time, and those
    gone last seen at the read before)."""
    from catchup.ledger import keys as ledger_keys

    monkeypatch.setattr(ledger_keys, "BLOCK", 2)
    five = _values(*(f"'k{n}'" for n in range(5)))
    project.write(job_toml("invoice", "daily", "2026-10-01", keys=five, command=["true"]))
    assert project.cli("-q", "scan", "--until", "2026-10-03").exit_code in (0, 1)
    first = sql("SELECT DISTINCT expected_from::date::text, first_seen FROM {schema}.job_keys")
    assert len(first) == 1 and first[0][0] == "2026-10-01"
    ((first_read,),) = sql("SELECT keys_read_at FROM {schema}.jobs")
    other = _values("'k0'", "'k1'", *(f"'n{n}'" for n in range(4)))
    project.write(job_toml("invoice", "daily", "2026-10-01", keys=other, command=["true"]))
    assert project.cli("-q", "scan", "--until", "2026-10-03").exit_code in (0, 1)
    new = sql("SELECT DISTINCT expected_from, first_seen FROM {schema}.job_keys WHERE key > 'm'")
    gone = sql("SELECT DISTINCT gone_at FROM {schema}.job_keys WHERE gone_at IS NOT NULL")
    ((read_at,),) = sql("SELECT keys_read_at FROM {schema}.jobs")
    assert new == [(read_at, read_at)] and gone == [(read_at,)]
    # each gone key (k2, k3 in the first block, k4 in the second) last seen at the read before
    seen = sql("SELECT DISTINCT last_seen FROM {schema}.job_keys WHERE gone_at IS NOT NULL")
    assert seen == [(first_read,)]
    assert sql("SELECT count(*) FROM {schema}.job_keys WHERE gone_at IS NOT NULL") == [(3,)]


def test_a_dated_first_read_in_blocks_keeps_each_keys_own_date(
    project: Project, sql: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first read of a dated keys query, its keys returned in no order and recorded a block
    at a time: each key is expected from its own date (the dates go in the blocks' key order,
    which is not theirs)."""
    from catchup.ledger import keys as ledger_keys

    monkeypatch.setattr(ledger_keys, "BLOCK", 2)
    dates = {"e": "2026-10-01", "a": "2026-10-05", "d": "2026-10-02", "b": "2026-10-04"}
    dates |= {"c": "2026-10-03"}
    project.write(
        job_toml("invoice", "daily", "2026-10-01", keys=_dated(*dates.items()), command=["true"])
    )
    assert project.cli("-q", "scan", "--until", "2026-10-06").exit_code in (0, 1)
    got = sql("SELECT key, expected_from::date::text FROM {schema}.job_keys ORDER BY 1")
    assert got == sorted(dates.items())


def test_a_read_recorded_a_block_at_a_time_locks_rows_in_key_order(
    database: Database, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blocks of a read's changes come in key order, so the key rows are locked in key
    order across blocks, as every writer of key rows locks them: here a transaction holds the
    first key's row, and the read (keys returned, and their rows written, in reverse order;
    every key expected from a later date, a block each) waits for it holding no other key's
    row."""
    import threading

    import psycopg
    import psycopg.sql

    from catchup.ledger import Ledger, diff_keys
    from catchup.ledger import keys as ledger_keys

    monkeypatch.setattr(ledger_keys, "BLOCK", 1)
    names = ["acme", "globex", "initech"]
    later = _dated(*((key, "2026-10-05") for key in reversed(names)))
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        ledger = Ledger(conn, schema)
        ledger.migrate()
        job_id = ledger.register_jobs(["invoice"])["invoice"].id
        start = datetime(2026, 10, 1, tzinfo=UTC)
        for n in range(1, 4):  # written in reverse key order: initech, globex, acme
            ledger.record_keys(job_id, [(k, start) for k in names[-n:]], start=start)
        lock = f'SELECT key FROM "{schema}".job_keys WHERE job_id = %s AND key = %s FOR UPDATE'
        with (
            psycopg.connect(database.conninfo) as holder,
            psycopg.connect(database.conninfo) as other,
        ):
            holder.execute(lock, [job_id, "acme"])  # the first in key order
            diff = diff_keys(conn, later, "UTC", schema, job_id)
            assert diff.changed == 3
            thread = threading.Thread(
                target=lambda: ledger.record_key_changes(diff, job_id=job_id, start=start),
                daemon=True,
            )
            pid = conn.info.backend_pid
            thread.start()

            # the waiting read holds neither of the others
            waits_holding_only_the_first(
                other, pid, psycopg.sql.SQL(lock), job_id, ["globex", "initech"]
            )
            holder.rollback()
            thread.join(timeout=30)
            assert not thread.is_alive()


def test_a_dated_keys_query_with_null_dates_compares_whole_as_unchanged(
    project: Project, sql: Any, database: Database, schema: str
) -> None:
    """A keys query whose date column is NULL for some keys: those are held from the job's
    start (or first seen); read again unchanged, the whole compares alike (the cheap path: no
    key joined), and a date that did change is still found."""
    import psycopg

    from catchup.ledger import diff_keys

    query = f"SELECT key, since FROM {schema}.tenants"
    project.write(job_toml("invoice", "daily", "2026-10-01", keys=query, command=["true"]))
    assert project.cli("-q", "migrate").exit_code == 0  # the schema the table goes in
    sql("CREATE TABLE {schema}.tenants (key text, since date)")
    sql("INSERT INTO {schema}.tenants VALUES ('acme', NULL), ('globex', '2026-10-03'), ('x', NULL)")
    assert project.cli("-q", "scan", "--until", "2026-10-05").exit_code in (0, 1)
    ((job_id,),) = sql("SELECT id FROM {schema}.jobs WHERE name = 'invoice'")

    def diff() -> Any:
        with psycopg.connect(database.conninfo, autocommit=True) as conn:
            return diff_keys(conn, query, "UTC", schema, job_id)

    again = diff()
    assert (again.same, again.changed, again.gone, again.count) == (True, 0, 0, 3)
    sql("UPDATE {schema}.tenants SET since = '2026-10-02' WHERE key = 'globex'")
    moved = diff()
    assert (moved.same, moved.changed, moved.gone) == (False, 1, 0)


def test_a_first_read_raced_by_another_is_not_recorded(
    database: Database, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first read (no key was held: every key new) about to be recorded when another read
    recorded the keys meanwhile: the other read's record stands, and this one writes nothing
    and waits for no key row. Here a transaction holds the first key's row: the raced read ends
    at once, locking and writing nothing (recorded, it would wait for that row)."""
    import threading

    import psycopg

    from catchup.ledger import Ledger, diff_keys
    from catchup.ledger import keys as ledger_keys
    from catchup.scan.keyed import record_read

    monkeypatch.setattr(ledger_keys, "BLOCK", 1)
    names = [f"t{n:02}" for n in range(12)]
    later = _dated(*((key, "2026-10-05") for key in reversed(names)))
    job = make_job("invoice", "daily", "2026-10-01", keys=later, command=["true"])
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        ledger = Ledger(conn, schema)
        ledger.migrate()
        job_id = ledger.register_jobs(["invoice"])["invoice"].id
        first = diff_keys(conn, later, "UTC", schema, job_id)  # none held
        assert first.changed == len(names) and first.first_read
        start = datetime(2026, 10, 1, tzinfo=UTC)
        ledger.record_keys(job_id, [(k, start) for k in names], start=start)  # the other read
        rows = f'SELECT key, xmin::text, expected_from FROM "{schema}".job_keys ORDER BY key'
        recorded = conn.execute(rows).fetchall()
        lock = f'SELECT key FROM "{schema}".job_keys WHERE job_id = %s AND key = %s FOR UPDATE'
        with psycopg.connect(database.conninfo) as holder:
            holder.execute(lock, [job_id, names[0]])  # the first in key order
            thread = threading.Thread(
                target=lambda: record_read(ledger, job, job_id, first), daemon=True
            )
            thread.start()
            thread.join(timeout=30)
            ended = not thread.is_alive()
            holder.rollback()
            thread.join(timeout=30)
        assert ended  # it never waited for the row held
        assert conn.execute(rows).fetchall() == recorded  # the other read's record stands


def test_a_read_of_a_job_whose_row_went_meanwhile_writes_no_key(
    database: Database, schema: str
) -> None:
    """A job's keys read, and before they are recorded its row goes (``catchup rename`` of
    another job over its name deletes it and its keys): nothing is written under an id no
    job has, first read or later."""
    import psycopg

    from catchup.ledger import Ledger, diff_keys
    from catchup.scan.keyed import record_read

    keys = "SELECT 'k' || lpad(i::text, 3, '0') FROM generate_series(1, 20) AS i"
    job = make_job("invoice", "daily", "2026-10-01", keys=keys, command=["true"])
    count = f'SELECT count(*) FROM "{schema}".job_keys'
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        ledger = Ledger(conn, schema)
        ledger.migrate()
        for first in (True, False):
            job_id = ledger.register_jobs(["invoice"])["invoice"].id
            if not first:
                start = datetime(2026, 10, 1, tzinfo=UTC)
                ledger.record_keys(job_id, [("k001", start)], start=start)
            diff = diff_keys(conn, keys, "UTC", schema, job_id)
            assert diff.first_read is first and diff.changed == (20 if first else 19)
            conn.execute(f'DELETE FROM "{schema}".job_keys WHERE job_id = %s', [job_id])
            conn.execute(f'DELETE FROM "{schema}".jobs WHERE id = %s', [job_id])  # renamed over
            record_read(ledger, job, job_id, diff)
            assert conn.execute(count).fetchone() == (0,), first
            record_read(ledger, job, job_id, None)  # read again and recorded whole
            assert conn.execute(count).fetchone() == (0,), first


def test_keys_are_listed_a_page_at_a_time(project: Project, sql: Any) -> None:
    """`catchup keys` of 50,001 keys (one gone, one paused): the table shows the first 1,000
    and counts them all, with the command that lists every key; --json lists every one (two
    pages of its reads), in the ledger's key order; the Python API pages with ``after``, and
    a page after the first reads the ledger only; a gone key paused is not counted paused;
    an ``after`` or ``limit`` that cannot be one is refused."""
    from catchup.cli.looking import JSON_PAGE

    many = JSON_PAGE + 1
    query = f"SELECT 'k' || lpad(i::text, 6, '0') FROM generate_series(1, {many}) AS i"
    fewer = query.replace(str(many), str(many - 1))
    project.write(job_toml("invoice", "daily", "2026-10-01", keys=fewer, command=["true"]))
    assert project.cli("-q", "keys", "invoice").exit_code == 0  # all but the last recorded
    project.write(job_toml("invoice", "daily", "2026-10-01", keys=query, command=["true"]))
    assert project.cli("-q", "pause", "invoice", "--key", "k000007", "--reason", "x").exit_code == 0
    sql("UPDATE {schema}.job_keys SET gone_at = now() WHERE key = 'k000002'")
    ordered = [k for (k,) in sql("SELECT key FROM {schema}.job_keys ORDER BY key")]
    listed = json.loads(project.cli("-q", "keys", "invoice", "--json").stdout)
    assert [k["key"] for k in listed["keys"]] == ordered and len(ordered) == many
    assert (listed["expected"], listed["gone"], listed["paused"]) == (many, 0, 1)  # k000002 back
    assert listed["next_after"] is None and listed["read_at"] is not None
    table = project.cli("-q", "keys", "invoice", env={"COLUMNS": "200"}).output
    assert "k001000" in table and "k001001" not in table
    assert f"the first 1,000 of {many:,} shown; every key: catchup keys invoice --json" in table
    assert f"{many:,} keys expected, 0 gone, 1 paused" in table
    with Catchup(str(project.config), dsn=project.database.conninfo) as app:
        ledger, read = app.session.ledger, []
        page = ledger.key_page

        def counted(*args: Any) -> list[Any]:
            rows = page(*args)
            read.append(len(rows))
            return rows

        ledger.key_page = counted  # type: ignore[method-assign,assignment]
        first = app.keys("invoice", limit=30_000)
        assert read == [30_001]  # a page and the key that says more follow, never every key
        assert first.next_after == ordered[29_999] and first.counts.total == many
        sql("DELETE FROM {schema}.job_keys WHERE key = %s", [ordered[-1]])  # unread, unrecorded
        rest = app.keys("invoice", after=first.next_after, limit=30_000)
        assert [k.key for k in first.keys + rest.keys] == ordered[:-1] and rest.next_after is None
        counting, calls = ledger.key_counts, []

        def count_calls(*args: Any) -> Any:
            calls.append(args)
            return counting(*args)

        ledger.key_counts = count_calls  # type: ignore[method-assign,assignment]
        again = app.keys("invoice", after=first.next_after, limit=30_000, counts=first.counts)
        assert again.counts is first.counts and calls == []  # counted by the first page only
        ledger.key_counts = counting  # type: ignore[method-assign]
        assert [k.key for k in app.keys("invoice", after="", limit=2).keys] == ordered[:2]
        sql("UPDATE {schema}.job_keys SET gone_at = now(), paused_at = now() WHERE key = 'k000009'")
        counts = app.keys("invoice", after="", limit=1).counts
        assert (counts.expected, counts.gone, counts.paused) == (many - 2, 1, 1)  # k000007
        refused = ({"after": "k\x00"}, {"limit": 0}, {"limit": True}, {"limit": 1.5})
        for asked in (*refused, {"counts": first.counts}):
            with pytest.raises(ConfigError):
                app.keys("invoice", **asked)


def test_a_keys_query_with_a_percent_sign_is_read_as_written(project: Project) -> None:
    """A keys query's ``%`` (modulo, a LIKE pattern) reaches the server as written, in the
    probe of its columns as in its read: it failed with ``operator does not exist: integer %%
    integer`` before."""
    query = (
        "SELECT 'k' || i FROM generate_series(1, 10) AS i WHERE i % 2 = 0 AND ('k' || i) LIKE 'k%'"
    )
    project.write(job_toml("invoice", "daily", "2026-10-01", keys=query, command=["true"]))
    listed = project.cli("-q", "keys", "invoice", "--json")
    assert listed.exit_code == 0, listed.output
    assert [k["key"] for k in json.loads(listed.stdout)["keys"]] == ["k10", "k2", "k4", "k6", "k8"]


def test_a_first_read_into_an_analyzed_empty_key_history_looks_no_key_up(
    database: Database, schema: str
) -> None:
    """A job's first read of its keys, recorded into a key history the planner knows to be
    empty (a VACUUM or ANALYZE ran on it when it was: autovacuum after its rows were
    deleted, a DBA's nightly `vacuumdb --analyze`): no key is looked up (none is held).
    Looked up, each key's lookup was planned as a scan of the (empty) table, and the
    statement scanned again, for every key, the pages it had written so far: a first block of
    50,000 keys took 9.4 s that way, of a million keys' 16 s."""
    import psycopg

    from catchup.ledger import Ledger, diff_keys

    keys = "SELECT 'k' || lpad(i::text, 5, '0') FROM generate_series(1, 3000) AS i"
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        ledger = Ledger(conn, schema)
        ledger.migrate()
        job_id = ledger.register_jobs(["invoice"])["invoice"].id
        conn.execute(f'VACUUM (ANALYZE) "{schema}".job_keys')
        diff = diff_keys(conn, keys, "UTC", schema, job_id)
        assert diff.changed == 3000
        conn.autocommit = False  # the read's transaction a savepoint of this one: its counts
        ledger.record_key_changes(diff, job_id=job_id, start=datetime(2026, 10, 1, tzinfo=UTC))
        scans = conn.execute(
            "SELECT seq_scan FROM pg_stat_xact_user_tables"
            " WHERE schemaname = %s AND relname = 'job_keys'",
            [schema],
        ).fetchone()
        conn.commit()
        held = conn.execute(f'SELECT count(*) FROM "{schema}".job_keys').fetchone()
    assert held == (3000,)
    assert scans is not None
    assert scans[0] < 10, f"{scans[0]} scans of the key history"


def test_a_key_gone_past_the_horizon_is_looked_at_for_its_days_before_it_went(
    database: Database, schema: str, sql: Any
) -> None:
    """Every key verified up to the horizon, four days ago; t05 never ran that day, and went
    the next. A scan that moves the horizon to today does not look at a key gone before the
    newest day, so the read that found it gone cut its range at the horizon: every scan
    still finds its missing day (the range, left following, would vouch for it)."""
    start = today(sql) - timedelta(days=7)
    horizon, went = start + 3 * DAY, start + 4 * DAY + timedelta(hours=1)
    job = make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=KEYS, call="operator:truth")
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        sql("DELETE FROM {schema}.runs WHERE key = 't05' AND period_start >= %s", [horizon])
        sql("UPDATE {schema}.job_keys SET verified = tstzmultirange(tstzrange(%s, NULL))", [start])
        sql("UPDATE {schema}.scan_state SET keys_horizon = %s", [horizon])
    kept = [k for k in KEYS if k != "t05"]
    job = make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=kept, call="operator:truth")
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        ((job_id,),) = sql("SELECT id FROM {schema}.jobs WHERE name = 'invoice'")
        app.session.ledger.record_keys(job_id, [(k, None) for k in kept], start=start)
        sql("UPDATE {schema}.job_keys SET gone_at = %s WHERE key = 't05'", [went])
        for _ in range(2):
            (scanned,) = app.scan().jobs
            assert [(r.key, r.first, r.last) for r in scanned.key_ranges] == [
                ("t05", horizon, horizon + DAY)
            ]


def test_a_key_moved_while_a_scan_of_its_first_read_records_is_looked_at_again(
    database: Database, schema: str, sql: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An evidence job's keys are judged in Python. While its first scan records what it
    found, a read moves when acme is expected (a day later): the scan writes nothing of a key
    changed since it read it, and moves the horizon. The read took away acme's presumed range
    (no scan had judged it), so the next scan still finds acme's days missing."""
    start = today(sql) - timedelta(days=3)
    evidence = f"SELECT 'acme', CURRENT_DATE FROM {schema}.jobs WHERE false"
    job = make_job(
        "invoice",
        "daily",
        f"{start:%Y-%m-%d}",
        keys=["acme", "globex"],
        call="operator:truth",
        evidence=evidence,
    )
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as other:
        record = Keys.record_verified

        def read_meanwhile(ledger: Keys, job_id: int, *args: Any) -> bool:
            keys = [("acme", start + DAY), ("globex", None)]
            other.session.ledger.record_keys(job_id, keys, start=start)
            return record(ledger, job_id, *args)

        with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
            with monkeypatch.context() as patched:
                patched.setattr(Keys, "record_verified", read_meanwhile)
                assert app.scan().jobs[0].counts["missing"] == 6
            assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(start + 2 * DAY,)]
            assert app.scan().jobs[0].counts["missing"] == 5
