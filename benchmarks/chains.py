"""What dependencies cost a scan, and how fast `catchup why` answers, on a long chain.

    uv run python benchmarks/chains.py [--scale 1.0] [--repeat 3]

Builds a ledger in a throwaway schema on the embedded PostgreSQL (or CATCHUP_DSN): 10 jobs in a
chain (each `after` the one before), hourly and daily in turn, 3 years each, every period
succeeded but the last two days (missing) and one failed hour a week in the first job. Then:
  - the later scan of the 10 jobs with their `after` against the same jobs without it (the same
    ledger, the same run): ratio target <= 1.5;
  - `why` of the last job's newest due period (blocked down the chain): target <= 0.1 s.
The last line holds the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable
from datetime import timedelta

from psycopg import sql

from catchup import db
from catchup.job import Config, Job
from catchup.scan import scan
from catchup.schedule import Period, Timeline, parse_schedule
from catchup.session import Session
from catchup.upstream import Dependency
from catchup.why import explain_period

JOBS = 10


def median_seconds(action: Callable[[], object], repeat: int) -> float:
    action()  # warm-up: caches, and the scan's watermark
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def build(target: db.Target, schema: str, days: int) -> Config:
    session = Session(Config(path=None, schema=schema), target)
    conn = session.conn
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    session.ledger.migrate()
    now = session.now().replace(hour=0, minute=0, second=0, microsecond=0)
    anchor = now - timedelta(days=days)
    names = [f"job{i}" for i in range(JOBS)]
    ids = session.ledger.register_jobs(names)
    jobs: dict[str, Job] = {}
    for i, name in enumerate(names):
        text, step, count = (
            ("hourly", "1 hour", days * 24) if i % 2 == 0 else ("daily", "1 day", days)
        )
        schedule = parse_schedule(text)
        keep = count - (48 if text == "hourly" else 2)
        status = (
            "CASE WHEN k %% 168 = 3 THEN 'failed' ELSE 'succeeded' END" if i == 0 else "'succeeded'"
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {runs} (job_id, period_start, period_end, status, attempt, failures,"
                " finished_at)"
                " SELECT %(job_id)s, %(anchor)s::timestamptz + k * %(step)s::interval,"
                " %(anchor)s::timestamptz + (k + 1) * %(step)s::interval, " + status + ", 1, 0,"
                " %(anchor)s::timestamptz + (k + 1) * %(step)s::interval + interval '1 minute'"
                " * %(i)s FROM generate_series(0, %(keep)s - 1) AS k"
            ).format(runs=sql.Identifier(schema, "runs")),
            {"job_id": ids[name].id, "anchor": anchor, "step": step, "keep": keep, "i": i},
        )
        jobs[name] = Job(
            name=name,
            schedule=schedule,
            start=anchor,
            timeline=Timeline.single(schedule, anchor),
            command=("true",),
            max_attempts=1,
            after=(Dependency(names[i - 1]),) if i else (),
        )
    conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(schema, "runs")))
    session.close()
    return Config(path=None, jobs=jobs, schema=schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the 3 years")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    target = db.resolve(None, None)
    days = max(30, int(3 * 365 * args.scale))
    started = time.perf_counter()
    chained = build(target, "bench_chains", days)
    built = time.perf_counter() - started
    alone = dataclasses.replace(
        chained,
        jobs={n: dataclasses.replace(j, after=()) for n, j in chained.jobs.items()},
    )
    figures: dict[str, float] = {}
    state = "?"
    for label, config in (("without", alone), ("with", chained)):
        session = Session(config, target)
        jobs = list(config.jobs.values())

        def scanned(s: Session = session, j: list[Job] = jobs) -> object:
            return scan(s, j, since=None, until=None)

        figures[label] = median_seconds(scanned, args.repeat)
        if label == "with":
            last = session.resolve(config.job(f"job{JOBS - 1}"), write=False)
            period = last.timeline.latest_due(last.delay, session.now())
            assert period is not None
            answer = explain_period(session, last, period, session.now())

            def why(s: Session = session, p: Period = period, j: Job = last) -> object:
                return explain_period(s, j, p, s.now())

            figures["why"] = median_seconds(why, args.repeat)
            state = answer.state
        session.close()
    ratio = figures["with"] / figures["without"]
    print(
        f"{JOBS} jobs in a chain x {days} days (hourly and daily in turn): later scan without "
        f"after {figures['without']:.3f}s, with {figures['with']:.3f}s, ratio {ratio:.2f} "
        f"({'met' if ratio <= 1.5 else 'MISSED'} target <= 1.5); why of the last job's newest "
        f"period ({state}) {figures['why']:.3f}s "
        f"({'met' if figures['why'] <= 0.1 else 'MISSED'} target <= 0.1 s); built in {built:.0f}s"
    )
    print(f"ratios: chain-scan={ratio:.2f} why={figures['why']:.3f}s")


if __name__ == "__main__":
    main()
