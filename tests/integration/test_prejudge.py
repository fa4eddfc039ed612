"""A keyed job's first scan judges its keys beside their first read (issue 54): while the read
records them, a connection of its own runs the keys query again and counts each key's rows
(catchup/scan/prejudge.py), and the scan writes what that judged instead of settling every key
after the read. What it writes is what settling them writes; it is written only while it still
holds (the keys the job holds are those judged, no row removed since, each key as the first
read recorded it); otherwise, or when the judgement failed, the scan settles them itself."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from fix_db import Database, schema_made

from catchup import Catchup, make_job
from catchup.config.job import Job
from catchup.ledger import keys as keys_module
from catchup.ledger.keys import Keys, prejudge_first_keys
from catchup.results import NotDue
from catchup.scan import prejudge
from catchup.scan.coverage import signature
from catchup.scan.targets import Prejudged

DAY = timedelta(days=1)
KEYS = [f"t{n:02}" for n in range(12)]


def today(sql: Any) -> datetime:
    """The database clock's UTC midnight: dates are built from it, never from today."""
    ((now,),) = sql("SELECT date_trunc('day', clock_timestamp(), 'UTC')")
    return now  # type: ignore[no-any-return]


@pytest.fixture
def settles(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Which of the two ways each first scan's keys were settled: "judged" (what was judged
    beside the read, written) or "settled" (settle_complete_keys, after the read)."""
    ways: list[str] = []
    settle, judged = Keys.settle_complete_keys, Keys.settle_prejudged

    def settling(self: Keys, *args: Any) -> bool:
        ways.append("settled")
        return settle(self, *args)

    def writing(self: Keys, *args: Any) -> bool:
        done = judged(self, *args)
        if done:
            ways.append("judged")
        return done

    monkeypatch.setattr(Keys, "settle_complete_keys", settling)
    monkeypatch.setattr(Keys, "settle_prejudged", writing)
    yield ways


@pytest.fixture
def judged_jobs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The id of each job whose first read was judged beside it, in turn."""
    ids: list[int] = []
    judge = prejudge_first_keys

    def judging(conn: Any, asked: Any, job_id: int, *rest: Any) -> Prejudged | None:
        ids.append(job_id)
        return judge(conn, asked, job_id, *rest)

    monkeypatch.setattr(prejudge, "prejudge_first_keys", judging)
    return ids


def tenants(sql: Any, schema: str, start: datetime) -> None:
    """Twelve tenants, each expected from the job's start, but t09 (from the window's fifth
    day: its rows before are not its own) and t10 (from after the window: nothing expected)."""
    schema_made(sql, schema)  # where the team keeps its tenants, here
    sql("CREATE TABLE {schema}.tenants (name text, since date)")
    sql("INSERT INTO {schema}.tenants SELECT unnest(%s::text[]), NULL", [KEYS])
    sql("UPDATE {schema}.tenants SET since = %s WHERE name = 't09'", [(start + 4 * DAY).date()])
    sql("UPDATE {schema}.tenants SET since = %s WHERE name = 't10'", [(start + 30 * DAY).date()])


def forget_keys(sql: Any) -> None:
    """The job as before its first read of its keys: no key row, no horizon."""
    sql("DELETE FROM {schema}.job_keys")
    sql("UPDATE {schema}.scan_state SET keys_horizon = NULL")
    sql("UPDATE {schema}.jobs SET keys_read_at = NULL")


def key_rows(sql: Any) -> list[tuple[Any, ...]]:
    """Every key row as its first scan left it, and the job's horizon."""
    rows = sql(
        "SELECT key, expected_from, verified::text, gone_at FROM {schema}.job_keys ORDER BY key"
    )
    return [*rows, *sql("SELECT keys_horizon FROM {schema}.scan_state")]


Found = list[tuple[str, str, datetime]]


def first_scan(
    app: Catchup, sql: Any, removal: bool = False, since: datetime | None = None
) -> tuple[list[tuple[Any, ...]], Found]:
    """A first scan of the job's keys (from ``since``: None, the job's start): the key rows
    it left, and what it found (each key's ranges: key, state, first day). ``removal``: its
    scan state is one a removal of a row made before any scan (no schedules signed, no
    ranges), not the earlier scans'."""
    forget_keys(sql)
    if removal:
        sql("DELETE FROM {schema}.scan_state")
        sql(
            "INSERT INTO {schema}.scan_state (job_id, signature, generation) SELECT id, '', 1"
            " FROM {schema}.jobs"
        )
    (job,) = app.scan(since=since).jobs
    return key_rows(sql), sorted((r.key, r.state, r.first) for r in job.key_ranges)


def holed(app: Catchup, sql: Any, start: datetime) -> None:
    """Every key's days run, then: t03 without its second day's row, t04 and t05 without any,
    t07's newest day failed, t09 without a row on its first expected day."""
    assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
    sql("DELETE FROM {schema}.runs WHERE key = 't03' AND period_start = %s", [start + DAY])
    sql("DELETE FROM {schema}.runs WHERE key IN ('t04', 't05')")
    sql(
        "UPDATE {schema}.runs SET status = 'failed', failures = 1, error = 'boom'"
        " WHERE key = 't07' AND period_start = %s",
        [today(sql) - DAY],
    )
    sql("DELETE FROM {schema}.runs WHERE key = 't09' AND period_start = %s", [start + 4 * DAY])


@pytest.mark.parametrize("removal", [False, True], ids=["scanned-before", "a-removals-state"])
def test_a_first_scan_writes_what_settling_its_keys_after_the_read_writes(
    database: Database,
    schema: str,
    sql: Any,
    settles: list[str],
    monkeypatch: pytest.MonkeyPatch,
    removal: bool,
) -> None:
    """The same ledger, scanned first with its keys settled after their read, then with them
    judged beside it: the same key rows (t03, t04, t05, t09 cut, then their ranges found), the
    same horizon, the same gaps found (t04 and t05, without a row, verified nowhere); also when
    the only scan state is one a removal made (a replay of a job whose rows were deleted)."""
    start = today(sql) - timedelta(days=7)
    tenants(sql, schema, start)
    query = f'SELECT name, since FROM "{schema}".tenants'
    job = make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=query, call="operator:truth")
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        holed(app, sql, start)
        with monkeypatch.context() as m:
            m.setattr(prejudge, "start", lambda *_: None)  # no judgement: settled after
            settled = first_scan(app, sql, removal)
        settles.clear()
        judged = first_scan(app, sql, removal)
        assert settles == ["judged"]  # written as judged: nothing settled after the read
    assert judged == settled
    rows, found = judged
    assert [key for key, _, verified, _ in rows[:-1] if verified == "{}"] == ["t04", "t05"]
    assert rows[-1] == (today(sql) - DAY,)  # t04, t05: 2 of 11 keys without the newest day
    assert ("t04", "missing", start) in found
    assert ("t09", "missing", start + 4 * DAY) in found
    assert ("t07", "failed", today(sql) - DAY) in found
    assert [r for r in found if r[0] in ("t09", "t10")] == [("t09", "missing", start + 4 * DAY)]


def test_a_first_scan_of_a_later_window_writes_what_settling_writes(
    database: Database,
    schema: str,
    sql: Any,
    settles: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A first scan from the job's fourth day (as a tick's catchup_window has it): every key
    expected before it is cut at the window's start, the same both ways, and the gaps found
    the same (t03's hole, before the window, not among them)."""
    start = today(sql) - timedelta(days=7)
    tenants(sql, schema, start)
    query = f'SELECT name, since FROM "{schema}".tenants'
    job = make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=query, call="operator:truth")
    since = start + 3 * DAY
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        holed(app, sql, start)
        with monkeypatch.context() as m:
            m.setattr(prejudge, "start", lambda *_: None)
            settled = first_scan(app, sql, since=since)
        settles.clear()
        judged = first_scan(app, sql, since=since)
        assert settles == ["judged"]
    assert judged == settled
    rows, found = judged
    cut = f'{{["{since:%Y-%m-%d %H:%M:%S}+00",)}}'
    assert {key: verified for key, _, verified, _ in rows[:-1]}["t00"] == cut
    assert ("t04", "missing", since) in found
    assert not [r for r in found if r[0] == "t03"]


@pytest.mark.parametrize(
    ("beside", "why"),
    [
        ("name <> 't04'", "the keys query returned another key set beside the read"),
        ("length(name) / 0 = 1", "the keys query failed beside the read"),
    ],
)
def test_a_judgement_that_does_not_hold_leaves_the_scan_to_settle_the_keys(
    database: Database,
    schema: str,
    sql: Any,
    settles: list[str],
    monkeypatch: pytest.MonkeyPatch,
    beside: str,
    why: str,
) -> None:
    """The keys query returns other keys (t04, which has no row, left out) or fails, only on
    the connection that judges the first read's keys: what it judged is not written (the
    keys the job holds are not those it judged), and the scan settles them after the read,
    as if nothing had been judged: t04's missing days are found."""
    start = today(sql) - timedelta(days=7)
    tenants(sql, schema, start)
    query = (
        f'SELECT name, since FROM "{schema}".tenants'
        " WHERE CASE WHEN current_setting('application_name') = 'catchup-prejudge'"
        f" THEN {beside} ELSE true END"
    )
    job = make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=query, call="operator:truth")
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        holed(app, sql, start)
        with monkeypatch.context() as m:
            m.setattr(prejudge, "start", lambda *_: None)
            settled = first_scan(app, sql)
        settles.clear()
        again = first_scan(app, sql)
        assert settles == ["settled"], why
    assert again == settled
    assert ("t04", "missing", start) in again[1]


def test_a_judgement_of_other_periods_is_not_taken(
    database: Database, schema: str, sql: Any, settles: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first read judged for a window from the job's second day, where the scan's is from
    its first: the judgement is not taken (t03, complete from the second day, would follow
    the horizon past its missing first day), and the scan settles the keys itself, finding
    t03's hole."""
    start, _, job = undated(sql, schema, KEYS)
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        sql("DELETE FROM {schema}.runs WHERE key = 't03' AND period_start = %s", [start])
        judge = prejudge.start

        def from_the_second_day(*args: Any) -> prejudge.Prejudging | None:
            session, jobs, _, until, now, scanned_from = args
            return judge(session, jobs, start + DAY, until, now, scanned_from)

        monkeypatch.setattr(prejudge, "start", from_the_second_day)
        settles.clear()
        _, found = first_scan(app, sql)
        assert settles == ["settled"]
    assert ("t03", "missing", start) in found


def undated(sql: Any, schema: str, keys: list[str]) -> tuple[datetime, str, Job]:
    """``keys`` as tenants without a date: the job's start a week ago, its keys query, it."""
    start = today(sql) - timedelta(days=7)
    schema_made(sql, schema)
    sql("CREATE TABLE {schema}.tenants (name text)")
    sql("INSERT INTO {schema}.tenants SELECT unnest(%s::text[])", [keys])
    query = f'SELECT name FROM "{schema}".tenants'
    job = make_job("invoice", "daily", f"{start:%Y-%m-%d}", keys=query, call="operator:truth")
    return start, query, job


def judged_beside(
    database: Database, app: Catchup, sql: Any, query: str, start: datetime
) -> tuple[int, str, Prejudged]:
    """The job as before any scan (no key row, no scan state), its first read judged on a
    connection of its own, for its window up to today: the job's id, the signature of its
    schedules, what was judged."""
    forget_keys(sql)
    sql("DELETE FROM {schema}.scan_state")
    ((job_id,),) = sql("SELECT id FROM {schema}.jobs WHERE name = 'invoice'")
    (job,) = app.session.resolve_all(list(app.session.config.jobs.values()), write=False)
    periods = [(p.start, p.end) for p in job.timeline.periods(start, today(sql))]
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        asked = (query, "UTC", app.session.ledger.schema)
        judged = prejudge_first_keys(conn, asked, job_id, start, periods)
    assert judged is not None
    return job_id, signature(job), judged


def recorded(app: Catchup, job_id: int, start: datetime, keys: list[str]) -> None:
    """A first read of ``keys`` recorded: each presumed complete from the job's start."""
    app.session.ledger.record_keys(job_id, [(k, None) for k in keys], start=start)


def test_what_was_judged_is_written_only_while_no_row_went_and_each_key_is_as_read(
    database: Database, schema: str, sql: Any
) -> None:
    """What was judged of a first read (t04 and t05 cut) is not written once a row of the job
    went after it counted them (t03's newest day, deleted: t03 would follow a horizon past
    its hole): nothing is written, and the scan after it finds t03's hole. Judged again and
    written, a key whose row is no longer as the first read recorded it (t05's range, changed)
    keeps what it has: a key not as it was judged (t06, judged complete and not listed, now
    following from a day later: as when the ledger's start is not the config's; or its ranges
    forgotten), nothing is written either. Once every key is as judged, it is written."""
    start, query, job = undated(sql, schema, KEYS)
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        sql("DELETE FROM {schema}.runs WHERE key IN ('t04', 't05')")
        job_id, sig, judged = judged_beside(database, app, sql, query, start)
        assert judged.keys == ["t04", "t05"]
        recorded(app, job_id, start, KEYS)
        sql("DELETE FROM {schema}.runs WHERE key = 't03' AND period_start = %s", [today(sql) - DAY])
        before = key_rows(sql)
        assert not app.session.ledger.settle_prejudged(sig, judged)
        assert key_rows(sql) == before  # nothing written, no horizon
        (scanned,) = app.scan().jobs
        assert ("t03", "missing") in {(r.key, r.state) for r in scanned.key_ranges}

        job_id, sig, judged = judged_beside(database, app, sql, query, start)
        recorded(app, job_id, start, KEYS)
        presumed = "SELECT verified FROM {schema}.job_keys WHERE key = 't06'"
        ((as_read,),) = sql(presumed)
        moved = "UPDATE {schema}.job_keys SET verified = %s WHERE key = 't06'"
        for other in (f'{{["{start + DAY:%Y-%m-%d %H:%M:%S}+00",)}}', None):  # or forgotten
            sql(moved, [other])
            before = key_rows(sql)
            assert not app.session.ledger.settle_prejudged(sig, judged)
            assert key_rows(sql) == before
        sql(moved, [as_read])
        assert app.session.ledger.settle_prejudged(sig, judged)
        now = {r[0]: r[2] for r in key_rows(sql)[:-1]}
        assert (now["t04"], now["t05"]) == ("{}", "{}")
        # three keys of twelve without the newest day (t03's went above): it is not vouched for
        assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(today(sql) - DAY,)]


def test_a_judgement_is_of_the_keys_the_job_holds(
    database: Database, schema: str, sql: Any
) -> None:
    """Judged, then another set of keys recorded (t11 where the judgement had t04): nothing
    written, no horizon; the same keys recorded: written, the horizon moved."""
    start, query, job = undated(sql, schema, KEYS[:11])
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        sql("DELETE FROM {schema}.runs WHERE key = 't04'")
        job_id, sig, judged = judged_beside(database, app, sql, query, start)
        assert judged.keys == ["t04"]
        recorded(app, job_id, start, [k for k in KEYS if k != "t04"])
        before = key_rows(sql)
        assert not app.session.ledger.settle_prejudged(sig, judged)
        assert key_rows(sql) == before
        assert sql("SELECT count(*) FROM {schema}.scan_state") == [(0,)]
        sql("DELETE FROM {schema}.job_keys")
        recorded(app, job_id, start, KEYS[:11])
        assert app.session.ledger.settle_prejudged(sig, judged)
        assert sql("SELECT key FROM {schema}.job_keys WHERE verified = '{{}}'") == [("t04",)]
        assert sql("SELECT keys_horizon FROM {schema}.scan_state") == [(today(sql),)]


def test_a_judgement_of_more_keys_than_it_may_hold_steps_aside(
    database: Database, schema: str, sql: Any, settles: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judgement that would write more keys than it may hold (here 1: t04 and t05 have no
    row) holds none: the scan settles the keys itself, and finds both keys' missing days
    (what it held would have had one of them left following, its days never looked at)."""
    start, _, job = undated(sql, schema, KEYS)
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        sql("DELETE FROM {schema}.runs WHERE key IN ('t04', 't05')")
        monkeypatch.setattr(keys_module, "PREJUDGED_MOST", 1)
        settles.clear()
        _, found = first_scan(app, sql)
        assert settles == ["settled"]
    assert [(key, state) for key, state, _ in found] == [("t04", "missing"), ("t05", "missing")]


def test_a_first_tick_writes_what_was_judged_for_its_catchup_window(
    database: Database, schema: str, sql: Any, settles: list[str], judged_jobs: list[int]
) -> None:
    """A job started a week ago whose tick looks back three days: its first tick's keys are
    judged for those three days, what it judged is written (t04 and t05 cut), and the tick
    runs their days in its window (a judgement of the week's would not be for its periods:
    not taken). A job beside it that only runs its latest period is never scanned by a tick:
    its keys are not judged. A scan from the job's fifth day is judged for its own window."""
    start, query, _ = undated(sql, schema, KEYS)
    day = f"{start:%Y-%m-%d}"
    job = make_job("invoice", "daily", day, keys=query, call="operator:truth", catchup_window="3d")
    latest = make_job("export", "daily", day, keys=query, call="operator:truth", catchup="latest")
    with Catchup(jobs=[job, latest], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        sql("DELETE FROM {schema}.runs WHERE key IN ('t04', 't05')")
        forget_keys(sql)
        settles.clear()
        judged_jobs.clear()
        ran = app.tick()
        assert settles == ["judged"]
        assert judged_jobs == [sql("SELECT id FROM {schema}.jobs WHERE name = 'invoice'")[0][0]]
        assert ran.totals["failed"] == 0
        window = today(sql) - 2 * DAY  # the days that start in the last three days, and are due
        ran_cut = (
            "SELECT key, count(*), min(period_start) FROM {schema}.runs"
            " WHERE key IN ('t04', 't05') AND job_id = %s GROUP BY key ORDER BY key"
        )
        assert sql(ran_cut, judged_jobs) == [("t04", 2, window), ("t05", 2, window)]
        forget_keys(sql)
        settles.clear()
        app.scan(jobs=["invoice"], since=f"{start + 4 * DAY:%Y-%m-%d}")
        assert settles == ["judged"]


def test_a_run_of_every_key_judges_nothing(
    database: Database, schema: str, sql: Any, judged_jobs: list[int]
) -> None:
    """``catchup run`` of a keyed job scans nothing: its first read is not judged beside it
    (the keys query is not run a second time), and every key's latest day runs."""
    start, _, job = undated(sql, schema, KEYS)
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.replay(since=f"{start:%Y-%m-%d}").totals["failed"] == 0
        sql("DELETE FROM {schema}.runs WHERE period_start = %s", [today(sql) - DAY])
        forget_keys(sql)
        ran = app.run_keys("invoice")
        assert not isinstance(ran, NotDue)
        assert ran.totals["succeeded"] == len(KEYS)
    assert judged_jobs == []
