"""What tick and replay print: a per-job summary, a tick's one line, a dry run's plan (summarised
or period by period, streamed), and a replay's progress."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..results import STATUSES, Outcome
from ..vocabulary import OutcomeStatus
from .limits import GAP_LIMIT
from .tables import outcome
from .text import STYLE, iso_utc, safe, span

if TYPE_CHECKING:
    from ..config.job import Job
    from ..results import Batch, Planned

# Imports inside functions: at first use: only a run on a terminal shows progress.


def batch_summary(console: Console, batch: Batch, title: str = "replay") -> None:
    """Per job: how many periods succeeded, failed, were skipped, lost or interrupted."""
    totals = batch.totals
    table = Table(title=title, title_justify="left")
    table.add_column("job")
    # succeeded and failed always; the others where something had them (80 columns hold it)
    always = (OutcomeStatus.succeeded, OutcomeStatus.failed)
    columns = tuple(s for s in STATUSES if s in always or totals[s])
    for name in columns:
        table.add_column(name, justify="right")
    per_job: dict[str, Counter[str]] = {}
    for done in batch.outcomes:
        per_job.setdefault(done.job, Counter())[done.status] += 1
    for job, counts in sorted(per_job.items()):
        table.add_row(
            job, *(Text(str(counts[c]), style=STYLE[c] if counts[c] else "dim") for c in columns)
        )
    table.add_row(
        Text("total", style="bold"), *(Text(str(totals[c]), style="bold") for c in columns)
    )
    console.print(table)
    left_alone(console, batch)


def left_alone(console: Console, batch: Batch) -> None:
    for new, old in batch.held:
        verb = "would run" if batch.dry_run else "ran"
        said = f"held: {new} {verb} nothing (it looks like {old} renamed: see the warning)"
        console.print(Text(safe(said), style="yellow"), soft_wrap=True)
    for name, count in batch.upstream:
        verb = "would also run" if batch.dry_run else "also planned"
        console.print(
            Text(f"{verb} {count:,} period(s) of {name} that the planned ones wait for (after)")
        )
    if batch.untracked:
        console.print(
            Text(
                f"{batch.untracked:,} untracked period(s) left alone: their output exists but "
                "the ledger has no run (catchup adopt records them"
                + (
                    "; a keyed job's: catchup mark JOB PERIOD --key K --done)"
                    if batch.untracked_keys
                    else ")"
                ),
                style=STYLE["untracked"],
            )
        )


def tick_summary(console: Console, batch: Batch) -> None:
    """One line: what a tick did (the line a cron or systemd log keeps); then, when there are
    any, one line of the gaps max_per_tick left and one of those before catchup_window."""
    _totals_line(console, batch, "tick")
    if batch.left.later:
        console.print(
            f"left to later ticks by max_per_tick: {_per_job(batch.left.later)} gap period(s)",
            highlight=False,
        )
    if batch.left.outside:
        name, _, first = batch.left.outside[0]
        console.print(
            f"before catchup_window: {_per_job(batch.left.outside)} gap period(s); no tick runs "
            f"them, a replay does: catchup replay --job {safe(name)} --since {iso_utc(first)}",
            highlight=False,
        )


def _per_job(counts: Iterable[tuple[str, int] | tuple[str, int, datetime]], shown: int = 5) -> str:
    """``export 12, billing 3`` (and how many jobs more)."""
    counts = list(counts)
    said = ", ".join(f"{safe(c[0])} {c[1]:,}" for c in counts[:shown])
    return said + (f" and {len(counts) - shown} more job(s)" if len(counts) > shown else "")


def run_summary(console: Console, batch: Batch) -> None:
    """One line: what ``catchup run`` of every key of a job did."""
    _totals_line(console, batch, "run")


def _totals_line(console: Console, batch: Batch, word: str) -> None:
    totals = batch.totals
    errors, unstartable = totals[OutcomeStatus.error], totals[OutcomeStatus.unstartable]
    console.print(
        f"{word}: {totals[OutcomeStatus.succeeded]} succeeded, "
        f"{totals[OutcomeStatus.failed]} failed, {totals[OutcomeStatus.skipped]} skipped, "
        f"{totals[OutcomeStatus.lost]} lost"
        + (
            f", {totals[OutcomeStatus.blocked]} blocked (waiting for upstream periods)"
            if totals[OutcomeStatus.blocked]
            else ""
        )
        + (f", {errors} database error(s)" if errors else "")
        + (f", {unstartable} could not start (no attempt counted)" if unstartable else "")
        + (
            f"; {batch.deferred} left for the next tick (--max-time {span(batch.max_time)})"
            if batch.deferred and batch.max_time is not None
            else ""
        )
        + (f"; compacted {batch.compacted:,} old period(s)" if batch.compacted else "")
        + _held(batch),
        highlight=False,
    )


def _held(batch: Batch) -> str:
    """``; held: weekly-report (nothing claimed)``: the jobs a rename in progress holds (the
    line that says why and the ways out is the warning on stderr)."""
    if not batch.held:
        return ""
    return f"; held: {', '.join(safe(new) for new, _ in batch.held)} (nothing claimed)"


def plan(
    console: Console, batch: Batch, *, each: bool = False, limit: int | None = GAP_LIMIT
) -> None:
    """A dry run: what would run, and that nothing was written. By default a line per job (its
    periods by state, from its first to its last), then the oldest ``limit`` runs of consecutive
    periods in one state, saying how many more; ``each``: a line per period, oldest first.
    Streamed: the plan is read once and never held whole."""
    if each:
        for item in batch.plan:
            line = Text(safe(f"would run {named(item.job)} {item.job.label(item.period.start)} "))
            line.append(f"({item.state})", style=STYLE.get(item.state, ""))
            console.print(line, soft_wrap=True)
        console.print(f"{batch.planned:,} period(s) would run; nothing was written")
        left_alone(console, batch)
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
        line = Text(safe(f"  {named(run.job)} {names} "))
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
    left_alone(console, batch)


def named(job: Job) -> str:
    """A job's name, and its key for one key's periods of a job with keys."""
    return f"{job.name} {job.key}" if job.key else job.name


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
    open_runs: dict[tuple[str, str], PlannedRun] = {}
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
        series = (name, item.job.key)  # a job's runs, per key for a job with keys
        run = open_runs.get(series)
        if run is not None and run.state == item.state and run.end == start:
            run.last, run.end, run.periods = start, end, run.periods + 1
            continue
        if run is not None:
            close(run)
        open_runs[series] = PlannedRun(item.job, item.state, start, start, 1, end)
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
            label = safe(f"{named(item.job)} {item.job.label(item.period.start)}")
            self.bar.update(self.task, description=label)

    def done(self, result: Outcome) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.advance(self.task)
            if result.status != OutcomeStatus.succeeded and result.status != OutcomeStatus.skipped:
                outcome(self.bar.console, result)
        else:
            outcome(self.out, result)
