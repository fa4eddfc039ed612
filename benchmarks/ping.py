"""What a ping costs `catchup serve` at a steady 200 pings a second, next to /healthz.

    uv run python benchmarks/ping.py [--rate 200] [--seconds 10] [--jobs 20]

On the embedded PostgreSQL (or CATCHUP_DSN): --jobs observed jobs of one-minute periods, each
a day old, and a running `catchup serve` on this host's loopback. Then, open loop (each request
sent at its moment, late or not, so a slow answer delays the next ones' numbers, not the
schedule): --rate pings a second for --seconds, each settling a period of its own
(`/ping/<uuid>?period=…`: a claim and a finish, one transaction), and the same rate of
/healthz, the floor, measured the same way in the same run. Times run from each request's
moment to its whole answer. The first pings, which open the desk's connections and read the
jobs, are sent first and not counted. Target: the pings' p99 <= 20 ms.

The last line holds the figures and the ratios.
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg import sql

from catchup.postgres import database as db

SCHEMA = "bench_ping"
WARM = 3  # periods a job is pinged for first, not counted: the desk's facades warm up


def write_config(folder: Path, jobs: int, start: datetime) -> tuple[Path, list[str]]:
    ids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"catchup-bench-{i}")) for i in range(jobs)]
    text = f'[database]\nschema = "{SCHEMA}"\n'
    for i, ping in enumerate(ids):
        text += (
            f'[jobs.cron{i:03d}]\nschedule = "every 1 minute"\n'
            f'start = "{start:%Y-%m-%dT%H:%M:%SZ}"\nping = "{ping}"\n'
        )
    path = folder / "catchup.toml"
    path.write_text(text)
    return path, ids


def drive(port: int, paths: list[str], rate: float, workers: int = 16) -> list[float]:
    """Each path asked at its moment (``rate`` a second), on ``workers`` kept-alive
    connections; the seconds from each moment to its whole answer."""
    began = time.perf_counter() + 0.5
    times: list[float] = []
    lock = threading.Lock()
    turn = iter(range(len(paths)))

    def work() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while True:
            with lock:
                n = next(turn, None)
            if n is None:
                break
            moment = began + n / rate
            time.sleep(max(0.0, moment - time.perf_counter()))
            conn.request("GET", paths[n])
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 200, (paths[n], answer.status)
            with lock:
                times.append(time.perf_counter() - moment)
        conn.close()

    threads = [threading.Thread(target=work) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return times


def p99(times: list[float]) -> float:
    return statistics.quantiles(times, n=100)[98]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--jobs", type=int, default=20)
    args = parser.parse_args()
    count = int(args.rate * args.seconds)
    per_job = -(-count // args.jobs) + WARM
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=per_job + 5)
    folder = Path(tempfile.mkdtemp(prefix="catchup-ping-bench-"))
    config, ids = write_config(folder, args.jobs, start)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    base = [sys.executable, "-m", "catchup", "-q", "--config", str(config)]
    with psycopg.connect(db.resolve(None, None).conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
    subprocess.run([*base, "migrate"], env=env, check=True, capture_output=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [*base, "serve", "--listen", f"127.0.0.1:{port}", "--refresh", "60s"],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_ready(f"http://127.0.0.1:{port}")
        periods = [
            f"/ping/{ids[n % args.jobs]}?period="
            f"{start + timedelta(minutes=n // args.jobs):%Y-%m-%dT%H:%M:%SZ}"
            for n in range(count + WARM * args.jobs)
        ]
        # the desk's facades open their connections and read the jobs once: not counted
        drive(port, periods[: WARM * args.jobs], args.rate)
        floor = drive(port, ["/healthz"] * count, args.rate)
        pings = drive(port, periods[WARM * args.jobs :], args.rate)
    finally:
        server.terminate()
        server.wait(timeout=60)
    ms = 1000
    ratio = p99(pings) / p99(floor)
    met = "met" if p99(pings) <= 0.02 else "MISSED"
    print(
        f"{count} pings at {args.rate:g}/s over {args.jobs} jobs: p50 "
        f"{statistics.median(pings) * ms:.1f} ms, p99 {p99(pings) * ms:.1f} ms ({met} target "
        f"<= 20 ms); /healthz (the floor) p50 {statistics.median(floor) * ms:.1f} ms, p99 "
        f"{p99(floor) * ms:.1f} ms"
    )
    print(f"ratios: ping_p99/healthz_p99={ratio:.1f} ping_p99_ms={p99(pings) * ms:.1f}")


def wait_ready(url: str) -> None:
    deadline = time.monotonic() + 300
    while True:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("serve did not answer")
        time.sleep(0.2)


if __name__ == "__main__":
    main()
