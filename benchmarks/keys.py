"""Per-key periods at scale: a keyed job's scan against the plain query, its memory and its
report formats, and the rate of a replay of one day for every key.

    uv run python benchmarks/keys.py [--keys 10000] [--days 365] [--repeat 3] [--workers 4]
                                     [--memory-only] [--no-replay] [--no-tick]

On the embedded PostgreSQL (or CATCHUP_DSN), in a throwaway schema, in one run:
  build   one daily job with --keys keys (its keys a query: generate_series of names) and
          --days days, every (key, day) in the ledger but 2% missing in key x week blocks and
          1% failed scattered;
  plain   the floor: generate_series of the days x the keys LEFT JOIN the ledger, listing every
          (key, day) that has not succeeded (the plain detector, by hand);
  scan    the library's scan of the job (its keys read and recorded, then one statement over
          (key, period), ranges per key grouped across keys): the first (nothing recorded yet)
          and a later one, each against the floor (targets: first <= 1x, later <= 0.3x), and
          how many key rows the later scan wrote (target: none, the keys did not change);
  rss     the peak memory of `catchup scan --json`, then of `catchup keys --json` (target
          <= 300 MB each, at any key count);
  formats `catchup scan` (table, piped) and `--format markdown` against `--json` (<= 1.5x each);
  replay  a replay of one day of every key of a no-op `call` job (operator:truth), --workers,
          in periods/s: each period in its own round trips (batch_size=1) and claimed in
          batches (catchup.claims.batch; target: >= 5x the first), each against the bare claim and
          finish statements on one connection (period by period, and in batches);
  tick    a tick of one day of every key of that job (every key's yesterday due) against the
          bare statements in batches, then `catchup tick` with nothing due (target: <= 2 s).
Every figure is the median of --repeat runs (each scan's ratio, of --repeat turns: the plain
query, then the scan; each first scan after the job's keys are forgotten). The last line
holds the ratios.
--memory-only builds the ledger and measures rss alone (the 10,000,000 keys x 1 day leg);
--no-replay leaves the replay out (a million keys' per-period replay takes minutes), --no-tick
the ticks.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import cast

from psycopg import sql

from catchup.claims.batch import BATCH_MAX
from catchup.config.loading import Config, Job
from catchup.ledger import FinishFields, Many
from catchup.postgres import database as db
from catchup.replay.runs import replay, tick
from catchup.scan.detector import scan
from catchup.schedule import Timeline, parse_schedule
from catchup.session import Session

DAILY = parse_schedule("daily")
SCHEMA = "bench_keys"


def keys_query(n: int) -> str:
    return f"SELECT {key_sql(n)} FROM generate_series(0, {n - 1}) AS i"


def key_sql(n: int) -> str:
    """The i-th of ``n`` keys as SQL: 't' and i, zero-padded to one width (lpad cuts a longer
    number: 10^7 keys need 7 digits)."""
    return f"'t' || lpad(i::text, {max(6, len(str(n - 1)))}, '0')"


def median_seconds(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def build(target: db.Target, keys: int, days: int, **what: object) -> tuple[Config, Job]:
    """A ledger of one keyed daily job whose last period is yesterday; every (key, day) has
    a row but 2% missing (key x week blocks) and 1% failed."""
    session = Session(Config(path=None, schema=SCHEMA), target, prepare=False)
    conn = session.conn
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
    session.ledger.migrate()
    today = session.now().replace(hour=0, minute=0, second=0, microsecond=0)
    anchor = today - timedelta(days=days)
    job = Job(
        name="invoice",
        schedule=DAILY,
        start=anchor,
        timeline=Timeline.single(DAILY, anchor),
        keys=keys_query(keys),
        **(what or {"command": ("true", "{key}")}),  # type: ignore[arg-type]
    )
    job_id = session.ledger.register_jobs([job.name])[job.name].id
    runs = sql.Identifier(SCHEMA, "runs")
    status = (
        "CASE WHEN abs(hashint8(i::bigint * 7919 + d)) %% 100 = 0"
        " THEN 'failed' ELSE 'succeeded' END"
    )
    conn.execute(
        sql.SQL(
            "INSERT INTO {runs} (job_id, key, period_start, period_end, status, attempt, failures,"
            " finished_at, retry_after)"
            " SELECT %(job_id)s, " + key_sql(keys) + ","
            " %(anchor)s::timestamptz + d * interval '1 day',"
            " %(anchor)s::timestamptz + (d + 1) * interval '1 day', " + status + ", 1,"
            " CASE WHEN " + status + " = 'failed' THEN 1 ELSE 0 END,"
            " %(anchor)s::timestamptz + (d + 1) * interval '1 day', now()"
            " FROM generate_series(0, %(keys)s - 1) AS i, generate_series(0, %(days)s - 1) AS d"
            " WHERE abs(hashint8(i::bigint * 104729 + d / 7)) %% 50 <> 0"
        ).format(runs=runs),
        {"job_id": job_id, "anchor": anchor, "keys": keys, "days": days},
    )
    conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(runs))
    session.close()
    return Config(path=None, jobs={job.name: job}, schema=SCHEMA), job


def plain(session: Session, job: Job, keys: int, days: int) -> int:
    """The floor: every (key, day) that has not succeeded, by generate_series x keys LEFT
    JOIN the ledger."""
    query = sql.SQL(
        "SELECT count(*) FROM generate_series(0, %(keys)s - 1) AS i"
        " CROSS JOIN generate_series(%(first)s::timestamptz, %(last)s::timestamptz,"
        " interval '1 day') AS p"
        " LEFT JOIN {runs} r ON r.job_id = %(job_id)s AND r.key = " + key_sql(keys) + ""
        " AND r.period_start = p WHERE r.status IS DISTINCT FROM 'succeeded'"
    ).format(runs=sql.Identifier(SCHEMA, "runs"))
    params: dict[str, object] = {
        "keys": keys,
        "first": job.anchor,
        "last": job.anchor + timedelta(days=days - 1),
        "job_id": session.registered_id(job.name),
    }
    row = session.conn.execute(query, params).fetchone()
    assert row is not None
    (count,) = cast(tuple[int], row)
    return count


def write_config(job: Job, folder: Path, keys: int) -> Path:
    start = job.anchor.strftime("%Y-%m-%d")
    path = folder / "catchup.toml"
    path.write_text(
        f'[project]\nname = "python"\n[database]\nschema = "{SCHEMA}"\n'
        f'[jobs.invoice]\nschedule = "daily"\n'
        f'start = "{start}"\ncommand = ["true", "{{key}}"]\nkeys = "{keys_query(keys)}"\n'
        # a first read of ten million keys, compared with none held, takes about a minute
        'keys_timeout = "15m"\n'
    )
    return path


def compiled() -> None:
    """Catchup's and its libraries' bytecode written once, untimed, as an install writes it
    (else the first timed process would compile them)."""
    import importlib

    names = ("catchup", "click", "rich", "psycopg", "jinja2", "markupsafe", "dateutil")
    folders = [str(Path(importlib.import_module(n).__file__ or "").parent) for n in names]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], check=False)


def person_env() -> dict[str, str]:
    """The environment of a `catchup` a person runs: Python's bytecode cached, as an install
    leaves it (with PYTHONDONTWRITEBYTECODE set, as a shell may have it, every process
    compiled catchup, click, rich and psycopg again: 0.37 s of a 1.6 s quiet tick)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def cli_seconds(config: Path, args: list[str], env: dict[str, str], repeat: int) -> float:
    argv = [sys.executable, "-m", "catchup", "-q", "--config", str(config), "scan", *args]

    def once() -> object:
        return subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=False)

    return median_seconds(once, repeat)


def key_rows_written(session: Session, action: Callable[[], object]) -> int:
    """How many of the job's key rows ``action`` wrote or locked (their xmin or xmax is a
    transaction from after it began)."""
    row = cast(
        tuple[int] | None, session.conn.execute("SELECT txid_current() % 4294967296").fetchone()
    )
    assert row is not None
    action()
    query = sql.SQL(
        "SELECT count(*) FROM {} WHERE xmin::text::bigint > %(before)s"
        " OR (xmax::text::bigint > %(before)s)"
    ).format(sql.Identifier(SCHEMA, "job_keys"))
    counted = cast(tuple[int] | None, session.conn.execute(query, {"before": row[0]}).fetchone())
    assert counted is not None
    return counted[0]


def peak_memory_mb(
    config: Path, env: dict[str, str], args: tuple[str, ...] = ("scan", "--json")
) -> float:
    """The peak RSS of one `catchup scan --json` process (or of ``args``: its own, from
    wait4)."""
    argv = [sys.executable, "-m", "catchup", "-q", "--config", str(config), *args]
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here
    assert child.returncode in (0, 1), f"{' '.join(args)} exited {child.returncode}"
    return usage.ru_maxrss / 1024


def replay_rate(target: db.Target, keys: int, workers: int, repeat: int, batch: int) -> float:
    """A replay of one day for every key of a no-op call job, in periods/s (``batch``: the
    most periods claimed in one round trip; 1 is the per-period path)."""

    def once() -> float:
        config, job = build(target, keys, 1, call="operator:truth")
        session = Session(config, target)
        session.conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(SCHEMA, "runs")))
        started = time.perf_counter()
        result = replay(
            session, [job], since=job.anchor, until=None, workers=workers, batch_size=batch
        )
        elapsed = time.perf_counter() - started
        session.close()
        assert result.totals["succeeded"] == keys, result.totals
        return keys / elapsed

    return statistics.median(once() for _ in range(repeat))


DONE: FinishFields = dict(
    status="succeeded",
    history_status="succeeded",
    counts_as_failure=False,
    backoff=timedelta(seconds=1),
    exit_code=0,
    error=None,
    output_tail=None,
)


def bare_rate(target: db.Target, keys: int, repeat: int, batch: int) -> float:
    """The floor: the claim and finish statements alone for one day of every key, on one
    connection, ``batch`` periods per statement (1: claim then finish, period by period)."""

    def once() -> float:
        config, job = build(target, keys, 1, call="operator:truth")
        session = Session(config, target)
        ledger = session.ledger
        session.conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(SCHEMA, "runs")))
        job_id = session.registered_id(job.name)
        period = job.timeline.period(job.anchor)
        names = [f"t{i:06}" for i in range(keys)]
        started = time.perf_counter()
        for at in range(0, keys, batch):
            part = names[at : at + batch]
            if batch == 1:
                claim = ledger.claim(
                    job_id,
                    period,
                    owner="bench",
                    lease=job.lease,
                    max_attempts=3,
                    allow_overlap=False,
                    key=part[0],
                )
                assert claim is not None
                ledger.finish(job_id, period.start, claim.attempt, part[0], **DONE)
                continue
            many = Many(
                job_id,
                part,
                [period.start] * len(part),
                [period.end] * len(part),
                "bench",
                job.lease,
                3,
                False,
            )
            claims = ledger.claim_many(many)
            done = [(k, period.start, claims[n].attempt, DONE) for n, k in enumerate(part)]
            ledger.finish_many(job_id, done, timedelta(seconds=1), timedelta(hours=6))
        elapsed = time.perf_counter() - started
        session.close()
        return keys / elapsed

    return statistics.median(once() for _ in range(repeat))


def forget_keys(session: Session) -> None:
    """The job as it was before its first scan (registered, its keys never read): its key
    rows, scan state and coverage gone, the ledger's rows kept."""
    tables = ("job_keys", "scan_state", "coverage")
    names = sql.SQL(", ").join(sql.Identifier(SCHEMA, table) for table in tables)
    session.conn.execute(sql.SQL("TRUNCATE {}").format(names))
    jobs = sql.Identifier(SCHEMA, "jobs")
    session.conn.execute(sql.SQL("UPDATE {} SET keys_read_at = NULL").format(jobs))


def scan_leg(target: db.Target, config: Config, job: Job, keys: int, days: int, repeat: int) -> str:
    """The first and a later scan against the plain query, and the key rows a later scan
    writes. Each scan is timed in turns with the plain query (the plain query, then the scan,
    ``repeat`` times; before each first scan the job's keys are forgotten, so it is a first
    scan again), and each ratio is the median of its turns': the machine's speed drifts by a
    third over a run here, and one first scan against a plain query timed apart took that
    drift for its own (1.20x and 1.43x from one run of the same code to the next)."""
    session = Session(config, target)
    gaps = plain(session, job, keys, days)  # (its pages read once, as for every turn after)
    firsts = []
    for _ in range(repeat):
        forget_keys(session)
        floor = median_seconds(lambda: plain(session, job, keys, days), 1)
        started = time.perf_counter()
        report = scan(session, [job], since=None, until=None)
        firsts.append((time.perf_counter() - started, floor))
        found = sum(report.jobs[0].counts[s] for s in report.jobs[0].counts if s != "succeeded")
        assert found == gaps, (found, gaps)
    laters = []
    for _ in range(repeat):
        floor = median_seconds(lambda: plain(session, job, keys, days), 1)
        laters.append(
            (median_seconds(lambda: scan(session, [job], since=None, until=None), 1), floor)
        )
    written = key_rows_written(session, lambda: scan(session, [job], since=None, until=None))
    session.close()
    first, later, floor = (
        statistics.median(t[0] for t in firsts),
        statistics.median(t[0] for t in laters),
        statistics.median(t[1] for t in firsts + laters),
    )
    first_r = statistics.median(s / f for s, f in firsts)
    later_r = statistics.median(s / f for s, f in laters)
    print(f"plain: {gaps:,} (key, day) not succeeded, {floor:.3f}s (median of {2 * repeat})")
    print(
        f"scan: first {first:.3f}s ({first_r:.2f}x plain; target <= 1), later {later:.3f}s "
        f"({later_r:.2f}x plain; target <= 0.3), medians of {repeat} turns each; "
        f"{len(report.jobs[0].key_ranges):,} key ranges "
        f"in {len(report.jobs[0].ranges):,} grouped ranges; a later scan wrote {written:,} "
        "key rows (target: 0)"
    )
    return f"first/plain={first_r:.2f} later/plain={later_r:.2f} key_rows_written={written}"


def formats_leg(path: Path, repeat: int) -> str:
    env = person_env()
    json_s = cli_seconds(path, ["--json"], env, repeat)
    table_s = cli_seconds(path, [], env, repeat)
    markdown_s = cli_seconds(path, ["--format", "markdown"], env, repeat)
    table_r, markdown_r = table_s / json_s, markdown_s / json_s
    print(
        f"formats: scan --json {json_s:.2f}s, table {table_s:.2f}s ({table_r:.2f}x), "
        f"markdown {markdown_s:.2f}s ({markdown_r:.2f}x; targets <= 1.5x)"
    )
    return f"table/json={table_r:.2f} markdown/json={markdown_r:.2f}"


def replay_leg(target: db.Target, keys: int, workers: int, repeat: int) -> str:
    """The replay per period and in batches, each against its bare statements, measured in
    turns (a replay, then its floor, ``repeat`` times): the machine's speed drifts over a
    run, and a replay timed in one stretch against a floor timed in another took that drift
    for its own (0.62x to 0.82x from one run to the next); each ratio is the median of those
    of its turns."""
    turns = [
        (
            replay_rate(target, keys, workers, 1, 1),
            bare_rate(target, keys, 1, 1),
            replay_rate(target, keys, workers, 1, BATCH_MAX),
            bare_rate(target, keys, 1, BATCH_MAX),
        )
        for _ in range(repeat)
    ]
    single, bare_single, batched, bare_batched = (
        statistics.median(t[i] for t in turns) for i in range(4)
    )
    to_floor = statistics.median(t[2] / t[3] for t in turns)
    single_to_floor = statistics.median(t[0] / t[1] for t in turns)
    speedup = statistics.median(t[2] / t[0] for t in turns)
    print(
        f"replay: one day of {keys:,} keys, no-op call job, {workers} workers: per period "
        f"{single:.0f}/s, batched {batched:.0f}/s ({speedup:.2f}x; target >= 5)"
    )
    print(
        f"bare statements, one connection: claim + finish per period {bare_single:.0f}/s, "
        f"in batches of {BATCH_MAX} {bare_batched:.0f}/s; the batched replay is "
        f"{to_floor:.2f}x its floor (target >= 0.7), the per-period one "
        f"{single_to_floor:.2f}x (medians of {repeat} turns)"
    )
    return f"batched/single={speedup:.2f} batched/floor={to_floor:.2f}"


def tick_leg(target: db.Target, folder: Path, keys: int, workers: int) -> str:
    """A tick of one day of every key of a no-op call job (every key's yesterday due, nothing
    in the ledger, the keys recorded) against the bare batched statements of the same day, and
    the scan it starts with, timed alone on the same ledger; then `catchup tick` with nothing
    due, as a person runs it (a process of its own), four times: the first after the busy tick
    verifies every key's day once, the three after it every later one (their median; the
    first of them may still pay for the rows the first rewrote: target <= 2 s)."""
    config, job = build(target, keys, 1, call="operator:truth")
    session = Session(config, target)
    session.conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(SCHEMA, "runs")))
    scan(session, [job], since=None, until=None)  # the keys recorded, as a tick finds them
    scan_s = median_seconds(lambda: scan(session, [job], since=None, until=None), 1)
    started = time.perf_counter()
    ran = tick(session, [job], workers=workers)
    busy = time.perf_counter() - started
    session.close()
    assert ran.totals["succeeded"] == keys, ran.totals
    path = write_config(job, folder, keys)
    argv = [sys.executable, "-m", "catchup", "-q", "--config", str(path), "tick", "--json"]
    quiet = []
    for _ in range(4):
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, check=False, env=person_env())
        quiet.append(time.perf_counter() - started)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["totals"]["succeeded"] == 0, done.stdout
    floor = bare_rate(target, keys, 1, BATCH_MAX)
    rate, claims = keys / busy, keys / max(busy - scan_s, 1e-9)
    print(
        f"tick: one day of {keys:,} keys due, {workers} workers: {busy:.1f}s ({rate:.0f}/s, "
        f"{rate / floor:.2f}x the bare batches' {floor:.0f}/s); the scan it starts with "
        f"{scan_s:.1f}s alone, the rest {claims:.0f}/s ({claims / floor:.2f}x)"
    )
    later = statistics.median(quiet[1:])
    print(
        f"quiet tick: `catchup tick` with nothing due {quiet[0]:.2f}s the first time (every "
        f"key's day verified once), then {', '.join(f'{q:.2f}s' for q in quiet[1:])}: "
        f"median {later:.2f}s (target <= 2)"
    )
    return f"tick/floor={rate / floor:.2f} quiet_tick_s={later:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4, help="the replay's workers")
    parser.add_argument("--memory-only", action="store_true", help="build, then rss alone")
    parser.add_argument("--no-replay", action="store_true", help="leave the replay out")
    parser.add_argument("--no-tick", action="store_true", help="leave the ticks out")
    args = parser.parse_args()
    target = db.resolve(None, None)
    keys, days, repeat = args.keys, args.days, args.repeat
    started = time.perf_counter()
    config, job = build(target, keys, days)
    built = time.perf_counter() - started
    print(f"build: {keys:,} keys x {days} days = {keys * days:,} periods in {built:.1f}s")
    ratios = [] if args.memory_only else [scan_leg(target, config, job, keys, days, repeat)]
    path = write_config(job, Path(tempfile.mkdtemp(prefix="catchup-bench-keys-")), keys)
    compiled()
    rss = peak_memory_mb(path, person_env())
    print(f"rss: scan --json peak {rss:.0f} MB (target <= 300)")
    ratios.append(f"rss_mb={rss:.0f}")
    listed = peak_memory_mb(path, person_env(), ("keys", "invoice", "--json"))
    print(f"rss: keys --json peak {listed:.0f} MB (target <= 300)")
    ratios.append(f"keys_rss_mb={listed:.0f}")
    if not args.memory_only:
        ratios.append(formats_leg(path, repeat))
    if not (args.memory_only or args.no_replay):
        ratios.append(replay_leg(target, keys, args.workers, repeat))
    if not (args.memory_only or args.no_tick):  # last: its ledger is one day's
        ratios.append(tick_leg(target, path.parent, keys, args.workers))
    print("ratios: " + " ".join(ratios))


if __name__ == "__main__":
    main()
