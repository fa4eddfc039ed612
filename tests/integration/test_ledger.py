"""The claim path on the real PostgreSQL: who may claim what, and which writes are fenced."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from fix_db import Database
from fix_processes import wait_for

from catchup.ledger import Ledger, sqlfiles
from catchup.schedule import Period, Timeline, parse_schedule

DAY = Timeline.single(parse_schedule("daily"), datetime(2026, 10, 1, tzinfo=UTC))
ANCHOR = DAY.first
P1 = DAY.period(ANCHOR)
P2 = DAY.period(P1.end)
LEASE = timedelta(seconds=30)


@pytest.fixture
def ledger(database: Database, schema: str) -> Iterator[Ledger]:
    conn = psycopg.connect(database.conninfo, autocommit=True)
    ledger = Ledger(conn, schema)
    assert ledger.migrate()[0] == "0001_ledger"
    yield ledger
    conn.close()


def job(ledger: Ledger, name: str = "billing") -> int:
    return ledger.register_jobs([name])[name].id


def claim(
    ledger: Ledger,
    job_id: int,
    period: Period = P1,
    *,
    overlap: bool = False,
    max_attempts: int = 3,
    owner: str = "test",
) -> Any:
    return ledger.claim(
        job_id, period, owner=owner, lease=LEASE, max_attempts=max_attempts, allow_overlap=overlap
    )


def finish(
    ledger: Ledger,
    job_id: int,
    attempt: int,
    status: str = "succeeded",
    period: Period = P1,
    backoff: timedelta = timedelta(0),
) -> Any:
    failed = status == "failed"
    return ledger.finish(
        job_id,
        period.start,
        attempt,
        status=status,
        history_status=status,
        counts_as_failure=failed,
        backoff=backoff,
        exit_code=int(failed),
        error="boom" if failed else None,
        output_tail=None,
    )


def expire_lease(sql: Callable[..., Any], period: Period = P1) -> None:
    """Stand-in for the passage of time: the lease ran out a second ago (database clock)."""
    sql(
        "UPDATE {schema}.runs SET lease_expires_at = clock_timestamp() - interval '1 second' "
        "WHERE period_start = %s",
        [period.start],
    )


def test_migrate_twice_is_a_no_op(ledger: Ledger) -> None:
    assert ledger.migrate() == []
    assert ledger.version() == len(sqlfiles.migrations())


def test_job_ids_are_stable(ledger: Ledger) -> None:
    first = ledger.register_jobs(["a", "b"])
    again = ledger.register_jobs(["b", "a", "c"])
    assert first["a"].id == again["a"].id and first["b"].id == again["b"].id
    assert len({row.id for row in again.values()}) == 3


def test_new_period_is_claimed_once(ledger: Ledger) -> None:
    job_id = job(ledger)
    first = claim(ledger, job_id)
    assert first is not None and first.attempt == 1
    assert claim(ledger, job_id) is None  # live lease: nobody else gets it


def test_succeeded_period_is_never_claimed(ledger: Ledger, sql: Callable[..., Any]) -> None:
    job_id = job(ledger)
    assert finish(ledger, job_id, claim(ledger, job_id).attempt) is not None
    assert claim(ledger, job_id) is None
    expire_lease(sql)  # even a stray lease value does not reopen it
    assert claim(ledger, job_id) is None


def test_failed_period_waits_for_its_backoff(ledger: Ledger, sql: Callable[..., Any]) -> None:
    job_id = job(ledger)
    done = finish(
        ledger, job_id, claim(ledger, job_id).attempt, "failed", backoff=timedelta(hours=1)
    )
    assert done.failures == 1
    assert claim(ledger, job_id) is None  # backing off
    sql("UPDATE {schema}.runs SET retry_after = clock_timestamp() - interval '1 second'")
    retry = claim(ledger, job_id)
    assert retry is not None and retry.attempt == 2


def test_exhausted_period_is_not_claimed(ledger: Ledger) -> None:
    job_id = job(ledger)
    for attempt in (1, 2):
        claimed = claim(ledger, job_id, max_attempts=2)
        assert claimed.attempt == attempt
        finish(ledger, job_id, attempt, "failed")
    assert claim(ledger, job_id, max_attempts=2) is None
    row = ledger.run_row(job_id, P1.start)
    assert row is not None and row.status == "failed" and row.failures == 2


def test_expired_lease_is_taken_over_and_the_old_attempt_is_fenced(
    ledger: Ledger, sql: Callable[..., Any]
) -> None:
    job_id = job(ledger)
    old = claim(ledger, job_id, owner="old")
    expire_lease(sql)
    new = claim(ledger, job_id, owner="new")
    assert new is not None and new.attempt == 2
    # the old runner can neither renew nor finish
    assert ledger.heartbeat(job_id, P1.start, old.attempt, LEASE) is None
    assert finish(ledger, job_id, old.attempt) is None
    assert ledger.save_checkpoint(old.id, old.attempt, "x") is False
    # the new one can
    assert ledger.heartbeat(job_id, P1.start, new.attempt, LEASE) is not None
    assert finish(ledger, job_id, new.attempt) is not None
    history = {row.attempt: row.status for row in ledger.history(job_id)[0]}
    assert history == {1: "lost", 2: "succeeded"}


def test_expired_lease_cannot_be_renewed(ledger: Ledger, sql: Callable[..., Any]) -> None:
    """A lease that ran out is gone even before anyone takes the period over."""
    job_id = job(ledger)
    claimed = claim(ledger, job_id)
    expire_lease(sql)
    assert ledger.heartbeat(job_id, P1.start, claimed.attempt, LEASE) is None


def test_forbid_blocks_other_periods_while_one_runs(
    ledger: Ledger, sql: Callable[..., Any]
) -> None:
    job_id = job(ledger)
    running = claim(ledger, job_id, P1)
    assert claim(ledger, job_id, P2) is None
    blocker = ledger.blocker(job_id, P2.start)
    assert blocker is not None and blocker.period_start == P1.start
    expire_lease(sql, P1)  # a stale run does not block forever
    assert claim(ledger, job_id, P2) is not None
    assert running.attempt == 1


def test_allow_lets_periods_overlap(ledger: Ledger) -> None:
    job_id = job(ledger)
    assert claim(ledger, job_id, P1, overlap=True) is not None
    assert claim(ledger, job_id, P2, overlap=True) is not None


def test_overlap_is_per_job(ledger: Ledger) -> None:
    a, b = job(ledger, "a"), job(ledger, "b")
    assert claim(ledger, a, P1) is not None
    assert claim(ledger, b, P2) is not None


def test_checkpoint_is_fenced_and_kept(ledger: Ledger, sql: Callable[..., Any]) -> None:
    job_id = job(ledger)
    first = claim(ledger, job_id)
    assert ledger.save_checkpoint(first.id, first.attempt, '{"cursor": 1234}')
    expire_lease(sql)
    second = claim(ledger, job_id)
    assert second.checkpoint == '{"cursor": 1234}'


def test_times_come_from_the_database_clock(ledger: Ledger, sql: Callable[..., Any]) -> None:
    job_id = job(ledger)
    before = ledger.now()
    claimed = claim(ledger, job_id)
    after = ledger.now()
    assert before + LEASE <= claimed.lease_expires_at <= after + LEASE


def test_a_finish_sent_twice_is_applied_once(ledger: Ledger) -> None:
    """A finish retried after a lost reply finds its period no longer running: it changes
    nothing (the failure is not counted twice, the backoff not doubled)."""
    job_id = job(ledger)
    first = claim(ledger, job_id)
    once = finish(ledger, job_id, first.attempt, "failed", backoff=timedelta(minutes=5))
    assert once is not None and once.failures == 1
    assert finish(ledger, job_id, first.attempt, "failed", backoff=timedelta(minutes=5)) is None
    assert finish(ledger, job_id, first.attempt, "succeeded") is None
    row = ledger.run_row(job_id, P1.start)
    assert row is not None and (row.status, row.failures) == ("failed", 1)


def test_the_job_lock_serialises_claims_of_one_job(
    ledger: Ledger, database: Database, schema: str
) -> None:
    """The interleaving forced: while one claim's transaction is open (its row not yet
    visible), a claim of another period of the same job waits for the job's lock and then sees
    the first; without the lock both would run at once."""
    job_id = job(ledger)
    other = psycopg.connect(database.conninfo, autocommit=True)
    second_ledger = Ledger(other, schema)
    result: list[Any] = []
    try:
        with ledger.conn.transaction():
            assert claim(ledger, job_id, P1) is not None  # committed only when this block ends
            racer = threading.Thread(target=lambda: result.append(claim(second_ledger, job_id, P2)))
            racer.start()
            pid = other.info.backend_pid

            def waiting_or_done() -> bool:
                if not racer.is_alive():
                    return True
                with psycopg.connect(database.conninfo, autocommit=True) as probe:
                    row = probe.execute(
                        "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]
                    ).fetchone()
                return row is not None and row[0] == "Lock"

            wait_for(waiting_or_done, timeout=30, what="the second claim to wait or finish")
        racer.join(timeout=30)
        assert not racer.is_alive()
        assert result == [None], "a second period of a forbid job was claimed while one ran"
    finally:
        other.close()


def test_the_backoff_doubles_up_to_six_hours(ledger: Ledger) -> None:
    """retry_backoff after the first failure, doubling with each, never more than 6 hours."""
    job_id = job(ledger)
    waits = []
    for _ in range(5):
        claimed = ledger.claim(
            job_id,
            P1,
            owner="t",
            lease=LEASE,
            max_attempts=10,
            allow_overlap=False,
            ignore_backoff=True,
        )
        assert claimed is not None
        done = finish(ledger, job_id, claimed.attempt, "failed", backoff=timedelta(hours=1))
        # finished_at and retry_after are two clock_timestamp() readings microseconds apart
        waits.append((done.retry_after - done.finished_at).total_seconds())
    assert [round(w) for w in waits] == [h * 3600 for h in (1, 2, 4, 6, 6)]


def test_a_stale_period_on_its_last_attempt_waits_for_a_person(
    ledger: Ledger, sql: Callable[..., Any]
) -> None:
    """Its lease ran out on the last allowed attempt: no automatic takeover (it stays stale
    for scan to report), but a replay with --retry-exhausted takes it over."""
    job_id = job(ledger)
    assert claim(ledger, job_id, max_attempts=1) is not None
    expire_lease(sql)
    assert claim(ledger, job_id, max_attempts=1) is None
    again = ledger.claim(
        job_id,
        P1,
        owner="person",
        lease=LEASE,
        max_attempts=1,
        allow_overlap=False,
        retry_exhausted=True,
    )
    assert again is not None and again.attempt == 2
