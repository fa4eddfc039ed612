"""A fleet on one ledger: 1,000 hourly jobs x 90 days, timed as whole processes.

    uv run python benchmarks/fleet.py [--jobs 1000] [--days 90] [--workers 4]

Builds the ledger in a throwaway schema on the embedded PostgreSQL (or CATCHUP_DSN): every job
hourly, 5% of its days missing whole, 5% of its periods failed scattered, and its newest due
hour missing, about 2.2 million rows. Then it times, each as a `python -m catchup` process:
after a first scan (shown, not compared: it verifies the history once), `scan --json`,
`scan` (the table), `scan --format markdown` (and its size), `jobs`,
`replay --since <start> --dry-run`, and `tick` with every job due (catchup = "latest", a no-op
command), sampling the server's connections from catchup while the tick runs. The targets are
ratios of the same run: table <= 1.5x json, markdown <= 1.5x json, markdown < 1 MiB, dry run
<= 2x json, tick connections <= workers + 4, and every job of the tick succeeded. The last
line is `fleet: json=S table=S markdown=S markdown_bytes=N jobs=S dry_run=S tick=S
tick_connections=N`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

import psycopg
from psycopg import sql

from catchup.config.job import Config
from catchup.postgres import database as db
from catchup.session import Session

SCHEMA = "bench_fleet"


def build(target: db.Target, jobs: int, days: int) -> tuple[list[str], str]:
    """The ledger; returns the job names and the first period's start (ISO)."""
    session = Session(Config(path=None, schema=SCHEMA), target)
    conn = session.conn
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
    session.ledger.migrate()
    now = session.now().replace(minute=0, second=0, microsecond=0)
    periods = days * 24
    anchor = now - timedelta(hours=periods)
    names = [f"job{i:04d}" for i in range(jobs)]
    session.ledger.register_jobs(names)
    insert = sql.SQL(
        "INSERT INTO {runs} (job_id, period_start, period_end, status, attempt, failures,"
        " finished_at, retry_after)"
        " SELECT j.id, %(anchor)s::timestamptz + k * interval '1 hour',"
        " %(anchor)s::timestamptz + (k + 1) * interval '1 hour',"
        " CASE WHEN abs(hashint8(k + j.id * 7919)) %% 20 = 0 THEN 'failed' ELSE 'succeeded' END,"
        " 1, CASE WHEN abs(hashint8(k + j.id * 7919)) %% 20 = 0 THEN 1 ELSE 0 END, now(), now()"
        " FROM {jobs} j CROSS JOIN generate_series(0, %(periods)s - 2) AS k"
        " WHERE (abs(hashint4((k / 24)::int + j.id::int)) %% 20) <> 0"
    ).format(runs=sql.Identifier(SCHEMA, "runs"), jobs=sql.Identifier(SCHEMA, "jobs"))
    conn.execute(insert, {"anchor": anchor, "periods": periods})
    conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(SCHEMA, "runs")))
    session.close()
    return names, anchor.strftime("%Y-%m-%dT%H:%M:%SZ")


def write_config(folder: Path, names: list[str], start: str) -> Path:
    path = folder / "fleet.toml"
    text = f'[database]\nschema = "{SCHEMA}"\n'
    for name in names:
        text += (
            f'[jobs.{name}]\nschedule = "hourly"\nstart = "{start}"\ncatchup = "latest"\n'
            'command = ["true"]\n'
        )
    path.write_text(text)
    return path


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - started, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--workers", type=int, default=4, help="the tick's pool (its default)")
    args = parser.parse_args()
    target = db.resolve(None, None)
    started = time.perf_counter()
    names, start = build(target, args.jobs, args.days)
    print(f"built {args.jobs:,} jobs x {args.days} days in {time.perf_counter() - started:.0f}s")
    folder = Path(tempfile.mkdtemp(prefix="catchup-fleet-"))
    config = write_config(folder, names, start)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    base = [sys.executable, "-m", "catchup", "-q", "--config", str(config)]
    figures: dict[str, float] = {}
    # the first scan verifies the history and remembers it (coverage); every later one, which is
    # what a ledger in use sees, reads only what can still hold gaps: time those
    first, done = timed([*base, "scan", "--json"], env)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    print(f"first scan --json (not compared): {first:.2f}s", flush=True)
    for name, extra in (
        ("json", ["scan", "--json"]),
        ("table", ["scan"]),
        ("markdown", ["scan", "--format", "markdown"]),
        ("jobs", ["jobs"]),
        ("dry_run", ["replay", "--since", start, "--dry-run"]),
    ):
        seconds, done = timed([*base, *extra], env)
        assert done.returncode in (0, 1), done.stderr[-2000:]
        figures[name] = seconds
        if name == "markdown":
            figures["markdown_bytes"] = len(done.stdout.encode())
        print(f"{' '.join(extra)}: {seconds:.2f}s, {len(done.stdout.encode()):,} bytes", flush=True)
    peak = [0]
    stop = threading.Event()

    def watch() -> None:
        with psycopg.connect(target.conninfo, autocommit=True) as conn:
            while not stop.is_set():
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
                    " AND application_name LIKE 'catchup%%'"
                ).fetchone()
                peak[0] = max(peak[0], row[0] if row else 0)
                stop.wait(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        seconds, done = timed([*base, "tick", "--workers", str(args.workers), "--json"], env)
    finally:
        stop.set()
        watcher.join()
    totals = json.loads(done.stdout)["totals"] if done.stdout else {}
    figures["tick"] = seconds
    print(
        f"tick: {seconds:.2f}s, exit {done.returncode}, totals {totals}, peak connections {peak[0]}"
    )
    json_s = figures["json"]
    checks = [
        ("table <= 1.5x json", figures["table"] / json_s, figures["table"] <= 1.5 * json_s),
        (
            "markdown <= 1.5x json",
            figures["markdown"] / json_s,
            figures["markdown"] <= 1.5 * json_s,
        ),
        ("markdown < 1 MiB", figures["markdown_bytes"], figures["markdown_bytes"] < 1_048_576),
        ("dry run <= 2x json", figures["dry_run"] / json_s, figures["dry_run"] <= 2 * json_s),
        ("tick connections <= workers + 4", peak[0], peak[0] <= args.workers + 4),
        (
            "every job of the tick succeeded",
            totals.get("succeeded", 0),
            totals.get("succeeded") == args.jobs,
        ),
    ]
    for what, value, met in checks:
        shown = f"{value:.2f}" if isinstance(value, float) else f"{value:,}"
        print(f"{what}: {shown} ({'met' if met else 'MISSED'})")
    print(
        f"fleet: json={json_s:.2f} table={figures['table']:.2f} "
        f"markdown={figures['markdown']:.2f} markdown_bytes={figures['markdown_bytes']:.0f} "
        f"jobs={figures['jobs']:.2f} dry_run={figures['dry_run']:.2f} tick={seconds:.2f} "
        f"tick_connections={peak[0]}"
    )


if __name__ == "__main__":
    main()
