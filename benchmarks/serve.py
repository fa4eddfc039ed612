"""What a scrape of `catchup serve` costs next to a scan, on a fleet of 1,000 jobs.

    uv run python benchmarks/serve.py [--jobs 1000] [--days 30] [--repeat 20]

Builds the fleet of benchmarks/fleet.py (hourly jobs, 5% of days missing, 5% of periods failed)
on the embedded PostgreSQL (or CATCHUP_DSN), then in one run: `catchup scan --json` as a whole
process (the median of 3, after a first scan that verifies the history), and the answer time of
`/metrics` (and of `/` and `/api/scan`) from a running `catchup serve` (the median of --repeat
requests, after it is ready). /metrics serves the scan it keeps, so it should cost a small
fraction of a scan: target <= 0.1x. The last line holds the ratios.
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
from pathlib import Path

from fleet import build, timed, write_config

from catchup import db


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
        metrics = answer_seconds(url + "/metrics", args.repeat)
        page = answer_seconds(url + "/", args.repeat)
        document = answer_seconds(url + "/api/scan", args.repeat)
    finally:
        server.terminate()
        server.wait(timeout=60)
    ratio = metrics / scan
    print(
        f"{args.jobs:,} jobs x {args.days} days: scan --json {scan:.2f}s; /metrics "
        f"{metrics * 1000:.1f} ms ({ratio:.3f}x, {'met' if ratio <= 0.1 else 'MISSED'} target "
        f"<= 0.1x); / {page * 1000:.1f} ms; /api/scan {document * 1000:.1f} ms"
    )
    print(f"ratios: metrics/scan={ratio:.3f} page/scan={page / scan:.3f}")


if __name__ == "__main__":
    main()
