"""Due-to-start latency of `catchup scheduler`, beside a cron-style `catchup tick` every minute.

    uv run python benchmarks/scheduler.py [--jobs 100] [--minutes 10] [--replicas 2]

Two configs of --jobs jobs `every 1 minute` (catchup = "latest", a no-op command) on the
embedded PostgreSQL (or CATCHUP_DSN), each in a schema of its own, run at the same time for
--minutes: one by --replicas `catchup scheduler` processes (one leads), one by a loop that
starts `catchup tick` as cron would, at each minute's first second (the best a CronJob or a
timer gives). A period's latency is its first attempt's start (the claim, on the database
clock) minus the moment it fell due (its end). Target: the scheduler's p99 <= 1 s. The last
line holds the figures: `scheduler: p50=S p99=S max=S n=N cron_tick: p50=S p99=S n=N`.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg import sql

from catchup import db
from catchup.job import Config
from catchup.session import Session


def write_config(folder: Path, schema: str, jobs: int, start: datetime) -> Path:
    path = folder / f"{schema}.toml"
    text = f'[database]\nschema = "{schema}"\n'
    for n in range(jobs):
        text += (
            f'[jobs.j{n:03d}]\nschedule = "every 1 minute"\n'
            f'start = "{start:%Y-%m-%dT%H:%M:%SZ}"\ncatchup = "latest"\ncommand = ["true"]\n'
        )
    path.write_text(text)
    return path


def latencies(conninfo: str, schema: str, since: datetime, until: datetime) -> list[float]:
    """Each period that fell due in [since, until): its first attempt's start minus its end."""
    query = sql.SQL(
        "SELECT extract(epoch FROM h.started_at - r.period_end) FROM {runs} r"
        " JOIN {history} h USING (job_id, key, period_start)"
        " WHERE h.attempt = 1 AND r.period_end >= %s AND r.period_end < %s"
    ).format(runs=sql.Identifier(schema, "runs"), history=sql.Identifier(schema, "history"))
    with psycopg.connect(conninfo, autocommit=True) as conn:
        return [float(v) for (v,) in conn.execute(query, (since, until)).fetchall()]


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--replicas", type=int, default=2)
    args = parser.parse_args()
    target = db.resolve(None, None)
    folder = Path(tempfile.mkdtemp(prefix="catchup-scheduler-bench-"))
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        now = conn.execute("SELECT clock_timestamp()").fetchone()[0].astimezone(UTC)  # type: ignore[index]
        for schema in ("bench_scheduler", "bench_cron"):
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    base = [sys.executable, "-m", "catchup", "-q", "--config"]
    led, cron = (
        write_config(folder, s, args.jobs, start) for s in ("bench_scheduler", "bench_cron")
    )
    for schema in ("bench_scheduler", "bench_cron"):
        # the ledgers made here, before the clock starts (and in the database the benchmark
        # reads: the processes find their jobs in it)
        session = Session(Config(path=None, schema=schema), target)
        session.ledger.migrate()
        session.ledger.register_jobs([f"j{n:03d}" for n in range(args.jobs)])
        session.close()
    # measured from the next whole minute after both are running
    first = start + timedelta(minutes=3)
    last = first + timedelta(minutes=args.minutes)
    schedulers = [
        subprocess.Popen(
            [*base, str(led), "scheduler", "--workers", "4"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(args.replicas)
    ]
    ticks: list[subprocess.Popen[bytes]] = []
    try:
        while True:
            wall = datetime.now(UTC)
            if wall >= last + timedelta(seconds=20):
                break
            boundary = wall.replace(second=0, microsecond=0) + timedelta(minutes=1)
            time.sleep(max(0.0, (boundary - datetime.now(UTC)).total_seconds()))
            ticks.append(
                subprocess.Popen(
                    [*base, str(cron), "tick", "--workers", "4", "--max-time", "60s"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
    finally:
        for proc in schedulers:
            proc.send_signal(signal.SIGTERM)
        for proc in [*schedulers, *ticks]:
            proc.wait(timeout=120)
    led_times = latencies(target.conninfo, "bench_scheduler", first, last)
    cron_times = latencies(target.conninfo, "bench_cron", first, last)
    expected = args.jobs * args.minutes
    p99 = quantile(led_times, 0.99)
    print(
        f"{args.jobs} jobs every minute for {args.minutes} min ({expected} periods each), "
        f"{args.replicas} scheduler replicas:"
    )
    print(
        f"  catchup scheduler: p50 {statistics.median(led_times):.3f} s, p99 {p99:.3f} s, "
        f"max {max(led_times):.3f} s over {len(led_times)} periods "
        f"({'met' if p99 <= 1 else 'MISSED'} target p99 <= 1 s)"
    )
    print(
        f"  cron-style tick each minute: p50 {statistics.median(cron_times):.3f} s, "
        f"p99 {quantile(cron_times, 0.99):.3f} s over {len(cron_times)} periods"
    )
    print(
        f"scheduler: p50={statistics.median(led_times):.3f} p99={p99:.3f} "
        f"max={max(led_times):.3f} n={len(led_times)} cron_tick: "
        f"p50={statistics.median(cron_times):.3f} p99={quantile(cron_times, 0.99):.3f} "
        f"n={len(cron_times)}"
    )


if __name__ == "__main__":
    main()
