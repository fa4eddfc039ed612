"""Excluded periods at scale: the scan with 1,000 `exclude` ranges per job against the same
scan of the same ledger without them.

    uv run python benchmarks/exclusions.py [--periods 100000] [--ranges 1000] [--width 2]
                                           [--repeat 5]

On the embedded PostgreSQL (or CATCHUP_DSN), in a throwaway schema, in one run. One ledger of
10 hourly jobs (UTC) of --periods periods each, the last ending at the current hour: every
period succeeded but --ranges ranges of --width periods each, spread evenly through each job's
history, that have no row (nobody ran them: what a real ledger holds of an excluded window).
The same ledger is scanned as two configs, differing only in the jobs' `exclude`:
  plain     no `exclude`: each range's periods are missing (gaps);
  excluded  `exclude` lists the --ranges ranges as times ("2015-03-01T02:00Z..2015-03-01T04:00Z",
            read by catchup.schedule.exclusions.read_entries): its periods are excluded, and no
            period is missing.
Each is timed as the library's scan (catchup.scan.detector.scan, as `catchup scan` runs it):
  first  nothing verified yet (every job's coverage and scan state deleted before each run);
  later  the default scan once coverage is recorded (the everyday scan);
  full   the plain detector (`scan --full`: every expected period LEFT JOIN the ledger).
Each figure is the median of --repeat runs (3x as many of the later scan, the cheapest and
the target's) after a warm-up, the two configs taking turns run by run. The target (the
issue's): the later scan with the exclusions <= 1.1x the later scan without. The counts are
checked in each config (excluded == --ranges x --width per job, and no missing period in the
excluded one but those that fell due after the build). The last line holds the ratios.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from psycopg import sql

from catchup.config.loading import Config, Job
from catchup.postgres import database as db
from catchup.results import ScanReport
from catchup.scan.detector import scan
from catchup.schedule import Timeline, parse_schedule
from catchup.schedule.exclusions import read_entries
from catchup.session import Session
from catchup.vocabulary import PeriodState

HOURLY = parse_schedule("hourly")
STEP = timedelta(hours=1)
JOBS = 10
SCHEMA = "bench_exclusions"
TARGET = 1.1
MODES = ("first", "later", "full")


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where the excluded ranges fall: range ``i`` holds the periods ``offset(i)`` to
    ``offset(i) + width - 1`` counted from the first."""

    periods: int
    ranges: int
    width: int

    @property
    def spacing(self) -> int:
        return self.periods // self.ranges

    def offset(self, i: int) -> int:
        return i * self.spacing + self.spacing // 2

    @property
    def excluded(self) -> int:
        return self.ranges * self.width


def build(target: db.Target, layout: Layout) -> tuple[Config, Config]:
    """The ledger, and its jobs without ``exclude`` and with it."""
    session = Session(Config(path=None, schema=SCHEMA), target)
    conn = session.conn
    conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
    session.ledger.migrate()
    now = session.now().replace(minute=0, second=0, microsecond=0)
    anchor = now - layout.periods * STEP
    names = [f"job{i}" for i in range(JOBS)]
    ids = session.ledger.register_jobs(names)
    runs = sql.Identifier(SCHEMA, "runs")
    insert = sql.SQL(
        "INSERT INTO {runs} (job_id, period_start, period_end, status, attempt, failures,"
        " finished_at, retry_after)"
        " SELECT %(job_id)s, %(anchor)s::timestamptz + k * interval '1 hour',"
        " %(anchor)s::timestamptz + (k + 1) * interval '1 hour', 'succeeded', 1, 0,"
        " %(anchor)s::timestamptz + (k + 1) * interval '1 hour', now()"
        " FROM generate_series(0, %(periods)s - 1) AS k"
        " WHERE k >= %(ranges)s::int * %(spacing)s::int"
        " OR k %% %(spacing)s::int NOT BETWEEN %(half)s::int AND %(half)s::int + %(width)s::int - 1"
    ).format(runs=runs)
    for name in names:
        conn.execute(
            insert,
            {
                "job_id": ids[name].id,
                "anchor": anchor,
                "periods": layout.periods,
                "ranges": layout.ranges,
                "spacing": layout.spacing,
                "half": layout.spacing // 2,
                "width": layout.width,
            },
        )
    conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(runs))
    session.close()
    texts = [range_text(anchor, layout, i) for i in range(layout.ranges)]
    entries = read_entries(texts, calendars={})
    assert len(entries) == layout.ranges
    plain = {
        name: Job(
            name=name,
            schedule=HOURLY,
            start=anchor,
            timeline=Timeline.single(HOURLY, anchor),
            command=("true",),
        )
        for name in names
    }
    excluded = {name: dataclasses.replace(job, exclude=entries) for name, job in plain.items()}
    return (
        Config(path=None, jobs=plain, schema=SCHEMA),
        Config(path=None, jobs=excluded, schema=SCHEMA),
    )


def range_text(anchor: datetime, layout: Layout, i: int) -> str:
    """Range ``i`` as an ``exclude`` entry: ``A..B`` in UTC, ``B`` left out."""
    lo = anchor + layout.offset(i) * STEP
    hi = lo + layout.width * STEP
    return f"{lo:%Y-%m-%dT%H:%MZ}..{hi:%Y-%m-%dT%H:%MZ}"


def check(report: ScanReport, layout: Layout, *, excluded: bool) -> None:
    """Every job's counts as the ledger holds them: the periods past the ledger's last row
    (due since the build, normally none) are the only other missing ones."""
    for job in report.jobs:
        counts = job.counts
        late = job.expected - layout.periods
        assert late >= 0, (job.job, job.expected)
        assert counts.get(PeriodState.succeeded, 0) == layout.periods - layout.excluded, counts
        if excluded:
            assert counts.get(PeriodState.excluded, 0) == layout.excluded, counts
            assert counts.get(PeriodState.missing, 0) == late, counts
            assert len(job.excluded_by) == layout.ranges, len(job.excluded_by)
        else:
            assert counts.get(PeriodState.excluded, 0) == 0, counts
            assert counts.get(PeriodState.missing, 0) == layout.excluded + late, counts
        others = sum(counts.values()) - counts.get(PeriodState.succeeded, 0)
        assert others == layout.excluded + late, counts


def forget_coverage(session: Session) -> None:
    """As if no scan had run: every job's coverage and scan state gone."""
    for table in ("coverage", "scan_state"):
        session.conn.execute(sql.SQL("DELETE FROM {}").format(sql.Identifier(SCHEMA, table)))


def measure(
    target: db.Target, configs: dict[str, Config], layout: Layout, repeat: int
) -> dict[tuple[str, str], float]:
    """The median seconds of each (config, mode), the configs taking turns run by run."""
    sessions = {label: Session(config, target) for label, config in configs.items()}
    jobs = {label: list(config.jobs.values()) for label, config in configs.items()}

    def run(label: str, mode: str) -> float:
        session = sessions[label]
        if mode == "first":
            forget_coverage(session)
        started = time.perf_counter()
        report = scan(session, jobs[label], since=None, until=None, full=mode == "full")
        seconds = time.perf_counter() - started
        check(report, layout, excluded=label == "excluded")
        return seconds

    times: dict[tuple[str, str], list[float]] = {}
    for mode in MODES:
        order = list(configs)
        for label in order:
            run(label, mode)  # warm-up (and a first scan records the coverage a later reads)
        for n in range(repeat * (3 if mode == "later" else 1)):
            for label in order if n % 2 == 0 else reversed(order):
                times.setdefault((label, mode), []).append(run(label, mode))
    for session in sessions.values():
        session.close()
    return {key: statistics.median(values) for key, values in times.items()}


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--periods", type=int, default=100_000, help="periods per job")
    parser.add_argument("--ranges", type=int, default=1_000, help="excluded ranges per job")
    parser.add_argument("--width", type=int, default=2, help="periods per excluded range")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    layout = Layout(args.periods, args.ranges, args.width)
    if args.ranges < 1 or args.width < 1 or layout.spacing < args.width + 1:
        parser.error("--ranges x (--width + 1) must be at most --periods, both at least 1")
    target = db.resolve(None, None)
    built: list[tuple[Config, Config]] = []
    seconds = timed(lambda: built.append(build(target, layout)))
    plain, excluded = built[0]
    print(
        f"build: {JOBS} jobs x {layout.periods:,} hourly periods, {layout.ranges:,} ranges x "
        f"{layout.width} periods per job without a row ({JOBS * layout.excluded:,} in all), "
        f"in {seconds:.1f}s",
        flush=True,
    )
    figures = measure(target, {"plain": plain, "excluded": excluded}, layout, args.repeat)
    ratios = {mode: figures["excluded", mode] / figures["plain", mode] for mode in MODES}
    for mode in MODES:
        print(
            f"{mode}: plain (the ranges missing) {figures['plain', mode]:.3f}s, excluded "
            f"{figures['excluded', mode]:.3f}s, ratio {ratios[mode]:.2f}x",
            flush=True,
        )
    later = ratios["later"]
    print(
        f"target: the later scan with {layout.ranges:,} excluded ranges per job "
        f"{later:.2f}x the scan without ({'met' if later <= TARGET else 'MISSED'} target "
        f"<= {TARGET}x)"
    )
    print(
        f"ratios: excluded/plain later {later:.2f}x (target <= {TARGET}x), "
        f"first {ratios['first']:.2f}x, full {ratios['full']:.2f}x"
    )


if __name__ == "__main__":
    main()
