"""Batched claims on a real ledger: ``claim_periods()`` gives each period the answer its own
claim would (every state a row can be in, under every rule a claim takes), ``finish_periods()``
is fenced per attempt, a replay of a keyed job claims its keys in batches and runs each
(key, period) once, and the periods waiting in a batch keep their leases while a slow one runs
(another replica cannot take them over)."""

from __future__ import annotations

import itertools
import signal
import time
import zlib
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from fix_db import Database
from fix_project import Project, job_toml

from catchup.claims import batch as batch_module
from catchup.config.loading import Config, make_job
from catchup.ledger import FinishFields, Ledger, Many
from catchup.postgres import database as db
from catchup.replay.pool import run_planned
from catchup.results import Planned
from catchup.schedule import Timeline, parse_schedule
from catchup.session import Session
from catchup.vocabulary import PeriodState

DAY = Timeline.single(parse_schedule("daily"), datetime(2026, 10, 1, tzinfo=UTC))
LEASE = timedelta(seconds=30)
SUCCEEDED: FinishFields = dict(
    status="succeeded",
    history_status="succeeded",
    counts_as_failure=False,
    backoff=timedelta(seconds=1),
    exit_code=0,
    error=None,
    output_tail=None,
)


@pytest.fixture
def ledger(database: Database, schema: str) -> Any:
    conn = psycopg.connect(database.conninfo, autocommit=True)
    ledger = Ledger(conn, schema)
    ledger.migrate()
    yield ledger
    conn.close()


# a row's state before the claim: (status, attempt, failures, lease from now, retry from now),
# with None for no row at all
STATES: dict[str, tuple[str, int, int, int | None, int | None] | None] = {
    "no row": None,
    "succeeded": ("succeeded", 1, 0, None, None),
    "waived": ("waived", 1, 0, None, None),
    "failed, backing off": ("failed", 1, 1, None, 600),
    "failed, backoff over": ("failed", 1, 1, None, -5),
    "failed, no attempts left": ("failed", 3, 3, None, -5),
    "running, live lease": ("running", 1, 0, 600, None),
    "running, lease expired": ("running", 1, 0, -5, None),
    "running, expired, last attempt": ("running", 3, 2, -5, None),
    # a person deleted the row (to run it again): its two attempts stay on record
    "deleted, its history kept": ("deleted", 2, 1, None, None),
}
# what else holds the job back: another period of the same key running, another key's
# period running, the job paused, the key paused
AROUND = ("nothing", "same key runs another period", "another key runs", "job paused", "key paused")
RULES = list(itertools.product((False, True), repeat=4))  # overlap, whole job, backoff, exhausted


def _put(sql: Any, job_id: int, key: str, day: int, state: tuple[Any, ...]) -> None:
    status, attempt, failures, lease, retry = state
    start = DAY.first + timedelta(days=day)
    if status == "deleted":
        sql(
            "INSERT INTO {schema}.history (job_id, key, period_start, attempt, status, owner,"
            " started_at) SELECT %s, %s, %s, a, 'failed', 'before', clock_timestamp()"
            " FROM generate_series(1, %s) AS a",
            (job_id, key, start, attempt),
        )
        return
    sql(
        "INSERT INTO {schema}.runs (job_id, key, period_start, period_end, status, attempt,"
        " failures, owner, claimed_at, lease_expires_at, retry_after, finished_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, 'before', clock_timestamp(),"
        " clock_timestamp() + make_interval(secs => %s),"
        " clock_timestamp() + make_interval(secs => %s),"
        " CASE WHEN %s <> 'running' THEN clock_timestamp() END)",
        (
            job_id,
            key,
            start,
            start + timedelta(days=1),
            status,
            attempt,
            failures,
            lease,
            retry,
            status,
        ),
    )
    if status == "waived":
        return  # waived by hand: no attempt
    sql(
        "INSERT INTO {schema}.history (job_id, key, period_start, attempt, status, owner,"
        " started_at) VALUES (%s, %s, %s, %s, %s, 'before', clock_timestamp())",
        (job_id, key, start, attempt, "running" if status == "running" else status),
    )


def _arrange(sql: Any, job_id: int, state: Any, around: str) -> None:
    if state is not None:
        _put(sql, job_id, "k", 0, state)
    live = ("running", 1, 0, 600, None)
    if around == "same key runs another period":
        _put(sql, job_id, "k", 1, live)
    elif around == "another key runs":
        _put(sql, job_id, "other", 0, live)
    elif around == "job paused":
        sql("UPDATE {schema}.jobs SET paused_at = clock_timestamp() WHERE id = %s", (job_id,))
    elif around == "key paused":
        sql(
            "INSERT INTO {schema}.job_keys (job_id, key, expected_from, first_seen, last_seen,"
            " paused_at) VALUES (%s, 'k', %s, %s, %s, clock_timestamp())",
            (job_id, DAY.first, DAY.first, DAY.first),
        )


def _after(sql: Any, job_id: int) -> list[tuple[Any, ...]]:
    runs = sql(
        "SELECT key, period_start, status, attempt, failures, owner FROM {schema}.runs"
        " WHERE job_id = %s ORDER BY 1, 2",
        (job_id,),
    )
    history = sql(
        "SELECT key, period_start, attempt, status, owner FROM {schema}.history"
        " WHERE job_id = %s ORDER BY 1, 2, 3",
        (job_id,),
    )
    return list(runs) + list(history)


def test_a_batch_claims_each_period_as_its_own_claim_would(ledger: Ledger, sql: Any) -> None:
    """Every state a row can be in, beside everything that can hold a claim back, under every
    combination of a claim's rules: claim_periods() of that period (with another key's new
    period beside it in the batch) claims it exactly when claim_period() does, as the same
    attempt, leaving the same rows behind."""
    period = DAY.period(DAY.first)
    compared = 0
    for n, (state_name, around) in enumerate(itertools.product(STATES, AROUND)):
        for m, (overlap, whole, backoff, exhausted) in enumerate(RULES):
            one, many = (f"j{n}-{m}-one", f"j{n}-{m}-many")
            ids = ledger.register_jobs([one, many])
            for name in (one, many):
                _arrange(sql, ids[name].id, STATES[state_name], around)
            rules: dict[str, Any] = dict(
                owner="me",
                lease=LEASE,
                max_attempts=3,
                allow_overlap=overlap,
                ignore_backoff=backoff,
                retry_exhausted=exhausted,
                whole_job=whole,
            )
            single = ledger.claim(ids[one].id, period, key="k", **rules)
            batch = ledger.claim_many(
                Many(
                    ids[many].id,
                    ["k"],
                    [period.start],
                    [period.end],
                    **rules,
                )
            )
            case = (state_name, around, overlap, whole, backoff, exhausted)
            assert (single is not None) == (0 in batch), case
            if single is not None:
                assert single.attempt == batch[0].attempt, case
            assert _after(sql, ids[one].id) == _after(sql, ids[many].id), case
            compared += 1
    assert compared == len(STATES) * len(AROUND) * len(RULES)


def test_a_batch_claims_one_period_of_a_key_at_a_time_when_overlap_is_forbidden(
    ledger: Ledger,
) -> None:
    """Two periods of one key in one batch: with overlap forbidden only the older is claimed
    (neither's overlap check would see the other); of two keys, both; forbid-job: one only."""
    job_id = ledger.register_jobs(["invoice"])["invoice"].id
    first, second = DAY.first, DAY.first + timedelta(days=1)

    def batch(keys: list[str], starts: list[datetime], **rules: Any) -> list[int]:
        many = Many(
            job_id,
            keys,
            starts,
            [s + timedelta(days=1) for s in starts],
            "me",
            LEASE,
            3,
            rules.pop("allow_overlap", False),
            **rules,
        )
        return sorted(ledger.claim_many(many))

    assert batch(["a", "a"], [second, first]) == [1]  # the older one
    assert batch(["b", "c"], [first, first]) == [0, 1]
    assert batch(["d", "d"], [first, second], allow_overlap=True) == [0, 1]
    assert batch(["e", "f"], [first, first], whole_job=True) == []  # a, b, c, d run


def test_a_batch_finish_is_fenced_per_attempt_and_applied_once(ledger: Ledger, sql: Any) -> None:
    job_id = ledger.register_jobs(["invoice"])["invoice"].id
    start = DAY.first
    keys = ["a", "b", "c"]
    claims = ledger.claim_many(
        Many(job_id, keys, [start] * 3, [start + timedelta(days=1)] * 3, "me", LEASE, 3, False)
    )
    assert sorted(claims) == [0, 1, 2]
    # b's lease ran out and another runner took it over as attempt 2
    sql(
        "UPDATE {schema}.runs SET lease_expires_at = clock_timestamp() - interval '1 s'"
        " WHERE key = 'b'"
    )
    taken = ledger.claim(
        job_id,
        DAY.period(start),
        owner="other",
        lease=LEASE,
        max_attempts=3,
        allow_overlap=False,
        key="b",
    )
    assert taken is not None and taken.attempt == 2
    done = [(k, start, claims[n].attempt, SUCCEEDED) for n, k in enumerate(keys)]
    recorded = ledger.finish_many(job_id, done, timedelta(seconds=1), timedelta(hours=6))
    assert sorted(recorded) == [0, 2]  # b's attempt 1 was fenced off
    again = ledger.finish_many(job_id, done, timedelta(seconds=1), timedelta(hours=6))
    assert again == {}  # a finish sent twice is applied once
    rows = sql("SELECT key, status, attempt, owner FROM {schema}.runs ORDER BY key")
    assert rows == [
        ("a", "succeeded", 1, "me"),
        ("b", "running", 2, "other"),
        ("c", "succeeded", 1, "me"),
    ]


def _tenants(project: Project, keys: int, body: str, **extra: object) -> None:
    """A daily job of ``keys`` keys whose call is ``body``, in a module named for this test
    (a replay run in this process imports it: another test's module must not answer)."""
    module = f"tenants_{zlib.crc32(str(project.path).encode()):08x}"
    (project.path / f"{module}.py").write_text("import os, time\n\n\ndef run(ctx):\n" + body)
    project.write(
        job_toml(
            "invoice",
            "daily",
            "2026-10-01",
            keys=[f"t{n:03}" for n in range(keys)],
            call=f"{module}:run",
            **extra,
        )
    )


def test_a_replay_of_every_key_claims_in_batches_and_runs_each_once(
    project: Project, sql: Any
) -> None:
    """300 keys x 2 days of a no-op call job: claimed a batch at a time (the history shows far
    fewer claim instants than periods), each (key, period) run once, as attempt 1."""
    log = project.path / "ran"
    _tenants(
        project,
        300,
        f"    fd = os.open({str(log)!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT)\n"
        "    os.write(fd, f'{ctx.key} {ctx.period}\\n'.encode())\n"
        "    os.close(fd)\n",
    )
    result = project.cli("-q", "replay", "--since", "2026-10-01", "--until", "2026-10-03")
    assert result.exit_code == 0, result.output
    lines = log.read_text().splitlines()
    assert len(lines) == 600 and len(set(lines)) == 600
    rows = sql("SELECT status, attempt, count(*) FROM {schema}.runs GROUP BY 1, 2")
    assert rows == [("succeeded", 1, 600)]
    # a batch's claims are one statement: they share its transaction's start
    ((claims,),) = sql("SELECT count(DISTINCT xmin::text) FROM {schema}.history WHERE attempt = 1")
    assert claims < 60, claims


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_periods_waiting_in_a_batch_keep_their_leases_while_a_slow_one_runs(
    project: Project, sql: Any, ledger: Ledger
) -> None:
    """A batch whose third key runs past the lease: the keys waiting behind it are renewed with
    it, so another replica's claims of them are refused the whole time, and the batch runs each
    as attempt 1."""
    _tenants(
        project,
        10,
        "    time.sleep(3.5 if ctx.key == 't004' else 0.02)\n",
        lease="2s",
    )
    replay = project.spawn("-q", "replay", "--since", "2026-10-01", "--until", "2026-10-02")
    period = DAY.period(DAY.first)
    deadline = time.monotonic() + 30
    while not sql("SELECT 1 FROM {schema}.runs WHERE key = 't004' AND status = 'running'"):
        assert time.monotonic() < deadline and replay.poll() is None, "t004 never ran"
        time.sleep(0.05)
    behind = [
        k for (k,) in sql("SELECT key FROM {schema}.runs WHERE status = 'running' AND key > 't004'")
    ]
    assert behind, "nothing was claimed with t004"
    job_id = ledger.job_rows(["invoice"])["invoice"].id
    taken = []
    deadline = time.monotonic() + 60
    while replay.poll() is None:
        assert time.monotonic() < deadline, "the replay did not end"
        for key in behind:
            status = sql("SELECT status FROM {schema}.runs WHERE key = %s", (key,))
            if status == [("running",)]:
                claim = ledger.claim(
                    job_id,
                    period,
                    owner="other",
                    lease=LEASE,
                    max_attempts=3,
                    allow_overlap=False,
                    key=key,
                )
                if claim is not None:
                    taken.append(key)
        time.sleep(0.1)
    assert replay.returncode == 0
    assert taken == []
    rows = sql("SELECT status, attempt, count(*) FROM {schema}.runs GROUP BY 1, 2")
    assert rows == [("succeeded", 1, 10)]


def _running_batch(project: Project, sql: Any, keys: int, seconds: float) -> Any:
    """A replay of one day of ``keys`` keys whose calls take ``seconds`` each, started and
    waited on until some have succeeded and a batch is claimed beyond them."""
    log = project.path / "ran"
    _tenants(
        project,
        keys,
        f"    time.sleep({seconds})\n"
        f"    fd = os.open({str(log)!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT)\n"
        "    os.write(fd, f'{ctx.key}\\n'.encode())\n"
        "    os.close(fd)\n",
        lease="3s",
    )
    replay = project.spawn("-q", "replay", "--since", "2026-10-01", "--until", "2026-10-02")
    deadline = time.monotonic() + 60
    while True:
        ((done, running),) = sql(
            "SELECT count(*) FILTER (WHERE status = 'succeeded'),"
            " count(*) FILTER (WHERE status = 'running') FROM {schema}.runs"
        )
        if done >= 3 and running >= 3:
            return replay
        assert time.monotonic() < deadline and replay.poll() is None, (done, running)
        time.sleep(0.02)


def _replay_again(project: Project) -> None:
    """The replay after, in a process of its own."""
    again = project.spawn("-q", "replay", "--since", "2026-10-01", "--until", "2026-10-02")
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, out + err


@pytest.mark.slow  # seconds of processes: once, on PostgreSQL 18
def test_sigterm_mid_batch_gives_the_unstarted_periods_back(
    project: Project, sql: Any, ledger: Ledger
) -> None:
    """SIGTERM while a batch runs: the running call is asked to stop, the periods claimed with
    it that never started are given back at once (an interrupted attempt, no failure counted,
    claimable now), and nothing is left running."""
    replay = _running_batch(project, sql, 40, 0.1)
    replay.send_signal(signal.SIGTERM)
    replay.communicate(timeout=60)
    assert replay.returncode != 0
    rows = sql(
        "SELECT status, interrupted, failures, count(*) FROM {schema}.runs GROUP BY 1, 2, 3"
        " ORDER BY 1"
    )
    states = {(status, interrupted, failures) for status, interrupted, failures, _ in rows}
    assert states <= {("succeeded", False, 0), ("failed", True, 0)}, rows
    assert ("failed", True, 0) in states, rows  # some were given back unstarted
    _replay_again(project)
    assert sql("SELECT status, count(*) FROM {schema}.runs GROUP BY 1") == [("succeeded", 40)]


@pytest.mark.faults
def test_sigkill_mid_batch_leaves_periods_the_next_replay_takes_over(
    project: Project, sql: Any, ledger: Ledger
) -> None:
    """SIGKILL while a batch runs: what it claimed and did not record waits for its leases to
    run out, then the next replay takes each over as attempt 2; every period ends succeeded,
    and a period ran twice only if it ran in the last moments before the kill."""
    replay = _running_batch(project, sql, 40, 0.05)
    replay.kill()
    replay.communicate(timeout=30)
    ((left,),) = sql("SELECT count(*) FROM {schema}.runs WHERE status = 'running'")
    assert left > 0  # claimed with the batch, not recorded
    deadline = time.monotonic() + 30
    while sql(
        "SELECT 1 FROM {schema}.runs WHERE status = 'running'"
        " AND lease_expires_at > clock_timestamp()"
    ):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    _replay_again(project)
    assert sql("SELECT status, count(*) FROM {schema}.runs GROUP BY 1") == [("succeeded", 40)]
    ran = Counter((project.path / "ran").read_text().split())
    assert set(ran) == {f"t{n:03}" for n in range(40)}
    twice = [key for key, n in ran.items() if n > 1]
    # at most what ended in the last FLUSH_SECONDS before the kill (and the one running)
    assert len(twice) <= 10, twice


def test_a_call_that_times_out_in_a_batch_fails_alone(
    project: Project, sql: Any, ledger: Ledger
) -> None:
    """One key's call outlives its timeout and ignores being asked to stop: it fails as timed
    out, the run moves on without waiting for it, and the keys claimed with it after it still
    run in the same replay, each once."""
    _tenants(
        project,
        12,
        "    time.sleep(4 if ctx.key == 't006' else 0.01)\n",
        timeout="1s",
        kill_grace="1s",
    )
    _replay_again_expecting(project, 1)
    rows = sql("SELECT key, status, attempt FROM {schema}.runs ORDER BY key")
    assert [r for r in rows if r[1] != "succeeded"] == [("t006", "failed", 1)]
    assert len(rows) == 12 and {r[2] for r in rows} == {1}
    (error,) = sql("SELECT error FROM {schema}.runs WHERE key = 't006'")[0]
    assert error == "timed out after 1s"


def _replay_again_expecting(project: Project, code: int) -> None:
    again = project.spawn("-q", "replay", "--since", "2026-10-01", "--until", "2026-10-02")
    out, err = again.communicate(timeout=120)
    assert again.returncode == code, out + err


def test_a_caller_that_fails_mid_batch_strands_nothing(
    database: Database, schema: str, sql: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The callback told of each outcome fails (its output went away, say) while a batch of
    keys runs: the failure reaches the caller, and nothing is left running: what ran is
    recorded, what was claimed and not started is given back (no failure counted)."""
    keys = [f"t{n:03}" for n in range(40)]
    # A batch is sized from how long its first period took: under CI's load a 70 ms stall of
    # that 1 ms call sized the next batch at 7, which ended as the 8th outcome was told, and
    # nothing waited (the flake of 2026-12-08, made again by sleeping 70 ms there). Sized for
    # a quarter of the lease instead, the batch holds the rest unless that call stalled 1.6 s.
    monkeypatch.setattr(batch_module, "BATCH_SECONDS", 15.0)

    def call(ctx: Any) -> None:
        # the first keys are quick (so the rest are claimed in a batch), the rest slow enough
        # that the caller fails while most of that batch waits
        time.sleep(0.2 if ctx.key >= "t010" else 0.001)

    job = make_job("invoice", "daily", "2026-10-01", call=call, keys=keys)
    target = db.resolve(database.conninfo, None, embedded_allowed=False)
    period = job.timeline.period(DAY.first)
    items = [Planned(job.for_key(k), period, PeriodState.missing) for k in keys]
    told: list[str] = []

    def tell(outcome: Any) -> None:
        told.append(outcome.key)
        if len(told) == 8:
            raise BrokenPipeError("the output went away")

    with Session(Config(path=None, jobs={job.name: job}, schema=schema), target) as session:
        with pytest.raises(BrokenPipeError):
            run_planned(session, iter(items), planned=40, workers=1, on_done=tell)
    rows = sql(
        "SELECT status, interrupted, failures, count(*) FROM {schema}.runs GROUP BY 1, 2, 3"
        " ORDER BY 1"
    )
    assert {(s, i, f) for s, i, f, _ in rows} <= {("succeeded", False, 0), ("failed", True, 0)}
    assert ("failed", True, 0) in {(s, i, f) for s, i, f, _ in rows}, rows
