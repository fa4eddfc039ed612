"""The scan report for people: the summary table, the gap ranges oldest first, the calendar
heat maps, and the same recorded as SVG, HTML or text."""

from __future__ import annotations

import heapq
import os
from collections.abc import Sequence
from datetime import datetime
from typing import TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..claims.failover import told
from ..results import Calendar, JobScan, Range, ScanReport
from ..vocabulary import PeriodState
from .limits import GAP_LIMIT
from .pulse import scheduler
from .tables import fits, print_pairs, title_lines
from .text import GLYPH, LEGEND, STYLE, iso_utc, keys_paused, safe, schedule_text

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
# shown when a job of the report has an evidence query
EVIDENCE_COLUMNS = (PeriodState.unverified, PeriodState.untracked)


def summary_states(jobs: Sequence[JobScan]) -> tuple[PeriodState, ...]:
    """The state columns of a report of ``jobs``: they add up to ``expected``. ``excluded``,
    ``blocked``, ``outdated``, ``suspect``, ``interrupted`` and ``cancelled`` only when a job
    has such a period (most reports never do), the evidence columns when a job has an
    evidence query."""
    states: tuple[PeriodState, ...] = SUMMARY_STATES
    if any(job.counts.get(PeriodState.excluded) for job in jobs):
        at = states.index(PeriodState.waived) + 1
        states = (*states[:at], PeriodState.excluded, *states[at:])
    if any(job.counts.get(PeriodState.blocked) for job in jobs):
        at = states.index(PeriodState.missing) + 1
        states = (*states[:at], PeriodState.blocked, *states[at:])
    if any(job.counts.get(PeriodState.outdated) for job in jobs):
        at = states.index(PeriodState.succeeded) + 1
        states = (*states[:at], PeriodState.outdated, *states[at:])
    if any(job.counts.get(PeriodState.suspect) for job in jobs):
        at = states.index(PeriodState.stale) + 1
        states = (*states[:at], PeriodState.suspect, *states[at:])
    if any(job.counts.get(PeriodState.interrupted) for job in jobs):
        at = states.index(PeriodState.stale)
        states = (*states[:at], PeriodState.interrupted, *states[at:])
    if any(job.counts.get(PeriodState.cancelled) for job in jobs):
        at = states.index(PeriodState.stale)
        states = (*states[:at], PeriodState.cancelled, *states[at:])
    if any(job.evidence for job in jobs):
        return states + EVIDENCE_COLUMNS
    return states


def when(job: JobScan, t: datetime | None) -> str:
    """A period start of the job as people read it (its label), or "-"."""
    return "-" if t is None else safe(job.label(t))


def gaps_oldest_first(report: ScanReport, limit: int | None = None) -> list[tuple[JobScan, Range]]:
    """The report's gaps, oldest first (then by job): the order of every report; the first
    ``limit`` of them without sorting them all."""
    pairs = ((job, gap) for job in report.jobs for gap in job.gaps)

    def key(pair: tuple[JobScan, Range]) -> tuple[datetime, str]:
        return pair[1].first, pair[0].job

    return sorted(pairs, key=key) if limit is None else heapq.nsmallest(limit, pairs, key=key)


def keys_said(job: JobScan, gap: Range, shown: int = 3) -> str | None:
    """``120 of 10,000 keys (acme, globex, initech, … +117)``; None for a job without keys."""
    held = job.keys_in(gap)
    if held is None:
        return None
    names = ", ".join(held[:shown]) + (f", … +{len(held) - shown:,}" if len(held) > shown else "")
    return f"{len(held):,} of {job.keys:,} keys ({names})"


def suspect_line(report: ScanReport) -> str | None:
    """What the report's suspect periods are and how they are decided, when it has any."""
    count = sum(job.counts.get(PeriodState.suspect, 0) for job in report.jobs)
    if report.failover is None or not count:
        return None
    held = [job for job in report.jobs if job.counts.get(PeriodState.suspect, 0)]
    by_evidence = [job.job for job in held if job.evidence]
    person = (
        "`catchup mark JOB PERIOD --done --reason …` (it ran) or "
        "`catchup reset JOB PERIOD --reason …` (run it again)"
    )
    if not by_evidence:
        decided = f"a person with {person}"
    else:
        more = " and more" if len(by_evidence) > 3 else ""
        names = ", ".join(safe(n) for n in by_evidence[:3]) + more
        rest = "; the others by" if len(by_evidence) < len(held) else ", or by"
        decided = f"the evidence of {names} at the next claim{rest} a person with {person}"
    return (
        f"{count:,} suspect period{'s' if count != 1 else ''}: {told(report.failover)}; not "
        f"run until decided: {decided}"
    )


def gap_count(report: ScanReport) -> int:
    return sum(len(job.gaps) for job in report.jobs)


def scan_tables(console: Console, report: ScanReport, *, limit: int | None = GAP_LIMIT) -> None:
    """One line per job (counts, oldest gap, last success), then the oldest ``limit`` gap
    ranges (every one with ``None``), saying how many more there are. A table where it fits the
    console, else one block per job and one line per range, so names and dates stay whole."""
    _summary(console, report)
    _job_notes(console, report)
    total = gap_count(report)
    if not total:
        unread = [job.job for job in report.jobs if job.keys_error]
        if unread:  # not "no gaps": what those jobs' keys would show is not known
            names = ", ".join(safe(name) for name in unread)
            console.print(Text(f"no gaps on the keys known; not read now: {names}", style="red"))
        else:
            console.print(Text("no gaps", style="green"))
        return
    rows = gaps_oldest_first(report, limit)
    _gap_ranges(console, rows)
    for job, gap in rows:
        if (waits := job.waits(gap)) is not None:
            span = when(job, gap.first) + (
                "" if gap.first == gap.last else f" .. {when(job, gap.last)}"
            )
            console.print(Text(f"{job.job} {span} waits for {safe(waits)}", style=STYLE["blocked"]))
    if total > len(rows):
        console.print(
            Text(
                f"{len(rows)} of {total:,} gap ranges shown, oldest first: --limit N or --all "
                "for more (--json always has every one)",
                style="yellow",
            )
        )


def _summary(console: Console, report: ScanReport) -> None:
    """One line per job: a table where it fits, else a block per job."""
    window = f"{iso_utc(report.since)} .. {iso_utc(report.until)}"
    title = f"catchup scan · {window} · database clock {iso_utc(report.generated_at)}"
    states = summary_states(report.jobs)
    headers = ["job", "schedule", "expected", *states, "oldest gap", "last success"]
    lines = [_summary_cells(job, states) for job in report.jobs]
    if fits(console, headers, lines):
        summary = Table(title=title, title_justify="left")
        for name in headers:
            numeric = name == "expected" or name in states
            summary.add_column(name, justify="right" if numeric else "left")
        for job, cells in zip(report.jobs, lines, strict=True):
            summary.add_row(*_styled(job, cells, states))
        console.print(summary)
    else:
        title_lines(console, title)
        for job in report.jobs:
            _stacked(console, job, states)


def _job_notes(console: Console, report: ScanReport) -> None:
    """What went wrong reading a job (its evidence, its keys) and who decides suspect periods."""
    for job in report.jobs:
        if job.evidence_error:  # the job's own text, plain
            console.print(Text(f"{job.job}: {safe(job.evidence_error)}", style="red"))
        if job.keys_error:  # names the job; scanned on the keys it read last
            console.print(Text(safe(job.keys_error), style="red"))
    if (said := suspect_line(report)) is not None:
        console.print(Text(said, style=STYLE["suspect"]))


def _gap_ranges(console: Console, rows: list[tuple[JobScan, Range]]) -> None:
    """The gap ranges shown, oldest first: a table where it fits, else a line each."""
    gap_cells = [
        [job.job, gap.state, when(job, gap.first), when(job, gap.last), str(gap.periods)]
        + (
            [safe(keys_said(job, gap) or "")]
            if any(j.keys_in(g) is not None for j, g in rows)
            else []
        )
        for job, gap in rows
    ]
    heading = ["job", "state", "first", "last", "periods"]
    if gap_cells and len(gap_cells[0]) > len(heading):
        heading.append("keys")
    if fits(console, heading, gap_cells):
        table = Table(title="gaps, oldest first", title_justify="left")
        for name in heading:
            table.add_column(name, justify="right" if name == "periods" else "left")
        for (_, gap), row in zip(rows, gap_cells, strict=True):
            table.add_row(row[0], Text(gap.state, style=STYLE.get(gap.state, "")), *row[2:])
        console.print(table)
    else:
        console.print(Text("gaps, oldest first", style="bold"))
        for (job, gap), row in zip(rows, gap_cells, strict=True):
            line = Text(f"{row[0]} ")
            line.append(gap.state, style=STYLE.get(gap.state, ""))
            span = row[2] if row[2] == row[3] else f"{row[2]} .. {row[3]}"
            held = job.keys_in(gap)
            each = gap.periods // len(held) if held else gap.periods  # a key's own periods
            line.append(f" {span} ({each:,} period{'s' if each != 1 else ''}")
            line.append(" each)" if held and len(held) > 1 else ")")
            if len(row) > 5 and row[5]:
                line.append(f": {row[5]}")
            console.print(line)


def _summary_cells(job: JobScan, states: tuple[PeriodState, ...]) -> list[str]:
    gaps = job.gaps
    return [
        job.job + (" (paused)" if job.paused else "") + keys_paused(job.paused_keys),
        schedule_text(job.schedule, job.timezone),
        str(job.expected),
        *(str(job.counts[state]) for state in states),
        when(job, gaps[0].first) if gaps else "-",
        when(job, job.last_success) if job.last_success else "never",
    ]


def _styled(job: JobScan, cells: list[str], states: tuple[PeriodState, ...]) -> list[Text | str]:
    gaps = job.gaps
    out: list[Text | str] = [Text(cells[0], style="bold"), cells[1], cells[2]]
    for state, cell in zip(states, cells[3:-2], strict=True):
        count = job.counts[state]
        style = STYLE[state] if count and (state != PeriodState.succeeded or not gaps) else ""
        out.append(Text(cell, style="dim" if not count else style))
    return [*out, *cells[-2:]]


def _stacked(console: Console, job: JobScan, states: tuple[PeriodState, ...]) -> None:
    """A job's summary line for a narrow console: whole names and dates, wrapped at spaces."""
    cells = _summary_cells(job, states)
    console.print(Text(f"{cells[0]} · {cells[1]} · {job.expected} expected", style="bold"))
    counts = [f"{job.counts[s]} {s}" for s in states if job.counts[s]]
    print_pairs(
        console,
        (
            ", ".join(counts) or "nothing due",
            f"oldest gap {cells[-2]}",
            f"last success {cells[-1]}",
        ),
    )


def calendars(console: Console, found: Sequence[Calendar]) -> None:
    """One heat map per job: a cell per day (rows are months) or per hour (rows are days)."""
    for grid in found:
        unit = "day of month" if grid.unit == "day" else "hour of day 00..23"
        header = f"{unit} ({grid.timezone})"
        console.print(Text(f"{grid.job} · {header}", style="bold"))
        if not grid.rows:
            console.print(Text("  nothing due yet", style="dim"))
        for n, (label, cells) in enumerate(grid.rows):
            line = Text(f"  {label:<10} ")
            for state in cells:
                if state is None:
                    line.append("· ", style="dim")
                else:
                    line.append(GLYPH[state] + " ", style=STYLE.get(state, ""))
            console.print(line, soft_wrap=True)
            if grid.key_gaps and any(grid.key_gaps[n]):
                console.print(_key_gap_line(grid, n), style="dim")
        if grid.truncated:
            console.print(Text("  (older periods not shown: see the gap table)", style="dim"))
    legend = Text("legend: ")
    for state in LEGEND:
        legend.append(GLYPH[state] + " ", style=STYLE[state])
        legend.append(state + "  ")
    legend.append("· ", style="dim")
    legend.append("not expected")
    console.print(legend)


def _key_gap_line(grid: Calendar, n: int) -> Text:
    """Under a row of a keyed job's calendar: how many of its keys have a gap in each cell
    that has one, and which when it is one (``3: 120, 4..5: 1 (acme)``)."""

    def name(i: int) -> str:
        return str(i + 1) if grid.unit == "day" else f"{i:02}:00"

    said = []
    counts = grid.key_gaps[n]
    keys = grid.gap_key[n] if grid.gap_key else ("",) * len(counts)
    i = 0
    while i < len(counts):
        j = i
        while j + 1 < len(counts) and (counts[j + 1], keys[j + 1]) == (counts[i], keys[i]):
            j += 1  # cells in a row with the same count (and key) are said once
        if counts[i]:
            cells = name(i) if i == j else f"{name(i)}..{name(j)}"
            said.append(f"{cells}: {counts[i]:,}" + (f" ({safe(keys[i])})" if keys[i] else ""))
        i = j + 1
    what = "days" if grid.unit == "day" else "hours"
    return Text(f"  {'':<10} keys with a gap ({what}), of {grid.keys:,}: " + ", ".join(said))


def recorder(sink: TextIO) -> Console:
    """A console that records what is printed (in colour, 160 columns, no markup read from the
    text) for an SVG, HTML or text file, writing nothing to ``sink``'s terminal."""
    return Console(
        record=True,
        width=160,
        file=sink,
        force_terminal=True,
        color_system="truecolor",
        markup=False,
        emoji=False,
        highlight=False,
    )


def export(path: str, report: ScanReport, *, limit: int | None = GAP_LIMIT) -> str:
    """The table report with calendars, recorded by Rich and exported as SVG, HTML or text
    (by the name's ending), to attach to a ticket or keep as a CI artefact."""
    with open(os.devnull, "w") as sink:
        out = recorder(sink)
        scan_tables(out, report, limit=limit)
        if report.pulse is not None:
            scheduler(out, report.pulse)
        calendars(out, report.calendars)
    if path.endswith(".svg"):
        return out.export_svg(title="catchup scan")
    if path.endswith(".html"):
        return out.export_html()
    return out.export_text()
