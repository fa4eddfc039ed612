"""Excluded periods: a job's ``exclude`` (dates, ranges, day rules, cron specs, calendars) and
windows recorded afterwards (``catchup exclude``): never claimed, never a gap, counted apart;
an excluded upstream period blocks nothing; a window is undone the way it was recorded."""

from __future__ import annotations

import json
from typing import Any

from fix_project import Project, job_toml


def _day(sql: Any, days_ago: int) -> str:
    (day,) = sql(f"SELECT (now() AT TIME ZONE 'UTC')::date - {days_ago}")[0]
    return str(day)


def _scan(project: Project, *args: str) -> dict[str, dict[str, Any]]:
    result = project.cli("-q", "scan", "--format", "json", *args)
    assert result.exit_code in (0, 1), result.output
    return {job["job"]: job for job in json.loads(result.stdout)["jobs"]}


CALENDAR = '[calendars.holidays]\ndates = ["2026-10-28"]\n\n'


def test_each_form_excludes_the_periods_that_start_in_it(project: Project) -> None:
    exclude = [
        "2026-10-03",
        "2026-10-10..2026-10-11",
        "RRULE:FREQ=MONTHLY;BYMONTHDAY=20",
        "* * * * 0",  # the Sundays: 4, 11 (already in the range), 18, 25
        "calendar:holidays",
        "2026-10-14T00:00Z..2026-10-15T00:00Z",
    ]
    project.write(
        CALENDAR + job_toml("billing", "daily", "2026-10-01", command=["true"], exclude=exclude)
    )
    window = ("--since", "2026-10-01", "--until", "2026-11-01")
    job = _scan(project, *window)["billing"]
    assert (job["expected"], job["excluded"], job["missing"]) == (31, 9, 22)
    assert all(gap["status"] == "missing" for gap in job["gaps"])
    metrics = project.cli("-q", "scan", "--format", "openmetrics", *window).stdout
    assert 'catchup_excluded_periods{job="billing"} 9' in metrics
    why = project.cli("-q", "why", "billing", "2026-10-28")
    assert "excluded by calendar holidays" in why.stdout


def test_tick_never_claims_an_excluded_period_and_run_refuses_it(
    project: Project, sql: Any
) -> None:
    holiday = _day(sql, 2)
    job = job_toml("billing", "daily", _day(sql, 4), command=["true"], exclude=[holiday])
    project.write(job)
    ticked = project.cli("-q", "tick", "--json")
    assert ticked.exit_code == 0, ticked.output
    ran = {p["period"][:10] for p in json.loads(ticked.stdout)["periods"]}
    assert ran == {_day(sql, 4), _day(sql, 3), _day(sql, 1)}
    on_holiday = (
        "SELECT count(*) FROM {schema}.runs WHERE (period_start AT TIME ZONE 'UTC')::date = %s"
    )
    assert sql(on_holiday, (holiday,)) == [(0,)]
    refused = project.cli("-q", "run", "billing", "--period", holiday)
    assert refused.exit_code == 2
    assert "is excluded by exclude" in refused.stderr and "--include-excluded" in refused.stderr
    assert sql("SELECT count(*) FROM {schema}.runs")[0][0] == 3  # nothing written
    (line,) = json.loads(project.cli("-q", "jobs", "--json").stdout)
    assert (line["done"], line["expected"]) == (3, 3)  # the excluded day is not expected
    forced = project.cli("-q", "run", "billing", "--period", holiday, "--include-excluded")
    assert forced.exit_code == 0, forced.output
    assert _scan(project)["billing"]["succeeded"] == 4


def test_a_period_the_config_no_longer_excludes_is_due_again(project: Project, sql: Any) -> None:
    holiday = _day(sql, 2)
    project.write(job_toml("billing", "daily", _day(sql, 3), command=["true"], exclude=[holiday]))
    assert project.cli("-q", "tick").exit_code == 0
    assert _scan(project)["billing"]["excluded"] == 1
    project.write(job_toml("billing", "daily", _day(sql, 3), command=["true"]))
    assert _scan(project)["billing"]["missing"] == 1
    ticked = project.cli("-q", "tick", "--json")
    assert [p["period"][:10] for p in json.loads(ticked.stdout)["periods"]] == [holiday]


def test_a_job_whose_latest_period_is_excluded_runs_nothing(project: Project, sql: Any) -> None:
    latest = _day(sql, 1)
    spec = job_toml(
        "export", "daily", _day(sql, 3), command=["true"], catchup="latest", exclude=[latest]
    )
    project.write(spec)
    ticked = project.cli("-q", "tick", "--json")
    assert json.loads(ticked.stdout)["periods"] == []
    ran = project.cli("-q", "run", "export", "--json")  # the latest due, excluded: skipped
    assert ran.exit_code == 0 and "excluded by" in json.loads(ran.stdout)["detail"]
    assert sql("SELECT count(*) FROM {schema}.runs")[0][0] == 0


def test_a_window_recorded_afterwards_turns_gaps_into_excluded_and_back(
    project: Project, sql: Any
) -> None:
    start = _day(sql, 5)
    project.write(
        job_toml("done", "daily", start, command=["true"])
        + job_toml("never", "daily", start, command=["false"], max_attempts=1)
    )
    project.cli("-q", "tick")
    window = f"{_day(sql, 4)}..{_day(sql, 3)}"
    recorded = project.cli(
        "-q", "exclude", "--all", window, "--reason", "db migration", "--actor", "ana", "--json"
    )
    assert recorded.exit_code == 0, recorded.output
    said = json.loads(recorded.stdout)
    assert [(w["job"], w["periods"]) for w in said["windows"]] == [("done", 2), ("never", 2)]
    jobs = _scan(project)
    assert (jobs["done"]["succeeded"], jobs["done"]["excluded"]) == (5, 0)  # stays succeeded
    assert (jobs["never"]["exhausted"], jobs["never"]["excluded"]) == (3, 2)
    why = project.cli("-q", "why", "never", _day(sql, 4)).stdout
    assert "excluded by a window recorded by ana" in why and "db migration" in why
    events = sql("SELECT action, actor, reason FROM {schema}.events WHERE action = 'exclude'")
    assert events == [("exclude", "ana", "db migration")] * 2
    undone = project.cli("-q", "exclude", "never", window, "--undo", "--reason", "it ran after all")
    assert undone.exit_code == 0, undone.output
    assert (_scan(project)["never"]["exhausted"], _scan(project)["never"]["excluded"]) == (5, 0)
    assert sql("SELECT count(*) FROM {schema}.exclusions WHERE undone_at IS NULL")[0][0] == 1


def test_a_window_of_one_key_excludes_that_key_only_and_exclude_every_key(
    project: Project, sql: Any
) -> None:
    keys, first = ["acme", "globex"], _day(sql, 3)
    project.write(job_toml("billing", "daily", first, command=["true"], keys=keys, exclude=[first]))
    day = _day(sql, 2)
    recorded = project.cli("-q", "exclude", "billing", day, "--key", "acme", "--reason", "churned")
    assert recorded.exit_code == 0, recorded.output
    job = _scan(project)["billing"]
    assert (job["excluded"], job["missing"]) == (3, 3)  # both keys' day 3, acme's day 2
    assert (
        "excluded by a window" in project.cli("-q", "why", "billing", day, "--key", "acme").stdout
    )
    assert "excluded" not in project.cli("-q", "why", "billing", day, "--key", "globex").stdout


def test_an_excluded_upstream_period_blocks_nothing(project: Project, sql: Any) -> None:
    """Day 2 of export is excluded by its config, day 1 by a window recorded afterwards:
    report's days 2 and 1 wait for nothing, its day 3 for export's day 3."""
    holiday, outage = _day(sql, 2), _day(sql, 1)
    project.write(
        job_toml("export", "daily", _day(sql, 3), command=["true"], exclude=[holiday])
        + job_toml("report", "daily", _day(sql, 3), command=["true"], after=["export"])
    )
    window = project.cli("-q", "exclude", "export", outage, "--reason", "outage")
    assert window.exit_code == 0, window.output
    report = _scan(project)["report"]
    assert report["blocked"] == 1  # day 3, waiting for export's day 3
    missing = [g["first"][:10] for g in report["gaps"] if g["status"] == "missing"]
    assert missing == [holiday]  # then day 1: the same range
    first = project.cli("-q", "run", "report", "--period", outage)  # the claim waits for nothing
    assert first.exit_code == 0, first.output
    ticked = project.cli("-q", "tick", "--json")
    assert ticked.exit_code == 0, ticked.output
    ran = sorted((p["job"], p["period"][:10]) for p in json.loads(ticked.stdout)["periods"])
    assert ran == [("export", _day(sql, 3)), ("report", _day(sql, 3)), ("report", holiday)]
    assert _scan(project)["report"]["succeeded"] == 3


def test_exclusions_across_a_dst_change_read_the_local_clock(project: Project) -> None:
    """Hours 2-3 on Berlin's clock: one hour the night the clocks skip 02:00, three the night
    02:00-03:00 happens twice."""
    spec = job_toml(
        "hourly",
        "hourly",
        "2026-03-28",
        command=["true"],
        timezone="Europe/Berlin",
        exclude=["* 2-3 * * *"],
    ) + job_toml(
        "daily",
        "daily",
        "2026-10-24",
        command=["true"],
        timezone="Europe/Berlin",
        exclude=["2026-10-25"],
    )
    project.write(spec)
    spring = _scan(project, "--job", "hourly", "--since", "2026-03-29", "--until", "2026-03-30")
    assert spring["hourly"]["excluded"] == 1 and spring["hourly"]["expected"] == 23
    autumn = _scan(project, "--job", "hourly", "--since", "2026-10-25", "--until", "2026-10-26")
    assert autumn["hourly"]["excluded"] == 3 and autumn["hourly"]["expected"] == 25
    day = _scan(project, "--job", "daily", "--since", "2026-10-24", "--until", "2026-10-27")
    assert (day["daily"]["excluded"], day["daily"]["missing"]) == (1, 2)


def test_bad_exclusions_are_refused_in_one_line_and_write_nothing(
    project: Project, sql: Any
) -> None:
    cases = {
        "xyz": "exclude entry 'xyz': not a date",
        "2026-10-05..2026-10-01": "runs backwards",
        "calendar:nope": "no calendar 'nope'",
        "RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30": "never occurs",
    }
    for entry, said in cases.items():
        project.write(job_toml("billing", "daily", "2026-10-01", command=["true"], exclude=[entry]))
        result = project.cli("-q", "scan")
        assert result.exit_code == 2, entry
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
        assert "catchup.toml:" in result.stderr and said in result.stderr, result.stderr
    made = "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s"
    assert sql(made, (project.schema,)) == [(0,)]  # refused before the ledger is made
    project.write(job_toml("billing", "daily", "2026-10-01", command=["true"]))
    assert project.cli("-q", "scan", "--until", "2026-10-02").exit_code in (0, 1)
    for args in (
        ("2026-10-05..2026-10-01", "--reason", "x"),
        ("2026-10-05",),
        ("RRULE:FREQ=DAILY", "--reason", "x"),
        ("2026-10-05T02:00Z..2026-10-05T04:00Z", "--reason", "no daily period starts in it"),
    ):
        result = project.cli("-q", "exclude", "billing", *args)
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert sql("SELECT count(*) FROM {schema}.exclusions")[0][0] == 0


def test_replay_runs_the_gaps_around_an_excluded_period(project: Project, sql: Any) -> None:
    holiday = _day(sql, 2)
    project.write(job_toml("billing", "daily", _day(sql, 4), command=["true"], exclude=[holiday]))
    replayed = project.cli("-q", "replay", "--since", _day(sql, 4), "--json")
    assert replayed.exit_code == 0, replayed.output
    ran = [p["period"][:10] for p in json.loads(replayed.stdout)["periods"]]
    assert ran == [_day(sql, 4), _day(sql, 3), _day(sql, 1)]


def test_a_window_recorded_twice_is_recorded_once(project: Project, sql: Any) -> None:
    project.write(job_toml("billing", "daily", _day(sql, 3), command=["true"]))
    day = _day(sql, 2)
    for new in (True, False):
        said = project.cli("-q", "exclude", "billing", day, "--reason", "outage", "--json")
        assert said.exit_code == 0, said.output
        assert [w["new"] for w in json.loads(said.stdout)["windows"]] == [new]
    assert sql("SELECT count(*) FROM {schema}.exclusions") == [(1,)]
    assert sql("SELECT count(*) FROM {schema}.events WHERE action = 'exclude'") == [(1,)]


def test_a_window_in_the_hour_the_clocks_skip_is_refused(project: Project, sql: Any) -> None:
    project.write(
        job_toml("h", "every 15 minutes", "2027-03-27", command=["true"], timezone="Europe/Berlin")
    )
    result = project.cli(
        "-q", "exclude", "h", "2027-03-28T02:00..2027-03-28T03:00", "--reason", "x"
    )
    assert result.exit_code == 2 and "no period of h starts in it" in result.stderr, result.output
    assert "Traceback" not in result.output
    assert sql("SELECT count(*) FROM {schema}.exclusions") == [(0,)]


def test_a_run_forced_over_an_exclusion_is_done_like_any_other(project: Project, sql: Any) -> None:
    holiday = _day(sql, 2)
    project.write(job_toml("billing", "daily", _day(sql, 3), command=["true"], exclude=[holiday]))
    forced = project.cli("-q", "run", "billing", "--period", holiday, "--include-excluded")
    assert forced.exit_code == 0, forced.output
    again = project.cli("-q", "run", "billing", "--period", holiday, "--json")
    assert again.exit_code == 0, again.output  # not refused: it succeeded
    assert json.loads(again.stdout)["status"] == "skipped"
    assert sql("SELECT count(*) FROM {schema}.history") == [(1,)]


def test_a_keys_excluded_period_is_refused_by_run_as_any_other(project: Project, sql: Any) -> None:
    project.write(job_toml("billing", "daily", _day(sql, 3), command=["true"], keys=["acme"]))
    day = _day(sql, 2)
    assert (
        project.cli("-q", "exclude", "billing", day, "--key", "acme", "--reason", "x").exit_code
        == 0
    )
    refused = project.cli("-q", "run", "billing", "--period", day, "--key", "acme")
    assert refused.exit_code == 2 and "is excluded by a window" in refused.stderr, refused.output


def test_why_waits_for_no_excluded_upstream_period(project: Project, sql: Any) -> None:
    holiday = _day(sql, 2)
    project.write(
        job_toml("export", "daily", _day(sql, 3), command=["true"], exclude=[holiday])
        + job_toml("report", "daily", _day(sql, 3), command=["true"], after=["export"])
    )
    said = project.cli("-q", "why", "report", holiday).stdout
    assert "missing" in said and "blocked" not in said, said


def test_an_exclusion_to_the_end_of_time_is_read(project: Project, sql: Any) -> None:
    spec = job_toml(
        "billing", "daily", _day(sql, 3), command=["true"], exclude=[f"{_day(sql, 2)}..9999-12-31"]
    )
    project.write(spec)
    job = _scan(project)["billing"]
    assert (job["excluded"], job["missing"]) == (2, 1)
    assert project.cli("-q", "jobs").exit_code in (0, 1)


def test_a_tick_and_a_run_plan_no_period_a_window_excludes(project: Project, sql: Any) -> None:
    """What a tick plans without a scan (a newest due period, each key's) and a run of every
    key: a key's window keeps that key's period out, the other key's runs."""
    latest = _day(sql, 1)
    spec = job_toml(
        "billing",
        "daily",
        _day(sql, 2),
        command=["true"],
        keys=["acme", "globex"],
        catchup="latest",
    )
    project.write(spec)
    recorded = project.cli("-q", "exclude", "billing", latest, "--key", "acme", "--reason", "x")
    assert recorded.exit_code == 0, recorded.output
    ticked = project.cli("-q", "tick", "--json")
    assert ticked.exit_code == 0, ticked.output
    assert [p["key"] for p in json.loads(ticked.stdout)["periods"]] == ["globex"]
    assert (
        project.cli(
            "-q", "reset", "billing", latest, "--key", "globex", "--reason", "again"
        ).exit_code
        == 0
    )
    ran = project.cli("-q", "run", "billing", "--json")
    assert ran.exit_code == 0, ran.output
    assert [p["key"] for p in json.loads(ran.stdout)["periods"]] == ["globex"]
    acme = "SELECT count(*) FROM {schema}.history WHERE key = 'acme'"
    assert sql(acme) == [(0,)]
