"""The gap detector for jobs without keys, as a plan and its stages: :func:`plan` (each job's
window, cut where its schedule changed, and the pieces SQL steps through or Python lists),
then in one snapshot :func:`read_full` (the plain detector) or :func:`read_unfinished` and
:func:`read_holes` (the shortcut: rows not succeeded, and the holes coverage does not vouch
for), then per job :func:`job_scan` (the ranges joined and counted, the coverage recorded),
:func:`with_evidence` and, after a failover, the suspects.

Two ways to the same answer. ``full`` is the plain detector (generate_series LEFT JOIN the
ledger, every period classified). The default reads only what can still hold gaps: the rows that
are not succeeded (a small partial index), and the holes between existing rows (the primary key)
only where no earlier scan has verified that every period has a row. Rows are never removed by
catchup, so that coverage stays true; when a person deletes rows, a trigger forgets it.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..claims import suspects
from ..ledger import Ledger
from ..ledger.scans import Pieces, Windows
from ..results import COUNTED_STATES, JobScan, Range
from ..schedule import Fixed, Schedule, WallStep
from ..vocabulary import PeriodState
from . import evidence
from .coverage import record_coverage, signature
from .ranges import group, merge, present_ranges, uncovered
from .targets import ScanTarget
from .window import Moment, window

LISTED_BATCH = 50_000  # period starts sent per statement when Python lists them
FIRST = operator.itemgetter(1)  # Range.first, without a Python call per range

Piece = tuple[Schedule, datetime, datetime]  # a stretch of one schedule: (schedule, lo, hi)
Chosen = list[tuple[ScanTarget, Piece]]


@dataclass(frozen=True)
class Plan:
    """What a scan of ``targets`` reads: each job's window and expected count, and the pieces
    of the jobs that expect any, stepped in SQL or listed by Python."""

    targets: list[ScanTarget]
    now: datetime
    windows: dict[int, tuple[datetime, datetime]]
    expected: dict[int, int]
    active: list[ScanTarget]
    pieces: dict[int, list[Piece]]
    by_id: dict[int, ScanTarget]

    def chosen(self, stepped: bool) -> Chosen:
        return [
            (t, p)
            for t in self.active
            for p in self.pieces[t.job_id]
            if bool(p[0].step_sql) == stepped
        ]

    def arrays(self) -> Windows:
        return {
            "job_ids": [t.job_id for t in self.active],
            "firsts": [self.windows[t.job_id][0] for t in self.active],
            "untils": [self.windows[t.job_id][1] for t in self.active],
            "now": self.now,
        }

    def piece_arrays(self, chosen: Chosen) -> Pieces:
        return {
            "job_ids": [t.job_id for t, _ in chosen],
            "firsts": [lo for _, (_, lo, _) in chosen],
            "untils": [hi for _, (_, _, hi) in chosen],
            "steps": [s.step_sql for _, (s, _, _) in chosen],
            "max_attempts": [t.job.max_attempts for t, _ in chosen],
            "now": self.now,
        }


@dataclass
class Found:
    """What the statements found, per job id: ranges of rows, holes (missing ranges), the
    stretches coverage vouches for, the evidence state and the last success."""

    covered: dict[int, list[tuple[datetime, datetime]]] = field(default_factory=dict)
    ranges: dict[int, list[Range]] = field(default_factory=dict)
    missing: dict[int, list[Range]] = field(default_factory=dict)
    states: dict[int, tuple[str, int]] = field(default_factory=dict)
    last_success: dict[int, datetime | None] = field(default_factory=dict)


def plan(
    targets: list[ScanTarget], now: datetime, since: Moment | None, until: Moment | None
) -> Plan:
    windows = {t.job_id: window(t.job, now, t.since or since, until) for t in targets}
    expected = {t.job_id: t.job.timeline.count(*windows[t.job_id]) for t in targets}
    active = [t for t in targets if expected[t.job_id] > 0]
    pieces = {t.job_id: list(t.job.timeline.pieces(*windows[t.job_id])) for t in active}
    by_id = {t.job_id: t for t in targets}
    return Plan(targets, now, windows, expected, active, pieces, by_id)


def scan_unkeyed(
    ledger: Ledger,
    targets: list[ScanTarget],
    *,
    now: datetime,
    since: Moment | None,
    until: Moment | None,
    full: bool,
    record: bool,
) -> list[JobScan]:
    """Classify every expected period of each job in its window, all in one snapshot and a
    handful of statements whatever the number of jobs; see the module docstring."""
    chosen = plan(targets, now, since, until)
    found = Found(
        covered={t.job_id: [] for t in targets},
        ranges={t.job_id: [] for t in targets},
        missing={t.job_id: [] for t in targets},
    )
    # One snapshot for the coverage and the rows it vouches for.
    with ledger.scan_snapshot():
        found.states = ledger.scan_states([t.job_id for t in chosen.active])
        if chosen.active and full:
            read_full(ledger, chosen, found)
        elif chosen.active:
            read_unfinished(ledger, chosen, found)
            read_holes(ledger, chosen, found)
        found.last_success = ledger.last_successes([t.job_id for t in targets])
    evidenced = [t.job_id for t in chosen.active if t.job.evidence is not None and t.job_id > 0]
    checked = ledger.evidence_states(evidenced) if evidenced else {}
    results = []
    for t in targets:
        result = job_scan(ledger, chosen, found, t, full=full, record=record)
        results.append(with_evidence(ledger, chosen, t, result, checked, full=full, record=record))
    if results and (failover := ledger.failover()) is not None:
        results = [
            suspects.apply(ledger, t.job, t.job_id, r, failover)
            for t, r in zip(targets, results, strict=True)
        ]
    return results


def read_full(ledger: Ledger, chosen: Plan, found: Found) -> None:
    """The plain detector: every period of every piece classified in SQL."""
    for t, (schedule, lo, hi) in [*chosen.chosen(True), *chosen.chosen(False)]:
        found.ranges[t.job_id].extend(
            ledger.full_piece(*_full_query(t, schedule, lo, hi, chosen.now))
        )


def read_unfinished(ledger: Ledger, chosen: Plan, found: Found) -> None:
    """The rows that are not succeeded, as ranges, and the coverage still true for each job
    (its evidence signature unchanged)."""
    by_id = chosen.by_id
    for job_id, first, last in ledger.coverage(chosen.arrays()):
        if found.states.get(job_id, ("", 0))[0] == signature(by_id[job_id].job):
            found.covered[job_id].append((first, last))
    stepped, walled = chosen.chosen(True), chosen.chosen(False)
    if stepped:
        ledger.unfinished_ranges(chosen.piece_arrays(stepped), found.ranges)
    if walled:
        rows_by_job: dict[int, list[tuple[str, datetime]]] = {}
        for job_id, state, start in ledger.unfinished_rows(chosen.piece_arrays(walled)):
            rows_by_job.setdefault(job_id, []).append((state, start))
        for job_id, listed in rows_by_job.items():
            found.ranges[job_id].extend(group(by_id[job_id].job.timeline, listed))


def read_holes(ledger: Ledger, chosen: Plan, found: Found) -> None:
    """The missing ranges where coverage does not vouch for a row per period: stepped pieces
    in SQL, listed ones in batches of starts."""
    todo = [
        (t, piece)
        for t in chosen.active
        for lo, hi in uncovered(t.job.timeline, *chosen.windows[t.job_id], found.covered[t.job_id])
        for piece in t.job.timeline.pieces(lo, hi)
    ]
    stepped = [(t, p) for t, p in todo if p[0].step_sql]
    if stepped:
        _stepped_holes(ledger, chosen, stepped, found)
    _listed_holes(ledger, [(t, p) for t, p in todo if not p[0].step_sql], found)


def _stepped_holes(ledger: Ledger, chosen: Plan, stepped: Chosen, found: Found) -> None:
    arrays = chosen.piece_arrays(stepped)
    rows = ledger.missing_ranges(
        {
            "job_ids": arrays["job_ids"],
            "los": arrays["firsts"],
            "his": arrays["untils"],
            "steps": arrays["steps"],
            "lasts": [s.before(hi) for _, (s, _, hi) in stepped],
        },
    )
    kinds: dict[int, set[Schedule]] = {}
    for t, (s, _, _) in stepped:
        kinds.setdefault(t.job_id, set()).add(s)
    by_id = chosen.by_id
    for job_id, first, last in rows:
        (step, *others) = kinds[job_id]
        if not others and isinstance(step, Fixed):  # one grid: plain arithmetic
            count = (last - first) // timedelta(seconds=step.seconds) + 1
        else:
            timeline = by_id[job_id].job.timeline
            count = timeline.count(first, timeline.after(last))
        found.missing[job_id].append(Range(PeriodState.missing, first, last, count))


def _listed_holes(ledger: Ledger, walled: Chosen, found: Found) -> None:
    """Listed starts go in batches; runs cut between batches are joined by ``merge``."""
    job_ids: list[int] = []
    numbers: list[int] = []
    starts: list[datetime] = []

    def flush() -> None:
        rows = ledger.listed_missing({"job_ids": job_ids, "pieces": numbers, "starts": starts})
        for job_id, first, last, count in rows:
            found.missing[job_id].append(Range(PeriodState.missing, first, last, count))
        job_ids.clear()
        numbers.clear()
        starts.clear()

    for n, (t, (schedule, lo, hi)) in enumerate(walled):
        for start in schedule.starts(lo, hi):
            job_ids.append(t.job_id)
            numbers.append(n)
            starts.append(start)
            if len(starts) >= LISTED_BATCH:
                flush()
    if starts:
        flush()


def job_scan(
    ledger: Ledger, chosen: Plan, found: Found, t: ScanTarget, *, full: bool, record: bool
) -> JobScan:
    """One job's ranges joined and counted (succeeded as what is left of the expected count,
    by the shortcut), and its coverage recorded for the next scan."""
    job, job_id = t.job, t.job_id
    first, end = chosen.windows[job_id]
    expected = chosen.expected[job_id]
    found_ranges, holes = _joined(chosen, found, job_id, full)
    counts: dict[str, int] = dict.fromkeys(COUNTED_STATES, 0)
    for item in found_ranges:
        counts[item.state] += item.periods  # the text is the PeriodState's value
    if full:
        holes = [i for i in found_ranges if i.state == PeriodState.missing]
    else:
        counts[PeriodState.succeeded] = expected - sum(
            v for k, v in counts.items() if k != PeriodState.succeeded
        )
    if expected > 0 and record:
        present = present_ranges(job.timeline, first, end, holes)
        covered = found.covered[job_id]
        record_coverage(ledger, job, job_id, found.states.get(job_id), first, end, covered, present)
    return JobScan(
        job=job.name,
        schedule=job.schedule.text,
        timezone=job.timezone,
        daily_or_longer=job.schedule.daily_or_longer,
        paused=t.paused,
        first=first if expected else None,
        until=end if expected else None,
        expected=expected,
        counts=counts,
        # only the plain detector (full) reads succeeded runs; the shortcut never does
        ranges=tuple(i for i in found_ranges if i.state != PeriodState.succeeded)
        if full
        else tuple(found_ranges),
        last_success=found.last_success.get(job_id),
        labeler=job.label,
    )


def _joined(chosen: Plan, found: Found, job_id: int, full: bool) -> tuple[list[Range], list[Range]]:
    """A job's ranges and holes, each ordered, runs that meet joined. Runs from one statement
    over one piece are whole already; only runs from different pieces (a schedule change) or
    from batches of listed starts can meet."""
    pieces = chosen.pieces.get(job_id, [])
    timeline = chosen.by_id[job_id].job.timeline
    if len(pieces) > 1 or any(not s.step_sql for s, _, _ in pieces):
        ranges = merge(timeline, found.ranges[job_id])
        holes = merge(timeline, found.missing[job_id])
        return (ranges if full else merge(timeline, [*ranges, *holes])), holes
    # each list comes ordered from its statement
    ranges, holes = found.ranges[job_id], found.missing[job_id]
    return (ranges if full else sorted([*ranges, *holes], key=FIRST)), holes


def with_evidence(
    ledger: Ledger,
    chosen: Plan,
    t: ScanTarget,
    result: JobScan,
    checked: dict[int, Any],
    *,
    full: bool,
    record: bool,
) -> JobScan:
    """A job's evidence query read where something may have changed since its saved state,
    its unverified and untracked periods put into its scan."""
    job, job_id = t.job, t.job_id
    if job.evidence is None or chosen.expected[job_id] == 0:
        return result
    first, end = chosen.windows[job_id]
    holes_now = [i for i in result.ranges if i.state == PeriodState.missing]
    seen = evidence.read(
        ledger,
        job,
        job_id,
        first,
        end,
        now=chosen.now,
        holes=holes_now,
        state=checked.get(job_id),
        full=full,
    )
    result = evidence.apply(result, job, seen)
    if record and seen.state is not None:
        ledger.record_evidence_state(seen.state)
    return result


def _full_query(
    t: ScanTarget, schedule: Schedule, lo: datetime, hi: datetime, now: datetime
) -> tuple[str, dict[str, Any]]:
    """The plain detector's statement for one piece of a job's window."""
    params: dict[str, Any] = {
        "job_id": t.job_id,
        "now": now,
        "max_attempts": t.job.max_attempts,
    }
    if schedule.step_sql:
        last = schedule.before(hi)  # hi may be cut short of the grid by a schedule change
        return "scan_full", {**params, "first": lo, "last": last, "step": schedule.step_sql}
    if isinstance(schedule, WallStep):
        return "scan_full_calendar", {
            **params,
            "origin": schedule.origin,
            "step": schedule.interval_sql,
            "k0": schedule.k_of(lo),
            "n": schedule.count(lo, hi),
            "tz": schedule.timezone,
        }
    return "scan_full_listed", {**params, "starts": list(schedule.starts(lo, hi))}
