"""How fast replay works through a backlog, next to the bare statements and to a task queue.

    uv run --group bench python benchmarks/replay.py [--periods 1000] [--sleepers 80] [--repeat 3]

On the embedded PostgreSQL (or CATCHUP_DSN), in one run:
  floor   the bare statements a replay worker sends (sql/queries/claims.sql: a claim, then one
          finish_then_claim per period) on one connection, without catchup around them;
  call    replay of a no-op Python `call` job (operator:truth), 1 and 4 workers, with
          overlap = "forbid" (the default: one period of the job at a time, so 4 workers
          cannot run faster than 1) and overlap = "allow";
  command the same with a no-op `command` job (`true`);
  sleep   replay of a job that sleeps 50 ms, 1 and 4 workers (overlap = "allow");
  peer    procrastinate (the `bench` dependency group) running as many no-op tasks with one
          worker, in a database of its own.
Every rate is the median of --repeat runs. The last line holds the ratios, each beside its
target with "met" or "MISSED": call/floor (forbid, 1 worker; target >= 0.5), sleep 4 workers
/ 1 worker (target >= 3.5), and call/peer (forbid, 1 worker, against procrastinate's one
worker; target >= 2).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import sql

from catchup.config.loading import Config, Job
from catchup.ledger import ClaimRequest, FinishFields
from catchup.postgres import database as db
from catchup.replay.runs import replay
from catchup.schedule import Period, Timeline, parse_schedule
from catchup.session import Session

HOURLY = parse_schedule("hourly")


def fresh(target: db.Target, schema: str, job: Job | None = None) -> Session:
    jobs = {job.name: job} if job else {}
    session = Session(Config(path=None, jobs=jobs, schema=schema), target, prepare=False)
    session.conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    session.ledger.migrate()
    return session


def make_job(n: int, **keys: Any) -> Job:
    anchor = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=n + 2)
    return Job(
        name="bench",
        schedule=HOURLY,
        start=anchor,
        timeline=Timeline.single(HOURLY, anchor),
        **keys,
    )


def floor(target: db.Target, n: int) -> float:
    """The statements a replay worker sends, bare: the first claim, then per period one
    finish_then_claim (its finish and the next period's claim in one transaction), then the
    last finish."""
    session = fresh(target, "bench_floor")
    ledger = session.ledger
    job_id = ledger.register_jobs(["bench"])["bench"].id
    anchor = datetime(2020, 1, 1, tzinfo=UTC)

    def request(k: int) -> ClaimRequest:
        period = Period(anchor + timedelta(hours=k), anchor + timedelta(hours=k + 1))
        return ClaimRequest(job_id, period, "bench", timedelta(minutes=1), 3, allow_overlap=False)

    done: FinishFields = {
        "status": "succeeded",
        "history_status": "succeeded",
        "counts_as_failure": False,
        "backoff": timedelta(0),
        "exit_code": 0,
        "error": None,
        "output_tail": None,
    }
    started = time.perf_counter()
    first = request(0)
    claim = ledger.claim(
        job_id, first.period, owner="bench", lease=first.lease, max_attempts=3, allow_overlap=False
    )
    for k in range(n):
        assert claim is not None
        start = anchor + timedelta(hours=k)
        if k == n - 1:
            assert ledger.finish(job_id, start, claim.attempt, **done) is not None
        else:
            finished, claim = ledger.finish_then_claim(
                job_id, start, claim.attempt, request(k + 1), **done
            )
            assert finished is not None
    elapsed = time.perf_counter() - started
    session.close()
    return n / elapsed


def catchup_rate(target: db.Target, n: int, workers: int, **keys: object) -> float:
    job = make_job(n, **keys)
    session = fresh(target, "bench_replay", job)
    started = time.perf_counter()
    result = replay(session, [job], since=job.anchor, until=None, limit=n, workers=workers)
    elapsed = time.perf_counter() - started
    session.close()
    assert result.totals["succeeded"] == n, result.totals
    return n / elapsed


def peer(target: db.Target, n: int) -> float:
    import procrastinate
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    with psycopg.connect(target.conninfo, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS bench_procrastinate")
        admin.execute("CREATE DATABASE bench_procrastinate")
    params = conninfo_to_dict(target.conninfo)
    params["dbname"] = "bench_procrastinate"
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=make_conninfo("", **params))
    )

    @app.task(name="noop")  # type: ignore[untyped-decorator, unused-ignore]
    def noop() -> None:
        return None

    with app.open():
        app.schema_manager.apply_schema()
        for start in range(0, n, 500):
            noop.batch_defer(*({} for _ in range(min(500, n - start))))
        started = time.perf_counter()
        app.run_worker(wait=False, concurrency=1, install_signal_handlers=False)
        elapsed = time.perf_counter() - started
    return n / elapsed


def median(measure: Callable[[], float], repeat: int) -> float:
    return statistics.median(measure() for _ in range(repeat))


def verdict(ratio: float, target: float) -> str:
    return "met" if ratio >= target else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--periods", type=int, default=1000)
    parser.add_argument("--sleepers", type=int, default=80)
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (the median)")
    args = parser.parse_args()
    n, repeat = args.periods, args.repeat
    target = db.resolve(None, None)
    bare = median(lambda: floor(target, n), repeat)
    print(f"floor: bare claim path statements, one connection: {bare:.0f} periods/s", flush=True)
    rates = {}
    for kind, keys in (("call", {"call": "operator:truth"}), ("command", {"command": ("true",)})):
        for overlap in ("forbid", "allow"):
            for workers in (1, 4):
                measure = functools.partial(
                    catchup_rate, target, n, workers, overlap=overlap, **keys
                )
                rate = median(measure, repeat)
                rates[kind, overlap, workers] = rate
                print(
                    f"{kind} job, overlap = {overlap}, {workers} worker(s): {rate:.0f} periods/s "
                    f"({rate / bare:.2f}x floor)",
                    flush=True,
                )

    def sleepers(workers: int) -> float:
        return catchup_rate(
            target, args.sleepers, workers, command=("sleep", "0.05"), overlap="allow"
        )

    sleep1 = median(lambda: sleepers(1), repeat)
    sleep4 = median(lambda: sleepers(4), repeat)
    print(f"50 ms job: 1 worker {sleep1:.1f}/s, 4 workers {sleep4:.1f}/s", flush=True)
    try:
        theirs = peer(target, n)
        print(f"peer: procrastinate, one worker, no-op tasks: {theirs:.0f} tasks/s", flush=True)
        ours = rates["call", "forbid", 1] / theirs
        versus = f" call/peer={ours:.2f} ({verdict(ours, 2.0)} >= 2)"
    except ImportError:
        versus = " (peer skipped: uv sync --group bench)"
    call, scale = rates["call", "forbid", 1] / bare, sleep4 / sleep1
    print(
        f"ratios: call/floor={call:.2f} ({verdict(call, 0.5)} >= 0.5) "
        f"command/floor={rates['command', 'forbid', 1] / bare:.2f} "
        f"sleep4/sleep1={scale:.2f} ({verdict(scale, 3.5)} >= 3.5){versus}"
    )


if __name__ == "__main__":
    main()
