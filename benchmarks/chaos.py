"""A chaos run of `catchup scheduler`: its leader killed, stopped and stopped again, over and over.

    uv run python benchmarks/chaos.py [--minutes 10] [--replicas 3] [--jobs 20] [--seed 1]
    uv run python benchmarks/chaos.py --seconds 40 --json      # what the fault suite runs

--replicas `catchup scheduler --lease 3s` processes share one ledger (the embedded PostgreSQL,
or CATCHUP_DSN; schema --schema). --jobs jobs run `every 1 minute` with delays spread over the
minute (a period of one of them falls due every few seconds); each run appends its job, period
and attempt to a journal file: the jobs' own side effects, counted at the end. Every few
seconds (3 to 7, seeded) the leader gets one of, in turn and shuffled: SIGKILL (a replacement
replica is started), SIGSTOP for longer than its lease (then SIGCONT), SIGTERM (a rolling
deploy; a replacement is started). Measured each time: how long until another replica leads.

Figures: takeover after SIGKILL and SIGSTOP (target <= lease + 1 s) and after SIGTERM (handed
back: about the standby's one-second poll); periods run twice by the journal (target 0);
periods that fell due in the run and never started, and the worst due-to-start latency
(target under lease + the interval, 63 s: a period whose runner was killed is taken over when
its own 15 s lease runs out). The last line holds them; --json prints one document instead.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from catchup.postgres import database as db

LEASE = 3.0  # the scheduler's --lease
JOB_LEASE = 15  # the jobs' lease (s): longer than any stop, so a stopped runner keeps its claim
STOP_PAST_LEASE = (1.0, 3.0)  # a stop lasts the lease plus this many seconds (uniform)
BETWEEN = (3.0, 7.0)  # seconds between two strikes (uniform)


def write_config(folder: Path, schema: str, jobs: int, start: datetime, journal: Path) -> Path:
    step = 60 // jobs
    text = f'[database]\nschema = "{schema}"\n'
    command = json.dumps(
        ["sh", "-c", f'echo "$CATCHUP_JOB $CATCHUP_PERIOD $CATCHUP_ATTEMPT" >> {journal}']
    )
    for n in range(jobs):
        text += (
            f'[jobs.j{n:02d}]\nschedule = "every 1 minute"\n'
            f'start = "{start:%Y-%m-%dT%H:%M:%SZ}"\ndelay = "{n * step}s"\ncatchup = "all"\n'
            f'lease = "{JOB_LEASE}s"\ncommand = {command}\n'
        )
    path = folder / "catchup.toml"
    path.write_text(text)
    return path


class Fleet:
    """The replicas: started, struck, replaced."""

    def __init__(self, config: Path, folder: Path, env: dict[str, str]) -> None:
        self.config, self.folder, self.env = config, folder, env
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.count = 0

    def start(self) -> None:
        self.count += 1
        log = (self.folder / f"replica-{self.count}.err").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "catchup", "-q", "--config", str(self.config), "scheduler",
             "--lease", f"{LEASE:g}s", "--grace", "5s", "--workers", "4"],
            env=self.env, stdout=subprocess.DEVNULL, stderr=log,
        )  # fmt: skip
        log.close()
        self.procs[proc.pid] = proc

    def stop_all(self) -> list[int | None]:
        """SIGTERM to the replicas still running: their exit codes (each 0 when well)."""
        running = [proc for proc in self.procs.values() if proc.poll() is None]
        for proc in running:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
        codes: list[int | None] = []
        for proc in running:
            try:
                codes.append(proc.wait(timeout=60))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append(None)
        return codes


def leader(conninfo: str, schema: str) -> tuple[int, int] | None:
    """(pid, term) of the live leader."""
    query = sql.SQL("SELECT holder, term FROM {} WHERE expires_at > clock_timestamp()").format(
        sql.Identifier(schema, "leader")
    )
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
            row = conn.execute(query).fetchone()
    except psycopg.Error:
        return None
    return None if row is None else (int(row[0].split(":")[1]), int(row[1]))


def wait_leader(conninfo: str, schema: str, other_than: int | None, timeout: float) -> float:
    """Seconds until a replica other than ``other_than`` leads (inf past ``timeout``)."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        now = leader(conninfo, schema)
        if now is not None and now[0] != other_than:
            return time.monotonic() - began
        time.sleep(0.05)
    return float("inf")


def strike(
    fleet: Fleet, conninfo: str, schema: str, kind: str, rng: random.Random
) -> dict[str, Any]:
    lead = leader(conninfo, schema)
    if lead is None:
        return {"kind": kind, "skipped": "no leader"}
    pid, term = lead
    proc = fleet.procs[pid]
    if kind == "kill":
        os.kill(pid, signal.SIGKILL)
        took = wait_leader(conninfo, schema, pid, LEASE + 15)
        proc.wait(timeout=30)
        fleet.start()
    elif kind == "stop":
        os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        took = wait_leader(conninfo, schema, pid, LEASE + 15)
        time.sleep(max(0.0, LEASE + rng.uniform(*STOP_PAST_LEASE) - (time.monotonic() - stopped)))
        os.kill(pid, signal.SIGCONT)
    else:
        proc.send_signal(signal.SIGTERM)
        took = wait_leader(conninfo, schema, pid, LEASE + 15)
        code = proc.wait(timeout=30)
        fleet.start()
        if code != 0:
            return {"kind": kind, "term": term, "took": took, "exit": code}
    return {"kind": kind, "term": term, "took": took}


def outcome(
    conninfo: str, schema: str, journal: Path, jobs: int, since: datetime, until: datetime
) -> dict[str, Any]:
    lines = [line.split() for line in journal.read_text().splitlines()] if journal.exists() else []
    ran = Counter((job, period) for job, period, _ in lines)
    twice = sorted(f"{job}@{period}" for (job, period), n in ran.items() if n > 1)
    step = 60 // jobs
    query = sql.SQL(
        "SELECT j.name, r.period_start, r.period_end, min(h.started_at) FROM {runs} r"
        " JOIN {jobs} j ON j.id = r.job_id"
        " LEFT JOIN {history} h USING (job_id, key, period_start)"
        " GROUP BY 1, 2, 3"
    ).format(
        runs=sql.Identifier(schema, "runs"),
        jobs=sql.Identifier(schema, "jobs"),
        history=sql.Identifier(schema, "history"),
    )
    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = conn.execute(query).fetchall()
    started = {(name, start): (end, first) for name, start, end, first in rows}
    late: list[float] = []
    unstarted: list[str] = []
    for n in range(jobs):
        name, delay = f"j{n:02d}", timedelta(seconds=n * step)
        end = since.replace(second=0, microsecond=0)
        while end + delay < until:
            due = end + delay
            if due >= since:
                row = started.get((name, end - timedelta(minutes=1)))
                if row is None or row[1] is None:
                    unstarted.append(f"{name}@{end - timedelta(minutes=1):%H:%M}")
                else:
                    late.append((row[1] - due).total_seconds())
            end += timedelta(minutes=1)
    return {"twice": twice, "ran": len(ran), "unstarted": unstarted, "late": late}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--seconds", type=float, help="instead of --minutes")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=20, choices=(6, 10, 12, 15, 20, 30))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--schema", default="bench_chaos")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    seconds = args.seconds if args.seconds is not None else args.minutes * 60
    rng = random.Random(args.seed)
    target = db.resolve(None, None)
    folder = Path(tempfile.mkdtemp(prefix="catchup-chaos-"))
    journal = folder / "journal"
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        now = conn.execute("SELECT clock_timestamp()").fetchone()[0].astimezone(UTC)  # type: ignore[index]
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(args.schema))
        )
    # periods from the minute before: they fall due from the first seconds of the run on
    start = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
    config = write_config(folder, args.schema, args.jobs, start, journal)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if "CATCHUP_DSN" not in env:
        env["CATCHUP_DSN"] = target.conninfo
    fleet = Fleet(config, folder, env)
    for _ in range(args.replicas):
        fleet.start()
    strikes: list[dict[str, Any]] = []
    first_took = wait_leader(target.conninfo, args.schema, None, 60)
    began = time.monotonic()
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        led = conn.execute("SELECT clock_timestamp()").fetchone()[0]  # type: ignore[index]
    # counted: the periods that fell due once a replica led (the backlog before is no strike's)
    since = max(start + timedelta(minutes=1), led)
    kinds: list[str] = []
    try:
        while time.monotonic() - began < seconds:
            time.sleep(rng.uniform(*BETWEEN))
            if not kinds:
                kinds = ["kill", "stop", "term"]
                rng.shuffle(kinds)
            strikes.append(strike(fleet, target.conninfo, args.schema, kinds.pop(), rng))
            if not args.json:
                print(f"  {strikes[-1]}", flush=True)
        # the last strike's periods: taken over (a killed runner's claim runs out) and run
        time.sleep(JOB_LEASE + 5)
    finally:
        codes = fleet.stop_all()
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        until = conn.execute("SELECT clock_timestamp()").fetchone()[0] - timedelta(  # type: ignore[index]
            seconds=JOB_LEASE + 5
        )
    found = outcome(target.conninfo, args.schema, journal, args.jobs, since, until)
    took = {
        kind: [s["took"] for s in strikes if s["kind"] == kind and "took" in s]
        for kind in ("kill", "stop", "term")
    }
    late = found.pop("late")
    figures = {
        "seconds": round(time.monotonic() - began),
        "replicas": args.replicas,
        "jobs": args.jobs,
        "first_leader_seconds": round(first_took, 3),
        "strikes": strikes,
        "takeover_max_seconds": {k: round(max(v), 3) if v else None for k, v in took.items()},
        "takeover_p50_seconds": {
            k: round(statistics.median(v), 3) if v else None for k, v in took.items()
        },
        "due_periods": len(late) + len(found["unstarted"]),
        "late_max_seconds": round(max(late), 3) if late else None,
        "late_p99_seconds": round(sorted(late)[int(0.99 * (len(late) - 1))], 3) if late else None,
        "exit_codes": codes,
        "lease_seconds": LEASE,
        **found,
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"chaos: {figures['seconds']} s, {len(strikes)} strikes, {args.replicas} replicas, "
        f"{args.jobs} jobs every minute"
    )
    for kind in ("kill", "stop", "term"):
        print(
            f"  takeover after {kind}: p50 {figures['takeover_p50_seconds'][kind]} s, max "
            f"{figures['takeover_max_seconds'][kind]} s over {len(took[kind])} strikes"
        )
    print(
        f"  periods: {figures['due_periods']} fell due, {len(found['unstarted'])} never started, "
        f"{len(found['twice'])} ran twice; due-to-start p99 {figures['late_p99_seconds']} s, "
        f"max {figures['late_max_seconds']} s"
    )
    worst = max((t for v in (took["kill"], took["stop"]) for t in v), default=0.0)
    print(
        f"chaos: strikes={len(strikes)} takeover_max={worst:.3f} (target <= {LEASE + 1:g}) "
        f"twice={len(found['twice'])} unstarted={len(found['unstarted'])} "
        f"late_max={figures['late_max_seconds']}"
    )


if __name__ == "__main__":
    main()
