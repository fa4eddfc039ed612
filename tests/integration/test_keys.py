"""Per-key periods through the command line on a real ledger: one period per (job, key, period),
each claimed, fenced and recorded on its own; the key history (a tenant added mid-window has no
earlier gaps, a removed one stops being expected); one failing tenant re-run alone; marks and
resets of one key; ``after`` an unkeyed job gating every key; racing ticks, each (key, period)
once; and the ledger's own guards (the key in the claim, the fence and the overlap guard)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import psycopg.sql
import pytest
from fix_db import Database, ledger_contents, schema_made, waits_holding_only_the_first
from fix_project import Project, job_toml

from catchup.ledger import Ledger
from catchup.schedule import Timeline, parse_schedule


def run(project: Project, *args: str) -> dict[str, Any]:
    result = project.cli("-q", *args, "--json")
    assert result.stdout.strip(), result.output
    return {"code": result.exit_code, **json.loads(result.stdout)}


def today(sql: Any) -> datetime:
    """The database clock's UTC midnight: tests build their dates from it, never from today."""
    ((now,),) = sql("SELECT date_trunc('day', clock_timestamp(), 'UTC')")
    return now  # type: ignore[no-any-return]


def day(t: datetime) -> str:
    return t.strftime("%Y-%m-%d")


def logged(path: Any) -> list[tuple[str, str]]:
    """What the job wrote: a (key, period) per run."""
    pairs = []
    for line in path.read_text().splitlines():
        key, period = line.split()[:2]
        pairs.append((key, period))
    return pairs


TENANTS = ["acme", "globex", "initech"]


def invoice(project: Project, **extra: object) -> Any:
    log = project.path / "ran"
    keys: object = extra.pop("keys", TENANTS)
    project.write(
        job_toml(
            "invoice",
            "daily",
            "2026-03-01",
            keys=keys,
            command=["sh", "-c", f'echo "$0 $1" >> {log}', "{key}", "{period}"],
            **extra,
        )
    )
    return log


def test_every_key_runs_its_own_period_and_one_failing_key_re_runs_alone(
    project: Project, tmp_path: Any
) -> None:
    log = project.path / "ran"
    broken = tmp_path / "globex.broken"
    broken.touch()
    script = f'echo "$0 $1" >> {log}; test "$0" != globex || test ! -e {broken}'
    project.write(
        job_toml(
            "invoice",
            "daily",
            "2026-03-01",
            keys=TENANTS,
            command=["sh", "-c", script, "{key}", "{period}"],
        )
    )
    first = run(project, "replay", "--since", "2026-03-01", "--until", "2026-03-03")
    assert first["code"] == 1
    assert sorted(logged(log)) == sorted(
        (k, d) for k in TENANTS for d in ("2026-03-01", "2026-03-02")
    )
    failed = [(p["key"], p["label"]) for p in first["periods"] if p["status"] == "failed"]
    assert failed == [("globex", "2026-03-01"), ("globex", "2026-03-02")]
    scanned = run(project, "scan", "--until", "2026-03-03")["jobs"][0]
    assert (scanned["expected"], scanned["keys"], scanned["failed"]) == (6, 3, 2)
    assert [(g["status"], g["keys"]) for g in scanned["gaps"]] == [("failed", ["globex"])]
    markdown = project.cli("-q", "scan", "--until", "2026-03-03", "--format", "markdown")
    assert "| invoice | failed | 2026-03-01 | 2026-03-02 | 2 | 1 of 3 keys (globex) |" in (
        markdown.stdout
    )
    # the calendar counts keys per cell: under March, its days 1 and 2 have one key's gap
    # each, named (globex), and day 3 all three's
    calendar = project.cli("-q", "scan", "--until", "2026-03-04", "--calendar")
    lines = calendar.output.splitlines()
    march = next(n for n, line in enumerate(lines) if line.strip().startswith("2026-03 "))
    said = "keys with a gap (days), of 3: 1..2: 1 (globex), 3: 3"
    assert lines[march + 1].split() == said.split(), calendar.output

    plan = project.cli(
        "-q", "replay", "--since", "2026-03-01", "--until", "2026-03-03", "--dry-run"
    )
    assert "  invoice globex 2026-03-01 .. 2026-03-02 (2 failed)" in plan.output
    broken.unlink()
    log.write_text("")
    again = run(project, "replay", "--since", "2026-03-01", "--until", "2026-03-03")
    assert again["code"] == 0
    assert logged(log) == [("globex", "2026-03-01"), ("globex", "2026-03-02")]  # it alone
    history = run(project, "history", "invoice", "--key", "globex", "--period", "2026-03-01")
    assert [(a["key"], a["attempt"], a["status"]) for a in history["attempts"]] == [
        ("globex", 2, "succeeded"),
        ("globex", 1, "failed"),
    ]
    acme = run(project, "history", "invoice", "--key", "acme")
    assert {a["key"] for a in acme["attempts"]} == {"acme"} and acme["total_attempts"] == 2


def test_a_tenant_added_mid_window_has_no_earlier_gaps_and_a_removed_one_stops(
    project: Project, sql: Any, schema: str
) -> None:
    base = today(sql)
    start = base - timedelta(days=6)
    schema_made(sql, schema)  # where the team keeps its tenants, here
    sql("CREATE TABLE {schema}.tenants (id text, created date)")
    sql("INSERT INTO {schema}.tenants VALUES ('acme', NULL)")
    log = project.path / "ran"
    project.write(
        job_toml(
            "invoice",
            "daily",
            day(start),
            keys=f'SELECT id, created FROM "{schema}".tenants',
            command=["sh", "-c", f'echo "$0 $1" >> {log}', "{key}", "{period}"],
        )
    )
    first = run(project, "scan")["jobs"][0]
    assert (first["keys"], first["expected"], first["missing"]) == (1, 6, 6)  # from the start
    # newco appears today, with no date: expected from now on, so no gap before today
    sql("INSERT INTO {schema}.tenants VALUES ('newco', NULL)")
    # initech was created two days ago: expected from that day
    sql("INSERT INTO {schema}.tenants VALUES ('initech', %s)", [(base - timedelta(days=2)).date()])
    later = run(project, "scan")["jobs"][0]
    assert (later["keys"], later["expected"]) == (3, 6 + 0 + 2)
    assert sorted(k for g in later["gaps"] for k in g["keys"]) == ["acme", "initech"]
    keys = {k["key"]: k for k in run(project, "keys", "invoice")["keys"]}
    assert keys["initech"]["expected_from"] == day(base - timedelta(days=2)) + "T00:00:00Z"
    assert keys["acme"]["expected_from"] == day(start) + "T00:00:00Z"
    assert all(k["gone_at"] is None for k in keys.values())
    assert run(project, "replay", "--since", day(start))["code"] == 0
    assert Counter(k for k, _ in logged(log)) == {"acme": 6, "initech": 2}

    # acme leaves: it is gone from this read on, and keeps its history
    sql("DELETE FROM {schema}.tenants WHERE id = 'acme'")
    gone = {k["key"]: k for k in run(project, "keys", "invoice")["keys"]}
    assert gone["acme"]["gone_at"] is not None and gone["newco"]["gone_at"] is None
    # as if it left three days ago: its periods since are no longer expected
    sql(
        "UPDATE {schema}.job_keys SET gone_at = %s WHERE key = 'acme'",
        [base - timedelta(days=3)],
    )
    after = run(project, "scan")["jobs"][0]
    assert (after["expected"], after["succeeded"]) == (3 + 2, 3 + 2)
    assert run(project, "history", "invoice", "--key", "acme")["total_attempts"] == 6


def test_mark_and_reset_change_one_key_only(project: Project, sql: Any) -> None:
    invoice(project)
    assert (
        project.cli("-q", "replay", "--since", "2026-03-01", "--until", "2026-03-02").exit_code == 0
    )
    refused = project.cli("reset", "invoice", "2026-03-01", "--reason", "rates were wrong")
    assert refused.exit_code == 2 and "invoice has keys: name the key with --key" in refused.output
    done = project.cli(
        "reset", "invoice", "2026-03-01", "--key", "acme", "--reason", "rates were wrong"
    )
    assert done.exit_code == 0 and "invoice acme 2026-03-01: succeeded → failed" in done.output
    rows = sql("SELECT key, status FROM {schema}.runs ORDER BY key")
    assert rows == [("acme", "failed"), ("globex", "succeeded"), ("initech", "succeeded")]
    marked = project.cli(
        "mark", "invoice", "2026-03-02", "--key", "globex", "--skip", "--reason", "closed"
    )
    assert marked.exit_code == 0
    scanned = run(project, "scan", "--until", "2026-03-03")["jobs"][0]
    assert sorted((g["status"], g["first"][:10], tuple(g["keys"])) for g in scanned["gaps"]) == [
        ("failed", "2026-03-01", ("acme",)),
        ("missing", "2026-03-02", ("acme", "initech")),
    ]
    assert scanned["waived"] == 1
    changes = run(project, "history", "invoice", "--key", "acme")["changes"]
    assert [(c["key"], c["action"]) for c in changes] == [("acme", "reset")]
    unknown = project.cli("scan", "--key", "umbrella")
    assert unknown.exit_code == 2 and "invoice has no key 'umbrella'" in unknown.output


def test_an_unkeyed_upstream_gates_every_key(project: Project, sql: Any) -> None:
    log = project.path / "ran"
    project.write(
        job_toml("export", "daily", "2026-03-01", command=["true"])
        + job_toml(
            "invoice",
            "daily",
            "2026-03-01",
            keys=TENANTS,
            after=["export"],
            command=["sh", "-c", f'echo "$0 $1" >> {log}', "{key}", "{period}"],
        )
    )
    blocked = run(project, "run", "invoice", "--period", "2026-03-01")
    assert blocked["code"] == 1
    assert Counter(p["status"] for p in blocked["periods"]) == {"blocked": 3}
    assert sql("SELECT count(*) FROM {schema}.runs") == [(0,)]  # nothing claimed
    assert project.cli("-q", "run", "export", "--period", "2026-03-01").exit_code == 0
    ran = run(project, "run", "invoice", "--period", "2026-03-01", "--key", "globex")
    assert (ran["code"], ran["key"], ran["status"]) == (0, "globex", "succeeded")
    rest = run(project, "run", "invoice", "--period", "2026-03-01")
    assert Counter(p["status"] for p in rest["periods"]) == {"succeeded": 2, "skipped": 1}
    assert sorted(logged(log)) == [(k, "2026-03-01") for k in TENANTS]


def test_a_key_with_a_control_character_is_refused_in_one_line(
    project: Project, sql: Any, schema: str
) -> None:
    schema_made(sql, schema)  # where the team keeps its tenants, here
    sql("CREATE TABLE {schema}.tenants (id text)")
    sql("INSERT INTO {schema}.tenants VALUES ('acme'), (%s)", ["evil\x1b[31m"])
    project.write(
        job_toml(
            "invoice",
            "daily",
            "2026-03-01",
            keys=f'SELECT id FROM "{schema}".tenants',
            command=["true", "{key}"],
        )
    )
    result = project.cli("-q", "replay", "--since", "2026-03-01", "--until", "2026-03-02")
    assert result.exit_code == 2
    # one line for the job (the replay of the others goes on, and its summary says so)
    assert result.stderr.count("\n") == 1 and "\x1b" not in result.output
    assert "jobs.invoice.keys: row 2: the key 'evil\\x1b[31m' holds a control character" in (
        result.output
    )
    tables = "SELECT tablename FROM pg_tables WHERE schemaname = %s"
    assert sql(tables, [schema]) == [("tenants",)]  # no ledger made beside them


@pytest.mark.slow
def test_16_racing_ticks_run_every_key_and_period_once(project: Project, sql: Any) -> None:
    """16 tick processes at once over KEYS x DAYS due periods (catchup = all) of a Python
    ``call`` job: each (key, period) ran exactly once, counted from the job's own side effects
    (a line each, appended with one write), and ``ctx.key`` is the key it ran for."""
    keys, days = 200, 5  # the 500 x 10 passed here too (about 75 s): too long for CI
    base = today(sql)
    log = project.path / "ran"
    (project.path / "tenant_job.py").write_text(
        "import os\n\n\n"
        "def run(ctx):\n"
        f"    fd = os.open({str(log)!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT)\n"
        "    os.write(fd, f'{ctx.key} {ctx.period}\\n'.encode())\n"
        "    os.close(fd)\n"
    )
    project.write(
        job_toml(
            "invoice",
            "daily",
            day(base - timedelta(days=days)),
            keys=[f"t{n:03}" for n in range(keys)],
            call="tenant_job:run",
        )
    )
    ticks = [project.spawn("-q", "tick", "--json") for _ in range(16)]
    for proc in ticks:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    ran = Counter(logged(log))
    assert len(ran) == keys * days and set(ran.values()) == {1}
    assert {key for key, _ in ran} == {f"t{n:03}" for n in range(keys)}
    rows = sql("SELECT status, attempt, count(*) FROM {schema}.runs GROUP BY 1, 2")
    assert rows == [("succeeded", 1, keys * days)]


# -- the ledger's own guards, per key ----------------------------------------------------------

DAY = Timeline.single(parse_schedule("daily"), datetime(2026, 10, 1, tzinfo=UTC))
LEASE = timedelta(seconds=30)


@pytest.fixture
def ledger(database: Database, schema: str) -> Any:
    conn = psycopg.connect(database.conninfo, autocommit=True)
    ledger = Ledger(conn, schema)
    ledger.migrate()
    yield ledger
    conn.close()


def claim(ledger: Ledger, job_id: int, key: str, day: int = 0, whole_job: bool = False) -> Any:
    period = DAY.period(DAY.first + timedelta(days=day))
    return ledger.claim(
        job_id,
        period,
        owner=f"test-{key}",
        lease=LEASE,
        max_attempts=3,
        allow_overlap=False,
        key=key,
        whole_job=whole_job,
    )


def test_the_same_period_of_two_keys_is_two_claims(ledger: Ledger) -> None:
    job_id = ledger.register_jobs(["invoice"])["invoice"].id
    assert claim(ledger, job_id, "acme") is not None
    assert claim(ledger, job_id, "globex") is not None  # not the same period: another key's
    assert claim(ledger, job_id, "acme") is None  # that one is running


def test_a_finish_is_fenced_to_its_own_key(ledger: Ledger, sql: Any) -> None:
    job_id = ledger.register_jobs(["invoice"])["invoice"].id
    acme, globex = claim(ledger, job_id, "acme"), claim(ledger, job_id, "globex")
    assert acme.attempt == globex.attempt == 1
    done = ledger.finish(
        job_id,
        acme.period_start,
        acme.attempt,
        "acme",
        status="succeeded",
        history_status="succeeded",
        counts_as_failure=False,
        backoff=timedelta(0),
        exit_code=0,
        error=None,
        output_tail=None,
    )
    assert done is not None
    assert sql("SELECT key, status FROM {schema}.runs ORDER BY key") == [
        ("acme", "succeeded"),
        ("globex", "running"),
    ]
    assert ledger.heartbeat(job_id, acme.period_start, 1, LEASE, "globex") is not None
    assert ledger.heartbeat(job_id, acme.period_start, 1, LEASE, "acme") is None


def test_overlap_is_forbidden_per_key_unless_forbid_job(ledger: Ledger) -> None:
    job_id = ledger.register_jobs(["invoice"])["invoice"].id
    assert claim(ledger, job_id, "acme", day=1) is not None
    # acme's day 1 runs: acme's day 0 waits, globex's day 0 does not
    assert claim(ledger, job_id, "acme", day=0) is None
    assert claim(ledger, job_id, "globex", day=0) is not None
    # overlap = "forbid-job": any key's running period holds the others back
    assert claim(ledger, job_id, "initech", day=2, whole_job=True) is None
    blocker = ledger.blocker(job_id, DAY.period(DAY.first).start, "initech", whole_job=True)
    assert blocker is not None


@pytest.mark.superuser
def test_a_ledger_from_before_keys_migrates_with_its_runs_and_answers_alike(
    project: Project, sql: Any, schema: str, database: Database, monkeypatch: Any
) -> None:
    """A ledger made by the migrations of the day before keys (through 0013), holding runs,
    history, a change by hand and coverage, reaches the schema a fresh ledger has, every row
    kept as the unkeyed job's (key ''), and the scan reads it as those rows say."""
    from fix_catalog import catalog

    from catchup.ledger import sqlfiles

    shipped = sqlfiles.migrations()
    monkeypatch.setattr(sqlfiles, "migrations", lambda: [m for m in shipped if m[0] <= 13])
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        old = Ledger(conn, schema)
        assert old.migrate()[-1] == "0013_reruns"
        job_id = old.register_jobs(["billing"])["billing"].id
    monkeypatch.setattr(sqlfiles, "migrations", lambda: shipped)
    # what the catchup of that day wrote: 4 days succeeded, one failed, one waived by hand
    sql(
        "INSERT INTO {schema}.runs (job_id, period_start, period_end, status, attempt, failures,"
        " finished_at) SELECT %s, d, d + interval '1 day',"
        " CASE WHEN d = '2026-03-05' THEN 'failed' WHEN d = '2026-03-06' THEN 'waived'"
        " ELSE 'succeeded' END, 1, (d = '2026-03-05')::int, d + interval '1 day'"
        " FROM generate_series('2026-03-01'::timestamptz, '2026-03-06', interval '1 day') d",
        [job_id],
    )
    sql(
        "INSERT INTO {schema}.history (job_id, period_start, attempt, status, started_at)"
        " SELECT job_id, period_start, 1, CASE WHEN status = 'failed' THEN 'failed'"
        " ELSE 'succeeded' END, period_start FROM {schema}.runs WHERE status <> 'waived'"
    )
    sql(
        "INSERT INTO {schema}.events (job_id, period_start, action, previous, reason, actor)"
        " VALUES (%s, '2026-03-06', 'skip', 'missing', 'closed', 'ana')",
        [job_id],
    )
    sql("INSERT INTO {schema}.coverage VALUES (%s, '2026-03-01', '2026-03-06')", [job_id])
    project.write(job_toml("billing", "daily", "2026-03-01", command=["true"]))
    scanned = run(project, "scan", "--until", "2026-03-09")  # it migrates, then reads
    job = scanned["jobs"][0]
    assert (job["succeeded"], job["failed"], job["waived"], job["missing"]) == (4, 1, 1, 2)
    assert [(g["status"], g["first"][:10], g["last"][:10]) for g in job["gaps"]] == [
        ("failed", "2026-03-05", "2026-03-05"),
        ("missing", "2026-03-07", "2026-03-08"),
    ]
    assert sql(
        "SELECT (SELECT count(*) FROM {schema}.runs WHERE key = ''),"
        " (SELECT count(*) FROM {schema}.history WHERE key = ''),"
        " (SELECT count(*) FROM {schema}.events WHERE key = '' AND action = 'skip')"
    ) == [(6, 5, 1)]
    history = run(project, "history", "billing", "--period", "2026-03-05")
    assert [(a["attempt"], a["status"]) for a in history["attempts"]] == [(1, "failed")]
    again = run(project, "replay", "--since", "2026-03-01", "--until", "2026-03-09")
    assert [p["label"] for p in again["periods"]] == ["2026-03-05", "2026-03-07", "2026-03-08"]
    assert [p["attempt"] for p in again["periods"]] == [2, 1, 1]
    # and its schema is the one a fresh ledger has
    fresh = f"{schema}_fresh"
    with psycopg.connect(database.conninfo, autocommit=True) as conn:
        Ledger(conn, fresh).migrate()
        try:
            mine, theirs = catalog(conn, schema), catalog(conn, fresh)
        finally:
            conn.execute(
                psycopg.sql.SQL("DROP SCHEMA {} CASCADE").format(psycopg.sql.Identifier(fresh))
            )
    assert mine == theirs


def test_a_keyed_upstream_gates_key_by_key(project: Project, sql: Any) -> None:
    project.write(
        job_toml("export", "daily", "2026-03-01", keys=TENANTS, command=["true", "{key}"])
        + job_toml(
            "invoice",
            "daily",
            "2026-03-01",
            keys=TENANTS,
            after=["export"],
            command=["true", "{key}"],
        )
    )
    assert (
        project.cli("-q", "run", "export", "--period", "2026-03-01", "--key", "acme").exit_code == 0
    )
    ran = run(project, "run", "invoice", "--period", "2026-03-01")
    assert ran["code"] == 1
    assert sorted((p["key"], p["status"]) for p in ran["periods"]) == [
        ("acme", "succeeded"),
        ("globex", "blocked"),
        ("initech", "blocked"),
    ]
    assert sql(
        "SELECT key FROM {schema}.runs r JOIN {schema}.jobs j ON j.id = r.job_id "
        "WHERE j.name = 'invoice'"
    ) == [("acme",)]


def test_one_key_paused_is_left_alone_and_why_says_so(project: Project, sql: Any) -> None:
    log = invoice(project)
    paused = project.cli("pause", "invoice", "--key", "initech", "--reason", "moving banks")
    assert paused.exit_code == 0 and "invoice initech: paused since" in paused.output
    ran = run(project, "run", "invoice", "--period", "2026-03-01")
    assert sorted((p["key"], p["status"]) for p in ran["periods"]) == [
        ("acme", "succeeded"),
        ("globex", "succeeded"),
        ("initech", "skipped"),
    ]
    assert sorted(logged(log)) == [("acme", "2026-03-01"), ("globex", "2026-03-01")]
    table = project.cli("-q", "run", "invoice", "--period", "2026-03-02")
    assert table.output.strip().splitlines()[-1].startswith("run: 2 succeeded"), table.output
    why = project.cli("-q", "why", "invoice", "2026-03-01", "--key", "initech")
    assert "invoice initech is paused since" in why.output
    assert "catchup run invoice --period 2026-03-01 --key initech" in why.output
    resumed = project.cli("resume", "invoice", "--key", "initech")
    assert resumed.exit_code == 0 and "invoice initech: resumed" in resumed.output
    again = run(project, "run", "invoice", "--period", "2026-03-01", "--key", "initech")
    assert (again["key"], again["status"]) == ("initech", "succeeded")
    changes = run(project, "history", "invoice", "--key", "initech")["changes"]
    assert [(c["key"], c["action"]) for c in changes] == [
        ("initech", "resume"),
        ("initech", "pause"),
    ]


def test_what_a_scan_verified_of_each_key_is_kept_and_forgotten_when_a_row_goes(
    project: Project, sql: Any
) -> None:
    """A scan records, per key, how far every expected period has a row, so later scans look
    for holes only after it; a row a person removes is missing again in the next scan."""
    base = today(sql)
    start = base - timedelta(days=6)
    project.write(
        job_toml("invoice", "daily", day(start), keys=["a", "b"], command=["true", "{key}"])
    )
    third = start + timedelta(days=2)
    assert project.cli("-q", "run", "invoice", "--period", day(start)).exit_code == 0
    assert (
        project.cli("-q", "run", "invoice", "--period", day(start + timedelta(days=1))).exit_code
        == 0
    )
    first = run(project, "scan")["jobs"][0]
    assert (first["missing"], first["succeeded"]) == (8, 4)
    spans = (  # an unbounded range reaches the job's horizon
        "SELECT k.key, lower(r), coalesce(upper(r), s.keys_horizon) FROM {schema}.job_keys k"
        " JOIN {schema}.scan_state s USING (job_id) CROSS JOIN unnest(k.verified) r ORDER BY 1, 2"
    )
    assert sql(spans) == [("a", start, third), ("b", start, third)]  # up to each key's hole
    assert run(project, "replay", "--since", day(start))["code"] == 0
    clean = run(project, "scan")["jobs"][0]
    assert (clean["missing"], clean["succeeded"]) == (0, 12)
    assert sql(spans) == [("a", start, base), ("b", start, base)]
    again = run(project, "scan")["jobs"][0]  # holes looked for only after what was verified
    assert again["succeeded"] == 12
    sql("DELETE FROM {schema}.runs WHERE key = 'a' AND period_start = %s", [third])
    after = run(project, "scan")["jobs"][0]
    hole = [("missing", third.strftime("%Y-%m-%dT%H:%M:%SZ"), ["a"])]
    assert [(g["status"], g["first"], g["keys"]) for g in after["gaps"]] == hole
    # the hole stays outside what is verified, so every later scan looks at it again
    fourth = third + timedelta(days=1)
    assert sql(spans) == [("a", start, third), ("a", fourth, base), ("b", start, base)]
    later = run(project, "scan")["jobs"][0]
    assert [(g["status"], g["first"], g["keys"]) for g in later["gaps"]] == hole


def test_the_last_success_of_a_keyed_job_is_its_newest_succeeded_period_of_any_key(
    project: Project, sql: Any
) -> None:
    """acme ran all of the last five days, globex only the first: the job's last success is
    yesterday (found by the scan itself), globex's alone the first day (the newest periods have
    none: the ledger says), and a window that ends before yesterday still names yesterday."""
    base = today(sql)
    first = base - timedelta(days=5)
    project.write(
        job_toml("invoice", "daily", day(first), keys=["acme", "globex"], command=["true"])
    )
    assert run(project, "replay", "--key", "acme", "--since", day(first))["code"] == 0
    one = run(project, "run", "invoice", "--key", "globex", "--period", day(first))
    assert one["code"] == 0

    def last_success(*args: str) -> str:
        shown = project.cli("-q", "scan", *args, env={"COLUMNS": "80"}).output
        return shown.split("last success ", 1)[1].split()[0]

    assert last_success() == day(base - timedelta(days=1))
    assert last_success("--key", "globex") == day(first)
    assert last_success("--until", day(base - timedelta(days=3))) == day(base - timedelta(days=1))


@pytest.mark.parametrize(
    "args",
    [
        ("scan", "--key", "nobody"),
        ("replay", "--since", "2026-03-01", "--until", "2026-03-02", "--key", "nobody"),
        ("run", "invoice", "--period", "2026-03-01", "--key", "nobody"),
        ("mark", "invoice", "2026-03-01", "--key", "nobody", "--skip", "--reason", "x"),
        ("reset", "invoice", "2026-03-01", "--key", "nobody", "--reason", "x"),
        ("history", "invoice", "--key", "nobody"),
        ("why", "invoice", "2026-03-01", "--key", "nobody"),
        ("pause", "invoice", "--key", "nobody", "--reason", "x"),
        ("resume", "invoice", "--key", "nobody"),
    ],
    ids=lambda args: args[0],
)
def test_a_key_the_job_lacks_is_refused_before_anything_is_written(
    project: Project, sql: Any, args: tuple[str, ...]
) -> None:
    invoice(project)
    assert project.cli("-q", "keys", "invoice").exit_code == 0  # the ledger, as a team's is
    invoice(project, keys=[*TENANTS, "hooli"])  # one the ledger has not seen: recording it writes
    before = ledger_contents(sql, project.schema)
    refused = project.cli("-q", *args)
    assert (refused.exit_code, refused.output.strip().splitlines()) == (
        2,
        ["catchup: invoice has no key 'nobody' (its keys: acme, globex, hooli, initech)"],
    )
    assert ledger_contents(sql, project.schema) == before


def test_a_scan_finds_the_same_holes_by_probe_and_by_merge(
    project: Project, sql: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The holes (periods with no row) are found by one index read per stretch of unverified
    periods when few are, and by one pass over the job's rows when many are: both give every
    answer."""
    from catchup.ledger import keys as ledger_keys

    invoice(project, keys=["acme", "globex", "hooli", "initech", "umbrella"])
    window = ("--since", "2026-03-01", "--until", "2026-03-21")
    assert project.cli("-q", "replay", *window).exit_code == 0
    sql(
        "DELETE FROM {schema}.runs WHERE key = 'globex' AND period_start BETWEEN %s AND %s",
        [datetime(2026, 3, 4, tzinfo=UTC), datetime(2026, 3, 9, tzinfo=UTC)],
    )
    sql(
        "DELETE FROM {schema}.runs WHERE key = 'hooli' AND period_start >= %s",
        [datetime(2026, 3, 19, tzinfo=UTC)],
    )
    sql(
        "UPDATE {schema}.runs SET status = 'failed', failures = 1"
        " WHERE key = 'umbrella' AND period_start = %s",
        [datetime(2026, 3, 10, tzinfo=UTC)],
    )
    answers = []
    for cost in (0, 10**9, 0, 10**9):  # 0: probe every hole; 10**9: merge every time
        monkeypatch.setattr(ledger_keys, "HOLE_PROBE_COST", cost)
        scanned = run(project, "scan", *window)["jobs"][0]
        answers.append(scanned)
    assert sorted(
        (g["status"], g["first"][:10], g["last"][:10], tuple(g["keys"])) for g in answers[0]["gaps"]
    ) == [
        ("failed", "2026-03-10", "2026-03-10", ("umbrella",)),
        ("missing", "2026-03-04", "2026-03-09", ("globex",)),
        ("missing", "2026-03-19", "2026-03-20", ("hooli",)),
    ]
    assert all(a == answers[0] for a in answers[1:])


def test_a_scan_says_which_keys_periods_an_unkeyed_upstream_blocks(project: Project) -> None:
    """A keyed job after an unkeyed one: each key's missing periods whose upstream period is
    not done are blocked, named by it, in the scan, as the claim refuses them; the rest stay
    missing (and a key's failed period stays failed)."""
    project.write(
        job_toml("export", "daily", "2026-03-01", command=["true"])
        + job_toml(
            "invoice",
            "daily",
            "2026-03-01",
            keys=TENANTS,
            after=["export"],
            command=["sh", "-c", 'test "$0" != initech', "{key}"],
        )
    )
    window = ("--since", "2026-03-01", "--until", "2026-03-07")
    # export ran on the 1st to 3rd; invoice ran every key on the 1st
    assert (
        project.cli(
            "-q", "replay", "--job", "export", "--since", "2026-03-01", "--until", "2026-03-04"
        ).exit_code
        == 0
    )
    assert project.cli("-q", "run", "invoice", "--period", "2026-03-01").exit_code == 1
    scanned = run(project, "scan", *window)["jobs"]
    invoice = next(j for j in scanned if j["job"] == "invoice")
    gaps = [
        (g["status"], g["first"][:10], g["last"][:10], tuple(g["keys"]), g.get("blocked_by"))
        for g in invoice["gaps"]
    ]
    assert gaps == [
        ("failed", "2026-03-01", "2026-03-01", ("initech",), None),
        ("missing", "2026-03-02", "2026-03-03", tuple(TENANTS), None),
        (
            "blocked",
            "2026-03-04",
            "2026-03-06",
            tuple(TENANTS),
            "export 2026-03-04 .. 2026-03-06 (missing)",
        ),
    ]
    assert (invoice["missing"], invoice["blocked"], invoice["failed"]) == (6, 9, 1)
    # one key of it, as the claim sees it: its own periods only
    one = run(project, "scan", *window, "--key", "acme")["jobs"][0]
    assert (one["missing"], one["blocked"]) == (2, 3)


def test_a_scan_blocks_each_keys_periods_by_its_own_upstream_key(project: Project) -> None:
    """A keyed job after a keyed one: a key's missing period is blocked while the upstream
    period of the same key is not done, whether the upstream job is scanned too or not."""
    project.write(
        job_toml("export", "daily", "2026-03-01", keys=TENANTS, command=["true", "{key}"])
        + job_toml(
            "invoice",
            "daily",
            "2026-03-01",
            keys=TENANTS,
            after=["export"],
            command=["true", "{key}"],
        )
    )
    export = ("replay", "--job", "export", "--since", "2026-03-01")
    assert project.cli("-q", *export, "--until", "2026-03-04", "--key", "acme").exit_code == 0
    assert project.cli("-q", *export, "--until", "2026-03-02", "--key", "globex").exit_code == 0
    window = ("--since", "2026-03-01", "--until", "2026-03-04")
    expected = [
        ("blocked", "2026-03-01", "2026-03-03", ("initech",)),
        ("missing", "2026-03-01", "2026-03-03", ("acme",)),
        ("missing", "2026-03-01", "2026-03-01", ("globex",)),
        ("blocked", "2026-03-02", "2026-03-03", ("globex",)),
    ]
    for only in ((), ("--job", "invoice")):
        jobs = run(project, "scan", *window, *only)["jobs"]
        invoice = next(j for j in jobs if j["job"] == "invoice")
        gaps = [
            (g["status"], g["first"][:10], g["last"][:10], tuple(g["keys"]))
            for g in invoice["gaps"]
        ]
        assert sorted(gaps, key=lambda g: (g[1], g[3])) == sorted(
            expected, key=lambda g: (g[1], g[3])
        ), only
        assert (invoice["missing"], invoice["blocked"]) == (4, 5)
        blocked = [g for g in invoice["gaps"] if g["status"] == "blocked"]
        assert all(g["blocked_by"].startswith("export 2026-03-0") for g in blocked)
    # the claims agree: a replay of invoice runs the 5 export periods it waits for, then its 9
    replayed = run(project, "replay", "--job", "invoice", *window)
    ran = Counter((p["job"], p["status"]) for p in replayed["periods"])
    assert ran == {("export", "succeeded"): 5, ("invoice", "succeeded"): 9}, replayed


def test_a_replay_of_one_job_runs_the_keyed_upstream_periods_it_needs(project: Project) -> None:
    """``replay --job invoice`` of a job after a keyed one runs the upstream periods of the
    keys it replays first (each key's own), and no other key's."""
    log = project.path / "ran"
    command = ["sh", "-c", f'echo "$0 $1 $2" >> {log}', "{key}", "{period}"]
    project.write(
        job_toml("export", "daily", "2026-03-01", keys=TENANTS, command=[*command, "export"])
        + job_toml(
            "invoice",
            "daily",
            "2026-03-01",
            keys=TENANTS,
            after=["export"],
            command=[*command, "invoice"],
        )
    )
    window = ("--since", "2026-03-01", "--until", "2026-03-03")
    done = run(project, "replay", "--job", "invoice", *window, "--key", "acme", "--key", "globex")
    assert done["code"] == 0, done
    ran = [tuple(line.split()) for line in log.read_text().splitlines()]
    assert sorted(ran) == sorted(
        (k, d, job)
        for k in ("acme", "globex")
        for d in ("2026-03-01", "2026-03-02")
        for job in ("export", "invoice")
    )
    # each invoice ran after its own key's export of that day
    for key in ("acme", "globex"):
        for d in ("2026-03-01", "2026-03-02"):
            assert ran.index((key, d, "export")) < ran.index((key, d, "invoice"))


@pytest.mark.parametrize(
    "args",
    [("scan",), ("keys", "invoice"), ("replay", "--since", "2026-03-01"), ("tick",)],
    ids=lambda args: args[0],
)
def test_a_keys_query_that_fails_writes_nothing(
    project: Project, sql: Any, args: tuple[str, ...]
) -> None:
    """A keys query that fails (here: a table that does not exist) is one line naming the
    job's keys, and the ledger is left as it was: not even the job's row is written."""
    invoice(project, keys="SELECT id FROM no_such_tenants")
    assert project.cli("-q", "migrate").exit_code == 0
    before = ledger_contents(sql, project.schema)
    failed = project.cli("-q", *args)
    lines = failed.output.strip().splitlines()
    assert failed.exit_code != 0 and len(lines) == 1, failed.output
    assert lines[0].startswith("catchup: jobs.invoice.keys: the keys query failed: ")
    assert "no_such_tenants" in lines[0]
    assert ledger_contents(sql, project.schema) == before


def test_an_upstream_rerun_makes_the_keys_that_used_it_outdated(project: Project) -> None:
    """A keyed job after an unkeyed one and a keyed one: the unkeyed upstream's re-run makes
    every key's period that used it outdated; the keyed upstream's re-run of one key only that
    key's. `replay --outdated` runs each of them again, once."""
    project.write(
        job_toml("rates", "daily", "2026-03-01", command=["true"])
        + job_toml("export", "daily", "2026-03-01", keys=TENANTS, command=["true", "{key}"])
        + job_toml(
            "invoice",
            "daily",
            "2026-03-01",
            keys=TENANTS,
            after=["rates", "export"],
            command=["true", "{key}"],
        )
    )
    window = ("--since", "2026-03-01", "--until", "2026-03-03")
    assert project.cli("-q", "replay", *window).exit_code == 0

    def invoice_gaps() -> list[tuple[str, str, str, tuple[str, ...]]]:
        jobs = run(project, "scan", *window)["jobs"]
        found = next(j for j in jobs if j["job"] == "invoice")
        return [
            (g["status"], g["first_label"], g["last_label"], tuple(g["keys"]))
            for g in found["gaps"]
        ]

    assert invoice_gaps() == []
    reset = ("reset", "export", "2026-03-02", "--key", "globex", "--reason", "bad export")
    assert project.cli("-q", *reset).exit_code == 0
    assert (
        project.cli("-q", "run", "export", "--period", "2026-03-02", "--key", "globex").exit_code
        == 0
    )
    assert invoice_gaps() == [("outdated", "2026-03-02", "2026-03-02", ("globex",))]
    assert project.cli("-q", "reset", "rates", "2026-03-01", "--reason", "bad rates").exit_code == 0
    assert project.cli("-q", "run", "rates", "--period", "2026-03-01").exit_code == 0
    assert sorted(invoice_gaps()) == [
        ("outdated", "2026-03-01", "2026-03-01", ("acme", "initech")),
        ("outdated", "2026-03-01", "2026-03-02", ("globex",)),
    ]
    rerun = run(project, "replay", *window, "--outdated", "--reason", "upstream re-ran")
    assert sorted((p["job"], p["key"], p["label"]) for p in rerun["periods"]) == [
        ("invoice", "acme", "2026-03-01"),
        ("invoice", "globex", "2026-03-01"),
        ("invoice", "globex", "2026-03-02"),
        ("invoice", "initech", "2026-03-01"),
    ]
    assert invoice_gaps() == []


def test_a_keyed_running_balance_is_blocked_key_by_key_after_its_own_failed_day(
    project: Project,
) -> None:
    """balance waits for its own previous day, key by key: globex's failed March 2 blocks
    globex's later days (named by that day), while acme's and initech's days are missing only
    where nothing before them is undone: the first missing day of a range is missing, the ones
    after it wait for it."""
    fails = ["sh", "-c", 'test "$0 $1" != "globex 2026-03-02"', "{key}", "{period}"]
    project.write(
        job_toml(
            "balance",
            "daily",
            "2026-03-01",
            keys=TENANTS,
            command=fails,
            max_attempts=1,
            after=[{"job": "balance", "periods": "previous"}],
        )
    )
    assert (
        project.cli("-q", "replay", "--since", "2026-03-01", "--until", "2026-03-03").exit_code == 1
    )
    found = run(project, "scan", "--since", "2026-03-01", "--until", "2026-03-06")["jobs"][0]
    gaps = sorted(
        (g["status"], g["first_label"], g["last_label"], tuple(g["keys"]), g.get("blocked_by"))
        for g in found["gaps"]
    )
    assert gaps == [
        ("blocked", "2026-03-03", "2026-03-05", ("globex",), "balance 2026-03-02 (exhausted)"),
        (
            "blocked",
            "2026-03-04",
            "2026-03-05",
            ("acme", "initech"),
            "balance 2026-03-03 (missing)",
        ),
        ("exhausted", "2026-03-02", "2026-03-02", ("globex",), None),
        ("missing", "2026-03-03", "2026-03-03", ("acme", "initech"), None),
    ]
    # the claims agree: only acme's and initech's March 3 can run now
    ran = run(project, "replay", "--since", "2026-03-03", "--until", "2026-03-04")
    assert sorted((p["key"], p["status"]) for p in ran["periods"]) == [
        ("acme", "succeeded"),
        ("globex", "blocked"),
        ("initech", "succeeded"),
    ]


def test_what_a_group_of_blocked_keys_waits_for_names_the_keys_it_holds_for(
    project: Project,
) -> None:
    """Keys grouped in one blocked range can wait for different things: what they all wait
    for is said plainly, what only some wait for names them."""
    fails = ["sh", "-c", 'test "$0 $1" != "globex 2026-03-02"', "{key}", "{period}"]
    project.write(
        job_toml("rates", "daily", "2026-03-01", command=["true"])
        + job_toml(
            "balance",
            "daily",
            "2026-03-01",
            keys=TENANTS,
            command=fails,
            max_attempts=1,
            after=["rates", {"job": "balance", "periods": "previous"}],
        )
    )
    window = ("--since", "2026-03-01", "--until", "2026-03-04")
    assert project.cli("-q", "replay", *window).exit_code == 1
    jobs = run(project, "scan", "--since", "2026-03-01", "--until", "2026-03-06")["jobs"]
    balance = next(j for j in jobs if j["job"] == "balance")
    said = {
        (g["first_label"], tuple(g["keys"])): g["blocked_by"]
        for g in balance["gaps"]
        if g["status"] == "blocked"
    }
    assert said == {
        ("2026-03-03", ("globex",)): "balance 2026-03-02 (exhausted)",
        ("2026-03-04", tuple(TENANTS)): (
            "rates 2026-03-04 .. 2026-03-05 (missing); globex also: balance 2026-03-02 (exhausted)"
        ),
    }


def test_recording_keys_locks_their_rows_in_key_order(
    ledger: Ledger, database: Database, schema: str
) -> None:
    """A read of the keys returned in any order locks the key rows it changes in key order
    before it updates them, as a scan recording what it verified does: two ticks doing one
    each never deadlock. Here a transaction holds the first key's row; the read (every key
    expected from a day later) waits for it holding no other key's row (another connection
    can lock each at once)."""
    import threading

    job_id = ledger.register_jobs(["invoice"])["invoice"].id
    names = ["acme", "globex", "initech"]
    for n in range(1, 4):  # written in reverse key order: initech, globex, acme
        ledger.record_keys(job_id, [(k, None) for k in names[-n:]], start=DAY.first)
    rows = psycopg.sql.Identifier(schema, "job_keys")
    lock = psycopg.sql.SQL("SELECT key FROM {} WHERE job_id = %s AND key = %s FOR UPDATE")
    with psycopg.connect(database.conninfo) as holder, psycopg.connect(database.conninfo) as other:
        holder.execute(lock.format(rows), [job_id, "acme"])  # the first in key order
        reader = Ledger(psycopg.connect(database.conninfo, autocommit=True), schema)
        # no index to read them by: the rows come in the order they were written, reversed
        reader.conn.execute("SET enable_indexscan = off")
        reader.conn.execute("SET enable_bitmapscan = off")
        pid = reader.conn.info.backend_pid
        done = threading.Event()

        def read() -> None:
            later = DAY.first + timedelta(days=1)
            reader.record_keys(job_id, [(k, later) for k in reversed(names)], start=DAY.first)
            done.set()

        thread = threading.Thread(target=read, daemon=True)
        thread.start()

        # the waiting read holds neither of the others
        waits_holding_only_the_first(other, pid, lock.format(rows), job_id, ["globex", "initech"])
        holder.rollback()
        thread.join(timeout=30)
        assert done.is_set()
        reader.conn.close()
