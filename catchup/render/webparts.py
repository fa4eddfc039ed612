"""The pieces every status page shares: a job's counts, its calendar as cells that say
what they are, the running periods' rows, a gap range's row and the command that runs it.
Pure: from the scan and what was read with it."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import quote

from ..config.job import Job
from ..ledger.rows import FailureRow, RunningRow
from ..results import Calendar, JobScan, PageFacts, Range
from ..vocabulary import PeriodState
from .pasted import command
from .text import LEGEND, iso_utc, safe, span

STRIP_CELLS = 24  # the recent periods on a job's row of /


def job_path(name: str, api: bool = False) -> str:
    """Where a job's page is served (``/jobs/NAME``, or its JSON at ``/api/jobs/NAME``)."""
    return ("/api/jobs/" if api else "/jobs/") + quote(name, safe="")


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def counts(job: JobScan) -> list[tuple[str, int]]:
    found = [(str(state), job.counts.get(PeriodState(state), 0)) for state in LEGEND]
    return [(state, n) for state, n in found if n]


def cells(grid: Calendar) -> list[list[tuple[str | None, str]]]:
    return [[(state, said) for state, said, _ in row] for row in linked_cells(grid, None)]


def linked_cells(grid: Calendar, job: str | None) -> list[list[tuple[str | None, str, str | None]]]:
    """The grid's cells as (state, what a screen reader says, a link): with ``job``, each
    expected cell links to the page of the period its local day or hour starts in."""
    rows = []
    for label, cells in grid.rows:
        row = []
        for i, state in enumerate(cells):
            at = f"{label}-{i + 1:02}" if grid.unit == "day" else f"{label}T{i:02}:00"
            shown = at.replace("T", " ")
            href = None
            if job is not None and state is not None:
                href = job_path(job) + "/" + quote(at, safe="")
            row.append((state, f"{shown}: {state or 'not expected'}", href))
        rows.append(row)
    return rows


def period_link(job: str, start: datetime, key: str = "", api: bool = False) -> str:
    """Where a period's page is served: ``/jobs/NAME/2026-12-02T00:00:00Z`` (``?key=K``), or
    its JSON (``/api/jobs/…``)."""
    path = job_path(job, api) + "/" + quote(iso_utc(start), safe="")
    return path + ("?key=" + quote(key, safe="") if key else "")


def strip(grid: Calendar | None) -> list[tuple[str | None, str]]:
    if grid is None:
        return []
    flat = [cell for row in cells(grid) for cell in row]
    while flat and flat[-1][0] is None:
        flat.pop()  # what is not due yet
    return flat[-STRIP_CELLS:]


def when(job: Job | None, scan: JobScan | None, t: datetime | None) -> str:
    if t is None:
        return "never"
    if job is not None:
        return job.label(t)
    return scan.label(t) if scan is not None else iso_utc(t)


def running_rows(rows: tuple[RunningRow, ...], facts: PageFacts) -> list[dict[str, object]]:
    out = []
    for r in rows:
        left = r.lease_left
        out.append(
            {
                "job": r.job,
                "href": job_path(r.job),
                "key": r.key,
                "label": when(facts.jobs.get(r.job), None, r.period_start),
                "period_href": period_link(r.job, r.period_start, r.key),
                "attempt": r.attempt,
                "owner": r.owner or "?",
                "running_for": "?"
                if r.running_for is None
                else span(round(r.running_for.total_seconds())),
                "gone": left is not None and left.total_seconds() < 0,
                "lease": "?" if left is None else span(round(abs(left.total_seconds()))),
            }
        )
    return out


def replay_command(scan: JobScan, gap: Range, job: Job | None) -> str:
    """The exact command that runs one gap range (what `catchup why` would say of each); for
    periods suspect after a failover, the one that decides them to run (again)."""
    if gap.state == PeriodState.suspect:
        name = job.period_value if job is not None else iso_utc
        first, last = name(gap.first), name(gap.last)
        periods = first if first == last else f"{first}..{last}"
        return command("reset", scan.job, periods, reason=True)
    if gap.state == PeriodState.untracked:
        verb = ["adopt", scan.job]
    else:
        verb = ["replay", "--job", scan.job]
    since = job.period_value(gap.first) if job is not None else iso_utc(gap.first)
    # the end of the range is the next period's start: named as the job names its periods
    until = job.period_value(job.period_starting(gap.last).end) if job is not None else None
    words = [*verb, "--since", since] + (["--until", until] if until else [])
    held = scan.keys_in(gap)
    if held and len(held) <= 3:
        words += [w for key in held for w in ("--key", key)]
    if gap.state == PeriodState.exhausted:
        words.append("--retry-exhausted")
    elif gap.state in (PeriodState.unverified, PeriodState.outdated):
        words.append(f"--{gap.state}")
    reason = gap.state in (PeriodState.unverified, PeriodState.outdated, PeriodState.untracked)
    return command(*words, reason=reason)


def gap_row(scan: JobScan, gap: Range, job: Job | None) -> dict[str, object]:
    held = scan.keys_in(gap)
    waits = scan.waits(gap)
    note = None if waits is None else f"waits for {waits}"
    if held is not None:
        shown = ", ".join(held[:3]) + (f", … +{len(held) - 3:,}" if len(held) > 3 else "")
        note = f"{len(held):,} of {scan.keys:,} keys ({shown})"
    return {
        "job": scan.job,
        "href": job_path(scan.job),
        "state": str(gap.state),
        "first": scan.label(gap.first),
        "last": scan.label(gap.last),
        "periods": gap.periods,
        "note": note,
        "command": replay_command(scan, gap, job),
    }


def failure(row: FailureRow, job: Job | None) -> dict[str, object]:
    return {
        "key": row.key,
        "label": when(job, None, row.period_start),
        "href": period_link(row.job, row.period_start, row.key),
        "attempt": row.attempt,
        "exit_code": row.exit_code,
        "when": "failed " + ("at ?" if row.finished_at is None else iso_utc(row.finished_at)),
        "owner": row.owner,
        "retry": None if row.retry_after is None else "from " + iso_utc(row.retry_after),
        "error": row.error,
        "tail": None if not row.output_tail else safe(row.output_tail, lines=True),
        "cut": row.tail_cut,
    }
