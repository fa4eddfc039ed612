"""The Python API: jobs declared in code, run, scan, replay and tick, with typed results."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fix_db import Database, nothing_written
from fix_processes import wait_for

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


LOOSE: Any = make_job  # called as untyped code would call it


@pytest.mark.parametrize(
    ("declare", "words"),
    [
        (lambda: LOOSE("j", "daily", "2026-10-01", command="echo hi"), "jobs.j.command"),
        (lambda: LOOSE("j", "daily", "2026-10-01", call=42), "jobs.j.call"),
        (lambda: LOOSE("j", "daily", "2026-10-01", call=b"m:f"), "jobs.j.call"),
        (lambda: LOOSE(None, "daily", "2026-10-01", command=["true"]), "must be a string"),
        (
            lambda: Catchup(
                jobs=[
                    make_job("j", "daily", "2026-10-01", command=["true"]),
                    make_job("j", "hourly", "2026-10-01", command=["false"]),
                ],
                dsn="postgresql://nobody@127.0.0.1:1/none",
            ),
            "jobs.j: declared twice",
        ),
    ],
    ids=["command-string", "call-number", "call-bytes", "name-none", "name-twice"],
)
def test_code_is_checked_as_catchup_toml_is(declare: Any, words: str) -> None:
    """What catchup.toml refuses, make_job and Catchup(jobs=…) refuse too: a command given
    as a string (it was split into one-letter arguments), a call that is neither text nor
    callable, a name that is not text, a name declared twice (one job was lost unsaid)."""
    with pytest.raises(ConfigError, match=words):
        declare()


@pytest.mark.parametrize(
    ("reason", "actor", "words"),
    [
        ("a\x00b", None, "--reason: it holds a NUL"),
        ("bad \udc80 byte", None, "--reason: it holds a NUL or a lone surrogate"),
        ("fine", "ops\x00", "--actor"),
        ("fine", "ops \udc80", "--actor"),
        ("fine", "ops\u202e", "--actor"),
    ],
    ids=["reason-nul", "reason-surrogate", "actor-nul", "actor-surrogate", "actor-override"],
)
def test_a_reason_or_actor_the_ledger_cannot_keep_is_refused_before_anything_is_written(
    database: Database, schema: str, reason: str, actor: str | None, words: str
) -> None:
    job = make_job("export", "daily", "2026-10-01", command=["true"])
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        for change in (
            lambda: app.mark("export", ["2026-10-02"], kind="skip", reason=reason, actor=actor),
            lambda: app.reset("export", ["2026-10-02"], reason=reason, actor=actor),
            lambda: app.pause("export", reason=reason, actor=actor),
        ):
            with pytest.raises(ConfigError, match=words):
                change()
    assert nothing_written(database, schema)  # not even the schema: the session never opened


def test_ctx_cancelled_is_false_until_the_call_is_told_to_stop(
    database: Database, schema: str
) -> None:
    """``if ctx.cancelled:`` reads as it says: false while the call may work (it was always
    true, and periods were recorded succeeded without their work), true once it is told."""
    import time

    worked: list[str] = []
    told: list[bool] = []

    def export(ctx: JobContext) -> None:
        if ctx.cancelled:
            return
        worked.append(ctx.period)

    def slow(ctx: JobContext) -> None:
        deadline = time.monotonic() + 30
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        told.append(bool(ctx.cancelled) and ctx.cancelled.is_set() and ctx.cancelled.wait(0))

    jobs = [
        make_job("export", "daily", "2026-10-01", call=export),
        make_job("slow", "daily", "2026-10-01", call=slow, timeout="1s"),
    ]
    with Catchup(jobs=jobs, dsn=database.conninfo, schema=schema) as app:
        ran = app.run("export", datetime(2026, 10, 2, tzinfo=UTC))
        assert isinstance(ran, catchup.Outcome) and ran.status == "succeeded"
        assert worked == ["2026-10-02"]
        stopped = app.run("slow", datetime(2026, 10, 2, tzinfo=UTC))
        assert isinstance(stopped, catchup.Outcome) and stopped.status == "failed"
        assert "timed out" in (stopped.detail or "")
    wait_for(lambda: told == [True], what="the call to see it was told")


def test_dir_lists_the_public_names() -> None:
    """The names are imported lazily: dir() still lists them (completion, help())."""
    listed = dir(catchup)
    assert set(catchup.__all__) <= set(listed), set(catchup.__all__) - set(listed)
    assert "Catchup" in listed and "make_job" in listed and "import_module" not in listed


def test_a_job_scan_has_the_attributes_its_json_names(database: Database, schema: str) -> None:
    """Each key of a job in `scan --json` is an attribute of its JobScan with the same value
    (`missing`, `error`, …; a gap's `status`), beside the older names (`counts`, `state`)."""
    import json

    from catchup.render.json import scan_json
    from catchup.schedule import iso_utc

    job = make_job("export", "daily", "2026-10-01", command=["false"], max_attempts=1)
    with Catchup(jobs=[job], dsn=database.conninfo, schema=schema) as app:
        app.run("export", datetime(2026, 10, 2, tzinfo=UTC))
        report = app.scan(until=datetime(2026, 10, 6, tzinfo=UTC))
    (scanned,) = report.jobs
    (said,) = json.loads(scan_json(report))["jobs"]
    assert said["missing"] == scanned.missing == scanned.counts["missing"] == 4
    assert said["exhausted"] == scanned.exhausted == 1
    for name, value in said.items():
        if name != "gaps":
            assert getattr(scanned, name) == value, name
    assert scanned.error is None and scanned.succeeded == 0
    gaps = [
        {
            "status": g.status,
            "first": iso_utc(g.first),
            "last": iso_utc(g.last),
            "periods": g.periods,
            "first_label": scanned.label(g.first),
            "last_label": scanned.label(g.last),
        }
        for g in scanned.gaps
    ]
    assert gaps == said["gaps"] and [g.state for g in scanned.gaps] == [
        g["status"] for g in said["gaps"]
    ]
