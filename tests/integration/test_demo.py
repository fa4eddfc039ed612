"""The demo a newcomer runs first: it finds the gaps, replays them, adopts what an old cron job
did, ends clean, leaves nothing."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from fix_db import Database

from catchup.cli import cli


@pytest.mark.superuser
def test_demo_ends_with_a_clean_scan_and_drops_its_schema(database: Database) -> None:
    result = CliRunner().invoke(cli, ["-q", "demo"], env=database.env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "1. catchup scan --calendar" in out and "legend:" in out
    assert re.search(r"billing\s+│\s+failed", out)  # the failing night was found
    assert "2. catchup replay" in out and "4. catchup scan: clean" in out
    # the old cron job's week: untracked (never replayed), adopted, then waived
    # (14 days expected, or 13 in the hour after midnight UTC: the invoices are due an hour
    # after their day ends, so today's newest day is not due yet then)
    rows = re.findall(r"│ invoices\s+│ daily\s+│\s+(1[34]) │((?:\s+\d+ │){9,10})", out)
    counts = [[int(e), *(int(n) for n in re.findall(r"\d+", row))] for e, row in rows]
    # expected, succeeded, waived, missing, (blocked: only while some job has such a period,)
    # failed, exhausted, stale, running, unverified, untracked
    days = counts[0][0] if counts else 14
    assert counts == [
        [days, days - 7, 0, 0, 0, 0, 0, 0, 0, 0, 7],
        [days, days - 7, 7, 0, 0, 0, 0, 0, 0, 0],
    ]
    # the billing day the outage's export hours block, and the replay in that order
    assert re.search(r"billing\s+│\s+blocked", out)
    assert re.search(r"billing \S+ waits for export \S+ \.\. \S+\s+\(missing\)", out)
    assert "invoices: adopted 7 untracked period(s)" in out
    assert out.rstrip().count("no gaps") == 1  # the final scan, and only it
    match = re.search(r"Done: (\d+) gap range\(s\) found, (\d+) period\(s\) replayed, 0 left", out)
    assert match and int(match.group(1)) == 4 and int(match.group(2)) == 33
    # three tenants' statements: globex's failed night, and only it, replayed
    assert "1 of 3 keys (globex)" in out
    assert re.findall(r"statements (\w+) \S+ attempt (\d+): (\w+)", out) == [
        ("globex", "2", "succeeded")
    ]
    schema = re.search(r"schema (catchup_demo_[0-9a-f]+)", out)
    assert schema is not None
    with psycopg.connect(database.conninfo) as conn:
        found: Any = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", [schema.group(1)]
        ).fetchone()
    assert found[0] == 0
