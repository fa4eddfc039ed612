"""A rename in progress holds, it never reruns (issue 46, item 3). `catchup rename --help` said:
rename in the ledger, then in the config; a tick in between found the config's old name new
to the ledger and ran every done period again (the second invoice run). Now a configured job
new to the ledger with the schedule of a ledger job the config no longer names is held:
nothing of it is claimed, one line names both and the ways out, the other jobs run, and tick
exits 2, until the config says which it is (renamed_from, the config following the rename,
or not_renamed = true)."""

from __future__ import annotations

import json
import signal
import subprocess
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from fix_processes import wait_for
from fix_project import Project, job_toml
from psycopg import sql as pgsql

HELD = "report is held: it is new to the ledger and has the schedule of daily-report"


def four_days(sql: Any) -> str:
    """A start four whole days ago on the database clock: four daily periods due."""
    (today,) = sql("SELECT date_trunc('day', clock_timestamp() AT TIME ZONE 'UTC')")[0]
    return f"{today - timedelta(days=4):%Y-%m-%d}"


def jobs(start: str, *names: str, extra: str = "") -> str:
    """Daily jobs from ``start`` (catch-up all), and ``export``: hourly (no lookalike of
    theirs), each tick's latest hour."""
    daily = "".join(
        job_toml(name, schedule="daily", start=start, command=["true"]) + extra for name in names
    )
    return daily + job_toml(
        "export", schedule="hourly", start=start, catchup="latest", command=["true"]
    )


def runs(sql: Any, job: str) -> list[tuple[Any, ...]]:
    """Each period the ledger has of ``job`` (by its name now): start and attempt."""
    rows: list[tuple[Any, ...]] = sql(
        "SELECT r.period_start, r.attempt FROM {schema}.runs r "
        "JOIN {schema}.jobs j ON j.id = r.job_id WHERE j.name = %s ORDER BY 1",
        [job],
    )
    return rows


def report_done(project: Project, sql: Any) -> tuple[str, list[tuple[Any, ...]]]:
    """`report`'s four due days succeeded; the start and its runs."""
    start = four_days(sql)
    project.write(jobs(start, "report"))
    done = project.cli("-q", "replay", "--job", "report", "--since", start)
    assert done.exit_code == 0, done.output
    ran = runs(sql, "report")
    assert len(ran) >= 4 and {attempt for _, attempt in ran} == {1}
    return start, ran


def said_once(text: str, output: str) -> None:
    flat = " ".join(output.split())
    assert flat.count(text) == 1, output


def test_a_tick_between_the_ledgers_rename_and_the_configs_runs_nothing_of_the_held_job(
    project: Project, sql: Any
) -> None:
    """The order `rename --help` gave: the ledger first. The tick in between (a CronJob)
    holds `report` (exit 2, one line naming both), runs export, and no done day of the job
    runs again; `why` says held. Once the config follows, nothing is held or left behind."""
    start, ran = report_done(project, sql)
    renamed = project.cli("rename", "report", "daily-report", "--reason", "one name per team")
    assert renamed.exit_code == 0, renamed.output
    follow = "now rename [jobs.report] to [jobs.daily-report] in the config: until then report"
    assert f"{follow} is held" in " ".join(renamed.stdout.split())
    tick = project.cli("tick")
    assert tick.exit_code == 2, tick.output
    said_once(HELD, tick.stderr)
    # the way out after a ledger-first rename comes first, and reads as one
    assert (
        "The same job as daily-report: rename [jobs.report] to [jobs.daily-report] in the config"
        " to keep daily-report's name" in " ".join(tick.stderr.split())
    )
    assert "could not start" not in tick.stdout  # held: not planned, one line, not a line a day
    assert "held: report (nothing claimed)" in tick.stdout
    assert runs(sql, "report") == []  # nothing claimed under the config's old name
    assert runs(sql, "daily-report") == ran  # no done day ran again
    assert len(runs(sql, "export")) == 1  # the other job ran
    why = project.cli("-q", "why", "report", start)
    assert why.exit_code == 0, why.output
    assert "report" in why.stdout and ": held" in why.stdout, why.stdout
    assert "catchup rename daily-report report" in why.stdout
    as_json = project.cli("-q", "tick", "--json")
    assert as_json.exit_code == 2 and json.loads(as_json.stdout)["held"] == {
        "report": "daily-report"
    }

    project.write(jobs(start, "daily-report"))
    after = project.cli("tick")
    assert after.exit_code == 0, after.output
    assert runs(sql, "daily-report")[: len(ran)] == ran  # still each done day once
    assert project.cli("-q", "jobs").stderr == ""  # no held job, no empty row left noted


def test_a_config_renamed_first_holds_until_the_ledger_follows(project: Project, sql: Any) -> None:
    """The other order: the config first (without renamed_from). Held, not rerun; `catchup
    rename` then releases it, and its done days stay done; replay and a dry run hold too."""
    start, ran = report_done(project, sql)
    project.write(jobs(start, "daily-report"))
    held = "daily-report is held: it is new to the ledger and has the schedule of report"
    tick = project.cli("-q", "tick")
    assert tick.exit_code == 2, tick.output
    said_once(held, tick.stderr)
    assert len(runs(sql, "export")) == 1  # the other job ran
    replay = project.cli("-q", "replay", "--since", start)
    assert replay.exit_code == 2, replay.output
    assert "held: daily-report ran nothing" in replay.stdout
    dry = project.cli("-q", "replay", "--since", start, "--dry-run", "--json")
    assert dry.exit_code == 2 and json.loads(dry.stdout)["held"] == {"daily-report": "report"}
    assert runs(sql, "daily-report") == [] and runs(sql, "report") == ran
    renamed = project.cli("rename", "report", "daily-report", "--reason", "one name per team")
    assert renamed.exit_code == 0, renamed.output
    tick = project.cli("tick")
    assert tick.exit_code == 0, tick.output
    assert runs(sql, "daily-report")[: len(ran)] == ran


def test_run_of_a_held_job_claims_nothing(project: Project, sql: Any) -> None:
    start, ran = report_done(project, sql)
    project.write(jobs(start, "daily-report"))
    run = project.cli("-q", "run", "daily-report", "--period", start)
    assert run.exit_code == 2, run.output
    assert "daily-report is held" in run.output and "not claimed" in run.output
    assert runs(sql, "daily-report") == [] and runs(sql, "report") == ran


def test_not_renamed_says_a_job_is_new_and_it_runs(project: Project, sql: Any) -> None:
    start, ran = report_done(project, sql)
    project.write(jobs(start, "daily-report", extra="not_renamed = true\n"))
    tick = project.cli("-q", "tick")
    assert tick.exit_code == 0, tick.output
    assert "is held" not in tick.stderr
    assert "the ledger has jobs this config does not name: report" in " ".join(tick.stderr.split())
    assert len(runs(sql, "daily-report")) >= 4  # its own periods: a new job, by its config
    assert runs(sql, "report") == ran
    both = jobs(start, "daily-report", extra='not_renamed = true\nrenamed_from = "report"\n')
    project.write(both)
    refused = project.cli("-q", "jobs")
    assert refused.exit_code == 2
    assert "jobs.daily-report.not_renamed: and renamed_from say opposite things" in refused.stderr


WEEKLY = '[jobs.{name}]\nschedule = "weekly"\nstart = "2026-10-05"\ncommand = ["true"]\n'


def test_rename_takes_the_name_renamed_from_gives_before_any_write(
    project: Project, sql: Any
) -> None:
    """`[jobs.weekly] renamed_from = "report"`: `history weekly` showed report's attempts, but
    `rename weekly billing` said "the ledger has no job weekly" until a command wrote."""
    project.write(WEEKLY.format(name="report"))
    done = project.cli("-q", "replay", "--since", "2026-10-05", "--until", "2026-10-19")
    assert done.exit_code == 0, done.output
    ((job_id,),) = sql("SELECT id FROM {schema}.jobs WHERE name = 'report'")
    project.write(WEEKLY.format(name="weekly") + 'renamed_from = "report"\n')
    assert project.cli("-q", "history", "weekly").stdout.count("succeeded") == 2
    renamed = project.cli("rename", "weekly", "billing", "--reason", "billing owns it")
    assert renamed.exit_code == 0, renamed.output
    assert sql("SELECT id, name FROM {schema}.jobs") == [(job_id, "billing")]
    assert sql("SELECT previous FROM {schema}.events WHERE action = 'rename' ORDER BY at, id") == [
        ("report",),
        ("weekly",),
    ]
    # the config still says weekly: held until it says billing, nothing run again
    tick = project.cli("-q", "tick")
    assert tick.exit_code == 2 and "weekly is held" in tick.stderr, tick.output
    assert runs(sql, "weekly") == []


def test_a_job_renamed_from_one_the_ledger_has_is_never_held_by_another_dropped_one(
    project: Project, sql: Any
) -> None:
    """`[jobs.report] renamed_from = "daily-report"` while `audit`, with the same schedule, is
    dropped: the first tick renamed it and ran, it was not held for looking like audit (it
    was held once, found new before its rename, and told to take audit's name)."""
    start = four_days(sql)
    project.write(jobs(start, "daily-report", "audit"))
    assert project.cli("-q", "replay", "--since", start).exit_code == 0
    before = runs(sql, "daily-report")
    project.write(jobs(start, "report", extra='renamed_from = "daily-report"\n'))
    tick = project.cli("-q", "tick")
    assert tick.exit_code == 0 and "held" not in tick.stderr, tick.output
    assert runs(sql, "report") == before  # its periods, kept, none run again


class Scheduler:
    """`catchup scheduler` in a process of its own, its log in a file."""

    def __init__(self, project: Project) -> None:
        self.log = project.path / "scheduler.err"
        with self.log.open("w") as err:
            self.proc = subprocess.Popen(
                project.command("scheduler", "--lease", "3s"),
                cwd=project.path,
                env=project.env(),
                text=True,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def saying(self, text: str, what: str) -> None:
        def seen() -> bool:
            assert self.proc.poll() is None, self.log.read_text()
            return text in " ".join(self.log.read_text().split())

        wait_for(seen, timeout=60, what=what)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_the_scheduler_holds_a_job_renamed_under_it_and_keeps_leading(
    project: Project, sql: Any
) -> None:
    """A scheduler runs while the ledger's job is renamed: its next tick holds the config's
    old name (said once in its log), runs nothing of it, and the scheduler leads on; the
    config's reload to the new name runs on without a period run twice."""
    start, ran = report_done(project, sql)
    scheduler = Scheduler(project)
    try:
        scheduler.saying("leading (term 1)", "the lead")
        wait_for(lambda: len(runs(sql, "export")) == 1, timeout=60, what="export's latest day")
        renamed = project.cli("rename", "report", "daily-report", "--reason", "one team")
        assert renamed.exit_code == 0, renamed.output
        scheduler.proc.send_signal(signal.SIGHUP)  # a tick at once (the config unchanged)
        scheduler.saying(f"warning: {HELD}", "the hold in the log")
        assert runs(sql, "report") == [] and runs(sql, "daily-report") == ran
        ticks = scheduler.log.read_text().count("tick (term 1)")
        project.write(jobs(start, "daily-report"))
        scheduler.saying("config reloaded: 2 jobs", "the config following the rename")
        wait_for(
            lambda: scheduler.log.read_text().count("tick (term 1)") > ticks,
            timeout=60,
            what="a tick after the reload",
        )
        assert runs(sql, "daily-report")[: len(ran)] == ran
        assert scheduler.proc.poll() is None
    finally:
        code = scheduler.stop()
    log = scheduler.log.read_text()
    assert code == 0, log
    assert " ".join(log.split()).count(HELD) == 1, log
    assert "Traceback" not in log


def three_of_four_days(project: Project, sql: Any) -> tuple[str, list[tuple[Any, ...]]]:
    """`report`'s first three due days succeeded (the fourth never ran), then the config
    renamed it `daily-report`, without renamed_from; the start and report's runs."""
    start = four_days(sql)
    project.write(jobs(start, "report"))
    until = f"{sql('SELECT %s::date + 3', [start])[0][0]:%Y-%m-%d}"
    done = project.cli("-q", "replay", "--job", "report", "--since", start, "--until", until)
    assert done.exit_code == 0, done.output
    ran = runs(sql, "report")
    assert len(ran) == 3
    project.write(jobs(start, "daily-report"))
    return start, ran


def test_a_long_lived_session_runs_a_held_job_once_a_rename_elsewhere_releases_it(
    project: Project, sql: Any
) -> None:
    """What a scheduler's session sees between two ticks: held at the first; `catchup
    rename` from a shell; the second tick of the same session runs the day never run, under
    the job's own id (not the row registered while it was held, which the rename replaced)."""
    from catchup import Catchup

    _, ran = three_of_four_days(project, sql)
    with Catchup(project.config, dsn=project.database.conninfo) as app:
        first = app.tick()
        assert first.held == (("daily-report", "report"),)
        assert not [o for o in first.outcomes if o.job == "daily-report"]
        renamed = project.cli("rename", "report", "daily-report", "--reason", "one team")
        assert renamed.exit_code == 0, renamed.output
        second = app.tick()
        assert second.held == ()
        statuses = {o.status for o in second.outcomes if o.job == "daily-report"}
        assert statuses == {"succeeded"}, second.outcomes
    now = runs(sql, "daily-report")
    assert now[:3] == ran and len(now) >= 4 and {attempt for _, attempt in now} == {1}


def test_the_scheduler_runs_a_held_job_once_the_ledger_follows_the_config(
    project: Project, sql: Any
) -> None:
    """The config renamed first, under a running scheduler: held, said once, the scheduler
    leads on; `catchup rename` from a shell then releases it at the next tick, which runs the
    one day never run, and no day twice."""
    _, ran = three_of_four_days(project, sql)
    scheduler = Scheduler(project)
    try:
        held = "daily-report is held: it is new to the ledger and has the schedule of report"
        scheduler.saying(f"warning: {held}", "the hold in the log")
        assert runs(sql, "daily-report") == [] and runs(sql, "report") == ran
        renamed = project.cli("rename", "report", "daily-report", "--reason", "one team")
        assert renamed.exit_code == 0, renamed.output
        scheduler.proc.send_signal(signal.SIGHUP)  # a tick at once (the config unchanged)
        wait_for(lambda: len(runs(sql, "daily-report")) > 3, timeout=60, what="the day not run")
        now = runs(sql, "daily-report")
        assert now[:3] == ran and {attempt for _, attempt in now} == {1}
        assert scheduler.proc.poll() is None
    finally:
        code = scheduler.stop()
    log = scheduler.log.read_text()
    assert code == 0, log
    assert "Traceback" not in log and "error" not in log, log
    assert " ".join(log.split()).count(held) == 1, log  # on connecting, not again each tick


def test_a_rename_while_a_scheduler_registers_the_new_name_renames(
    project: Project, sql: Any
) -> None:
    """What CI once caught: a scheduler's tick, having read the edited config, registered
    `daily-report` while `catchup rename` ran; its row, committed between the rename's look
    and its rename, failed the rename (a duplicate name). Here that registration is held open
    until the rename waits on it: the rename removes the empty row and keeps report's id."""
    _, ran = three_of_four_days(project, sql)
    (report_id,) = sql("SELECT id FROM {schema}.jobs WHERE name = 'report'")[0]
    with psycopg.connect(project.database.conninfo) as registering:
        registering.execute(
            pgsql.SQL("INSERT INTO {}.jobs (name) VALUES ('daily-report')").format(
                pgsql.Identifier(project.schema)
            )
        )
        (pid,) = registering.execute("SELECT pg_backend_pid()").fetchone() or (0,)
        rename = project.spawn("rename", "report", "daily-report", "--reason", "one team")
        try:
            wait_for(
                lambda: sql(
                    "SELECT 1 FROM pg_locks l JOIN pg_locks h ON h.transactionid = l.transactionid"
                    " WHERE NOT l.granted AND h.granted AND h.pid = %s",
                    [pid],
                ),
                timeout=60,
                what="the rename waiting on the registration",
            )
            registering.commit()
            out, err = rename.communicate(timeout=60)
        finally:
            rename.kill()
    assert rename.returncode == 0, out + err
    assert sql("SELECT id FROM {schema}.jobs WHERE name = 'daily-report'") == [(report_id,)]
    assert runs(sql, "daily-report") == ran


def test_another_projects_job_with_the_same_schedule_holds_nothing(
    project: Project, sql: Any
) -> None:
    """Two projects in one schema: the other's new daily job is no rename of this one's
    `report` (which its config never named), so it runs."""
    from catchup import Catchup

    start, ran = report_done(project, sql)
    second = project.path / "second" / "catchup.toml"
    second.parent.mkdir()
    second.write_text(
        f'[database]\nschema = "{project.schema}"\n\n'
        + job_toml("digest", schedule="daily", start=start, command=["true"])
    )
    with Catchup(second, dsn=project.database.conninfo) as app:
        ticked = app.tick()
    assert ticked.held == ()
    assert len(runs(sql, "digest")) >= 4 and runs(sql, "report") == ran


def test_a_held_job_takes_no_change_by_hand_until_the_config_says_which_it_is(
    project: Project, sql: Any
) -> None:
    """A mark would make the held job no longer new (and every done day of its old name run
    again), a pause would keep `catchup rename` from replacing its row: refused, exit 2,
    nothing written; the rename then goes through."""
    start, ran = report_done(project, sql)
    project.write(jobs(start, "daily-report"))
    before = sql("SELECT count(*) FROM {schema}.events")
    for change in (
        ("mark", "daily-report", start, "--done", "--reason", "done by hand"),
        ("pause", "daily-report", "--reason", "wait"),
    ):
        refused = project.cli("-q", *change)
        assert refused.exit_code == 2, refused.output
        assert "daily-report is held" in refused.stderr and "nothing was changed" in refused.stderr
    assert sql("SELECT count(*) FROM {schema}.events") == before
    assert runs(sql, "daily-report") == []
    renamed = project.cli("rename", "report", "daily-report", "--reason", "one name per team")
    assert renamed.exit_code == 0, renamed.output
    assert runs(sql, "daily-report") == ran
