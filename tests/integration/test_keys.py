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
import pytest
from fix_db import Database
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
    sql("CREATE SCHEMA IF NOT EXISTS {schema}")  # where the team keeps its tenants, here
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
    sql("CREATE SCHEMA IF NOT EXISTS {schema}")  # where the team keeps its tenants, here
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
    assert result.output.count("\n") == 1 and "\x1b" not in result.output
    assert "jobs.invoice.keys: row 2: the key 'evil\\x1b[31m' holds a control character" in (
        result.output
    )
    assert sql("SELECT count(*) FROM {schema}.runs") == [(0,)]


@pytest.mark.slow
def test_16_racing_ticks_run_every_key_and_period_once(project: Project, sql: Any) -> None:
    """16 tick processes at once over KEYS x DAYS due periods (catchup = all): each (key,
    period) ran exactly once, counted from the job's own side effects."""
    keys, days = 500, 10
    base = today(sql)
    log = project.path / "ran"
    project.write(
        job_toml(
            "invoice",
            "daily",
            day(base - timedelta(days=days)),
            keys=[f"t{n:03}" for n in range(keys)],
            command=["sh", "-c", f'echo "$0 $1" >> {log}', "{key}", "{period}"],
        )
    )
    ticks = [project.spawn("-q", "tick", "--json") for _ in range(16)]
    for proc in ticks:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    ran = Counter(logged(log))
    assert len(ran) == keys * days and set(ran.values()) == {1}
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


def test_a_ledger_from_before_keys_migrates_with_its_runs_and_answers_alike(
    project: Project, sql: Any, schema: str
) -> None:
    """A ledger made by the migrations before 0014 (runs, history, coverage, a change by hand)
    reaches the keyed schema with every row kept as the unkeyed job's (key ''), and its scan
    gives the same answer before and after."""
    project.write(job_toml("billing", "daily", "2026-03-01", command=["true"]))
    assert (
        project.cli("-q", "replay", "--since", "2026-03-01", "--until", "2026-03-05").exit_code == 0
    )
    assert (
        project.cli("-q", "mark", "billing", "2026-03-06", "--skip", "--reason", "closed").exit_code
        == 0
    )
    before = run(project, "scan", "--until", "2026-03-09")
    counts = sql(
        "SELECT (SELECT count(*) FROM {schema}.runs), (SELECT count(*) FROM {schema}.history), "
        "(SELECT count(*) FROM {schema}.events), (SELECT count(*) FROM {schema}.coverage)"
    )
    # back to the schema of 0013: what a ledger migrated yesterday had
    sql("DROP TABLE {schema}.job_keys")
    sql("ALTER TABLE {schema}.runs DROP CONSTRAINT runs_pkey")
    sql("ALTER TABLE {schema}.runs ADD PRIMARY KEY (job_id, period_start)")
    sql("ALTER TABLE {schema}.history DROP CONSTRAINT history_identity")
    sql(
        "ALTER TABLE {schema}.history ADD CONSTRAINT history_job_id_period_start_attempt_key "
        "UNIQUE (job_id, period_start, attempt)"
    )
    for table in ("runs", "history", "events"):
        sql(f"ALTER TABLE {{schema}}.{table} DROP COLUMN key")
    sql("DELETE FROM {schema}.schema_version WHERE version >= 14")
    migrated = project.cli("migrate")
    assert migrated.exit_code == 0 and "0014_keys" in migrated.output
    assert (
        sql(
            "SELECT (SELECT count(*) FROM {schema}.runs), (SELECT count(*) FROM {schema}.history), "
            "(SELECT count(*) FROM {schema}.events), (SELECT count(*) FROM {schema}.coverage)"
        )
        == counts
    )
    assert sql("SELECT DISTINCT key FROM {schema}.runs") == [("",)]
    after = run(project, "scan", "--until", "2026-03-09")
    assert {k: v for k, v in after.items() if k != "generated_at"} == {
        k: v for k, v in before.items() if k != "generated_at"
    }
    again = run(project, "replay", "--since", "2026-03-01", "--until", "2026-03-09")
    assert [p["label"] for p in again["periods"]] == ["2026-03-05", "2026-03-07", "2026-03-08"]


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
