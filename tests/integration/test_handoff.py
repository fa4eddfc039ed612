"""A worker with a backlog claims its next period in the transaction that records its last one
(sql/migrations/0007: finish_then_claim). What that handed-over claim must never do: be left
running when the worker stops, or be lost when the answer to that transaction is."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from fix_db import Database
from fix_project import Project
from fix_proxy import CutAfter

from catchup.config.loading import Config, make_job
from catchup.postgres import database as db
from catchup.replay.pool import run_planned
from catchup.results import Planned
from catchup.session import Session
from catchup.vocabulary import PeriodState

START = datetime(2026, 10, 1, tzinfo=UTC)


def test_a_handed_claim_that_will_not_run_is_given_back(
    database: Database, schema: str, sql: Any
) -> None:
    """Asked to stop right after a period succeeded, the worker holds the next period's claim
    (made with that finish) but has not started it: it records the claim as an interrupted
    attempt, counts no failure, and the period is claimable at once by anyone."""
    ran: list[str] = []
    job = make_job("export", "daily", START, call=lambda ctx: ran.append(ctx.period))
    target = db.resolve(database.conninfo, None, embedded_allowed=False)
    stop = threading.Event()
    items = [
        Planned(job, job.timeline.period(START + timedelta(days=n)), PeriodState.missing)
        for n in range(3)
    ]
    with Session(Config(path=None, jobs={job.name: job}, schema=schema), target) as session:
        batch = run_planned(
            session,
            iter(items),
            planned=3,
            workers=1,
            interrupted=stop,
            on_done=lambda outcome: stop.set(),
        )
    assert ran == ["2026-10-01"]
    assert [(o.label, o.status) for o in batch.outcomes] == [
        ("2026-10-01", "succeeded"),
        ("2026-10-02", "interrupted"),
    ]
    assert batch.outcomes[1].detail == "stopped before it started; left for a retry"
    runs = sql(
        "SELECT period_start, status, attempt, failures, lease_expires_at IS NULL"
        " FROM {schema}.runs ORDER BY period_start"
    )
    assert runs == [
        (START, "succeeded", 1, 0, True),
        (START + timedelta(days=1), "failed", 1, 0, True),
    ]
    assert sql("SELECT attempt, status FROM {schema}.history ORDER BY period_start") == [
        (1, "succeeded"),
        (1, "interrupted"),
    ]
    # claimable again at once, without waiting out a lease or a backoff
    with Session(Config(path=None, jobs={job.name: job}, schema=schema), target) as session:
        again = run_planned(session, iter(items[1:]), planned=2, workers=1)
    assert [(o.status, o.attempt) for o in again.outcomes] == [("succeeded", 2), ("succeeded", 1)]
    assert ran == ["2026-10-01", "2026-10-02", "2026-10-03"]


def test_a_lost_answer_to_finish_then_claim_reclaims_the_claim(
    project: Project, sql: Any, database: Database
) -> None:
    """PostgreSQL commits the finish of the first period and the claim of the second, and the
    worker never hears it: it reconnects, reads the finish back, and adopts the second period's
    claim (it is its own) instead of calling it "running elsewhere" and leaving it to expire.
    Each period runs once, as attempt 1."""
    proxy = CutAfter(database.conninfo, arm=b".finish_then_claim(")
    try:
        log = project.path / "log"
        project.write(
            '[jobs.billing]\nschedule = "daily"\nstart = "2026-01-01"\n'
            f'command = ["sh", "-c", "echo $CATCHUP_PERIOD $CATCHUP_ATTEMPT >> {log}"]\n'
        )
        assert project.cli("migrate").exit_code == 0
        result = project.run(
            "--dsn",
            proxy.dsn(database.conninfo),
            "replay",
            "--since",
            "2026-01-01",
            "--until",
            "2026-01-04",
        )
        assert proxy.cut.is_set(), f"the proxy never saw finish_then_claim: {result}"
        assert result.returncode == 0, (result.stdout, result.stderr)
        assert log.read_text().splitlines() == ["2026-01-01 1", "2026-01-02 1", "2026-01-03 1"]
        assert (
            sql("SELECT status, attempt FROM {schema}.runs ORDER BY period_start")
            == [("succeeded", 1)] * 3
        )
        assert sql("SELECT status FROM {schema}.history") == [("succeeded",)] * 3
    finally:
        proxy.close()


def test_a_next_claim_that_fails_leaves_the_finish_recorded(
    database: Database, schema: str, sql: Any
) -> None:
    """A trigger makes every claim of one job fail inside PostgreSQL. The worker's finish of a
    good period carried that job's claim, so the transaction rolled back whole: the finish is
    sent again on its own (the good period is succeeded, reported so), and the bad job's error
    is its own period's."""
    good = make_job("alpha", "daily", START, call="operator:truth")
    bad = make_job("poison", "daily", START, call="operator:truth")
    config = Config(path=None, jobs={good.name: good, bad.name: bad}, schema=schema)
    target = db.resolve(database.conninfo, None, embedded_allowed=False)
    with Session(config, target) as session:
        session.ledger.register_jobs(["alpha", "poison"])
        sql(
            "CREATE FUNCTION {schema}.poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.job_id = (SELECT id FROM " + schema + ".jobs WHERE name = 'poison') "
            "THEN RAISE EXCEPTION 'poisoned row'; END IF; RETURN NEW; END $$"
        )
        sql(
            "CREATE TRIGGER poison BEFORE INSERT ON {schema}.runs "
            "FOR EACH ROW EXECUTE FUNCTION {schema}.poison()"
        )
        items = [
            Planned(good, good.timeline.period(START), PeriodState.missing),
            Planned(bad, bad.timeline.period(START), PeriodState.missing),
            Planned(good, good.timeline.period(START + timedelta(days=1)), PeriodState.missing),
        ]
        batch = run_planned(session, iter(items), planned=3, workers=1)
    assert [(o.job, o.status) for o in batch.outcomes] == [
        ("alpha", "succeeded"),
        ("poison", "error"),
        ("alpha", "succeeded"),
    ]
    assert "poisoned row" in (batch.outcomes[1].detail or "")
    assert sql("SELECT status, attempt FROM {schema}.runs ORDER BY period_start") == [
        ("succeeded", 1),
        ("succeeded", 1),
    ]
