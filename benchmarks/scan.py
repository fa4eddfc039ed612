"""How long a scan takes, as the library runs it, against the plain query on the same ledger.

    uv run python benchmarks/scan.py [--scale 1.0] [--repeat 3]

Builds ledgers in throwaway schemas on the embedded PostgreSQL (or CATCHUP_DSN):
  (a) 10 jobs x 100,000 hourly periods, 5% missing in day-long blocks, 5% failed scattered;
  (b) the same with 10 jobs x 1,000,000 periods, plus the peak memory of `catchup scan --json`;
  (c) 10 jobs x 5 years of hourly periods, all succeeded but the last 48 hours;
  (d) start-up: `catchup --help` against `python -c "import click"`, and `catchup scan` on a
      small ledger with the server already running;
  (e) wall-clock schedules: 10 jobs x a year of cron "*/15 * * * *" on Europe/Berlin time (two
      DST changes), all succeeded but the last 48 hours: the first scan (nothing verified yet),
      a later scan, and the plain detector (`scan --full`, the listed starts LEFT JOIN the ledger);
  (f) evidence: the ledger of (a) with an evidence table of the same size (a row in every
      succeeded period, indexed) and every job's `evidence` query on it: a later scan with
      evidence against a later scan of the same jobs without (target <= 2x);
  (g) dependencies: 10 jobs in a chain (each `after` the one before), hourly and daily in turn,
      3 years each, every period succeeded but the last two days (missing) and one failed hour
      a week in the first job: the later scan with `after` against the same jobs without it
      (target <= 1.5x), and `catchup why` of the last job's newest period, blocked down the
      chain (target <= 0.1 s).
The reference is the plain query (sql/queries/tools.sql: plain_gaps): one generate_series LEFT JOIN
the ledger per job, listing every period that is not succeeded. For (a)-(c) the first scan
(nothing verified yet: what a new install or a new job pays) is timed once, then the later scan
and the plain query are each the median of --repeat runs after a warm-up. Both scans are shown
against the same plain query, each ratio beside its target with "met" or "MISSED". The last
line holds the ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from psycopg import sql

from catchup.config.loading import Config, Job
from catchup.config.upstream import Dependency
from catchup.postgres import database as db
from catchup.reports.why import explain_period
from catchup.scan.detector import scan
from catchup.scan.window import window
from catchup.schedule import Period, Timeline, parse_schedule
from catchup.session import Session

ROOT = Path(__file__).resolve().parent.parent
HOURLY = parse_schedule("hourly")
JOBS = 10


def median_seconds(action: Callable[[], object], repeat: int) -> float:
    action()  # warm-up: caches, and the scan's watermark
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def build(target: db.Target, schema: str, periods: int, pattern: str) -> Config:
    """A ledger of JOBS hourly jobs whose last period ends at the current hour."""
    session = Session(Config(path=None, schema=schema), target)
    conn = session.conn
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    session.ledger.migrate()
    now = session.now().replace(minute=0, second=0, microsecond=0)
    anchor = now - timedelta(hours=periods)
    names = [f"job{i}" for i in range(JOBS)]
    ids = session.ledger.register_jobs(names)
    if pattern == "scattered":
        # 5% missing as whole days, 5% failed scattered through history
        keep = "(abs(hashint4((k / 24)::int + %(salt)s)) %% 20) <> 0"
        status = (
            "CASE WHEN abs(hashint8(k + %(salt)s * 7919)) %% 20 = 0 "
            "THEN 'failed' ELSE 'succeeded' END"
        )
    else:
        keep = "k < %(periods)s - 48"
        status = "'succeeded'"
    insert = sql.SQL(
        "INSERT INTO {runs} (job_id, period_start, period_end, status, attempt, failures,"
        " finished_at, retry_after)"
        " SELECT %(job_id)s, %(anchor)s::timestamptz + k * interval '1 hour',"
        " %(anchor)s::timestamptz + (k + 1) * interval '1 hour', " + status + ", 1,"
        " CASE WHEN " + status + " = 'failed' THEN 1 ELSE 0 END,"
        " %(anchor)s::timestamptz + (k + 1) * interval '1 hour', now()"
        " FROM generate_series(0, %(periods)s - 1) AS k WHERE " + keep
    ).format(runs=sql.Identifier(schema, "runs"))
    for salt, name in enumerate(names):
        conn.execute(
            insert, {"job_id": ids[name].id, "anchor": anchor, "periods": periods, "salt": salt}
        )
    conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(schema, "runs")))
    session.close()
    jobs = {
        name: Job(
            name=name,
            schedule=HOURLY,
            start=anchor,
            timeline=Timeline.single(HOURLY, anchor),
            command=("true",),
        )
        for name in names
    }
    return Config(path=None, jobs=jobs, schema=schema)


def verdict(ratio: float, target: float) -> str:
    return "met" if ratio <= target else "MISSED"


def measure(target: db.Target, config: Config, repeat: int) -> tuple[float, float, float]:
    """(first scan, later scan median, plain query median)."""
    session = Session(config, target)
    jobs = list(config.jobs.values())

    def library() -> object:
        return scan(session, jobs, since=None, until=None)

    def plain() -> object:
        now = session.now()
        rows = 0
        for job in jobs:
            first, end = window(job, now, None, None)
            rows += len(
                session.ledger.plain_gaps(
                    {
                        "job_id": session.registered_id(job.name),
                        "first": first,
                        "until": end,
                        "step": job.schedule.step_sql,
                    }
                )
            )
        return rows

    started = time.perf_counter()
    library()  # the first scan: nothing verified yet
    first = time.perf_counter() - started
    ours = median_seconds(library, repeat)
    reference = median_seconds(plain, repeat)
    session.close()
    return first, ours, reference


def peak_memory_mb(config_path: Path, env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    subprocess.run(
        [sys.executable, "-m", "catchup", "-q", "--config", str(config_path), "scan", "--json"],
        env=env,
        stdout=subprocess.DEVNULL,
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(before, after) / 1024


def write_config(config: Config, folder: Path) -> Path:
    job = next(iter(config.jobs.values()))
    start = job.anchor.strftime("%Y-%m-%dT%H:%M:%SZ")
    text = f'[database]\nschema = "{config.schema}"\n'
    for name in config.jobs:
        text += f'[jobs.{name}]\nschedule = "hourly"\nstart = "{start}"\ncommand = ["true"]\n'
    path = folder / f"{config.schema}.toml"
    path.write_text(text)
    return path


def command_seconds(argv: list[str], env: dict[str, str], repeat: int) -> float:
    def once() -> object:
        return subprocess.run(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
        )

    return median_seconds(once, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every ledger size")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip", default="", help="letters of cases to skip, e.g. 'b'")
    args = parser.parse_args()
    target = db.resolve(None, None)
    env = dict(os.environ)
    # bytecode cached, as an install leaves it (a shell's PYTHONDONTWRITEBYTECODE had each
    # timed process compile catchup and its libraries again: about 0.4 s)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    folder = Path(tempfile.mkdtemp(prefix="catchup-bench-"))
    ratios = []
    sizes = {"a": (100_000, "scattered"), "b": (1_000_000, "scattered"), "c": (5 * 8760, "recent")}
    targets = {"a": 0.5, "b": 0.3, "c": 0.05}
    for case, (periods, pattern) in sizes.items():
        if case in args.skip:
            continue
        n = max(100, int(periods * args.scale))
        started = time.perf_counter()
        config = build(target, f"bench_{case}", n, pattern)
        built = time.perf_counter() - started
        first, ours, reference = measure(target, config, args.repeat)
        ratio, first_ratio = ours / reference, first / reference
        goal = targets[case]
        line = (
            f"({case}) {JOBS} jobs x {n:,} hourly periods ({pattern}): plain query "
            f"{reference:.3f}s; first scan {first:.3f}s, ratio {first_ratio:.3f} "
            f"({verdict(first_ratio, goal)} target <= {goal}); later scan {ours:.3f}s, ratio "
            f"{ratio:.3f} ({verdict(ratio, goal)}); built in {built:.0f}s"
        )
        if case == "b":
            peak = peak_memory_mb(write_config(config, folder), env)
            line += f"; peak RSS of `catchup scan --json` {peak:.0f} MB (target < 150)"
        print(line, flush=True)
        ratios.append(f"{case}={ratio:.3f} {case}-first={first_ratio:.3f}")
    small = build(target, "bench_d", 200, "recent")
    help_s = command_seconds([sys.executable, "-m", "catchup", "--help"], env, args.repeat)
    click_s = command_seconds([sys.executable, "-c", "import click"], env, args.repeat)
    scan_s = command_seconds(
        [
            sys.executable,
            "-m",
            "catchup",
            "-q",
            "--config",
            str(write_config(small, folder)),
            "scan",
        ],
        env,
        args.repeat,
    )
    print(
        f"(d) catchup --help {help_s:.3f}s vs python -c 'import click' {click_s:.3f}s "
        f"(ratio {help_s / click_s:.2f}, target <= 2); catchup scan on a small ledger "
        f"{scan_s:.3f}s (target < 1 s)",
        flush=True,
    )
    ratios += [f"help/click={help_s / click_s:.2f}", f"small-scan={scan_s:.3f}s"]
    if "e" not in args.skip:
        days = max(7, int(365 * args.scale))
        started = time.perf_counter()
        config = build_wall(target, "bench_e", days)
        built = time.perf_counter() - started
        first, later, full = measure_wall(target, config, args.repeat)
        print(
            f"(e) {JOBS} jobs x {days} days of '*/15 * * * *' in Europe/Berlin: first scan "
            f"{first:.3f}s, later scan {later:.3f}s, plain detector {full:.3f}s, ratio "
            f"{later / full:.3f} (later / plain); first / plain {first / full:.2f}; "
            f"built in {built:.0f}s",
            flush=True,
        )
        ratios.append(f"e={later / full:.3f}")
    if "f" not in args.skip:
        n = max(100, int(100_000 * args.scale))
        started = time.perf_counter()
        config = build(target, "bench_f", n, "scattered")
        plain_jobs, evidenced = with_evidence(target, config)
        built = time.perf_counter() - started
        _, without = later_scan(target, plain_jobs, args.repeat)
        first_ev, with_ev = later_scan(target, evidenced, args.repeat)
        ratio = with_ev / without
        print(
            f"(f) {JOBS} jobs x {n:,} hourly periods with an evidence table of the same size: "
            f"later scan without evidence {without:.3f}s, with {with_ev:.3f}s, ratio "
            f"{ratio:.2f} ({'met' if ratio <= 2 else 'MISSED'} target <= 2); the first scan "
            f"with evidence (reads all of it) {first_ev:.3f}s = {first_ev / without:.1f}x; "
            f"built in {built:.0f}s",
            flush=True,
        )
        ratios.append(f"f={ratio:.2f}")
    if "g" not in args.skip:
        days = max(30, int(3 * 365 * args.scale))
        started = time.perf_counter()
        chained = build_chain(target, "bench_g", days)
        built = time.perf_counter() - started
        without, with_after, why, state = measure_chain(target, chained, args.repeat)
        ratio = with_after / without
        print(
            f"(g) {JOBS} jobs in a chain x {days} days (hourly and daily in turn): later scan "
            f"without after {without:.3f}s, with {with_after:.3f}s, ratio {ratio:.2f} "
            f"({'met' if ratio <= 1.5 else 'MISSED'} target <= 1.5); why of the last job's "
            f"newest period ({state}) {why:.3f}s ({'met' if why <= 0.1 else 'MISSED'} target "
            f"<= 0.1 s); built in {built:.0f}s",
            flush=True,
        )
        ratios.append(f"g={ratio:.2f} why={why:.3f}s")
    print("ratios: " + " ".join(ratios))


def with_evidence(target: db.Target, config: Config) -> tuple[Config, Config]:
    """``config`` as is, and with every job's evidence query on a table holding a row in each
    of its succeeded periods (half past the hour), indexed by job and time."""
    schema = config.schema
    session = Session(config, target)
    table = sql.Identifier(schema, "evidence")
    session.conn.execute(sql.SQL("CREATE TABLE {} (job text, at timestamptz)").format(table))
    session.conn.execute(
        sql.SQL(
            "INSERT INTO {} SELECT j.name, r.period_start + interval '30 minutes' FROM {} r"
            " JOIN {} j ON j.id = r.job_id WHERE r.status = 'succeeded'"
        ).format(table, sql.Identifier(schema, "runs"), sql.Identifier(schema, "jobs"))
    )
    session.conn.execute(sql.SQL("CREATE INDEX ON {} (job, at)").format(table))
    session.conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(table))
    session.close()
    jobs = {
        name: dataclasses.replace(
            job, evidence=f"SELECT at FROM \"{schema}\".evidence WHERE job = '{name}'"
        )
        for name, job in config.jobs.items()
    }
    return config, dataclasses.replace(config, jobs=jobs)


def later_scan(target: db.Target, config: Config, repeat: int) -> tuple[float, float]:
    """The first scan of every job, and the median of ``repeat`` scans after it."""
    session = Session(config, target)
    jobs = list(config.jobs.values())
    started = time.perf_counter()
    scan(session, jobs, since=None, until=None)
    first = time.perf_counter() - started
    seconds = median_seconds(lambda: scan(session, jobs, since=None, until=None), repeat)
    session.close()
    return first, seconds


WALL = parse_schedule("*/15 * * * *", "Europe/Berlin")


def build_wall(target: db.Target, schema: str, days: int) -> Config:
    """JOBS jobs on a wall-clock cron, every period succeeded but the last 48 hours."""
    session = Session(Config(path=None, schema=schema), target)
    conn = session.conn
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    session.ledger.migrate()
    now = session.now()
    start = now - timedelta(days=days)
    timeline = Timeline.single(WALL, start)
    starts = list(timeline.starts(timeline.first, now - timedelta(hours=48)))
    names = [f"job{i}" for i in range(JOBS)]
    ids = session.ledger.register_jobs(names)
    copy = sql.SQL(
        "COPY {} (job_id, period_start, period_end, status, attempt, finished_at) FROM STDIN"
    ).format(sql.Identifier(schema, "runs"))
    for name in names:
        with conn.cursor().copy(copy) as writer:
            for a, b in itertools.pairwise(starts):
                writer.write_row((ids[name].id, a, b, "succeeded", 1, now))
    conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(schema, "runs")))
    session.close()
    jobs = {
        name: Job(
            name=name,
            schedule=WALL.bound(start),
            start=start,
            timeline=timeline,
            command=("true",),
            timezone="Europe/Berlin",
        )
        for name in names
    }
    return Config(path=None, jobs=jobs, schema=schema)


def measure_wall(target: db.Target, config: Config, repeat: int) -> tuple[float, float, float]:
    session = Session(config, target)
    jobs = list(config.jobs.values())
    started = time.perf_counter()
    scan(session, jobs, since=None, until=None)  # records what it verified
    first = time.perf_counter() - started
    later = median_seconds(lambda: scan(session, jobs, since=None, until=None), repeat)
    full = median_seconds(lambda: scan(session, jobs, since=None, until=None, full=True), repeat)
    session.close()
    return first, later, full


def build_chain(target: db.Target, schema: str, days: int) -> Config:
    """The chain's ledger and its jobs, each `after` the one before."""
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


def measure_chain(
    target: db.Target, chained: Config, repeat: int
) -> tuple[float, float, float, str]:
    """The later scan of the chain without `after` and with it, and `why` of the last job's
    newest due period (and the state it gives)."""
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

        figures[label] = median_seconds(scanned, repeat)
        if label == "with":
            last = session.resolve(config.job(f"job{JOBS - 1}"), write=False)
            period = last.timeline.latest_due(last.delay, session.now())
            assert period is not None
            state = explain_period(session, last, period, session.now()).state

            def why(s: Session = session, p: Period = period, j: Job = last) -> object:
                return explain_period(s, j, p, s.now())

            figures["why"] = median_seconds(why, repeat)
        session.close()
    return figures["without"], figures["with"], figures["why"], state


if __name__ == "__main__":
    main()
