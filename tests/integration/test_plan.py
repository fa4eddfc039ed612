"""``catchup plan NEW.toml`` (issue 55): what a config change would do to the ledger before it
is deployed, read-only: jobs added, held, renamed, redefined and removed; a keyed job's keys
against those recorded; and the periods the first tick after the change would run that the
current config's would not, which make it exit 1 (what a CI gate holds a change on)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fix_db import ledger_contents
from fix_project import Project

EXPORT = 'schedule = "daily"\nstart = "2026-11-01"\ncommand = ["true"]\n'


def new_config(project: Project, jobs_toml: str, name: str = "new.toml") -> Path:
    """A new version of the project's config beside it (the same ledger)."""
    path = project.path / name
    path.write_text(f'[database]\nschema = "{project.schema}"\n\n{jobs_toml}')
    return path


def planned(project: Project, *args: str) -> tuple[int, dict[str, Any]]:
    """``catchup plan --json``: its exit code and its jobs by name."""
    ran = project.run("-q", "plan", *args, "--json")
    assert ran.returncode in (0, 1), ran.stderr
    doc = json.loads(ran.stdout)
    return ran.returncode, {job["job"]: job for job in doc["jobs"]} | {"": doc}


def test_an_added_job_runs_at_once_what_an_unchanged_one_would_run_anyway(
    project: Project, sql: Any
) -> None:
    """A job added runs its first periods at once (max_per_tick of them, the rest left for
    later ticks): exit 1, the periods named. A job unchanged whose gaps are due runs them as it
    would without the change: not counted. Nothing of the ledger is written."""
    project.write(f"[jobs.export]\n{EXPORT}max_per_tick = 2\n")
    assert (
        project.run("-q", "replay", "--since", "2026-11-01", "--until", "2026-11-04").returncode
        == 0
    )
    # invoice starts ten days before the database clock's today: inside its catchup_window
    ((today,),) = sql("SELECT date_trunc('day', clock_timestamp() AT TIME ZONE 'UTC')")
    days = [f"{today - timedelta(days=n):%Y-%m-%d}" for n in (10, 9, 8)]
    first = days[0]
    new = new_config(
        project,
        f"[jobs.export]\n{EXPORT}max_per_tick = 2\n\n"
        f"[jobs.invoice]\n{EXPORT.replace('2026-11-01', first)}max_per_tick = 3\n",
    )
    before = ledger_contents(sql, project.schema)
    code, jobs = planned(project, str(new))
    assert code == 1
    invoice, export = jobs["invoice"], jobs["export"]
    assert invoice["change"] == "added" and invoice["runs_at_once"] == 3
    labels = [p["label"] for p in invoice["periods_at_once"]]
    assert labels == days
    assert invoice["left_for_later_ticks"] == invoice["gaps"] - 3 > 0
    assert export["change"] == "unchanged" and export["runs_at_once"] == 0
    assert export["already_due"] == 2  # its own gaps, due with or without the change
    assert jobs[""]["runs_at_once"] == 3 and jobs[""]["against"].endswith("catchup.toml")

    text = project.run("-q", "plan", str(new))
    assert text.returncode == 1, text.stderr
    lines = text.stdout.splitlines()
    runs = f"runs 3 period(s) at once: {days[0]} .. {days[-1]}"
    assert f"+ invoice: added\n    {runs}\n" in text.stdout
    assert "= export: unchanged\n    2 due period(s) run as they would anyway\n" in text.stdout
    assert (
        lines[-1] == "The first tick after this change would run 3 period(s) of 1 job(s) at once."
    )
    assert ledger_contents(sql, project.schema) == before  # read, never written


def test_a_rename_is_said_and_runs_nothing_and_a_lookalike_is_held(project: Project) -> None:
    """renamed_from: the job keeps its periods under its new name, nothing runs at once (the
    newest due period is the one the current config runs too), though a dropped job has its
    schedule. A new job with the schedule of a job the config drops, without renamed_from, is
    held; the dropped jobs are removed."""
    weekly = 'schedule = "weekly"\nstart = "2026-11-02"\ncommand = ["true"]\ncatchup = "latest"\n'
    audit = 'schedule = "daily"\nstart = "2026-11-02"\ncommand = ["true"]\ncatchup = "latest"\n'
    project.write(
        f'[jobs.export]\n{EXPORT}catchup = "latest"\n\n[jobs.report]\n{weekly}\n'
        f"[jobs.audit]\n{audit}"
    )
    assert (
        project.run("-q", "replay", "--since", "2026-11-01", "--until", "2026-11-10").returncode
        == 0
    )
    new = new_config(
        project,
        f'[jobs.books]\n{EXPORT}catchup = "latest"\nrenamed_from = "export"\n\n'
        f"[jobs.summary]\n{weekly}",
    )
    code, jobs = planned(project, str(new))
    assert code == 0, jobs
    assert (jobs["books"]["change"], jobs["books"]["was"]) == ("renamed", "export")
    assert jobs["books"]["runs_at_once"] == 0 and jobs["books"]["already_due"] == 1
    assert (jobs["summary"]["change"], jobs["summary"]["was"]) == ("held", "report")
    assert jobs["summary"]["runs_at_once"] == 0
    assert jobs["report"]["change"] == "removed" and "export" not in jobs
    # audit, dropped, has the schedule of books: books is renamed all the same (its rows are
    # export's at its first write), never held
    assert jobs["audit"]["change"] == "removed"
    shown = project.run("-q", "plan", str(new))
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "> books: renamed from export" in text
    assert "! summary: held: it has the schedule of report" in text
    assert re.search(r"^- report: removed\n    its \d+ period\(s\) stop being expected", text, re.M)
    assert 'catchup retire report --reason "…"' in text
    assert text.splitlines()[-1] == "Nothing would run at once."


def test_a_keys_change_names_the_keys_and_runs_what_a_new_key_owes(
    project: Project, sql: Any
) -> None:
    """Keys a new list drops and adds are named against those the ledger recorded; a new key
    is expected from when it is first seen (nothing owed, exit 0). A keys query whose date
    column puts a new key in the past owes its periods: the newest runs at once, exit 1."""
    keyed = 'schedule = "daily"\nstart = "2026-11-01"\ncommand = ["true"]\ncatchup = "latest"\n'
    project.write(f'[jobs.billing]\n{keyed}keys = ["acme", "globex", "initech"]\n')
    assert (
        project.run("-q", "replay", "--since", "2026-11-01", "--until", "2026-11-03").returncode
        == 0
    )
    listed = new_config(
        project, f'[jobs.billing]\n{keyed}keys = ["acme", "globex", "hooli", "umbrella"]\n'
    )
    code, jobs = planned(project, str(listed))
    billing = jobs["billing"]
    assert code == 0 and billing["change"] == "redefined" and "keys" in billing["differs"]
    assert billing["keys"] == {
        "added": 2, "gone": 1, "first_added": ["hooli", "umbrella"], "first_gone": ["initech"],
        "error": None,
    }  # fmt: skip
    text = project.run("-q", "plan", str(listed)).stdout
    assert "    keys +2 (hooli, umbrella), -1 (initech)\n" in text

    sql("CREATE TABLE {schema}.tenants (key text, since date)")
    sql("INSERT INTO {schema}.tenants VALUES ('acme', '2026-11-01'), ('hooli', '2026-11-01')")
    query = f"SELECT key, since FROM {project.schema}.tenants"
    dated = new_config(
        project, f"[jobs.billing]\n{keyed}keys = {json.dumps(query)}\n", "dated.toml"
    )
    code, jobs = planned(project, str(dated))
    billing = jobs["billing"]
    assert code == 1 and billing["runs_at_once"] == 1, billing  # hooli's newest due period
    assert billing["keys"]["first_added"] == ["hooli"]
    assert billing["keys"]["first_gone"] == ["globex", "initech"]


def test_a_new_config_that_does_not_load_is_one_line_and_nothing_written(
    project: Project, sql: Any
) -> None:
    project.write(f"[jobs.export]\n{EXPORT}")
    assert (
        project.run("-q", "replay", "--since", "2026-11-01", "--until", "2026-11-02").returncode
        == 0
    )
    before = ledger_contents(sql, project.schema)
    bad = new_config(project, f'[jobs.export]\n{EXPORT}\n[jobs.x]\nschedule = "sometimes"\n')
    ran = project.run("-q", "plan", str(bad))
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    assert ran.stderr.strip().startswith(f"catchup: {bad}:"), ran.stderr
    missing = project.run("-q", "plan", str(project.path / "nope.toml"))
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert ledger_contents(sql, project.schema) == before


def test_without_a_current_config_every_period_the_first_tick_runs_counts(
    project: Project, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """No current config (none found, none given): the ledger alone is the baseline, so the
    gaps an unchanged job would run anyway count too, and the text says how to count less."""
    named = '[project]\nname = "billing-team"\n\n'
    project.write(f"{named}[jobs.export]\n{EXPORT}max_per_tick = 2\n")
    assert (
        project.run("-q", "replay", "--since", "2026-11-01", "--until", "2026-11-02").returncode
        == 0
    )
    new = new_config(project, f"{named}[jobs.export]\n{EXPORT}max_per_tick = 2\n")
    elsewhere = tmp_path_factory.mktemp("elsewhere")  # no catchup.toml in it or above it
    env = project.env()
    env.pop("CATCHUP_CONFIG")
    ran = subprocess.run(
        [sys.executable, "-m", "catchup", "-q", "plan", str(new)],
        cwd=elsewhere, env=env, text=True, capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 1, ran.stderr
    assert "against the ledger alone" in ran.stdout.splitlines()[0]
    assert "= export: unchanged\n    runs 2 period(s) at once" in ran.stdout
    assert "`catchup --config CURRENT.toml plan NEW.toml`" in ran.stdout
    assert os.path.basename(str(new)) in ran.stdout.splitlines()[0]


def test_a_plans_connection_refuses_every_write(ledger: Any) -> None:
    """``only_read``: from then on the server refuses a write on the connection, whatever
    path of catchup's would make one (plan's promise held by the server, not by care)."""
    import psycopg

    ledger.only_read()
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        ledger.register_jobs(["newjob"])


def test_a_paused_job_a_job_back_and_a_failing_keys_query_are_said(
    project: Project, sql: Any
) -> None:
    """A paused job runs nothing (and says how it would); a job the current config dropped
    and the new one names again is added back; a keys query that fails says so (it was
    planned as if no key changed)."""
    project.write(f"[jobs.export]\n{EXPORT}\n[jobs.audit]\n{EXPORT}not_renamed = true\n")
    assert (
        project.run("-q", "replay", "--since", "2026-11-01", "--until", "2026-11-03").returncode
        == 0
    )
    assert project.run("-q", "pause", "export", "--reason", "vendor down").returncode == 0
    project.write(f"[jobs.export]\n{EXPORT}")  # audit dropped from the current config
    broken = f"SELECT key FROM {project.schema}.no_such_table"
    new = new_config(
        project,
        f"[jobs.export]\n{EXPORT}\n[jobs.audit]\n{EXPORT}not_renamed = true\n"
        f"\n[jobs.billing]\n{EXPORT}keys = {json.dumps(broken)}\n",
    )
    code, jobs = planned(project, str(new))
    assert jobs["export"]["paused"] and jobs["export"]["runs_at_once"] == 0
    assert jobs["audit"]["change"] == "added" and jobs["audit"]["back"]
    assert code == 1 and jobs["audit"]["runs_at_once"] > 0  # its gaps: the current runs none
    assert "no_such_table" in (jobs["billing"]["keys"]["error"] or ""), jobs["billing"]
    text = project.run("-q", "plan", str(new)).stdout
    assert "    paused: nothing of it runs until `catchup resume export`\n" in text
    assert "+ audit: added back (the ledger has its past periods)\n" in text
    assert "    its keys query fails: jobs.billing.keys: the keys query failed" in text


def test_a_change_planned_from_another_checkout_is_planned_and_says_what_it_would_meet(
    project: Project,
) -> None:
    """The current and new configs copied elsewhere (a CI checkout): the ledger records the
    jobs as defined by the deployed file, so the plan says so (deployed as another file, the
    change is refused) and plans all the same; it was refused, exit 2."""
    project.write(f"[jobs.export]\n{EXPORT}")
    assert (
        project.run("-q", "replay", "--since", "2026-11-01", "--until", "2026-11-03").returncode
        == 0
    )
    checkout = project.path / "checkout"
    checkout.mkdir()
    old = checkout / "catchup.toml"
    old.write_text(project.config.read_text())
    new = new_config(project, f"[jobs.export]\n{EXPORT.replace('11-01', '10-25')}")
    moved = checkout / "new.toml"
    moved.write_text(new.read_text())
    ran = project.run("-q", "--config", str(old), "plan", str(moved), "--json")
    assert ran.returncode in (0, 1), ran.stderr
    doc = json.loads(ran.stdout)
    assert doc["defined_by_others"] == [str(project.config.resolve())]
    (export,) = doc["jobs"]
    assert export["change"] == "redefined" and export["differs"] == ["start"]
