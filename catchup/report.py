"""Rendering for people (Rich) and for scripts (JSON). Knows neither click nor the database."""

from __future__ import annotations

import json
import os
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from .operations import Change

from .errors import ConfigError
from .explain import Explanation, describe_due
from .models import (
    STATUSES,
    Calendar,
    EventRow,
    HistoryRow,
    Island,
    JobLine,
    JobScan,
    Outcome,
    ScanReport,
    SchedulerHealth,
)
from .schedule import is_utc, iso_utc, span

STYLE = {
    "succeeded": "green",
    "waived": "cyan",
    "running": "blue",
    "skipped": "dim",
    "failed": "red",
    "exhausted": "bold red",
    "lost": "magenta",
    "interrupted": "yellow",
    "error": "bold red",
    "missing": "yellow",
    "stale": "magenta",
}


# Bidirectional overrides and isolates reorder what a terminal shows ("Trojan Source").
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def safe(text: str, *, lines: bool = False) -> str:
    """Text that a user or a job wrote, made fit to print: control characters (escape sequences,
    BEL, backspace, C1 codes, DEL) and bidirectional overrides are shown escaped (``\\x1b``),
    so nothing stored can move the cursor, retitle the terminal, or hide a link. Tabs stay;
    newlines stay where ``lines`` (an output tail), else they are escaped too (a table cell).
    Consoles print with markup off, so brackets are plain text as well."""
    out = []
    for c in text:
        if c == "\t" or (lines and c == "\n"):
            out.append(c)
        elif c in _BIDI or unicodedata.category(c) == "Cc":
            code = ord(c)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(c)
    return "".join(out)


def outcome(console: Console, result: Outcome) -> None:
    text = Text()
    text.append(safe(f"{result.job} {result.label}"), style="bold")
    if result.attempt is not None:
        text.append(f" attempt {result.attempt}")
    text.append(": ")
    text.append(result.status, style=STYLE.get(result.status, ""))
    if result.seconds is not None:
        text.append(f" in {result.seconds:.1f}s")
    if result.detail:
        text.append(f" ({safe(result.detail)})")
    console.print(text, soft_wrap=True)


def outcome_json(result: Outcome) -> dict[str, Any]:
    return {
        "job": result.job,
        "period": iso_utc(result.period.start),
        "attempt": result.attempt,
        "status": result.status,
        "detail": result.detail or None,
        "exit_code": result.exit_code,
        "seconds": None if result.seconds is None else round(result.seconds, 3),
    }


def _schedule(text: str, timezone: str) -> str:
    return text if is_utc(timezone) else f"{text} ({timezone})"


def jobs(console: Console, lines: Sequence[JobLine], database: str) -> None:
    table = Table(title=f"catchup jobs · {database}", title_justify="left")
    for column in (
        "job",
        "schedule",
        "first period",
        "last success",
        "next due",
        "done / expected",
        "running",
        "failed",
    ):
        table.add_column(column, justify="right" if column in ("running", "failed") else "left")
    for line in lines:
        gaps = line.expected - line.done
        done = Text(f"{line.done} / {line.expected}", style="green" if gaps == 0 else "yellow")
        table.add_row(
            line.job + (" (paused)" if line.paused else ""),
            _schedule(line.schedule, line.timezone),
            line.first_period,
            line.last_success or "never",
            iso_utc(line.next_due) if line.next_due else "-",
            done,
            str(line.running),
            Text(str(line.failed), style="red" if line.failed else ""),
        )
    console.print(table)


def jobs_json(lines: Sequence[JobLine]) -> str:
    return _dumps(
        [
            {
                "job": line.job,
                "schedule": line.schedule,
                "timezone": line.timezone,
                "first_period": line.first_period,
                "last_success": line.last_success,
                "next_due": iso_utc(line.next_due) if line.next_due else None,
                "expected": line.expected,
                "done": line.done,
                "running": line.running,
                "failed": line.failed,
                "paused": line.paused,
            }
            for line in lines
        ]
    )


def history(
    console: Console,
    job: str,
    rows: Sequence[HistoryRow],
    *,
    show_output: bool,
    label: Callable[[datetime], str] = iso_utc,
) -> None:
    table = Table(title=f"history of {safe(job)}", title_justify="left")
    for column in ("period", "attempt", "status", "owner", "started", "took", "exit", "error"):
        table.add_column(column)
    for row in rows:
        took = ""
        if row.finished_at is not None:
            took = f"{(row.finished_at - row.started_at).total_seconds():.1f}s"
        table.add_row(
            label(row.period_start),
            str(row.attempt),
            Text(row.status, style=STYLE.get(row.status, "")),
            safe(row.owner or ""),
            iso_utc(row.started_at),
            took,
            "" if row.exit_code is None else str(row.exit_code),
            safe(row.error or ""),
        )
    console.print(table)
    if show_output and rows and rows[0].output_tail:
        console.rule(f"output of attempt {rows[0].attempt} (tail)")
        console.print(Text(safe(rows[0].output_tail, lines=True)), soft_wrap=True)


def history_json(rows: Sequence[HistoryRow], events: Sequence[EventRow] = ()) -> str:
    return _dumps(
        {
            "attempts": [
                {
                    "period": iso_utc(row.period_start),
                    "attempt": row.attempt,
                    "status": row.status,
                    "owner": row.owner,
                    "started_at": iso_utc(row.started_at),
                    "finished_at": iso_utc(row.finished_at) if row.finished_at else None,
                    "exit_code": row.exit_code,
                    "error": row.error,
                }
                for row in rows
            ],
            "changes": [
                {
                    "period": iso_utc(e.period_start) if e.period_start else None,
                    "action": e.action,
                    "previous": e.previous,
                    "reason": e.reason,
                    "actor": e.actor,
                    "at": iso_utc(e.at),
                }
                for e in events
            ],
        }
    )


def events(
    console: Console, job: str, rows: Sequence[EventRow], label: Callable[[datetime], str] = iso_utc
) -> None:
    """The changes made to a job: by hand (marks, resets, pauses) and by editing its schedule or
    start: the audit trail."""
    if not rows:
        return
    table = Table(title=f"changes to {safe(job)}", title_justify="left")
    for column in ("at", "action", "period", "was", "by", "reason"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            iso_utc(row.at),
            row.action,
            label(row.period_start) if row.period_start else "(job)",
            safe(row.previous or ""),
            safe(row.actor),
            safe(row.reason or ""),
        )
    console.print(table)


def changes(console: Console, verb: str, rows: Sequence[Change]) -> None:
    """What a mark or reset did, one line per period."""
    for row in rows:
        line = Text(safe(f"{row.job} {row.label}: "))
        if row.previous == row.now:
            line.append(f"unchanged (already {row.now})", style="dim")
        else:
            line.append(f"{row.previous} → {row.now}", style=STYLE.get(row.now.split()[0], ""))
        console.print(line, soft_wrap=True)
    console.print(f"{verb}: {sum(r.previous != r.now for r in rows)} of {len(rows)} period(s)")


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


def _dumps(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


# -- scan ------------------------------------------------------------------------------------

# A distinct glyph per state, so the calendar reads without colour too (pipes, NO_COLOR).
GLYPH = {
    "succeeded": "■",
    "waived": "▣",
    "running": "▶",
    "missing": "□",
    "stale": "◌",
    "failed": "✗",
    "exhausted": "✖",
}
LEGEND = ("succeeded", "waived", "running", "missing", "stale", "failed", "exhausted")


def _when(job: JobScan, t: datetime | None) -> str:
    if t is None:
        return "-"
    if job.daily_or_longer and t.hour == t.minute == t.second == 0:
        return t.date().isoformat()
    return iso_utc(t)


def scan_tables(console: Console, report: ScanReport) -> None:
    """The summary table, then the gap ranges oldest first, coloured by state."""
    window = f"{iso_utc(report.since)} .. {iso_utc(report.until)}"
    summary = Table(
        title=f"catchup scan · {window} · database clock {iso_utc(report.generated_at)}",
        title_justify="left",
    )
    summary.add_column("job")
    summary.add_column("schedule")
    for name in ("expected", "succeeded", "missing", "failed", "exhausted", "stale", "running"):
        summary.add_column(name, justify="right")
    summary.add_column("oldest gap")
    summary.add_column("last success")
    for job in report.jobs:
        gaps = job.gaps
        cells: list[Text | str] = [
            Text(job.job + (" (paused)" if job.paused else ""), style="bold"),
            _schedule(job.schedule, job.timezone),
            str(job.expected),
        ]
        for state in ("succeeded", "missing", "failed", "exhausted", "stale", "running"):
            count = job.counts[state]
            style = STYLE[state] if count and (state != "succeeded" or not gaps) else ""
            cells.append(Text(str(count), style="dim" if not count else style))
        cells.append(_when(job, gaps[0].first) if gaps else "-")
        cells.append(_when(job, job.last_success) if job.last_success else "never")
        summary.add_row(*cells)
    console.print(summary)
    rows = sorted(
        ((job, gap) for job in report.jobs for gap in job.gaps),
        key=lambda pair: (pair[1].first, pair[0].job),
    )
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
            _when(job, gap.first),
            _when(job, gap.last),
            str(gap.periods),
        )
    console.print(table)


def calendars(console: Console, grids: Sequence[Calendar]) -> None:
    """One heat map per job: a cell per day (rows are months) or per hour (rows are days)."""
    for grid in grids:
        header = "day of month 1..31" if grid.unit == "day" else "hour of day 00..23 (UTC)"
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


def _gap_json(gap: Island) -> dict[str, object]:
    return {
        "status": gap.state,
        "first": iso_utc(gap.first),
        "last": iso_utc(gap.last),
        "periods": gap.periods,
    }


def scan_json(report: ScanReport) -> str:
    """Exactly the shape documented in DESIGN.md (plus ``paused`` per job)."""
    return "".join(scan_json_chunks(report))


def scan_json_chunks(report: ScanReport) -> Iterator[str]:
    """:func:`scan_json` in pieces, so a huge report is written without being built whole."""
    yield (
        json.dumps(
            {
                "generated_at": iso_utc(report.generated_at),
                "since": iso_utc(report.since),
                "until": iso_utc(report.until),
            }
        )[:-1]
        + ', "jobs": ['
    )
    for n, job in enumerate(report.jobs):
        head = json.dumps(
            {
                "job": job.job,
                "schedule": job.schedule,
                "timezone": job.timezone,
                "expected": job.expected,
                "succeeded": job.counts["succeeded"],
                "waived": job.counts["waived"],
                "running": job.counts["running"],
                "missing": job.counts["missing"],
                "failed": job.counts["failed"],
                "exhausted": job.counts["exhausted"],
                "stale": job.counts["stale"],
                "paused": job.paused,
            },
            ensure_ascii=False,
        )
        yield (", " if n else "") + head[:-1] + ', "gaps": ['
        batch: list[str] = []
        for i, gap in enumerate(job.gaps):
            batch.append((", " if i else "") + json.dumps(_gap_json(gap)))
            if len(batch) >= 1000:
                yield "".join(batch)
                batch = []
        yield "".join(batch) + "]}"
    yield "]}"


def scan_markdown(report: ScanReport, health: SchedulerHealth | None = None) -> str:
    """A summary for a CI job summary (GitHub-flavoured Markdown)."""
    total = sum(len(job.gaps) for job in report.jobs)
    head = "no gaps" if not total else f"{total} gap range{'s' if total != 1 else ''}"
    lines = [
        f"### catchup scan: {head}",
        "",
        f"Periods starting {iso_utc(report.since)} .. {iso_utc(report.until)}, "
        f"database clock {iso_utc(report.generated_at)}.",
        "",
        "| job | schedule | expected | succeeded | missing | failed | exhausted | stale "
        "| running | oldest gap | last success |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|---|---|",
    ]
    for job in report.jobs:
        c = job.counts
        name = _md(job.job) + (" (paused)" if job.paused else "")
        oldest = _when(job, job.gaps[0].first) if job.gaps else "-"
        last = _when(job, job.last_success) if job.last_success else "never"
        lines.append(
            f"| {name} | {_md(job.schedule)} | {job.expected} | {c['succeeded']} "
            f"| {c['missing']} | {c['failed']} | {c['exhausted']} | {c['stale']} "
            f"| {c['running']} | {oldest} | {last} |"
        )
    if total:
        lines += ["", "| job | state | first | last | periods |", "|---|---|---|---|--:|"]
        for job in report.jobs:
            for gap in job.gaps:
                lines.append(
                    f"| {_md(job.job)} | {gap.state} | {_when(job, gap.first)} "
                    f"| {_when(job, gap.last)} | {gap.periods} |"
                )
    if health is not None:
        lines.append("")
        if health.last_tick is not None:
            lines.append(
                f"Scheduler: last tick {iso_utc(health.last_tick)} from {health.last_host}."
            )
        lines += [f"> **warning:** {w}" for w in health.warnings]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


METRICS = (
    ("catchup_missing_periods", "Due periods of the job that have no run.", "missing"),
    ("catchup_failed_periods", "Periods that failed and will be retried.", "failed"),
    ("catchup_exhausted_periods", "Periods that failed with no attempts left.", "exhausted"),
    ("catchup_stale_periods", "Periods running with an expired lease.", "stale"),
    ("catchup_running_periods", "Periods running with a live lease.", "running"),
)


def scan_openmetrics(report: ScanReport, health: SchedulerHealth | None = None) -> str:
    """Gauges per job for a node_exporter textfile collector (OpenMetrics text format)."""
    out: list[str] = []

    def family(name: str, help_text: str, unit: str = "") -> None:
        out.append(f"# TYPE {name} gauge")
        if unit:
            out.append(f"# UNIT {name} {unit}")
        out.append(f"# HELP {name} {help_text}")

    for name, help_text, state in METRICS:
        family(name, help_text)
        for job in report.jobs:
            out.append(f'{name}{{job="{_label(job.job)}"}} {job.counts[state]}')
    family("catchup_paused", "1 when the job is paused.")
    for job in report.jobs:
        out.append(f'catchup_paused{{job="{_label(job.job)}"}} {int(job.paused)}')
    family(
        "catchup_last_success_timestamp_seconds", "Start of the newest succeeded period.", "seconds"
    )
    for job in report.jobs:
        if job.last_success is not None:
            out.append(
                f'catchup_last_success_timestamp_seconds{{job="{_label(job.job)}"}} '
                f"{job.last_success.timestamp():.0f}"
            )
    family("catchup_oldest_gap_timestamp_seconds", "Start of the oldest gap period.", "seconds")
    for job in report.jobs:
        if job.gaps:
            out.append(
                f'catchup_oldest_gap_timestamp_seconds{{job="{_label(job.job)}"}} '
                f"{job.gaps[0].first.timestamp():.0f}"
            )
    if health is not None and health.last_tick is not None:
        family("catchup_last_tick_timestamp_seconds", "When `catchup tick` last ran.", "seconds")
        out.append(f"catchup_last_tick_timestamp_seconds {health.last_tick.timestamp():.0f}")
    family("catchup_scan_timestamp_seconds", "When the scan ran (database clock).", "seconds")
    out.append(f"catchup_scan_timestamp_seconds {report.generated_at.timestamp():.0f}")
    out.append("# EOF")
    return "\n".join(out) + "\n"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


# -- replay and tick -------------------------------------------------------------------------


def batch_summary(
    console: Console, title: str, outcomes: Sequence[Outcome], totals: dict[str, int]
) -> None:
    """Per job: how many periods succeeded, failed, were skipped, lost or interrupted."""
    table = Table(title=title, title_justify="left")
    table.add_column("job")
    columns = STATUSES
    for name in columns:
        table.add_column(name, justify="right")
    per_job: dict[str, Counter[str]] = {}
    for outcome in outcomes:
        per_job.setdefault(outcome.job, Counter())[outcome.status] += 1
    for job, counts in sorted(per_job.items()):
        table.add_row(
            job, *(Text(str(counts[c]), style=STYLE[c] if counts[c] else "dim") for c in columns)
        )
    table.add_row(
        Text("total", style="bold"), *(Text(str(totals[c]), style="bold") for c in columns)
    )
    console.print(table)


def batch_json(
    outcomes: Sequence[Outcome], totals: dict[str, int], *, dry_run: bool = False
) -> str:
    """``{"periods": [{"job", "period", "attempt", "status", "detail"}, ...], "totals": {...}}``."""
    return json.dumps(
        {
            "dry_run": dry_run,
            "periods": [
                {
                    "job": o.job,
                    "period": iso_utc(o.period.start),
                    "attempt": o.attempt,
                    "status": o.status,
                    "detail": o.detail or None,
                }
                for o in outcomes
            ],
            "totals": totals,
        },
        ensure_ascii=False,
    )


def plan_lines(console: Console, items: Sequence[tuple[str, str, str]]) -> None:
    """A dry run: what would run, oldest first."""
    for job, label, state in items:
        line = Text(f"would run {job} {label} ")
        line.append(f"({state})", style=STYLE.get(state, ""))
        console.print(line, soft_wrap=True)


def save(path: str, report: ScanReport, health: SchedulerHealth, grids: Sequence[Calendar]) -> None:
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
        scheduler(recorder, health)
        calendars(recorder, grids)
    try:
        if path.endswith(".svg"):
            recorder.save_svg(path, title="catchup scan")
        elif path.endswith(".html"):
            recorder.save_html(path)
        else:
            recorder.save_text(path)
    except OSError as exc:
        raise ConfigError(f"--output {path}: {exc.strerror}") from None


def explanation(
    console: Console, ex: Explanation, now: datetime, label: Callable[[datetime], str]
) -> None:
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
    named = any(label(row.period.start) != iso_utc(row.period.start) for row in ex.rows)
    columns = (["period"] if named else []) + ["start (UTC)", "end (UTC)"]
    columns += [f"start ({ex.timezone})", f"end ({ex.timezone})"] if local else []
    columns += ["length", "due"] + (["DST"] if dst else [])
    table = Table()
    for column in columns:
        table.add_column(column)
    for row in ex.rows:
        cells = [label(row.period.start)] if named else []
        cells += [iso_utc(row.period.start), iso_utc(row.period.end)]
        if local:
            cells += [f"{t:%Y-%m-%d %H:%M %Z}" for t in (row.local_start, row.local_end)]
        cells += [span((row.period.end - row.period.start).total_seconds())]
        table.add_row(
            *cells,
            Text(describe_due(row, now), style="green" if row.is_due else ""),
            *([Text(row.dst or "", style="yellow")] if dst else []),
        )
    console.print(table)
    for warning in ex.warnings:
        console.print(Text(f"note: {warning}", style="yellow"), soft_wrap=True)
