"""The scan report for people: the summary table, the gap ranges oldest first, the calendar
heat maps, and the same recorded as SVG, HTML or text."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import ConfigError
from ..models import Calendar, Island, JobScan, ScanReport
from ..vocabulary import PeriodState
from .tables import scheduler
from .text import GLYPH, LEGEND, STYLE, iso_utc, safe, schedule_text

# the summary's state columns: with ``expected`` they add up (every period is in one state)
SUMMARY_STATES = (
    PeriodState.succeeded,
    PeriodState.waived,
    PeriodState.missing,
    PeriodState.failed,
    PeriodState.exhausted,
    PeriodState.stale,
    PeriodState.running,
)


def when(job: JobScan, t: datetime | None) -> str:
    """A period start of the job as people read it (its label), or "-"."""
    return "-" if t is None else safe(job.label(t))


def gaps_oldest_first(report: ScanReport) -> list[tuple[JobScan, Island]]:
    """Every gap of the report, oldest first (then by job): the order of every report."""
    return sorted(
        ((job, gap) for job in report.jobs for gap in job.gaps),
        key=lambda pair: (pair[1].first, pair[0].job),
    )


def scan_tables(console: Console, report: ScanReport) -> None:
    """The summary table, then the gap ranges oldest first, coloured by state."""
    window = f"{iso_utc(report.since)} .. {iso_utc(report.until)}"
    summary = Table(
        title=f"catchup scan · {window} · database clock {iso_utc(report.generated_at)}",
        title_justify="left",
    )
    summary.add_column("job")
    summary.add_column("schedule")
    for name in ("expected", *SUMMARY_STATES):
        summary.add_column(name, justify="right")
    summary.add_column("oldest gap")
    summary.add_column("last success")
    for job in report.jobs:
        gaps = job.gaps
        cells: list[Text | str] = [
            Text(job.job + (" (paused)" if job.paused else ""), style="bold"),
            schedule_text(job.schedule, job.timezone),
            str(job.expected),
        ]
        for state in SUMMARY_STATES:
            count = job.counts[state]
            style = STYLE[state] if count and (state != PeriodState.succeeded or not gaps) else ""
            cells.append(Text(str(count), style="dim" if not count else style))
        cells.append(when(job, gaps[0].first) if gaps else "-")
        cells.append(when(job, job.last_success) if job.last_success else "never")
        summary.add_row(*cells)
    console.print(summary)
    rows = gaps_oldest_first(report)
    if not rows:
        console.print(Text("no gaps", style="green"))
        return
    table = Table(title="gaps, oldest first", title_justify="left")
    for name in ("job", "state", "first", "last", "periods"):
        table.add_column(name, justify="right" if name == "periods" else "left")
    for job, gap in rows:
        style = STYLE.get(gap.state, "")
        table.add_row(
            job.job,
            Text(gap.state, style=style),
            when(job, gap.first),
            when(job, gap.last),
            str(gap.periods),
        )
    console.print(table)


def calendars(console: Console, grids: Sequence[Calendar]) -> None:
    """One heat map per job: a cell per day (rows are months) or per hour (rows are days)."""
    for grid in grids:
        unit = "day of month" if grid.unit == "day" else "hour of day 00..23"
        header = f"{unit} ({grid.timezone})"
        console.print(Text(f"{grid.job} · {header}", style="bold"))
        if not grid.rows:
            console.print(Text("  nothing due yet", style="dim"))
        for label, cells in grid.rows:
            line = Text(f"  {label:<10} ")
            for state in cells:
                if state is None:
                    line.append("· ", style="dim")
                else:
                    line.append(GLYPH[state] + " ", style=STYLE.get(state, ""))
            console.print(line, soft_wrap=True)
        if grid.truncated:
            console.print(Text("  (older periods not shown: see the gap table)", style="dim"))
    legend = Text("legend: ")
    for state in LEGEND:
        legend.append(GLYPH[state] + " ", style=STYLE[state])
        legend.append(state + "  ")
    legend.append("· ", style="dim")
    legend.append("not expected")
    console.print(legend)


def save(path: str, report: ScanReport) -> None:
    """The table report with calendars, recorded by Rich and saved as SVG, HTML or text, to
    attach to a ticket or keep as a CI artefact."""
    with open(os.devnull, "w") as sink:
        recorder = Console(
            record=True,
            width=160,
            file=sink,
            force_terminal=True,
            color_system="truecolor",
            markup=False,
            emoji=False,
        )
        scan_tables(recorder, report)
        if report.health is not None:
            scheduler(recorder, report.health)
        calendars(recorder, report.calendars)
    try:
        if path.endswith(".svg"):
            recorder.save_svg(path, title="catchup scan")
        elif path.endswith(".html"):
            recorder.save_html(path)
        else:
            recorder.save_text(path)
    except OSError as exc:
        raise ConfigError(f"--output {path}: {exc.strerror}") from None
