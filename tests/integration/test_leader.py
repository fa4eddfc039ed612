"""The scheduler's lead, on a real ledger: the lease and term of `Ledger.lead` (taken, kept,
lost when it runs out, handed back, one winner among standbys that ask at once), and the term
fence of `catchup.scheduler.leading.schedule`: a leader whose term was taken renews before its next
tick, finds the term gone, and starts nothing under it."""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from fix_db import Database
from fix_processes import wait_for

from catchup.ledger import Ledger
from catchup.postgres import database as db
from catchup.scheduler.inflight import InFlight
from catchup.scheduler.leading import Fence, LeadKeeper, schedule


def expire(ledger: Ledger) -> None:
    """Wait (bounded) until the lead's lease has run out on the database clock."""
    wait_for(lambda: not ledger.leader_now().live, timeout=10, what="the lease to run out")  # type: ignore[union-attr]


def test_the_lead_is_taken_kept_lost_and_handed_back(ledger: Ledger) -> None:
    short, long = timedelta(seconds=1), timedelta(seconds=60)
    first = ledger.lead("a", 0, short)
    assert first is not None and first.term == 1
    assert ledger.lead("b", 0, long) is None  # a leads: b stands by
    kept = ledger.lead("a", 1, short)
    assert kept is not None and kept.term == 1 and kept.since == first.since
    expire(ledger)
    taken = ledger.lead("b", 0, long)
    assert taken is not None and taken.term == 2
    # a wakes up with its old term: gone, and it cannot take it back while b's lease is live
    assert ledger.lead("a", 1, short) is None
    assert ledger.lead("a", 0, short) is None
    now = ledger.leader_now()
    assert now is not None and (now.holder, now.term, now.live) == ("b", 2, True)
    # handed back: the next to ask leads at once, as the next term
    assert ledger.resign("b", 2) and not ledger.resign("b", 2)
    again = ledger.lead("a", 1, short)
    assert again is not None and again.term == 3
    # a lease that ran out with nobody taking it: its holder asking again starts a new term
    expire(ledger)
    renewed = ledger.lead("a", 3, short)
    assert renewed is not None and renewed.term == 4 and renewed.since > again.since


def test_of_standbys_asking_at_once_one_leads(
    database: Database, schema: str, ledger: Ledger
) -> None:
    won: list[int] = []
    gate = threading.Barrier(8)

    def ask(n: int) -> None:
        with psycopg.connect(database.conninfo, autocommit=True) as conn:
            gate.wait()
            if Ledger(conn, schema).lead(f"r{n}", 0, timedelta(seconds=60)) is not None:
                won.append(n)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(won) == 1, won


def test_a_leader_whose_term_was_taken_starts_no_tick_under_it(
    database: Database, schema: str, ledger: Ledger, sql: Any
) -> None:
    """The term fence: the lead is taken from under a running scheduler right after its own
    renewal (so its keeper thread would not notice for a third of the lease); at its next wake
    it renews before ticking, finds its term gone, and ticks no more."""
    target = db.Target(database.conninfo, "test")
    ticks: list[tuple[int, float]] = []
    stopping = threading.Event()
    said: list[str] = []

    def tick(
        fence: Fence, interrupted: threading.Event, term: int, lane: InFlight, workers: int
    ) -> None:
        ticks.append((term, time.monotonic()))

    lane = InFlight(2)

    runner = threading.Thread(
        target=schedule,
        args=(target, schema, tick, lambda: 0.3),
        kwargs={
            "lease": 30.0,
            "grace": 1.0,
            "stopping": stopping,
            "say": said.append,
            "lanes": lambda: {lane.name: lane},
        },
    )
    runner.start()
    try:
        wait_for(lambda: len(ticks) >= 2, timeout=20, what="the leader's ticks")
        seen = ledger.leader_now()
        assert seen is not None and seen.term == 1
        # right after a renewal (the keeper's, or the one before a tick): take the lead away
        wait_for(
            lambda: (n := ledger.leader_now()) is not None and n.renewed_at > seen.renewed_at,
            timeout=20,
            what="a renewal",
        )
        sql(
            "UPDATE {schema}.leader SET holder = %s, term = term + 1, "
            "expires_at = clock_timestamp() + interval '1 hour'",
            ("someone else",),
        )
        taken = time.monotonic()
        wait_for(lambda: any("term 1 ended" in line for line in said), timeout=20, what="it")
        time.sleep(1)  # three more wake-ups of 0.3 s
        late = [t for term, t in ticks if t > taken + 0.05]
        assert late == [], f"ticked {len(late)} time(s) after its term was taken"
    finally:
        stopping.set()
        runner.join(timeout=30)
    assert not runner.is_alive()


def test_a_leader_whose_connection_was_ended_resumes_its_live_term(
    database: Database, schema: str, ledger: Ledger, sql: Any
) -> None:
    """The server ends the lead's connection: the renewal that meets it fails (it acts as a
    standby meanwhile), and the next, on a new connection, keeps the same term while its lease
    is live: no change of hands for a connection cut."""
    said: list[str] = []
    keeper = LeadKeeper(db.Target(database.conninfo, "test"), schema, "me:1:abc", 30.0, said.append)
    try:
        resumed(keeper, ledger, sql, said)
    finally:
        keeper.close()


def resumed(keeper: LeadKeeper, ledger: Ledger, sql: Any, said: list[str]) -> None:
    assert keeper.renew() == 1
    ended = sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
        ["catchup scheduler me:1:abc"],
    )
    assert ended == [(True,)]  # the lead's connection is named by its holder
    assert keeper.renew() is None
    assert said[-1].startswith("cannot renew the lead (") and said[-1].endswith("a standby")
    assert keeper.renew() == 1
    assert said[-1] == "leading again (term 1, its lease outlived the cut)"
    lead = ledger.leader_now()
    assert lead is not None and (lead.holder, lead.term, lead.live) == ("me:1:abc", 1, True)


def race_to_create(conninfo: str, name: str, racers: int) -> tuple[list[bool], list[str]]:
    """``racers`` connections creating database ``name`` at the same moment: what each
    create_database said, and what any raised."""
    gate = threading.Barrier(racers)
    made: list[bool] = []
    failed: list[str] = []

    def create() -> None:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            gate.wait()
            try:
                made.append(Ledger(conn, "catchup").create_database(name))
            except Exception as exc:
                failed.append(repr(exc))

    threads = [threading.Thread(target=create) for _ in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP DATABASE {}").format(psycopg.sql.Identifier(name)))
    return made, failed


@pytest.mark.superuser
def test_replicas_starting_at_once_create_the_project_database_once(database: Database) -> None:
    """Schedulers (or any commands) started together on a fresh embedded server race to create
    the project's database: one creates it, the others find it made; none fails (the loser of
    the race meets the catalog's unique index, not the "already exists" check)."""
    for round_ in range(5):
        made, failed = race_to_create(database.conninfo, f"race_{os.getpid()}_{round_}", 6)
        assert failed == [] and sorted(made) == [False] * 5 + [True], (failed, made)
