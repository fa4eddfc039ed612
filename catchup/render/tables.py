"""Output for people on a terminal (Rich, markup off): one function per result of the facade,
and the progress of a replay. Knows neither click nor the database."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ..changes.held import held_said
from ..claims.failover import moved_said
from ..results import (
    Connected,
    History,
    JobsReport,
    KeysReport,
    Migrated,
    NotDue,
    Outcome,
    Pinged,
)
from ..vocabulary import AttemptStatus
from .pasted import command
from .pulse import scheduler
from .text import STYLE, iso_utc, keys_paused, safe, schedule_text, seconds

if TYPE_CHECKING:
    from ..maintenance.findings import Finding


def outcome(console: Console, result: Outcome) -> None:
    text = Text()
    named = (
        f"{result.job} {result.key} {result.label}"
        if result.key
        else f"{result.job} {result.label}"
    )
    text.append(safe(named), style="bold")
    if result.attempt is not None:
        text.append(f" attempt {result.attempt}")
    text.append(": ")
    text.append(result.status, style=STYLE.get(result.status, ""))
    if result.seconds is not None:
        text.append(f" in {seconds(result.seconds)}")
    if result.detail:
        text.append(f" ({safe(result.detail)})")
    console.print(text, soft_wrap=True)
    for line in result.output.splitlines():
        console.print(Text(f"  │ {safe(line)}", style="dim"), soft_wrap=True)


def pinged(console: Console, result: Pinged) -> None:
    """``catchup ping``: the period the ping settled and how, in one line."""
    named = " ".join(p for p in (result.job, result.key, result.label or "") if p)
    text = Text()
    text.append(safe(named), style="bold")
    if result.attempt is not None:
        text.append(f" attempt {result.attempt}")
    text.append(f": {result.kind.value} ping, ")
    text.append(result.verdict.value.replace("_", " "), style=STYLE.get(result.verdict, ""))
    if result.detail not in (result.verdict.value, "running", "logged"):
        text.append(f" ({safe(result.detail)})")
    console.print(text, soft_wrap=True)


def keys(console: Console, report: KeysReport) -> None:
    """``catchup keys``: a line per key of the report's (a page of them, in key order), its
    first and last seen and from when expected; then how many are expected, gone and paused
    of them all, and how to list the rest."""
    headers = ("key", "expected from", "first seen", "last seen", "gone", "paused")
    rows = [
        [
            safe(k.key),
            iso_utc(k.expected_from),
            iso_utc(k.first_seen) if k.first_seen else "",
            iso_utc(k.last_seen) if k.last_seen else "",
            iso_utc(k.gone_at) if k.gone_at else "",
            f"since {iso_utc(k.paused_at)}" if k.paused_at else "",
        ]
        for k in report.keys
    ]
    title = f"keys of {safe(report.job)}"
    if fits(console, headers, rows):
        table = Table(title=title, title_justify="left")
        for column in headers:
            table.add_column(column)
        for cells in rows:
            table.add_row(*cells)
        console.print(table)
    else:
        blocks(console, title, headers, rows)
    counts = report.counts
    more = f", {counts.paused:,} paused" if counts.paused else ""
    console.print(f"{counts.expected:,} keys expected, {counts.gone:,} gone{more}", soft_wrap=True)
    if report.next_after is not None:
        every = command("keys", report.job, "--json")
        console.print(
            f"the first {len(report.keys):,} of {counts.total:,} shown; every key: {every}",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )


TAIL_LINES = 20  # of each attempt's output tail, when history --period shows several

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
            line.job + (" (paused)" if line.paused else "") + keys_paused(line.paused_keys),
            schedule_text(line.schedule, line.timezone),
            line.first_period,
            line.last_success or "never",
            iso_utc(line.next_due) if line.next_due else "-",
            f"{line.done} / {line.expected}",
            str(line.running),
            str(line.failed)
            + (f" + {line.exhausted} exhausted" if line.exhausted else "")
            + (f" + {line.interrupted} interrupted" if line.interrupted else "")
            + (f" + {line.cancelled} cancelled" if line.cancelled else ""),
        ]
        for line in report.lines
    ]
    title = f"catchup jobs · {report.database}"
    if not fits(console, JOBS_COLUMNS, rows):
        title_lines(console, title)
        for row in rows:
            console.print(Text(f"{row[0]} · {row[1]}", style="bold"))
            print_pairs(
                console,
                (
                    f"done {row[5]}",
                    f"running {row[6]}",
                    f"failed {row[7]}",
                    f"first period {row[2]}",
                    f"last success {row[3]}",
                    f"next due {row[4]}",
                ),
            )
        _not_configured(console, report)
        scheduler(console, report.pulse)
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
            Text(row[7], style="red" if line.failed or line.exhausted else ""),
        )
    console.print(table)
    _not_configured(console, report)
    scheduler(console, report.pulse)


def _not_configured(console: Console, report: JobsReport) -> None:
    """The ledger's jobs this config does not name, with their last success."""
    for gone in report.unconfigured:
        last = iso_utc(gone.last_success) if gone.last_success else "never"
        console.print(
            Text(
                f"not in this config: {safe(gone.name)} (last success {last}): `catchup rename` "
                "if it was renamed, `catchup retire` if it is gone on purpose",
                style="yellow",
            )
        )


def fits(console: Console, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> bool:
    """Whether a table of these cells fits the console without cutting a cell."""
    widths = [len(h) for h in headers]
    for row in rows:
        for n, cell in enumerate(row):
            widths[n] = max(widths[n], len(cell))
    return sum(widths) + 3 * len(widths) + 1 <= console.width


def blocks(
    console: Console, title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]
) -> None:
    """A table's rows as blocks, for a console too narrow for the table: the first cell on a
    line of its own, then ``header value`` pairs that wrap between pairs, never inside a name
    or a date."""
    title_lines(console, title)
    for row in rows:
        console.print(Text(row[0], style="bold"), soft_wrap=True)
        pairs = [
            v if v.startswith(f"{h} ") else f"{h} {v}"
            for h, v in zip(headers[1:], row[1:], strict=True)
            if v
        ]
        print_pairs(console, pairs)


def title_lines(console: Console, title: str) -> None:
    """A title above blocks: broken only between its `` · `` phrases (``database clock`` stays
    beside its time), a phrase wider than a line on lines of its own (wrapped: a team's DSN
    with its socket folder is wider than 80 columns)."""
    for line in packed(title.split(" · "), console.width):
        console.print(Text(line, style="bold"))


def print_pairs(console: Console, pairs: Sequence[str]) -> None:
    """``pairs`` under a block's first line, indented, wrapped between pairs."""
    for line in packed(pairs, max(20, console.width - 2)):
        console.print(Padding(Text(line), (0, 0, 0, 2), expand=False))


def packed(pairs: Sequence[str], width: int) -> list[str]:
    """``pairs`` joined by `` · `` into lines of at most ``width`` cells, broken only between
    pairs (a pair wider than a line has one of its own)."""
    lines: list[str] = []
    line = ""
    for pair in pairs:
        longer = f"{line} · {pair}" if line else pair
        if line and cell_len(longer) > width:
            lines.append(line)
            line = pair
        else:
            line = longer
    return [*lines, line] if line else lines


def _outputs(console: Console, result: History) -> None:
    """Each attempt's output tail, in the table's order: whole for one attempt, its last
    ``TAIL_LINES`` lines each for several (with the command that shows one whole)."""
    whole = len(result.attempts) == 1 or result.attempt is not None
    for row in result.attempts:
        who = f"{row.key} attempt {row.attempt}" if row.key else f"attempt {row.attempt}"
        if not row.output_tail:
            running = row.status == AttemptStatus.running
            said = "is running: its output is kept when it ends" if running else "printed nothing"
            console.print(Text(f"{safe(who)} {said}", style="dim"), soft_wrap=True)
            continue
        console.rule(f"output of {safe(who)} (tail)")
        lines = row.output_tail.rstrip("\n").split("\n")
        if not whole and len(lines) > TAIL_LINES:
            more = command(
                "history",
                result.job,
                "--period",
                iso_utc(row.period_start),
                "--attempt",
                str(row.attempt),
                key=row.key,
            )
            console.print(
                Text(f"… {len(lines) - TAIL_LINES:,} earlier lines: {more}", style="dim"),
                soft_wrap=True,
            )
            lines = lines[-TAIL_LINES:]
        console.print(Text(safe("\n".join(lines), lines=True)), soft_wrap=True)


def _none_on_record(result: History) -> str:
    """The line that stands for an empty attempts' table: which attempt, of what, is not on
    record (a key's period named with its key)."""
    what = "no attempt" if result.attempt is None else f"no attempt {result.attempt}"
    if result.period is None:
        return f"{what} on record yet"
    label = f"{result.key} {result.label(result.period)}".strip()
    return f"{what} of {safe(label)} on record"


def _attempts(console: Console, result: History) -> None:
    """The attempts' table (a block each when too narrow), or what stands for none."""
    headers = ("period", "attempt", "status", "owner", "started", "took", "exit", "error")
    rows = [
        [
            safe(f"{row.key} {result.label(row.period_start)}".strip()),
            str(row.attempt),
            str(row.status),
            safe(row.owner or ""),
            iso_utc(row.started_at),
            ""
            if row.finished_at is None
            else seconds((row.finished_at - row.started_at).total_seconds()),
            "" if row.exit_code is None else str(row.exit_code),
            safe(row.error or ""),
        ]
        for row in result.attempts
    ]
    title = f"history of {safe(result.job)}"
    if not rows:  # none asked for is on record (compacted, or never run): said, no table
        console.print(Text(title, style="bold"), soft_wrap=True)
        if result.compacted is None:
            console.print(Text(_none_on_record(result)))
    elif fits(console, headers[:-1], [r[:-1] for r in rows]):
        table = Table(title=title, title_justify="left")
        for column in headers:
            table.add_column(column)
        for cells in rows:
            table.add_row(*cells[:2], Text(cells[2], style=STYLE.get(cells[2], "")), *cells[3:])
        console.print(table)
    else:  # too narrow: whole dates and names, a block per attempt
        blocks(console, title, headers, rows)


def _compacted(console: Console, result: History) -> None:
    """What compaction dropped: the period's detail, or how many periods' (no --period)."""
    if (kept := result.compacted) is not None:
        first = "" if kept.claimed_at is None else f", claimed {iso_utc(kept.claimed_at)}"
        done = "" if kept.finished_at is None else f", finished {iso_utc(kept.finished_at)}"
        console.print(
            f"detail compacted on {iso_utc(kept.compacted_at)[:10]}: {kept.status} at attempt"
            f" {kept.attempt}{first}{done}"
        )
    elif result.compacted_at is not None and result.period is None:
        console.print(
            f"{result.compacted_periods:,} older periods' detail compacted (last on"
            f" {iso_utc(result.compacted_at)[:10]}): each keeps its outcome, see --period"
        )


def history(console: Console, result: History) -> None:
    """The attempts, newest first, then the changes made to the job (the audit trail); each
    says how many of how many it shows."""
    _attempts(console, result)
    _shown(console, "attempts", len(result.attempts), result.total_attempts, result.limit)
    _compacted(console, result)
    if result.period is not None:
        _outputs(console, result)
    if not result.changes:
        return
    change_headers = ("at", "action", "period", "was", "by", "reason")
    changes = [
        [
            iso_utc(event.at),
            str(event.action),
            safe(f"{event.key} {result.label(event.period_start)}".strip())
            if event.period_start
            else "(job)",
            safe(event.previous or ""),
            safe(event.actor),
            safe(event.reason or ""),
        ]
        for event in result.changes
    ]
    title = f"changes to {safe(result.job)}"
    if fits(console, change_headers[:3], [r[:3] for r in changes]) and console.width >= 100:
        table = Table(title=title, title_justify="left")
        for column in change_headers:
            table.add_column(column)
        for cells in changes:
            table.add_row(*cells)
        console.print(table)
    else:
        blocks(console, title, change_headers, changes)
    _shown(console, "changes", len(result.changes), result.total_changes, result.limit)


def _shown(console: Console, what: str, shown: int, total: int, limit: int) -> None:
    if total > shown:
        console.print(
            Text(f"{shown} of {total} {what}, newest first (--limit {max(limit, total)} for all)"),
            style="dim",
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


def moved(console: Console, info: Connected) -> None:
    """The server's new timeline, when this command was the first to see it: a warning
    (periods may be suspect), or a note (durable claims: nothing is)."""
    if info.moved is None:
        return
    kind, style = ("warning", "yellow") if info.moved.failover is not None else ("note", "dim")
    console.print(Text(f"{kind}: {moved_said(info.moved)}", style=style), soft_wrap=True)


def unconfigured(console: Console, info: Connected) -> None:
    """The ledger's jobs the config does not name, and configured jobs that look like them:
    one warning each, with what to do."""
    for new, old in info.lookalikes:
        console.print(
            Text(safe(f"warning: {held_said(new, old)}"), style="yellow"),
            soft_wrap=True,
        )
    paired = {old for _, old in info.lookalikes}
    rest = [u for u in info.unconfigured if u.name not in paired]
    if rest:
        shown = ", ".join(
            f"{u.name} (last success {iso_utc(u.last_success) if u.last_success else 'never'})"
            for u in rest[:10]
        )
        more = f" and {len(rest) - 10} more" if len(rest) > 10 else ""
        console.print(
            Text(
                safe(
                    f"note: the ledger has jobs this config does not name: {shown}{more}; "
                    "`catchup rename OLD NEW` if one was renamed, `catchup retire OLD` if it is "
                    "gone on purpose"
                ),
                style="yellow",
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
