"""The Python API: jobs declared in code, run, scan, replay and tick, with typed results."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fix_db import Database

import catchup
from catchup import Catchup, ConfigError, JobContext, make_job


def test_declared_jobs_run_scan_replay_and_tick(database: Database, schema: str) -> None:
    seen: list[tuple[str, str, int]] = []

    def export(ctx: JobContext) -> None:
        seen.append((ctx.job, ctx.period, ctx.attempt))
        assert ctx.period_end > ctx.period_start

    job = make_job("export", "daily", "2026-10-01", call=export, delay="1h")
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        assert app.database.endswith("(from --dsn)")
        outcome = app.run("export", datetime(2026, 10, 2, tzinfo=UTC))
        assert isinstance(outcome, catchup.Outcome)
        assert (outcome.status, outcome.attempt, outcome.label) == ("succeeded", 1, "2026-10-02")
        report = app.scan(until=datetime(2026, 10, 6, tzinfo=UTC))
        assert isinstance(report, catchup.ScanReport)
        (result,) = report.jobs
        assert (result.expected, result.counts["missing"]) == (5, 4)
        assert [(g.state, g.periods) for g in result.gaps] == [("missing", 1), ("missing", 3)]
        dry = app.replay(
            since=datetime(2026, 10, 1, tzinfo=UTC),
            until=datetime(2026, 10, 6, tzinfo=UTC),
            dry_run=True,
        )
        assert dry.planned == 4 and dry.outcomes == ()
        done = app.replay(
            since=datetime(2026, 10, 1, tzinfo=UTC),
            until=datetime(2026, 10, 6, tzinfo=UTC),
            workers=2,
        )
        assert done.totals["succeeded"] == 4
        assert not app.scan(until=datetime(2026, 10, 6, tzinfo=UTC)).has_gaps
        ticked = app.tick()
        assert isinstance(ticked, catchup.Batch)
    assert sorted(p for _, p, _ in seen)[:5] == [f"2026-10-0{d}" for d in range(1, 6)]


def test_loading_a_config_file(database: Database, schema: str, tmp_path: Any) -> None:
    path = tmp_path / "catchup.toml"
    path.write_text(
        f'[database]\nschema = "{schema}"\n[jobs.nightly]\nschedule = "daily"\n'
        'start = "2026-10-01"\ncommand = ["true"]\n'
    )
    with Catchup(path, dsn=database.conninfo) as app:
        ran = app.run("nightly", datetime(2026, 10, 1, tzinfo=UTC))
        assert isinstance(ran, catchup.Outcome) and ran.status == "succeeded"
        assert app.config.schema == schema


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"schedule": "fortnightly"}, "unknown schedule"),
        ({"lease": "0s"}, "longer than zero"),
        ({"surprise": 1}, "unknown key"),
    ],
)
def test_make_job_is_validated_like_the_config(kwargs: dict[str, Any], words: str) -> None:
    args = {"schedule": "daily", **kwargs}
    schedule = args.pop("schedule")
    with pytest.raises(ConfigError, match=words):
        make_job("j", schedule, "2026-10-01", command=["true"], **args)


def test_public_names_are_documented() -> None:
    for name in catchup.__all__:
        if name.startswith("__"):
            continue
        assert getattr(catchup, name).__doc__, name
    with pytest.raises(AttributeError):
        _ = catchup.nope
