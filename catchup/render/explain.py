"""``catchup explain``: a job's periods spelled out (UTC and local bounds, length, when each
is due, DST notes, the upstream periods each waits for), for people and as JSON."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..reports.explain import ClockChange, Explanation, Row, describe_due
from ..schedule import is_utc, to_wall, zone
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
    due_column = "due (this host's clock)" if ex.clock == "host" else "due"
    columns += ["length", due_column] + (["DST"] if dst else [])
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
    if waits or not fits(console, columns, rows):
        # a block per period: the upstream periods each waits for make long lines, or the
        # console is too narrow for the table (whole dates)
        at = columns.index(due_column)
        for cells in rows:  # `due (this host's clock) 2027-…`, not `due (…) due 2027-…`
            cells[at] = due_column + cells[at].removeprefix("due")
        blocks(
            console,
            f"{len(rows)} period(s)",
            [*columns, *(["waits for"] if waits else [])],
            [
                [*cells, *([row.waits or ""] if waits else [])]
                for cells, row in zip(rows, ex.rows, strict=True)
            ],
        )
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
    """The periods as JSON: UTC bounds and label, local bounds with their offset, length, when
    each falls due on ``clock`` ("database", or "host" when no ledger was used), and the DST
    notes in words (``dst``, ``warnings``) and as data (``clock_changes``, ``moved``,
    ``dst_changes``)."""
    return dumps(
        {
            "job": ex.job,
            "schedule": ex.schedule,
            "timezone": ex.timezone,
            "delay_seconds": int(ex.delay.total_seconds()),
            "spread_seconds": int(ex.spread.total_seconds()),
            "now": iso_utc(ex.now),
            "clock": ex.clock,
            "periods": [_row_json(row, ex.timezone) for row in ex.rows],
            "warnings": list(ex.warnings),
            "dst_changes": [_change_json(change, ex.timezone) for change in ex.dst_changes],
        }
    )


def _row_json(row: Row, timezone: str) -> dict[str, Any]:
    tz = zone(timezone)
    return {
        **period_json(row.period.start, row.period.end, row.label),
        "local_start": row.local_start.isoformat(),
        "local_end": row.local_end.isoformat(),
        "due": iso_utc(row.due),
        "is_due": row.is_due,
        "dst": row.dst,
        "waits": row.waits,
        "excluded_by": row.excluded_by,
        "length_seconds": int((row.period.end - row.period.start).total_seconds()),
        "clock_changes": [
            {"at": iso_utc(at), "offset_change_seconds": int(delta.total_seconds())}
            for at, delta in row.clock_changes
        ],
        "moved": [
            {
                "edge": m.edge,
                "scheduled_local": m.scheduled.isoformat(),
                "at": iso_utc(m.at),
                "at_local": m.at.astimezone(tz).isoformat(),
                "later_seconds": int((to_wall(m.at, tz) - m.scheduled).total_seconds()),
                "one_boundary_for_both": m.shared,
            }
            for m in row.moved
        ],
    }


def _change_json(change: ClockChange, timezone: str) -> dict[str, Any]:
    tz = zone(timezone)
    forward = change.offset_change > timedelta(0)
    return {
        "at": iso_utc(change.at),
        "offset_change_seconds": int(change.offset_change.total_seconds()),
        "local_before": change.local_before.isoformat(),
        "local_after": change.local_after.isoformat(),
        "local_times": [
            {
                "scheduled_local": t.scheduled.isoformat(),
                "kind": "skipped" if forward else "repeated",
                "start": iso_utc(t.start),
                "start_local": t.start.astimezone(tz).isoformat(),
                "one_period_for_both": t.shared,
            }
            for t in change.local_times
        ],
    }
