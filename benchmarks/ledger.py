"""The ledger as years pile up: the everyday costs against the ledger's size, and what
compaction leaves of it.

    uv run python benchmarks/ledger.py [--jobs 100] [--sizes 100000,1000000,8760000]
                                       [--claims 350] [--repeat 7] [--migrate 1000000] [--keep]

On the embedded PostgreSQL (or CATCHUP_DSN), in a throwaway schema, in one run. One ledger of
--jobs hourly jobs grows in place through --sizes periods in all (each job's hours filled
backwards from a few days ahead: the last size of the default is 100 jobs x 10 years), every
period succeeded, 5% of them at their third attempt (three history rows, the failures' output
tails), the others at their first (one history row), then VACUUM ANALYZE and a CHECKPOINT (so
the writes are not flushed in the middle of the figures). At each size:
  claim   claim + finish of new periods of one job, the ledger's own statements on one
          connection, in periods/s;
  done    `run` of a period already done (the facade, in process): it is refused;
  tick    a `tick` of every job with nothing due;
  scan    a later `scan` of the last 30 days of every job;
each the median of --repeat and printed as a ratio to the first size's (target: flat, the
claim rate within 10%). Then, at the last size:
  compact `catchup compact` of everything before now, with a claimer on another connection
          claiming and finishing new periods throughout (the longest claim + finish it saw,
          against its longest in as many periods before compaction) and a third claiming the
          old periods just past the cursor of the job being compacted, the rows its open
          batch holds (each claim refused: how long it waited); both with lock_timeout 100ms,
          counting the claims that waited longer for a lock;
  bytes   runs and history, with their indexes and TOAST, per period: before compaction,
          after it (dead space reusable, the files not shrunk) and after VACUUM FULL (what a
          compacted ledger costs; target <= 120);
  after   claim, done, tick and scan again, on the compacted ledger (against the first size's);
  full    a `scan --full` of every job's whole history against the plain query (generate_series
          of each job's hours LEFT JOIN the ledger).
And first, a ledger of --migrate periods as the release before compacted facts left it
(migration 19, every period compacted inside runs), migrated to the latest and its facts
moved to compacted while a claimer claims and finishes beside it: how long the migration and
the move took and the claimer's longest claim + finish during them.
The last line holds the ratios.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import cast

import psycopg
from psycopg import sql

from catchup import Catchup
from catchup.config.loading import Config
from catchup.ledger import FinishFields
from catchup.postgres import database as db
from catchup.results import Outcome
from catchup.schedule import Period
from catchup.session import Session

SCHEMA = "bench_ledger"
HOUR = timedelta(hours=1)
AHEAD = timedelta(days=3)  # filled past now, so a tick finds nothing due all run long
DONE: FinishFields = dict(
    status="succeeded",
    history_status="succeeded",
    counts_as_failure=False,
    backoff=timedelta(seconds=1),
    exit_code=0,
    error=None,
    output_tail=None,
)


def median_seconds(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def write_config(folder: Path, jobs: int, start: datetime) -> Path:
    path = folder / "catchup.toml"
    lines = ['[project]\nname = "bench-ledger"\n', f'[database]\nschema = "{SCHEMA}"\n']
    for j in range(jobs):
        lines.append(
            f'[jobs.j{j:03}]\nschedule = "hourly"\nstart = "{start:%Y-%m-%d}"\ncommand = ["true"]\n'
        )
    path.write_text("".join(lines))
    return path


def fill(
    session: Session, ids: list[int], end: datetime, first: int, last: int, schema: str = SCHEMA
) -> None:
    """Each job's hours ``first`` to ``last`` (counted back from ``end``), succeeded, finished
    an hour after they ended or an hour ago for those ahead of now; 5% at attempt 3."""
    runs = sql.Identifier(schema, "runs")
    history = sql.Identifier(schema, "history")
    for job_id in ids:
        session.conn.execute(
            sql.SQL(
                "WITH made AS ("
                " INSERT INTO {runs} (job_id, period_start, period_end, status, attempt, failures,"
                "   owner, claimed_at, finished_at, exit_code, output_tail)"
                " SELECT %(job)s, s, s + interval '1 hour', 'succeeded', a, a - 1, 'host-a:42',"
                "   least(s + interval '1 hour', now() - interval '1 hour'),"
                "   least(s + interval '1 hour', now() - interval '1 hour') + interval '30 s', 0,"
                "   'exported ' || i || ' rows'"
                " FROM generate_series(%(first)s::integer, %(last)s::integer) AS i,"
                "   LATERAL (SELECT %(end)s::timestamptz - (i + 1) * interval '1 hour' AS s,"
                "     CASE WHEN abs(hashint8(i * 7919 + %(job)s)) %% 20 = 0 THEN 3 ELSE 1 END"
                "     AS a) p"
                " RETURNING period_start, attempt, claimed_at, finished_at)"
                " INSERT INTO {history} (job_id, period_start, attempt, status, owner, started_at,"
                "   finished_at, exit_code, error, output_tail)"
                " SELECT %(job)s, m.period_start, n, CASE WHEN n = m.attempt THEN 'succeeded'"
                "   ELSE 'failed' END, 'host-a:42', m.claimed_at + (n - 1) * interval '1 min',"
                "   m.finished_at, CASE WHEN n = m.attempt THEN 0 ELSE 1 END,"
                "   CASE WHEN n < m.attempt THEN 'exited with 1' END,"
                "   CASE WHEN n < m.attempt THEN repeat('connection refused; retrying ', 8)"
                "   ELSE 'exported rows' END"
                " FROM made m, generate_series(1, m.attempt) AS n"
            ).format(runs=runs, history=history),
            {"job": job_id, "first": first, "last": last, "end": end},
        )
    for table in (runs, history):
        session.conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(table))
    # the writes flushed now, not by a checkpoint in the middle of the figures that follow
    session.conn.execute("CHECKPOINT")


def migration(
    target: db.Target, periods: int, end: datetime
) -> tuple[float, float, list[float], list[float]]:
    """A ledger as the release before compacted facts left it (migration 19), ``periods`` in
    it compacted the way that release compacts (the fact kept in runs, the detail gone),
    migrated to the latest and then compacted again (each fact moved to compacted, batch by
    batch) while a claimer on another connection claims and finishes new periods: the
    migration's seconds, the move's, and the claimer's times before and during both."""
    schema = SCHEMA + "_migrated"
    config = Config(path=None, schema=schema)
    session = Session(config, target, prepare=False)
    session.conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
    session.ledger.migrate(through=19)
    ids = [job.id for job in session.ledger.register_jobs([f"m{j}" for j in range(10)]).values()]
    fill(session, ids, end, 0, periods // 10 - 1, schema)
    session.conn.execute(
        sql.SQL(
            "UPDATE {} SET compacted_at = clock_timestamp(), owner = NULL, exit_code = NULL,"
            " output_tail = NULL WHERE status = 'succeeded'"
        ).format(sql.Identifier(schema, "runs"))
    )
    session.conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(schema, "history")))
    session.conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(schema, "runs")))
    session.conn.execute("CHECKPOINT")
    beside = Session(config, target, prepare=False)
    claimer = Claimer(beside, ids[0], end + 24 * HOUR)
    quiet = [claimer.one() for _ in range(200)]
    stop = threading.Event()
    busy: list[float] = []

    def claiming() -> None:
        while not stop.is_set():
            busy.append(claimer.one())

    thread = threading.Thread(target=claiming)
    thread.start()
    while len(busy) < 50:  # it is going
        time.sleep(0.01)
    started = time.perf_counter()
    applied = session.ledger.migrate()
    took = time.perf_counter() - started
    assert applied and applied[-1].startswith("0020"), applied
    started = time.perf_counter()
    before = session.now()
    for job_id in ids:
        while session.ledger.compact_batch(job_id, before, 500).looked == 500:
            pass
    moved = time.perf_counter() - started
    mark = len(busy)
    while len(busy) < mark + 50:  # and goes on after
        time.sleep(0.01)
    stop.set()
    thread.join()
    row = session.conn.execute(
        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, "compacted"))
    ).fetchone()
    assert row is not None and int(cast(tuple[int], row)[0]) >= periods - 10, row
    beside.close()
    session.conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
    session.close()
    return took, moved, quiet, busy


def pg_size(session: Session, table: str) -> int:
    row = session.conn.execute(
        "SELECT pg_total_relation_size(%s::regclass)", [f"{SCHEMA}.{table}"]
    ).fetchone()
    assert row is not None
    return int(cast(tuple[int], row)[0])


def pg_rows(session: Session, table: str) -> int:
    row = session.conn.execute(
        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(SCHEMA, table))
    ).fetchone()
    assert row is not None
    return int(cast(tuple[int], row)[0])


def ledger_bytes(session: Session) -> int:
    row = session.conn.execute(
        "SELECT pg_total_relation_size(%s::regclass) + pg_total_relation_size(%s::regclass)"
        " + pg_total_relation_size(%s::regclass)",
        [f"{SCHEMA}.runs", f"{SCHEMA}.history", f"{SCHEMA}.compacted"],
    ).fetchone()
    assert row is not None
    return int(cast(tuple[int], row)[0])


@dataclass
class Claimer:
    """Claims and finishes new periods of one job, one after another, timing each."""

    session: Session
    job_id: int
    start: datetime
    made: int = 0

    def one(self) -> float:
        at = self.start + self.made * HOUR
        self.made += 1
        period = Period(at, at + HOUR)
        started = time.perf_counter()
        ledger = self.session.ledger
        claim = ledger.claim(
            self.job_id,
            period,
            owner="bench",
            lease=timedelta(minutes=5),
            max_attempts=3,
            allow_overlap=False,
        )
        assert claim is not None, at
        assert ledger.finish(self.job_id, at, claim.attempt, **DONE) is not None
        return time.perf_counter() - started


@dataclass
class Figures:
    periods: int
    claims: float  # claim + finish per second
    done: float  # seconds: run of a done period
    tick: float  # seconds: tick, nothing due
    scan: float  # seconds: later scan of 30 days


def measure(
    cu: Catchup, claimer: Claimer, periods: int, claims: int, repeat: int, done_at: datetime
) -> Figures:
    rates = []
    claimer.one()  # warm
    for _ in range(repeat):
        seconds = sum(claimer.one() for _ in range(claims // repeat))
        rates.append((claims // repeat) / seconds)
    done = median_seconds(lambda: cu.run("j001", done_at), repeat)
    outcome = cu.run("j001", done_at)
    assert isinstance(outcome, Outcome) and outcome.status == "skipped", outcome
    ran = cu.tick()
    assert not ran.outcomes, ran.outcomes  # nothing due
    tick = median_seconds(cu.tick, repeat)
    now = cu.session.now()
    since = (now - timedelta(days=30)).replace(minute=0, second=0, microsecond=0)
    cu.scan(since=since, until=now)
    scan = median_seconds(lambda: cu.scan(since=since, until=now), repeat)
    return Figures(periods, statistics.median(rates), done, tick, scan)


LOCK_TIMEOUT = "100ms"


def waiting_for_locks(session: Session) -> None:
    """A claim that waits more than LOCK_TIMEOUT for a lock fails (and is counted)."""
    session.conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(LOCK_TIMEOUT)))


def claim_where_compaction_works(
    session: Session, stop: threading.Event, times: list[float], timeouts: list[int]
) -> None:
    """Claim, again and again, an old period just past the cursor of the job compaction works
    on: the rows its open batch holds. Each claim is refused (the period is done); how long it
    took is how long it waited."""
    ledger = session.ledger
    query = sql.SQL(
        "SELECT r.job_id, r.period_start FROM (SELECT job_id, through_at FROM {compaction}"
        " ORDER BY at DESC LIMIT 1) c, LATERAL (SELECT job_id, period_start FROM {runs} r"
        " WHERE r.job_id = c.job_id AND r.finished_at > c.through_at ORDER BY r.finished_at"
        " OFFSET 100 LIMIT 1) r"
    ).format(compaction=sql.Identifier(SCHEMA, "compaction"), runs=sql.Identifier(SCHEMA, "runs"))
    while not stop.is_set():
        row = session.conn.execute(query).fetchone()
        if row is None:
            time.sleep(0.001)
            continue
        job_id, at = cast(tuple[int, datetime], row)
        started = time.perf_counter()
        try:
            claim = ledger.claim(
                job_id,
                Period(at, at + HOUR),
                owner="bench",
                lease=timedelta(minutes=5),
                max_attempts=3,
                allow_overlap=False,
            )
        except psycopg.errors.LockNotAvailable:
            timeouts[0] += 1
            continue
        assert claim is None, (job_id, at)
        times.append(time.perf_counter() - started)


def plain_full(session: Session, first: datetime, end: datetime) -> int:
    """The floor of a full scan: each job's hours LEFT JOIN the ledger (``periods``: runs and
    the compacted facts), counting the hours not succeeded."""
    row = session.conn.execute(
        sql.SQL(
            "SELECT count(*) FROM {jobs} j CROSS JOIN generate_series(%(first)s::timestamptz,"
            " %(last)s::timestamptz, interval '1 hour') AS p"
            " LEFT JOIN {runs} r ON r.job_id = j.id AND r.key = '' AND r.period_start = p"
            " WHERE j.name LIKE 'j%%' AND r.status IS DISTINCT FROM 'succeeded'"
        ).format(jobs=sql.Identifier(SCHEMA, "jobs"), runs=sql.Identifier(SCHEMA, "periods")),
        {"first": first, "last": end - HOUR},
    ).fetchone()
    assert row is not None
    return int(cast(tuple[int], row)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--sizes", default="100000,1000000,8760000")
    parser.add_argument("--claims", type=int, default=350, help="claims timed at each size")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="leave the schema behind")
    parser.add_argument(
        "--migrate", type=int, default=1_000_000, help="periods in the ledger migrated (0: none)"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    jobs, repeat = args.jobs, args.repeat
    target = db.resolve(None, None)
    boot = Session(Config(path=None, schema=SCHEMA), target, prepare=False)
    boot.conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
    boot.close()
    now = Session(Config(path=None, schema=SCHEMA), target, prepare=False)
    hour = now.now().replace(minute=0, second=0, microsecond=0)
    now.close()
    end = hour + AHEAD
    first = end - (sizes[-1] // jobs) * HOUR
    folder = Path(tempfile.mkdtemp(prefix="catchup-bench-ledger-"))
    cu = Catchup(write_config(folder, jobs, first))
    session = cu.session
    names = [f"j{j:03}" for j in range(jobs)]
    ids = [session.registered_id(name) for name in names]
    # the claimed periods lie beyond the filled ones: new rows in the same tables and indexes
    # the claimers' jobs are in the ledger, not the config: the scans and ticks measured read
    # the configured jobs' periods, not the hundreds of thousands of periods the claimers
    # finish within the hour (the pulse reads every period of a job finished in the last hour)
    own = session.ledger.register_jobs(["claims-a", "claims-b"])
    claimer = Claimer(session, own["claims-a"].id, end + 24 * HOUR)
    done_at = hour - 24 * HOUR  # filled at every size, and due
    if args.migrate:
        took, moved, quiet, beside = migration(target, args.migrate, end)
        print(
            f"migrate: a ledger of {args.migrate:,} periods compacted as of migration 19, to the"
            f" latest in {took * 1e3:.0f}ms, its facts moved to compacted in {moved:.0f}s;"
            f" a claimer beside both: longest claim+finish {max(beside) * 1e3:.1f}ms, p99"
            f" {statistics.quantiles(beside, n=100)[98] * 1e3:.1f}ms"
            f" (alone: longest {max(quiet) * 1e3:.1f}ms)"
        )
    print(f"ledger: {jobs} hourly jobs, filled back from {end:%Y-%m-%dT%H}Z, sizes {sizes}")
    figures: list[Figures] = []
    filled = 0
    for size in sizes:
        per_job = size // jobs
        started = time.perf_counter()
        fill(session, ids, end, filled, per_job - 1)
        built = time.perf_counter() - started
        filled = per_job
        figure = measure(cu, claimer, size, args.claims, repeat, done_at)
        figures.append(figure)
        base = figures[0]
        print(
            f"{size:>11,} periods (+{built:.0f}s to build, {ledger_bytes(session) / 1e9:.2f} GB):"
            f" claim+finish {figure.claims:.0f}/s ({figure.claims / base.claims:.2f}x),"
            f" done-run {figure.done * 1e3:.1f}ms ({figure.done / base.done:.2f}x),"
            f" tick {figure.tick * 1e3:.0f}ms ({figure.tick / base.tick:.2f}x),"
            f" scan 30d {figure.scan * 1e3:.0f}ms ({figure.scan / base.scan:.2f}x)"
        )
    periods = filled * jobs
    before_bytes = ledger_bytes(session)
    # a claimer on its own connection, the same number of periods without and with compaction
    other = Catchup(cu.config)
    rival = Claimer(other.session, own["claims-b"].id, end + 24 * HOUR)
    quiet = [rival.one() for _ in range(args.claims)]
    stop = threading.Event()
    busy: list[float] = []
    timeouts = [0, 0]  # claims that waited more than LOCK_TIMEOUT: new periods, old ones
    waiting_for_locks(other.session)

    def claiming() -> None:
        while not stop.is_set():
            try:
                busy.append(rival.one())
            except psycopg.errors.LockNotAvailable:
                timeouts[0] += 1

    third = Catchup(cu.config)
    waiting_for_locks(third.session)
    old: list[float] = []
    old_timeouts = [0]
    threads = [
        threading.Thread(target=claiming),
        threading.Thread(
            target=claim_where_compaction_works, args=(third.session, stop, old, old_timeouts)
        ),
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    compacted = cu.compact(before=cu.session.now())
    took = time.perf_counter() - started
    stop.set()
    for thread in threads:
        thread.join()
    third.close()
    timeouts[1] = old_timeouts[0]
    assert compacted.periods >= periods, (compacted.periods, periods)
    session.conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(SCHEMA, "runs")))
    session.conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(SCHEMA, "history")))
    session.conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(SCHEMA, "compacted")))
    after_bytes = ledger_bytes(session)
    session.conn.execute(
        sql.SQL("VACUUM (FULL, ANALYZE) {}").format(sql.Identifier(SCHEMA, "runs"))
    )
    session.conn.execute(
        sql.SQL("VACUUM (FULL, ANALYZE) {}").format(sql.Identifier(SCHEMA, "history"))
    )
    compacted_bytes = ledger_bytes(session) - pg_size(session, "runs") - pg_size(session, "history")
    compacted_rows = pg_rows(session, "compacted")
    full_bytes = ledger_bytes(session)
    rows = periods + claimer.made + rival.made
    print(
        f"compact: {compacted.periods:,} periods in {took:.0f}s ({compacted.periods / took:.0f}/s);"
        f" a claimer beside it: {len(busy):,} claim+finish, longest {max(busy) * 1e3:.1f}ms,"
        f" p99 {statistics.quantiles(busy, n=100)[98] * 1e3:.1f}ms (without compaction: longest"
        f" {max(quiet) * 1e3:.1f}ms, p99 {statistics.quantiles(quiet, n=100)[98] * 1e3:.1f}ms)"
    )
    print(
        f"compact: claims of the old periods its open batch holds: {len(old):,} refused,"
        f" longest {max(old, default=0) * 1e3:.1f}ms, p99"
        f" {statistics.quantiles(old, n=100)[98] * 1e3 if len(old) > 1 else 0:.1f}ms;"
        f" claims that waited over {LOCK_TIMEOUT} for a lock: {timeouts[0]} new, {timeouts[1]} old"
    )
    print(
        f"bytes per period (runs + history, indexes, TOAST): {before_bytes / rows:.0f} before,"
        f" {after_bytes / rows:.0f} compacted, {full_bytes / rows:.0f} after VACUUM FULL"
        " (target <= 120); a fact in compacted with its indexes:"
        f" {compacted_bytes / max(compacted_rows, 1):.1f} ({compacted_rows:,} of them)"
    )
    # the everyday figures again, now that the done periods are compacted facts (VACUUM FULL's
    # writes flushed first, as after each fill)
    session.conn.execute("CHECKPOINT")
    after = measure(cu, claimer, periods, args.claims, repeat, done_at)
    base = figures[0]
    print(
        f"after compaction: claim+finish {after.claims:.0f}/s ({after.claims / base.claims:.2f}x),"
        f" done-run {after.done * 1e3:.1f}ms ({after.done / base.done:.2f}x),"
        f" tick {after.tick * 1e3:.0f}ms ({after.tick / base.tick:.2f}x),"
        f" scan 30d {after.scan * 1e3:.0f}ms ({after.scan / base.scan:.2f}x), against the"
        f" {base.periods:,}-period ledger's"
    )
    gaps = plain_full(session, first, end)
    floor = median_seconds(lambda: plain_full(session, first, end), 3)
    cu.scan(full=True)
    full = median_seconds(lambda: cu.scan(full=True), 3)
    print(
        f"scan --full: {full:.2f}s, plain query {floor:.2f}s ({full / floor:.2f}x),"
        f" {gaps:,} hours not succeeded"
    )
    last = figures[-1]
    base = figures[0]
    print(
        f"ratios: claims={last.claims / base.claims:.2f} done={last.done / base.done:.2f}"
        f" tick={last.tick / base.tick:.2f} scan30d={last.scan / base.scan:.2f}"
        f" bytes_per_period={full_bytes / rows:.0f} compact_longest_ms={max(busy) * 1e3:.1f}"
        f" old_claim_longest_ms={max(old, default=0) * 1e3:.1f}"
        f" lock_waits_over_{LOCK_TIMEOUT}={sum(timeouts)}"
        f" quiet_longest_ms={max(quiet) * 1e3:.1f} full/plain={full / floor:.2f}"
        f" after_compaction: claims={after.claims / base.claims:.2f}"
        f" done={after.done / base.done:.2f} tick={after.tick / base.tick:.2f}"
        f" scan30d={after.scan / base.scan:.2f}"
    )
    other.close()
    if not args.keep:
        session.conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA))
        )
    cu.close()


if __name__ == "__main__":
    main()
