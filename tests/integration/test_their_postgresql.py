"""catchup on a team's own PostgreSQL as a DBA sets it up (``fix_team``): a role in another
zone (``America/Los_Angeles`` with DST, or ``Etc/UTC``) and date style (``SQL, DMY``), that may
only connect and owns only the schema the DBA made for it, with tables and functions named like
catchup's earlier in its ``search_path``. It migrates, ticks, replays (two racing), scans the
right periods across a DST change of the role's zone, compacts, leads the scheduler, and
serves every page (each answered 500-less before: ``Last-Modified`` needs a UTC datetime, and
the session's zone gave psycopg another)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
from fix_processes import wait_for
from fix_project import Project, job_toml
from fix_proxy import pooler_for
from fix_team import Team, serializable_role
from psycopg import sql

from catchup.postgres import database as db


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


# an hourly job over the day the US changed to summer time (2026-03-08): 24 UTC hours, each
# a period, whatever zone the session is in; a daily job over the week around it: 7 UTC days
HOURLY = job_toml("hourly", schedule="hourly", start="2026-03-08", command=["true"])
DAILY = job_toml(
    "daily", schedule="daily", start="2026-03-05", command=["true"], catchup="all"
) + job_toml("tenants", schedule="daily", start="2026-03-05", command=["true"], keys=["a", "b"])


def scan(project: Project, *window: str) -> dict[str, Any]:
    done = project.run("scan", "--json", *window)
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_catchups_sessions_set_what_they_depend_on_whatever_the_role_sets(
    team: Team, team_zone: str
) -> None:
    """Every connection catchup makes reads UTC and ISO dates, and carries none of the limits
    the DBA gave the role for people's sessions."""
    conn = db.connect(db.Target(team.dsn(team_zone), "a team's DSN"))
    try:
        settings = {
            name: conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
            for name in (
                "TimeZone",
                "DateStyle",
                "IntervalStyle",
                "statement_timeout",
                "lock_timeout",
                "idle_in_transaction_session_timeout",
                "default_transaction_isolation",
            )
        }
    finally:
        conn.close()
    assert settings == {
        "TimeZone": ("UTC",),
        "DateStyle": ("ISO, MDY",),
        "IntervalStyle": ("postgres",),
        "statement_timeout": ("0",),
        "lock_timeout": ("0",),
        "idle_in_transaction_session_timeout": ("0",),
        "default_transaction_isolation": ("read committed",),
    }


def test_a_role_that_owns_only_its_schema_migrates_replays_scans_and_compacts(
    team_project: Project, team: Team, team_zone: str
) -> None:
    project = team_project
    project.write(HOURLY + DAILY)
    done = project.run("migrate")
    assert done.returncode == 0, done.stderr
    assert "permission denied" not in done.stderr

    window = ("--since", "2026-03-05", "--until", "2026-03-12")
    before = {job["job"]: job for job in scan(project, *window)["jobs"]}
    assert before["daily"]["expected"] == 7 and before["daily"]["missing"] == 7
    assert before["hourly"]["expected"] == 4 * 24  # 03-08 to 03-12, UTC hours
    assert before["hourly"]["gaps"][0]["first"] == "2026-03-08T00:00:00Z"

    # two replays racing over the same window: every period runs once
    racing = [
        project.spawn("replay", "--since", "2026-03-05", "--until", "2026-03-12", "--json")
        for _ in range(2)
    ]
    outs = [proc.communicate(timeout=300) for proc in racing]
    for proc, (_, err) in zip(racing, outs, strict=True):
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    ran = [
        (run["job"], run.get("key", ""), run["start"])
        for out, _ in outs
        for run in json.loads(out)["periods"]
        if run["status"] == "succeeded"
    ]
    assert len(ran) == len(set(ran)) == 7 + 2 * 7 + 4 * 24

    after = {job["job"]: job for job in scan(project, *window)["jobs"]}
    assert after["daily"]["succeeded"] == 7 and not after["daily"]["gaps"]
    assert after["hourly"]["succeeded"] == 4 * 24 and not after["hourly"]["gaps"]

    # the history reads back in UTC, the period labels are the UTC days
    history = project.run("history", "daily", "--json")
    assert history.returncode == 0, history.stderr
    starts = sorted(a["period"] for a in json.loads(history.stdout)["attempts"])
    assert starts[0] == "2026-03-05T00:00:00Z" and starts[-1] == "2026-03-11T00:00:00Z"

    compacted = project.run("compact", "--before", "2026-03-10")
    assert compacted.returncode == 0, compacted.stderr
    assert not scan(project, *window)["jobs"][0]["gaps"]

    # nothing was made outside the role's schema, nothing was read from the decoys
    with psycopg.connect(team.admin) as conn:
        owned = conn.execute(
            "SELECT n.nspname FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner"
            " WHERE r.rolname = %s",
            [team.role(team_zone)],
        ).fetchall()
        assert owned == [(project.schema,)]
        assert conn.execute("SELECT count(*) FROM decoy.runs").fetchone() == (0,)


def test_every_page_answers_on_a_server_in_another_zone(team_project: Project) -> None:
    project = team_project
    project.write(DAILY)
    assert project.run("replay", "--since", "2026-03-05", "--until", "2026-03-08").returncode == 0
    port = free_port()
    proc: subprocess.Popen[str] = project.spawn(
        "serve", "--listen", f"127.0.0.1:{port}", "--refresh", "1s"
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def answers() -> bool:
            try:
                return get(base + "/readyz")[0] == 200
            except OSError:
                return False

        wait_for(answers, timeout=60, what="serve to answer")
        for path in ("/", "/jobs/daily", "/jobs/daily/2026-03-06", "/keys/tenants", "/api/scan"):
            status, body = get(base + path)
            assert status == 200, (path, body[:300])
        document = json.loads(get(base + "/api/scan")[1])
        assert document["generated_at"].endswith("Z")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err


def test_the_scheduler_leads_on_a_role_that_owns_only_its_schema(team_project: Project) -> None:
    project = team_project
    project.write(job_toml("daily", schedule="daily", start="2026-03-05", command=["true"]))
    proc = project.spawn("scheduler", "--lease", "3s")
    try:
        seen: list[str] = []

        def leading() -> bool:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            return True

        wait_for(leading, timeout=5, what="the scheduler to stay up")

        def ran() -> bool:
            done = project.run("history", "daily", "--json")
            seen.append(done.stdout)
            return done.returncode == 0 and bool(json.loads(done.stdout)["attempts"])

        wait_for(ran, timeout=60, what="the scheduler's first run")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "leading (term 1)" in err and "Traceback" not in err, err


def test_doctor_says_what_the_role_may_do_and_what_each_missing_privilege_turns_off(
    team_project: Project, team: Team, team_zone: str
) -> None:
    project = team_project
    project.write(job_toml("daily", schedule="daily", start="2026-03-05", command=["true"]))
    role = team.role(team_zone)
    done = project.run("doctor")
    lines = done.stdout.splitlines()
    assert f"✓ role: {role} owns the schema {project.schema}: all catchup needs" in lines, done
    assert any(
        line.startswith(f"i role: {role} lacks pg_read_all_stats (GRANT pg_monitor TO {role})")
        for line in lines
    ), done.stdout
    assert not any("superuser" in line for line in lines), done.stdout

    # a schema nobody made, and a role that may not make one: serious, with the DBA's command
    text = project.config.read_text().replace(project.schema, "nowhere")
    project.config.write_text(text)
    done = project.run("doctor")
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        f"✗ role: the schema nowhere is not there and {role} may not create one (no CREATE on "
        f"the database): have a DBA run CREATE SCHEMA nowhere AUTHORIZATION {role}"
    ) in done.stdout.replace("\n  ", " "), done.stdout
    with psycopg.connect(team.admin) as conn:
        assert conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'nowhere'").fetchall() == []


def test_serve_reads_through_a_role_that_may_only_read(
    team_project: Project, team: Team, team_zone: str
) -> None:
    """``catchup serve`` as a role with SELECT on the ledger only, read-only by default: the
    page, /api/scan and /metrics answer, and nothing is written."""
    project = team_project
    project.write(DAILY + '[alerts.webhooks.ops]\nurl = "http://127.0.0.1:9/hook"\n')
    assert project.run("replay", "--since", "2026-03-05", "--until", "2026-03-07").returncode == 0
    team.grant_page(project.schema)
    before = ledger_rows(team, project.schema)
    port = free_port()
    page = team.dsn("page")
    err_file = project.path / "serve.err"
    with err_file.open("w") as err_out:
        proc = subprocess.Popen(
            project.command("serve", "--listen", f"127.0.0.1:{port}", "--refresh", "1s"),
            cwd=project.path,
            env=project.env(CATCHUP_DSN=page),
            text=True,
            stdout=subprocess.DEVNULL,
            stderr=err_out,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        said: list[str] = []

        def answers() -> bool:
            assert proc.poll() is None, read_so_far(err_file)
            try:
                status, body = get(base + "/readyz")
            except OSError:
                return False
            said[:] = [body]
            return status == 200

        try:
            wait_for(answers, timeout=60, what="serve to answer")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: /readyz said {said}") from None
        for path in ("/", "/jobs/daily", "/jobs/daily/2026-03-06", "/keys/tenants", "/api/scan"):
            status, body = get(base + path)
            assert status == 200, (path, body[:300])
        assert "catchup_up 1" in get(base + "/metrics")[1]
        wait_for(lambda: "alerts: " in read_so_far(err_file), timeout=30, what="the alerts' line")
        seen: set[str] = set()

        def scanned_twice_more() -> bool:
            seen.add(json.loads(get(base + "/api/scan")[1])["generated_at"])
            return len(seen) >= 3

        wait_for(scanned_twice_more, timeout=30, what="two more scans")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    err = read_so_far(err_file)
    assert "Traceback" not in err, err
    # the alerts it may not record are said once, not at every scan
    assert err.count("alerts: not recorded nor sent by this serve: its role may only read") == 1
    assert ledger_rows(team, project.schema) == before


def read_so_far(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def ledger_rows(team: Team, schema: str) -> dict[str, int]:
    """How many rows each table of the ledger holds (what a read-only serve leaves alone)."""
    with psycopg.connect(team.admin) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", [schema]
        ).fetchall()
        counts = {}
        for (table,) in tables:
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, table))
            ).fetchone()
            counts[table] = 0 if row is None else int(row[0])
        return counts


def test_migrations_racing_through_a_transaction_pooler_apply_once(
    team_project: Project, team: Team, team_zone: str
) -> None:
    """Eight first commands at once, through a transaction-mode PgBouncer, as a role whose
    transactions are serializable by default (the pooler keeps none of catchup's session
    settings but the reported ones): each migration is applied once, every command exits 0."""
    project = team_project
    project.write(job_toml("daily", schedule="daily", start="2026-03-05", command=["true"]))
    lock = "SELECT pg_advisory_xact_lock(hashtext('catchup.migrate'), hashtext(%s))"
    waiting = (
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    )
    with (
        serializable_role(team, team.role(team_zone)),
        pooler_for(team.dsn(team_zone)) as pooler,
        psycopg.connect(team.admin) as holder,
    ):
        # the migrations' own lock held until all eight wait for it: each took its snapshot
        # before it got the lock, the moment a transaction in the role's isolation would
        holder.execute(lock, [project.schema])
        env = project.env(CATCHUP_DSN=pooler.dsn)
        procs = [
            subprocess.Popen(
                project.command("migrate"),
                cwd=project.path,
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(8)
        ]
        with psycopg.connect(team.admin, autocommit=True) as watcher:

            def all_waiting() -> bool:
                gone = [p for p in procs if p.poll() is not None]
                assert not gone, [(p.returncode, p.communicate()[1]) for p in gone]
                row = watcher.execute(waiting).fetchone()
                return row is not None and row[0] >= 8

            wait_for(all_waiting, timeout=60, what="the eight migrations to wait for the lock")
        holder.commit()
        said = [proc.communicate(timeout=120) for proc in procs]
    for proc, (_, err) in zip(procs, said, strict=True):
        assert proc.returncode == 0, err
    with psycopg.connect(team.admin) as conn:
        versions = conn.execute(
            sql.SQL("SELECT version, count(*) FROM {}.schema_version GROUP BY 1").format(
                sql.Identifier(project.schema)
            )
        ).fetchall()
    assert versions and all(count == 1 for _, count in versions), versions
