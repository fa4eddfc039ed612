"""Output for people on a terminal (Rich, markup off): one function per result of the facade,
and the progress of a replay. Knows neither click nor the database."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..explain import Explanation, describe_due
from ..models import STATUSES, Outcome, SchedulerHealth
from ..results import Changes, Connected, History, JobsReport, Migrated, NotDue, Paused, Resumed
from ..schedule import is_utc
from ..vocabulary import EventAction, Status
from .limits import GAP_LIMIT
from .text import STYLE, iso_utc, safe, schedule_text, seconds, span

if TYPE_CHECKING:
    from ..doctor import Finding
    from ..job import Job
    from ..results import Batch, Planned


def outcome(console: Console, result: Outcome) -> None:
    text = Text()
    text.append(safe(f"{result.job} {result.label}"), style="bold")
    if result.attempt is not None:
        text.append(f" attempt {result.attempt}")
    text.append(": ")
    text.append(result.status, style=STYLE.get(result.status, ""))
    if result.seconds is not None:
        text.append(f" in {seconds(result.seconds)}")
    if result.detail:
        text.append(f" ({safe(result.detail)})")
    console.print(text, soft_wrap=True)


JOBS_COLUMNS = (
    "job",
    "schedule",
    "first period",
    "last success",
    "next due",
    "done / expected",
    "running",
    "failed",
)


def jobs(console: Console, report: JobsReport) -> None:
    """A row per job; on a console too narrow for the table, a block per job, so names and
    dates stay whole."""
    rows = [
        [
            line.job + (" (paused)" if line.paused else ""),
            schedule_text(line.schedule, line.timezone),
            line.first_period,
            line.last_success or "never",
            iso_utc(line.next_due) if line.next_due else "-",
            f"{line.done} / {line.expected}",
            str(line.running),
            str(line.failed),
        ]
        for line in report.lines
    ]
    title = f"catchup jobs · {report.database}"
    if not fits(console, JOBS_COLUMNS, rows):
        console.print(Text(title, style="bold"))
        for row in rows:
            console.print(Text(f"{row[0]} · {row[1]}", style="bold"))
            console.print(
                Text(
                    f"  done {row[5]} · running {row[6]} · failed {row[7]} · first period "
                    f"{row[2]} · last success {row[3]} · next due {row[4]}"
                )
            )
        scheduler(console, report.health)
        return
    table = Table(title=title, title_justify="left")
    for column in JOBS_COLUMNS:
        table.add_column(column, justify="right" if column in ("running", "failed") else "left")
    for line, row in zip(report.lines, rows, strict=True):
        gaps = line.expected - line.done
        table.add_row(
            *row[:5],
            Text(row[5], style="green" if gaps == 0 else "yellow"),
            row[6],
            Text(row[7], style="red" if line.failed else ""),
        )
    console.print(table)
    scheduler(console, report.health)


def fits(console: Console, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> bool:
    """Whether a table of these cells fits the console without cutting a cell."""
    widths = [len(h) for h in headers]
    for row in rows:
        for n, cell in enumerate(row):
            widths[n] = max(widths[n], len(cell))
    return sum(widths) + 3 * len(widths) + 1 <= console.width


def history(console: Console, result: History) -> None:
    """The attempts, newest first, then the changes made to the job (the audit trail); each
    says how many of how many it shows."""
    table = Table(title=f"history of {safe(result.job)}", title_justify="left")
    for column in ("period", "attempt", "status", "owner", "started", "took", "exit", "error"):
        table.add_column(column)
    for row in result.attempts:
        took = ""
        if row.finished_at is not None:
            took = seconds((row.finished_at - row.started_at).total_seconds())
        table.add_row(
            safe(result.label(row.period_start)),
            str(row.attempt),
            Text(row.status, style=STYLE.get(row.status, "")),
            safe(row.owner or ""),
            iso_utc(row.started_at),
            took,
            "" if row.exit_code is None else str(row.exit_code),
            safe(row.error or ""),
        )
    console.print(table)
    _shown(console, "attempts", len(result.attempts), result.total_attempts, result.limit)
    attempts = result.attempts
    if result.period is not None and attempts and attempts[0].output_tail:
        console.rule(f"output of attempt {attempts[0].attempt} (tail)")
        console.print(Text(safe(attempts[0].output_tail, lines=True)), soft_wrap=True)
    if not result.changes:
        return
    changes = Table(title=f"changes to {safe(result.job)}", title_justify="left")
    for column in ("at", "action", "period", "was", "by", "reason"):
        changes.add_column(column)
    for event in result.changes:
        changes.add_row(
            iso_utc(event.at),
            event.action,
            safe(result.label(event.period_start)) if event.period_start else "(job)",
            safe(event.previous or ""),
            safe(event.actor),
            safe(event.reason or ""),
        )
    console.print(changes)
    _shown(console, "changes", len(result.changes), result.total_changes, result.limit)


def _shown(console: Console, what: str, shown: int, total: int, limit: int) -> None:
    if total > shown:
        console.print(
            Text(f"{shown} of {total} {what}, newest first (--limit {max(limit, total)} for all)"),
            style="dim",
        )


VERB = {
    EventAction.done: "marked done",
    EventAction.skip: "marked skip",
    EventAction.reset: "reset",
}


def changes(console: Console, result: Changes) -> None:
    """What a mark or reset did, one line per period, then how many changed."""
    for row in result.rows:
        line = Text(safe(f"{row.job} {row.label}: "))
        now = f"{row.now} (runnable)" if result.action == EventAction.reset else str(row.now)
        if not row.changed:
            line.append(f"unchanged (already {row.now})", style="dim")
        else:
            line.append(f"{row.previous} → {now}", style=STYLE.get(row.now, ""))
        console.print(line, soft_wrap=True)
    console.print(f"{VERB[result.action]}: {result.changed} of {len(result.rows)} period(s)")


def paused(console: Console, result: Paused) -> None:
    console.print(Text(f"{result.job}: paused since {iso_utc(result.since)}"))


def resumed(console: Console, result: Resumed) -> None:
    if not result.resumed:
        console.print(Text(f"{result.job}: not paused; nothing to resume"))
        return
    policy = {
        "all": f"every gap of the last {span(result.catchup_window)}, at most "
        f"{result.max_per_tick} a tick",
        "latest": "only the newest due period",
        "none": "only periods that become due from now on",
    }[result.catchup]
    console.print(
        Text(f"{result.job}: resumed; the next tick runs {policy} (catchup = {result.catchup!r})"),
        soft_wrap=True,
    )


def not_due(console: Console, result: NotDue) -> None:
    console.print(
        Text(
            f"{result.job}: nothing due yet (first period {result.label} due {iso_utc(result.due)})"
        ),
        soft_wrap=True,
    )


def migrated(console: Console, result: Migrated) -> None:
    if result.applied:
        console.print(
            f"schema {result.schema}: applied {', '.join(result.applied)} "
            f"(now at version {result.version})"
        )
    else:
        console.print(f"schema {result.schema}: up to date (version {result.version})")


def connected(console: Console, info: Connected) -> None:
    """Which database a command uses (on stderr), never with a password."""
    note = f" ({info.note})" if info.note else ""
    console.print(
        Text(
            f"database: {info.database}, PostgreSQL {info.version}, schema {info.schema}{note}",
            style="dim",
        ),
        soft_wrap=True,
    )


MARKS = {
    "ok": ("✓", "green"),
    "info": ("i", "blue"),
    "warning": ("!", "yellow"),
    "serious": ("✗", "bold red"),
}


def findings(console: Console, found: Sequence[Finding]) -> None:
    """The doctor's findings, one line each."""
    for finding in found:
        mark, style = MARKS[finding.level]
        line = Text(f"{mark} ", style=style)
        line.append(f"{finding.topic}: ", style="bold")
        line.append(safe(finding.text))
        console.print(line, soft_wrap=True)


def scheduler(console: Console, health: SchedulerHealth) -> None:
    """One line on the scheduler's pulse, and a warning per problem."""
    if health.last_tick is None:
        console.print(
            Text(
                "scheduler: no tick recorded yet (is something calling `catchup tick`?)",
                style="dim",
            )
        )
    else:
        ago = (health.now - health.last_tick).total_seconds()
        every = f", about every {span(health.interval)}" if health.interval else ""
        console.print(
            Text(
                f"scheduler: last tick {iso_utc(health.last_tick)} from "
                f"{safe(health.last_host or '')} ({span(ago)} ago{every})",
                style="dim",
            )
        )
    for warning in health.warnings:
        console.print(Text(f"warning: {safe(warning)}", style="yellow"), soft_wrap=True)


# -- replay and tick -------------------------------------------------------------------------


def batch_summary(console: Console, batch: Batch, title: str = "replay") -> None:
    """Per job: how many periods succeeded, failed, were skipped, lost or interrupted."""
    totals = batch.totals
    table = Table(title=title, title_justify="left")
    table.add_column("job")
    columns = STATUSES
    for name in columns:
        table.add_column(name, justify="right")
    per_job: dict[str, Counter[str]] = {}
    for outcome in batch.outcomes:
        per_job.setdefault(outcome.job, Counter())[outcome.status] += 1
    for job, counts in sorted(per_job.items()):
        table.add_row(
            job, *(Text(str(counts[c]), style=STYLE[c] if counts[c] else "dim") for c in columns)
        )
    table.add_row(
        Text("total", style="bold"), *(Text(str(totals[c]), style="bold") for c in columns)
    )
    console.print(table)


def tick_summary(console: Console, batch: Batch) -> None:
    """One line: what a tick did (the line a cron or systemd log keeps)."""
    totals = batch.totals
    errors = totals[Status.error]
    console.print(
        f"tick: {totals[Status.succeeded]} succeeded, {totals[Status.failed]} failed, "
        f"{totals[Status.skipped]} skipped, {totals[Status.lost]} lost"
        + (f", {errors} database error(s)" if errors else ""),
        highlight=False,
    )


def plan(
    console: Console, batch: Batch, *, each: bool = False, limit: int | None = GAP_LIMIT
) -> None:
    """A dry run: what would run, and that nothing was written. By default a line per job (its
    periods by state, from its first to its last), then the oldest ``limit`` runs of consecutive
    periods in one state, saying how many more; ``each``: a line per period, oldest first.
    Streamed: the plan is read once and never held whole."""
    if each:
        for item in batch.plan:
            line = Text(safe(f"would run {item.job.name} {item.job.label(item.period.start)} "))
            line.append(f"({item.state})", style=STYLE.get(item.state, ""))
            console.print(line, soft_wrap=True)
        console.print(f"{batch.planned:,} period(s) would run; nothing was written")
        return
    jobs, oldest, runs = plan_summary(batch.plan, limit)
    for job in jobs.values():
        states = ", ".join(f"{n:,} {state}" for state, n in job.states.items())
        first, last = job.job.label(job.first), job.job.label(job.last)
        span_text = first if job.periods == 1 else f"{first} .. {last}"
        many = f"{job.periods:,} period{'s' if job.periods != 1 else ''}"
        console.print(Text(safe(f"would run {job.job.name}: {many} ({states}), {span_text}")))
    if oldest:
        console.print(Text("runs of consecutive periods, oldest first", style="bold"))
    for run in oldest:
        names = run.job.label(run.first)
        if run.periods > 1:
            names += f" .. {run.job.label(run.last)}"
        line = Text(safe(f"  {run.job.name} {names} "))
        line.append(f"({run.periods:,} {run.state})", style=STYLE.get(run.state, ""))
        console.print(line)
    if runs > len(oldest):
        console.print(
            Text(
                f"{len(oldest)} of {runs:,} runs shown: --limit N or --all for more, --each for "
                "every period",
                style="yellow",
            )
        )
    console.print(f"{batch.planned:,} period(s) would run; nothing was written")


@dataclass
class PlannedJob:
    """A dry run's periods of one job: how many, by state, from which to which."""

    job: Job
    periods: int
    states: dict[str, int]
    first: datetime
    last: datetime


@dataclass
class PlannedRun:
    """Consecutive periods of one job in one state."""

    job: Job
    state: str
    first: datetime
    last: datetime
    periods: int
    end: datetime


def plan_summary(
    items: Iterable[Planned], limit: int | None
) -> tuple[dict[str, PlannedJob], list[PlannedRun], int]:
    """Per job totals, the oldest ``limit`` runs (every run with ``None``), and how many runs
    there are: memory follows the jobs and ``limit``, not the periods."""
    jobs: dict[str, PlannedJob] = {}
    open_runs: dict[str, PlannedRun] = {}
    # the oldest runs so far, as a max-heap on (start, order): its top is the one to drop
    kept: list[tuple[float, int, PlannedRun]] = []
    runs = 0

    def close(run: PlannedRun) -> None:
        nonlocal runs
        runs += 1
        entry = (-run.first.timestamp(), -runs, run)
        if limit is None or len(kept) < limit:
            heapq.heappush(kept, entry)
        elif entry[:2] > kept[0][:2]:
            heapq.heapreplace(kept, entry)

    for item in items:
        name, start, end = item.job.name, item.period.start, item.period.end
        job = jobs.get(name)
        if job is None:
            job = jobs[name] = PlannedJob(item.job, 0, {}, start, start)
        job.periods += 1
        job.states[item.state] = job.states.get(item.state, 0) + 1
        job.last = start
        run = open_runs.get(name)
        if run is not None and run.state == item.state and run.end == start:
            run.last, run.end, run.periods = start, end, run.periods + 1
            continue
        if run is not None:
            close(run)
        open_runs[name] = PlannedRun(item.job, item.state, start, start, 1, end)
    for run in open_runs.values():
        close(run)
    return jobs, [run for _, _, run in sorted(kept, reverse=True)], runs


class Progress:
    """A replay's progress: a Rich bar on a terminal (failures printed above it), or one line
    per finished period otherwise."""

    def __init__(self, out: Console, enabled: bool) -> None:
        self.out = out
        self.enabled = enabled
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> Progress:
        if self.enabled:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as Bar

            self.bar = Bar(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=self.out,
            )
            self.bar.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.bar is not None:
            self.bar.__exit__(kind, exc, tb)

    def plan(self, total: int) -> None:
        if self.bar is not None:
            self.task = self.bar.add_task("replay", total=total)

    def start(self, item: Planned) -> None:
        if self.bar is not None and self.task is not None:
            label = safe(f"{item.job.name} {item.job.label(item.period.start)}")
            self.bar.update(self.task, description=label)

    def done(self, result: Outcome) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.advance(self.task)
            if result.status != Status.succeeded and result.status != Status.skipped:
                outcome(self.bar.console, result)
        else:
            outcome(self.out, result)


def explanation(console: Console, ex: Explanation) -> None:
    """The periods of one job, UTC (and local, for a local time zone), with when each is due."""
    extra = f" (of which spread {span(ex.spread.total_seconds())})" if ex.spread else ""
    console.print(
        Text(
            f"{ex.job}: {ex.schedule}, time zone {ex.timezone}, delay "
            f"{span(ex.delay.total_seconds())}{extra}",
            style="bold",
        ),
        soft_wrap=True,
    )
    local = not is_utc(ex.timezone)
    dst = any(row.dst for row in ex.rows)
    # the period column only when it says something the start does not (a date)
    named = any(not row.label.startswith(iso_utc(row.period.start)) for row in ex.rows)
    columns = (["period"] if named else []) + ["start (UTC)", "end (UTC)"]
    columns += [f"start ({ex.timezone})", f"end ({ex.timezone})"] if local else []
    columns += ["length", "due"] + (["DST"] if dst else [])
    table = Table()
    for column in columns:
        table.add_column(column)
    for row in ex.rows:
        cells = [row.label] if named else []
        cells += [iso_utc(row.period.start), iso_utc(row.period.end)]
        if local:
            cells += [f"{t:%Y-%m-%d %H:%M %Z}" for t in (row.local_start, row.local_end)]
        cells += [span((row.period.end - row.period.start).total_seconds())]
        table.add_row(
            *cells,
            Text(describe_due(row, ex.now), style="green" if row.is_due else ""),
            *([Text(row.dst or "", style="yellow")] if dst else []),
        )
    console.print(table)
    for warning in ex.warnings:
        console.print(Text(f"note: {warning}", style="yellow"), soft_wrap=True)
