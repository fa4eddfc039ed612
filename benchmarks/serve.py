"""What the pages and a scrape of `catchup serve` cost, next to a scan, on a fleet of 1,000 jobs.

    uv run python benchmarks/serve.py [--jobs 1000] [--days 30] [--repeat 20]

Builds the fleet of benchmarks/fleet.py (hourly jobs, 5% of days missing, 5% of periods failed)
on the embedded PostgreSQL (or CATCHUP_DSN), then in one run: `catchup scan --json` as a whole
process (the median of 3, after a first scan that verifies the history), and the answer times
of a running `catchup serve` on this host's loopback (so each is the server's time plus a local
round trip, an upper bound of the server-side time), after it is ready:

- `/metrics` (the median of --repeat): it serves the scan it keeps, target <= 0.1x the scan;
- `/healthz`, the floor: the cheapest answer, measured the same way in the same run;
- `/` (rendered with each scan), and pages rendered when first asked for after a scan, each
  asked once (so each answer is a render, never the cache): `/?job=…` filters, `/jobs/NAME`
  and `/jobs/NAME/PERIOD` (a failed period: why and history read from the ledger then);
  the median and the worst of --repeat distinct ones, target < 50 ms each (the first period
  page, which opens the pages' connection and reads the jobs' rows, is said apart);
- `/metrics` again while 200 idle connections are held open (target < 1 s).

The last line holds the figures and the ratios.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC
from pathlib import Path
from urllib.parse import quote

import psycopg
from fleet import SCHEMA, build, timed, write_config
from psycopg import sql

from catchup.postgres import database as db


def answer_seconds(url: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        with urllib.request.urlopen(url, timeout=60) as answer:
            answer.read()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    target = db.resolve(None, None)
    names, start = build(target, args.jobs, args.days)
    folder = Path(tempfile.mkdtemp(prefix="catchup-serve-bench-"))
    config = write_config(folder, names, start)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    base = [sys.executable, "-m", "catchup", "-q", "--config", str(config)]
    timed([*base, "scan", "--json"], env)  # verifies the history once
    scan = statistics.median(timed([*base, "scan", "--json"], env)[0] for _ in range(3))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [*base, "serve", "--listen", f"127.0.0.1:{port}", "--refresh", "60s"],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("serve did not become ready")
            time.sleep(0.2)
        floor = answer_seconds(url + "/healthz", args.repeat)
        metrics = answer_seconds(url + "/metrics", args.repeat)
        page = answer_seconds(url + "/", args.repeat)
        document = answer_seconds(url + "/api/scan", args.repeat)
        chosen = names[:: max(1, len(names) // args.repeat)][: args.repeat]
        failed = failed_periods(target, chosen)
        periods = [f"/jobs/{n}/{quote(p, safe='')}" for n, p in failed]
        # the first period page opens the pages' own connection and reads the jobs' rows
        # (kept for a scan's interval): said apart, the rest are what a page costs
        opening = first_answers(url, periods[:1])[0]
        rendered = {
            "/?job=": first_answers(url, [f"/?job={n}" for n in chosen]),
            "/jobs/NAME": first_answers(url, [f"/jobs/{n}" for n in chosen]),
            "/jobs/NAME/PERIOD": first_answers(url, periods[1:]),
        }
        held = hold_idle(port, 200)
        try:
            busy = answer_seconds(url + "/metrics", 5)
        finally:
            for sock in held:
                sock.close()
    finally:
        server.terminate()
        server.wait(timeout=60)
    ratio = metrics / scan
    print(
        f"{args.jobs:,} jobs x {args.days} days: scan --json {scan:.2f}s; /metrics "
        f"{metrics * 1000:.1f} ms ({ratio:.3f}x, {'met' if ratio <= 0.1 else 'MISSED'} target "
        f"<= 0.1x); /healthz (the floor) {floor * 1000:.1f} ms; / {page * 1000:.1f} ms; "
        f"/api/scan {document * 1000:.1f} ms"
    )
    worst = 0.0
    for path, times in rendered.items():
        median, most = statistics.median(times), max(times)
        worst = max(worst, most)
        print(
            f"{path} rendered when asked ({len(times)} distinct): median {median * 1000:.1f} ms,"
            f" worst {most * 1000:.1f} ms ({median / floor:.1f}x the floor;"
            f" {'met' if most < 0.05 else 'MISSED'} target < 50 ms)"
        )
    print(
        "the first period page (its connection opened, the jobs' rows read): "
        f"{opening * 1000:.1f} ms"
    )
    print(
        f"/metrics with 200 idle connections held: {busy * 1000:.1f} ms"
        f" ({'met' if busy < 1 else 'MISSED'} target < 1 s)"
    )
    print(
        f"ratios: metrics/scan={ratio:.3f} page/scan={page / scan:.3f} "
        f"worst_render_ms={worst * 1000:.1f} idle200_metrics_ms={busy * 1000:.1f}"
    )


def first_answers(url: str, paths: list[str]) -> list[float]:
    """Each path asked once: what a page rendered on demand costs (a 200 each)."""
    times = []
    for path in paths:
        started = time.perf_counter()
        with urllib.request.urlopen(url + path, timeout=60) as answer:
            answer.read()
            assert answer.status == 200, (path, answer.status)
        times.append(time.perf_counter() - started)
    return times


def failed_periods(target: db.Target, names: list[str]) -> list[tuple[str, str]]:
    """A failed period of each job named, as (job, its start in UTC)."""
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT DISTINCT ON (j.name) j.name, r.period_start FROM {jobs} j"
                " JOIN {runs} r ON r.job_id = j.id WHERE j.name = ANY(%s)"
                " AND r.status = 'failed' ORDER BY j.name, r.period_start DESC"
            ).format(jobs=sql.Identifier(SCHEMA, "jobs"), runs=sql.Identifier(SCHEMA, "runs")),
            (names,),
        ).fetchall()
    return [(name, start.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")) for name, start in rows]


def hold_idle(port: int, count: int) -> list[socket.socket]:
    """``count`` connections opened and left idle (each sent nothing)."""
    held = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        held.append(sock)
    return held


if __name__ == "__main__":
    main()
