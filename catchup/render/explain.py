"""``catchup explain``: a job's periods spelled out (UTC and local bounds, length, when each
is due, DST notes, the upstream periods each waits for), for people and as JSON."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..reports.explain import Explanation, describe_due
from ..schedule import is_utc
from .json import dumps, period_json
from .tables import blocks, fits
from .text import iso_utc, span


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
    waits = any(row.waits for row in ex.rows)
    rows = []
    for row in ex.rows:
        cells = [row.label] if named else []
        cells += [iso_utc(row.period.start), iso_utc(row.period.end)]
        if local:
            cells += [f"{t:%Y-%m-%d %H:%M %Z}" for t in (row.local_start, row.local_end)]
        cells += [span((row.period.end - row.period.start).total_seconds())]
        cells += [describe_due(row, ex.now)] + ([row.dst or ""] if dst else [])
        rows.append(cells)
    if waits:  # the upstream periods each waits for: a block per period, the lines are long
        blocks(
            console,
            f"{len(rows)} period(s)",
            [*columns, "waits for"],
            [[*cells, row.waits or ""] for cells, row in zip(rows, ex.rows, strict=True)],
        )
        _notes(console, ex)
        return
    if not fits(console, columns, rows):  # too narrow: whole dates, a block per period
        blocks(console, f"{len(rows)} period(s)", columns, rows)
    else:
        table = Table()
        for column in columns:
            table.add_column(column)
        for row, cells in zip(ex.rows, rows, strict=True):
            due = Text(cells[len(columns) - (2 if dst else 1)], style="green" if row.is_due else "")
            tail = [Text(cells[-1], style="yellow")] if dst else []
            table.add_row(*cells[: len(columns) - (2 if dst else 1)], due, *tail)
        console.print(table)
    _notes(console, ex)


def _notes(console: Console, ex: Explanation) -> None:
    for warning in ex.warnings:
        console.print(Text(f"note: {warning}", style="yellow"), soft_wrap=True)


def explanation_json(ex: Explanation) -> str:
    """The periods as JSON: UTC bounds and label, local bounds with their offset, when each
    falls due on the database clock, and the notes."""
    return dumps(
        {
            "job": ex.job,
            "schedule": ex.schedule,
            "timezone": ex.timezone,
            "delay_seconds": int(ex.delay.total_seconds()),
            "spread_seconds": int(ex.spread.total_seconds()),
            "now": iso_utc(ex.now),
            "periods": [
                {
                    **period_json(row.period.start, row.period.end, row.label),
                    "local_start": row.local_start.isoformat(),
                    "local_end": row.local_end.isoformat(),
                    "due": iso_utc(row.due),
                    "is_due": row.is_due,
                    "dst": row.dst,
                    "waits": row.waits,
                }
                for row in ex.rows
            ],
            "warnings": list(ex.warnings),
        }
    )
