"""A later scan of a keyed job reads from the ledger only the keys with something to find in its
window (issue 54): the others, settled there (every period they are expected in has a
succeeded row, and what scans verified of them follows the job's horizon past the window),
are counted in SQL. What the scan reports is what reading every key would have reported."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fix_db import Database

from catchup import Catchup, make_job
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
    its newest day, one is paused. A later scan reads only those three, counts the seventeen
    others, and reports what a scan of every key does."""
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
        again = gaps(app)  # the holes stay outside what is verified: looked at again
        assert again == [("t03", "missing", f"{start:%m-%d}"), ("t07", "failed", f"{newest:%m-%d}")]
        session = app.session
        (row,) = sql("SELECT id FROM {schema}.jobs WHERE name = 'invoice'")
        resolved = session.resolve_all([job], write=False)[0]
        periods = [(p.start, p.end) for p in resolved.timeline.periods(start, today(sql))]
        read, settled = window_keys(session.ledger, resolved, row[0], periods)
        assert sorted(k.key for k in read) == ["t03", "t07", "t11"]
        assert settled.count == len(KEYS) - 3
        assert settled.expected(len(periods)) == (len(KEYS) - 3) * 7
        (scanned,) = app.scan().jobs
        assert (scanned.keys, scanned.expected) == (len(KEYS), len(KEYS) * 7)
        assert scanned.paused_keys == ("t11",)
        assert scanned.last_success == newest


DAY = timedelta(days=1)
