"""The gap detector: each job's expected periods against the ledger, collapsed into ranges.

Two ways to the same answer. ``full`` is the plain detector (generate_series LEFT JOIN the
ledger, every period classified). The default reads only what can still hold gaps: the rows that
are not succeeded (a small partial index), and the holes between existing rows (the primary key)
only where no earlier scan has verified that every period has a row. Rows are never removed by
catchup, so that coverage stays true; when a person deletes rows, a trigger forgets it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

import psycopg
from psycopg import sql

from . import sqlfiles
from .config import Job
from .errors import ConfigError
from .models import COUNTED_STATES, Calendar, Island, JobScan, ScanReport
from .schedule import Calendar as CalendarSchedule
from .schedule import Fixed, Schedule, Timeline, iso_utc, to_utc, to_wall, zone

LISTED_BATCH = 50_000  # period starts sent per statement when Python lists them


def window(
    job: Job, now: datetime, since: datetime | None, until: datetime | None
) -> tuple[datetime, datetime]:
    """``[first, end)``: the period starts a scan expects, both boundaries of the job.

    ``first`` is the first start at or after ``since`` (and the job's start); ``end`` excludes
    periods starting at or after ``until`` and periods not yet due.
    """
    timeline, anchor = job.timeline, job.anchor
    first = anchor if since is None or since <= anchor else timeline.ceil(since)
    latest = timeline.latest_due(job.delay, now)
    end = latest.end if latest else anchor
    if until is not None:
        end = min(end, max(anchor, timeline.ceil(until)))
    return first, max(first, end)


def signature(job: Job) -> str:
    """What coverage is valid for: every schedule of the job and where each starts."""
    return job.timeline.signature


def _uncovered(
    timeline: Timeline,
    first: datetime,
    end: datetime,
    covered: list[tuple[datetime, datetime]],
) -> list[tuple[datetime, datetime]]:
    """The parts of ``[first, end)`` that no coverage range vouches for, as ``[lo, hi)``."""
    gaps = []
    cursor = first
    for lo, last in covered:
        hi = timeline.after(last)
        if lo > cursor:
            gaps.append((cursor, min(lo, end)))
        cursor = max(cursor, hi)
        if cursor >= end:
            break
    if cursor < end:
        gaps.append((cursor, end))
    return [(lo, hi) for lo, hi in gaps if lo < hi]


def _present(
    timeline: Timeline, first: datetime, end: datetime, missing: list[Island]
) -> list[tuple[datetime, datetime]]:
    """Coverage for ``[first, end)``: every period but the missing ones, as (first, last)."""
    ranges = []
    cursor = first
    for hole in missing:
        if hole.first > cursor:
            ranges.append((cursor, _before(timeline, hole.first)))
        cursor = timeline.after(hole.last)
    if cursor < end:
        ranges.append((cursor, _before(timeline, end)))
    return ranges


def _before(timeline: Timeline, t: datetime) -> datetime:
    found = timeline.before(t)
    assert found is not None
    return found


def _merge(timeline: Timeline, islands: list[Island]) -> list[Island]:
    """Sort runs of one state, joining those that meet (found in different pieces)."""
    merged: list[Island] = []
    for island in sorted(islands, key=lambda i: i.first):
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.state == island.state
            and last.last < island.first
            and timeline.after(last.last) == island.first
        ):
            merged[-1] = Island(last.state, last.first, island.last, last.periods + island.periods)
        else:
            merged.append(island)
    return merged


def _group(timeline: Timeline, rows: list[tuple[str, datetime]]) -> list[Island]:
    """Rows (state, period start), oldest first, as runs of consecutive periods in one state.
    Rows that are not period starts of the timeline (left by an edited start) are ignored."""
    islands: list[Island] = []
    for state, start in rows:
        if not timeline.is_boundary(start):
            continue
        last = islands[-1] if islands else None
        if last and last.state == state and timeline.after(last.last) == start:
            islands[-1] = Island(state, last.first, start, last.periods + 1)
        else:
            islands.append(Island(state, start, start, 1))
    return islands


@dataclass(frozen=True)
class Target:
    """One job to scan: its config, its ledger id, whether it is paused."""

    job: Job
    job_id: int
    paused: bool


def scan_job(
    conn: psycopg.Connection[Any],
    schema: str,
    job: Job,
    job_id: int,
    *,
    now: datetime,
    since: datetime | None,
    until: datetime | None,
    paused: bool,
    full: bool = False,
) -> JobScan:
    """Scan one job; see :func:`scan_jobs`."""
    (result,) = scan_jobs(
        conn, schema, [Target(job, job_id, paused)], now=now, since=since, until=until, full=full
    )
    return result


def scan_jobs(
    conn: psycopg.Connection[Any],
    schema: str,
    targets: list[Target],
    *,
    now: datetime,
    since: datetime | None,
    until: datetime | None,
    full: bool = False,
    record: bool = True,
) -> list[JobScan]:
    """Classify every expected period of each job in its window, all in one snapshot and a
    handful of statements whatever the number of jobs; see the module docstring.

    A job's window is cut where its schedule changed. Pieces with a fixed step are computed in
    SQL (``period + step``); pieces of wall-clock schedules get their period starts from the
    schedule (generated in SQL for calendar schedules by ``--full``, listed by Python
    otherwise)."""
    windows = {t.job_id: window(t.job, now, since, until) for t in targets}
    expected = {t.job_id: t.job.timeline.count(*windows[t.job_id]) for t in targets}
    active = [t for t in targets if expected[t.job_id] > 0]
    by_id = {t.job_id: t for t in targets}
    pieces = {t.job_id: list(t.job.timeline.pieces(*windows[t.job_id])) for t in active}
    stepped = [(t, p) for t in active for p in pieces[t.job_id] if p[0].step_sql]
    walled = [(t, p) for t in active for p in pieces[t.job_id] if not p[0].step_sql]
    arrays: dict[str, Any] = {
        "job_ids": [t.job_id for t in active],
        "firsts": [windows[t.job_id][0] for t in active],
        "untils": [windows[t.job_id][1] for t in active],
        "now": now,
    }
    states: dict[int, tuple[str, int]] = {}
    covered: dict[int, list[tuple[datetime, datetime]]] = {t.job_id: [] for t in targets}
    islands: dict[int, list[Island]] = {t.job_id: [] for t in targets}
    missing: dict[int, list[Island]] = {t.job_id: [] for t in targets}
    last_success: dict[int, datetime | None] = {}

    def q(name: str) -> sql.Composed:
        return sqlfiles.query(name, schema)

    def piece_arrays(
        chosen: list[tuple[Target, tuple[Schedule, datetime, datetime]]],
    ) -> dict[str, Any]:
        return {
            "job_ids": [t.job_id for t, _ in chosen],
            "firsts": [lo for _, (_, lo, _) in chosen],
            "untils": [hi for _, (_, _, hi) in chosen],
            "steps": [s.step_sql for _, (s, _, _) in chosen],
            "max_attempts": [t.job.max_attempts for t, _ in chosen],
            "now": now,
        }

    # One snapshot for the coverage and the rows it vouches for.
    with conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        conn.execute(q("scan_settings"))
        for job_id, sig, generation in conn.execute(q("scan_state"), arrays):
            states[job_id] = (sig, generation)
        if active and full:
            for t, (schedule, lo, hi) in [*stepped, *walled]:
                rows = conn.execute(*_full_query(q, t, schedule, lo, hi, now))
                islands[t.job_id].extend(Island(*row[1:]) for row in rows)
        elif active:
            for job_id, first, last in conn.execute(q("coverage"), arrays):
                if states.get(job_id, ("", 0))[0] == signature(by_id[job_id].job):
                    covered[job_id].append((first, last))
            if stepped:
                # Possibly millions of rows: read them in batches through a server-side
                # cursor, and let a one-period island share one datetime for first and last.
                with conn.cursor(name="catchup_scan_unfinished", binary=True) as cur:
                    cur.itersize = 20_000
                    cur.execute(q("scan_unfinished"), piece_arrays(stepped))
                    while batch := cur.fetchmany(cur.itersize):
                        for job_id, state, first, last, count in batch:
                            islands[job_id].append(
                                Island(state, first, first if count == 1 else last, count)
                            )
            if walled:
                rows_by_job: dict[int, list[tuple[str, datetime]]] = {}
                for job_id, state, start in conn.execute(
                    q("scan_unfinished_rows"), piece_arrays(walled)
                ):
                    rows_by_job.setdefault(job_id, []).append((state, start))
                for job_id, listed in rows_by_job.items():
                    islands[job_id].extend(_group(by_id[job_id].job.timeline, listed))
            todo = [
                (t, piece)
                for t in active
                for lo, hi in _uncovered(t.job.timeline, *windows[t.job_id], covered[t.job_id])
                for piece in t.job.timeline.pieces(lo, hi)
            ]
            todo_stepped = [(t, p) for t, p in todo if p[0].step_sql]
            todo_walled = [(t, p) for t, p in todo if not p[0].step_sql]
            if todo_stepped:
                chosen = piece_arrays(todo_stepped)
                rows = conn.execute(
                    q("scan_missing"),
                    {
                        "job_ids": chosen["job_ids"],
                        "los": chosen["firsts"],
                        "his": chosen["untils"],
                        "steps": chosen["steps"],
                        "lasts": [s.before(hi) for _, (s, _, hi) in todo_stepped],
                    },
                )
                kinds: dict[int, set[Schedule]] = {}
                for t, (s, _, _) in todo_stepped:
                    kinds.setdefault(t.job_id, set()).add(s)
                for job_id, first, last in rows:
                    (step, *others) = kinds[job_id]
                    if not others and isinstance(step, Fixed):  # one grid: plain arithmetic
                        count = (last - first) // timedelta(seconds=step.seconds) + 1
                    else:
                        timeline = by_id[job_id].job.timeline
                        count = timeline.count(first, timeline.after(last))
                    missing[job_id].append(Island("missing", first, last, count))
            # Listed starts go in batches; runs cut between batches are joined by _merge.
            job_ids: list[int] = []
            numbers: list[int] = []
            starts: list[datetime] = []

            def flush() -> None:
                rows = conn.execute(
                    q("scan_listed_missing"),
                    {"job_ids": job_ids, "pieces": numbers, "starts": starts},
                )
                for job_id, first, last, count in rows:
                    missing[job_id].append(Island("missing", first, last, count))
                job_ids.clear()
                numbers.clear()
                starts.clear()

            for n, (t, (schedule, lo, hi)) in enumerate(todo_walled):
                for start in schedule.starts(lo, hi):
                    job_ids.append(t.job_id)
                    numbers.append(n)
                    starts.append(start)
                    if len(starts) >= LISTED_BATCH:
                        flush()
            if starts:
                flush()
        for job_id, success in conn.execute(
            q("last_success"), {"job_ids": [t.job_id for t in targets]}
        ):
            last_success[job_id] = success

    results = []
    for t in targets:
        job, job_id = t.job, t.job_id
        first, end = windows[job_id]
        timeline = job.timeline
        # Runs from one statement over one piece are whole already; only runs from different
        # pieces (a schedule change) or from batches of listed starts can meet.
        cut = len(pieces.get(job_id, ())) > 1 or any(
            not s.step_sql for s, _, _ in pieces.get(job_id, ())
        )

        if cut:
            found = _merge(timeline, islands[job_id])
            holes = _merge(timeline, missing[job_id])
            if not full:
                found = _merge(timeline, [*found, *holes])
        else:  # each list comes ordered from its statement
            found, holes = islands[job_id], missing[job_id]
            if not full:
                found = sorted([*found, *holes], key=lambda i: i.first)
        counts = dict.fromkeys(COUNTED_STATES, 0)
        for item in found:
            counts[item.state] += item.periods
        if full:
            holes = [i for i in found if i.state == "missing"]
        else:
            counts["succeeded"] = expected[job_id] - sum(
                v for k, v in counts.items() if k != "succeeded"
            )
        if expected[job_id] > 0 and record:
            present = _present(timeline, first, end, holes)
            _record_coverage(
                conn, schema, job, job_id, states.get(job_id), first, end, covered[job_id], present
            )
        results.append(
            JobScan(
                job=job.name,
                schedule=job.schedule.text,
                timezone=job.timezone,
                daily_or_longer=job.schedule.daily_or_longer,
                paused=t.paused,
                first=first if expected[job_id] else None,
                until=end if expected[job_id] else None,
                expected=expected[job_id],
                counts=counts,
                islands=tuple(i for i in found if i.state != "succeeded"),
                last_success=last_success.get(job_id),
            )
        )
    return results


def _full_query(
    q: Any, t: Target, schedule: Schedule, lo: datetime, hi: datetime, now: datetime
) -> tuple[sql.Composed, dict[str, Any]]:
    """The plain detector's statement for one piece of a job's window."""
    params: dict[str, Any] = {
        "job_id": t.job_id,
        "now": now,
        "max_attempts": t.job.max_attempts,
    }
    if schedule.step_sql:
        last = schedule.before(hi)  # hi may be cut short of the grid by a schedule change
        return q("scan_full"), {**params, "first": lo, "last": last, "step": schedule.step_sql}
    if isinstance(schedule, CalendarSchedule):
        return q("scan_full_calendar"), {
            **params,
            "origin": schedule.origin,
            "step": schedule.interval_sql,
            "k0": schedule.k_of(lo),
            "n": schedule.count(lo, hi),
            "tz": schedule.timezone,
        }
    return q("scan_full_listed"), {**params, "starts": list(schedule.starts(lo, hi))}


def _record_coverage(
    conn: psycopg.Connection[Any],
    schema: str,
    job: Job,
    job_id: int,
    state: tuple[Any, ...] | None,
    first: datetime,
    end: datetime,
    covered: list[tuple[datetime, datetime]],
    present: list[tuple[datetime, datetime]],
) -> None:
    """Remember which periods have rows, unless rows disappeared since the scan read them."""
    mine = signature(job)
    clipped = [(max(a, first), b) for a, b in covered if b >= first]
    if state is not None and state[0] == mine and clipped == present:
        return  # nothing new learned: a steady-state scan writes nothing
    params = {
        "job_id": job_id,
        "signature": mine,
        "first": first,
        "until": end,
        "firsts": [a for a, _ in present],
        "lasts": [b for _, b in present],
    }
    try:
        with conn.transaction():
            if state is None:
                opened = conn.execute(sqlfiles.query("open_scan_state", schema), params)
                if opened.fetchone() is None:
                    return  # created meanwhile, perhaps by a deletion: learn it next time
            else:
                current = conn.execute(sqlfiles.query("lock_scan_state", schema), params).fetchone()
                if current is None or current[1] != state[1]:
                    return  # rows were removed since the scan's snapshot
                if current[0] != mine:
                    conn.execute(sqlfiles.query("reset_coverage", schema), params)
            conn.execute(sqlfiles.query("replace_coverage", schema), params)
    except psycopg.errors.InsufficientPrivilege:
        pass  # a read-only role can scan; it just cannot remember what it learned


def scan(
    session: Any,
    jobs: list[Job],
    *,
    since: datetime | None,
    until: datetime | None,
    full: bool = False,
) -> ScanReport:
    """Scan ``jobs`` on the database clock; the report the CLI renders and the API returns."""
    if since is not None and until is not None and since >= until:
        raise ConfigError(f"--since {iso_utc(since)} is not before --until {iso_utc(until)}")
    jobs = session.resolve_all(jobs)
    now = session.now()
    rows = session.ledger.register_jobs(sorted(session.config.jobs))
    targets = [Target(job, rows[job.name].id, rows[job.name].paused_at is not None) for job in jobs]
    results = scan_jobs(
        session.conn, session.config.schema, targets, now=now, since=since, until=until, full=full
    )
    report_since = since or min((job.anchor for job in jobs), default=now)
    return ScanReport(generated_at=now, since=report_since, until=until or now, jobs=tuple(results))


SEVERITY = ("succeeded", "waived", "running", "missing", "stale", "failed", "exhausted")
CALENDAR_MONTHS = 3
CALENDAR_DAYS = 7


def calendar(job: Job, result: JobScan) -> Calendar:
    """The last few months (daily or longer) or days (shorter) of ``result`` as a grid, laid
    out on the job's local calendar (UTC unless it has a time zone)."""
    timeline = job.timeline
    tz = zone(job.timezone)
    if result.first is None or result.until is None:
        return Calendar(job.name, "day", (), False)
    first, end = result.first, result.until
    starts = [i.first for i in result.islands]

    def state_of(start: datetime) -> str:
        for island in reversed(result.islands[: _bisect(starts, start)]):
            if island.first <= start <= island.last:
                return island.state
            break
        return "succeeded"

    def cell(lo_wall: datetime, hi_wall: datetime) -> str | None:
        """The worst state of the periods that start in a local interval."""
        lo, hi = max(to_utc(lo_wall, tz), first), min(to_utc(hi_wall, tz), end)
        if lo >= hi:
            return None
        states = [state_of(s) for s in timeline.starts(lo, hi)]
        return max(states, key=SEVERITY.index) if states else None

    last_day = datetime.combine(to_wall(end - timedelta(seconds=1), tz).date(), time(0))
    first_day = datetime.combine(to_wall(first, tz).date(), time(0))
    rows: list[tuple[str, tuple[str | None, ...]]] = []
    if job.schedule.daily_or_longer:
        month = last_day.replace(day=1)
        months = []
        while month >= first_day.replace(day=1):
            months.append(month)
            month = (month - timedelta(days=1)).replace(day=1)
        truncated = len(months) > CALENDAR_MONTHS
        for month in reversed(months[:CALENDAR_MONTHS]):
            cells = []
            for offset in range(31):
                lo = month + timedelta(days=offset)
                cells.append(cell(lo, lo + timedelta(days=1)) if lo.month == month.month else None)
            rows.append((month.strftime("%Y-%m"), tuple(cells)))
        return Calendar(job.name, "day", tuple(rows), truncated)
    days = (last_day - first_day).days + 1
    shown = min(days, CALENDAR_DAYS)
    for d in range(shown - 1, -1, -1):
        day = last_day - timedelta(days=d)
        cells = [cell(day + timedelta(hours=h), day + timedelta(hours=h + 1)) for h in range(24)]
        rows.append((day.strftime("%Y-%m-%d"), tuple(cells)))
    return Calendar(job.name, "hour", tuple(rows), days > shown)


def _bisect(starts: list[datetime], t: datetime) -> int:
    return bisect.bisect_right(starts, t)
