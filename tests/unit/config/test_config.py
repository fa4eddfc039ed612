"""Configuration: every mistake is one line naming the file and line, exit 2, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from catchup.cli import cli
from catchup.config.loading import load_config, parse_config, parse_duration
from catchup.errors import ConfigError

GOOD = """\
[jobs.billing]
schedule = "daily"
start = "2026-10-01"
command = ["./bill.sh", "--day", "{period}"]
"""

MISTAKES = [
    # (config text, line, words the message must contain)
    (GOOD + 'timeout = "2 hours"\n', 5, "jobs.billing.timeout"),
    (GOOD + 'lease = "0s"\n', 5, "longer than zero"),
    (GOOD + 'lease = "-5s"\n', 5, "not a duration"),
    (GOOD + "max_attempts = 0\n", 5, "at least 1"),
    (GOOD + 'max_attempts = "3"\n', 5, "whole number"),
    (GOOD + "max_attempts = true\n", 5, "whole number"),
    (GOOD + 'overlap = "sometimes"\n', 5, "forbid, forbid-job, allow"),
    (GOOD + 'retry_backof = "5m"\n', 5, "did you mean 'retry_backoff'"),
    (GOOD.replace('"daily"', '"fortnightly"'), 2, "unknown schedule"),
    (GOOD.replace('"daily"', "7"), 2, "expected a string"),
    (GOOD.replace('"2026-10-01"', '"2026-02-30"'), 3, "not a date"),
    (GOOD.replace('start = "2026-10-01"\n', ""), 1, "jobs.billing.start: missing"),
    (GOOD.replace('"{period}"', '"{perod}"'), 4, "unknown placeholder {perod}"),
    (GOOD.replace('"{period}"', '"{period_start:%Q"'), 4, "jobs.billing.command"),
    (GOOD.replace('["./bill.sh", "--day", "{period}"]', "[]"), 4, "non-empty list"),
    (GOOD + 'call = "billing:run"\n', 4, "exactly one of command"),
    (GOOD.replace("[jobs.billing]", '[jobs."bill; $(id)"]'), 1, "job name"),
    (GOOD.replace("[jobs.billing]", '[jobs."' + "x" * 1000 + '"]'), 1, "job name"),
    ('[database]\nschema = "Robert\'); drop"\n' + GOOD, 2, "database.schema"),
    ("[databse]\n" + GOOD, 1, "did you mean 'database'"),
    ('[database]\ndurable_claims = "yes"\n' + GOOD, 2, "database.durable_claims: expected true"),
    ('[project]\nname = "  "\n' + GOOD, 2, "project name needs a visible character"),
    ('[project]\nname = "a\\u001bb"\n' + GOOD, 2, "no control or invisible characters"),
    ("[project]\nname = 7\n" + GOOD, 2, "project.name: expected a string"),
    ('[project]\nnmae = "x"\n' + GOOD, 2, "did you mean 'name'"),
    ('project = "x"\n' + GOOD, 1, "[project] must be a table"),
    (GOOD + "keys = []\n", 5, "jobs.billing.keys: is empty"),
    (GOOD + 'keys = ["eu", "eu"]\n', 5, "'eu' is listed twice"),
    (GOOD + 'keys = ["eu", ""]\n', 5, "key 2 is empty"),
    (GOOD + 'keys = ["e\\u001bu"]\n', 5, "key 1 'e\\x1bu' holds a control character"),
    (GOOD + f'keys = ["{"x" * 201}"]\n', 5, "longer than 200 characters"),
    (GOOD + "keys = 7\n", 5, "expected a list of keys or a SELECT"),
    (GOOD + 'keys = "DELETE FROM tenants"\n', 5, "one read-only SELECT"),
    (GOOD + 'keys = ["eu"]\nkeys_dsn = "postgresql://ro@db/app"\n', 6, "needs keys as a query"),
    (GOOD.replace('"{period}"', '"{key}"'), 4, "{key} needs keys"),
    (
        GOOD + 'keys = ["eu"]\n[jobs.report]\nschedule = "daily"\nstart = "2026-10-01"\n'
        'command = ["true"]\nafter = ["billing"]\n',
        10,
        "billing has keys: only a job with the same keys can wait for it",
    ),
    (
        GOOD.replace('"daily"', '"RRULE:FREQ=DAILY;BYHOUR=2"'),
        2,
        "BYHOUR names a time of day, and RFC 5545 ignores it when the start is a date: write "
        'the start with its time, like start = "2026-10-01T00:00"',
    ),
    (
        GOOD.replace('"daily"', '"RRULE:FREQ=WEEKLY;BYMINUTE=5"').replace(
            '"2026-10-01"', "2026-10-01"
        ),
        2,
        "BYMINUTE names a time of day",
    ),
    (
        GOOD.replace('"daily"', '"RRULE:FREQ=HOURLY;INTERVAL=2;BYHOUR=15"').replace(
            '"2026-10-01"', '"2026-10-01T00:00"'
        ),
        2,
        "it never occurs counted from the start, 2026-10-01 00:00",
    ),
    (GOOD + "command = [\n", 5, "invalid TOML"),
    ("[jobs.billing\n", 1, "invalid TOML"),
]


@pytest.mark.parametrize(("text", "line", "words"), MISTAKES)
def test_mistake_is_reported_with_file_and_line(
    tmp_path: Path, text: str, line: int, words: str
) -> None:
    """The CLI prints catchup.toml:LINE and exits 2 before touching any database."""
    config = tmp_path / "catchup.toml"
    config.write_text(text)
    # An unreachable database: reaching it would give exit 3, so exit 2 proves it was not tried.
    result = CliRunner().invoke(
        cli,
        ["--config", str(config), "run", "billing"],
        env={"CATCHUP_DSN": "postgresql://nobody@127.0.0.1:1/none"},
        catch_exceptions=False,
    )
    assert result.exit_code == 2, result.output
    assert f"{config}:{line}: " in result.stderr
    assert words in result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""


def test_all_problems_reported_at_once(tmp_path: Path) -> None:
    text = GOOD + 'lease = "0s"\nmax_attempts = 0\n'
    with pytest.raises(ConfigError) as info:
        parse_config(text.encode(), tmp_path / "catchup.toml")
    assert len(info.value.problems) == 2


def test_problems_come_in_the_order_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "catchup.toml"
    path.write_text(GOOD + 'max_attempts = 0\nlease = "0s"\ntimezone = "Mars/Base"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    lines = [int(said.split(":")[1]) for said in caught.value.problems]
    assert lines == [5, 6, 7]


def test_invalid_utf8_and_nul(tmp_path: Path) -> None:
    path = tmp_path / "catchup.toml"
    with pytest.raises(ConfigError, match=r"catchup.toml:2: not valid UTF-8"):
        parse_config(b"# ok\n# \xff\n", path)
    with pytest.raises(ConfigError, match="invalid TOML"):
        parse_config(b'[jobs.a]\nschedule = "daily\x00"\n', path)


def test_good_config_defaults(tmp_path: Path) -> None:
    config = parse_config(GOOD.encode(), tmp_path / "catchup.toml")
    job = config.job("billing")
    assert job.anchor == datetime(2026, 10, 1, tzinfo=UTC)
    assert job.lease == timedelta(seconds=60)
    assert job.max_attempts == 3
    assert job.overlap == "forbid"
    assert config.schema == "catchup"
    with pytest.raises(ConfigError, match="did you mean 'billing'"):
        config.job("biling")


def test_toml_native_dates_and_offsets(tmp_path: Path) -> None:
    text = GOOD.replace('"2026-10-01"', "2026-10-01T02:00:00+02:00")
    job = parse_config(text.encode(), tmp_path / "c.toml").job("billing")
    assert job.start == datetime(2026, 10, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("15m", 900), ("2h", 7200), ("1d", 86400), ("1h30m", 5400)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


def test_missing_config_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CATCHUP_CONFIG", raising=False)
    result = CliRunner().invoke(cli, ["run", "billing"], catch_exceptions=False)
    assert result.exit_code == 2
    assert "no catchup.toml" in result.stderr


def test_a_bad_zone_does_not_hide_a_bad_schedule(tmp_path: Path) -> None:
    path = tmp_path / "catchup.toml"
    path.write_text(
        '[jobs.billing]\nschedule = "RRULE:FREQ=DAILY;UNTIL=20270101T000000"\n'
        'start = "2026-11-01"\ntimezone = "Mars/Olympus"\ncommand = ["true"]\n'
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    lines = str(caught.value).splitlines()
    assert [line.split(": ", 2)[1] for line in lines] == [  # in the file's order
        "jobs.billing.schedule",
        "jobs.billing.timezone",
    ]


def test_keys_are_read_as_a_list_or_a_query(tmp_path: Path) -> None:
    """``keys`` as a list (kept in order) or a SELECT (trimmed of its semicolon), ``{key}``
    accepted in the command of a job with keys, and ``keys_dsn`` beside a query."""
    config = tmp_path / "catchup.toml"
    config.write_text(
        GOOD.replace('"{period}"', '"{key}"')
        + 'keys = ["eu", "us", "apac"]\noverlap = "forbid-job"\n'
        + '\n[jobs.export]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        + 'keys = "SELECT id FROM tenants;"\nkeys_dsn = "postgresql://ro@app-db/app"\n'
    )
    jobs = load_config(config).jobs
    assert jobs["billing"].keys == ("eu", "us", "apac") and jobs["billing"].keyed
    assert jobs["billing"].whole_job_overlap and jobs["billing"].key == ""
    assert jobs["export"].keys == "SELECT id FROM tenants"
    assert jobs["export"].keys_dsn == "postgresql://ro@app-db/app"
    assert jobs["billing"].for_key("eu").key == "eu"


def test_durable_claims_come_from_the_file_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from catchup.postgres.database import durable_claims

    path = tmp_path / "catchup.toml"
    path.write_text("[database]\ndurable_claims = true\n" + GOOD)
    assert load_config(path).durable_claims is True
    monkeypatch.delenv("CATCHUP_DURABLE_CLAIMS", raising=False)
    assert durable_claims(True) is True and durable_claims(False) is False
    monkeypatch.setenv("CATCHUP_DURABLE_CLAIMS", "false")
    assert durable_claims(True) is False
    monkeypatch.setenv("CATCHUP_DURABLE_CLAIMS", "TRUE")
    assert durable_claims(False) is True
    monkeypatch.setenv("CATCHUP_DURABLE_CLAIMS", "sometimes")
    with pytest.raises(ConfigError, match="CATCHUP_DURABLE_CLAIMS: expected true or false"):
        durable_claims(False)


def test_not_renamed_is_a_flag_that_contradicts_renamed_from(tmp_path: Path) -> None:
    """`not_renamed = true`: a new job, never held for a dropped job's schedule
    (catchup/changes/held.py); not a string, and not beside renamed_from."""
    from catchup.config.loading import make_job

    path = tmp_path / "catchup.toml"
    assert parse_config((GOOD + "not_renamed = true\n").encode(), path).job("billing").not_renamed
    assert not parse_config(GOOD.encode(), path).job("billing").not_renamed
    assert make_job("x", "daily", "2026-10-01", command=["true"], not_renamed=True).not_renamed
    for extra, said in (
        ('not_renamed = "yes"\n', "jobs.billing.not_renamed: expected true or false, got"),
        (
            'not_renamed = true\nrenamed_from = "old"\n',
            "jobs.billing.not_renamed: and renamed_from say opposite things",
        ),
    ):
        with pytest.raises(ConfigError) as info:
            parse_config((GOOD + extra).encode(), path)
        assert said in str(info.value), info.value


def test_log_output_is_a_flag_of_a_job_catchup_runs(tmp_path: Path) -> None:
    """`log_output = true`: the job's output logged; not a string, and not on an observed job
    (a ping and no command: catchup never sees its output)."""
    path = tmp_path / "catchup.toml"
    assert parse_config((GOOD + "log_output = true\n").encode(), path).job("billing").log_output
    assert not parse_config(GOOD.encode(), path).job("billing").log_output
    observed = (
        '[jobs.seen]\nschedule = "daily"\nstart = "2026-10-01"\n'
        'ping = "5bf66975-d4c7-4bf5-bcc8-b8d8a82ea278"\nlog_output = true\n'
    )
    for text, said in (
        (GOOD + 'log_output = "yes"\n', "jobs.billing.log_output: expected true or false, got"),
        (observed, "jobs.seen.log_output: an observed job (ping, no command or call)"),
    ):
        with pytest.raises(ConfigError) as info:
            parse_config(text.encode(), path)
        assert said in str(info.value), info.value


def test_lanes_and_a_jobs_lane_are_checked_naming_the_line(tmp_path: Path) -> None:
    """[scheduler.lanes]: each a name and 1 to 64 workers, never `default` (that lane's are
    --workers); a job's lane must be one of them. Each mistake on its own line."""
    job = '[jobs.{}]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\nlane = "{}"\n'
    text = (
        "[scheduler.lanes]\nslow = 1\nfast = 0\ndefault = 3\n\n"
        + job.format("a", "slwo")
        + job.format("b", "default")
        + job.format("c", "slow")
    )
    with pytest.raises(ConfigError) as caught:
        parse_config(text.encode(), tmp_path / "catchup.toml")
    assert str(caught.value).splitlines() == [
        f"{tmp_path / 'catchup.toml'}:3: scheduler.lanes.fast: expected 1 to 64 workers, got 0",
        f"{tmp_path / 'catchup.toml'}:4: scheduler.lanes.default: the default lane's workers "
        "are the scheduler's --workers",
        f"{tmp_path / 'catchup.toml'}:10: jobs.a.lane: [scheduler.lanes] has no lane 'slwo' "
        "(did you mean 'slow'?)",
        f"{tmp_path / 'catchup.toml'}:15: jobs.b.lane: 'default' is the lane of jobs without "
        "one: leave lane out",
    ]
    good = parse_config(
        b"[scheduler.lanes]\nslow = 2\n\n" + job.format("c", "slow").encode(),
        tmp_path / "catchup.toml",
    )
    assert good.lanes == {"slow": 2} and good.jobs["c"].lane == "slow"
    assert good.lane_jobs() == {"slow": ["c"]}


def test_a_rule_with_a_time_of_day_takes_a_start_written_with_one(tmp_path: Path) -> None:
    text = GOOD.replace('"daily"', '"RRULE:FREQ=DAILY;BYHOUR=2"').replace(
        '"2026-10-01"', '"2026-10-01T00:00"'
    )
    job = parse_config(text.encode(), tmp_path / "c.toml").job("billing")
    assert job.schedule.ceil(job.start) == datetime(2026, 10, 1, 2, tzinfo=UTC)
