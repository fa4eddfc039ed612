"""``catchup ps`` (every period running now, on every host) and ``catchup cancel`` (what the
request did), for people and as JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..config.job import Job
from ..ledger.rows import RunningRow
from ..results import Cancelled, Running
from .json import period_json
from .tables import blocks, fits
from .text import STYLE, iso_utc, safe, span


def label(row: RunningRow, jobs: Mapping[str, Job]) -> str:
    """The period as its job names it (its start in UTC for a job the config lacks)."""
    job = jobs.get(row.job)
    return job.label(row.period_start) if job is not None else iso_utc(row.period_start)


def lease_text(row: RunningRow) -> str:
    left = row.lease_left
    if left is None:
        return "?"
    seconds = round(left.total_seconds())
    said = f"{span(seconds)}" if seconds >= 0 else f"gone {span(-seconds)} ago"
    return f"{said}, cancelling" if row.cancelling else said


def running_json(row: RunningRow, jobs: Mapping[str, Job]) -> dict[str, object]:
    """One running period, as ``catchup ps --json`` lists it (and the status pages)."""
    job = jobs.get(row.job)
    end = job.period_starting(row.period_start).end if job is not None else row.period_end
    left = row.lease_left
    return {
        "job": row.job,
        **({"key": row.key} if row.key else {}),
        "period": period_json(row.period_start, end, label(row, jobs)),
        "attempt": row.attempt,
        "owner": row.owner,
        "claimed_at": None if row.claimed_at is None else iso_utc(row.claimed_at),
        "running_seconds": None
        if row.running_for is None
        else round(row.running_for.total_seconds()),
        "lease_left_seconds": None if left is None else round(left.total_seconds()),
        "cancelling": row.cancelling,
    }


def ps_json(result: Running) -> str:
    return json.dumps(
        {
            "generated_at": iso_utc(result.now),
            "running": [running_json(row, result.jobs) for row in result.rows],
            "total": result.total,
        }
    )


def ps(console: Console, result: Running) -> None:
    """A row per running period, oldest claim first; a table when it fits, else blocks."""
    keyed = any(row.key for row in result.rows)
    headers = ("job", *(("key",) if keyed else ()), "period", "attempt", "on", "for", "lease left")
    rows = [
        [
            safe(row.job),
            *((safe(row.key),) if keyed else ()),
            safe(label(row, result.jobs)),
            str(row.attempt),
            safe(row.owner or "?"),
            "?" if row.running_for is None else span(round(row.running_for.total_seconds())),
            lease_text(row),
        ]
        for row in result.rows
    ]
    if not rows:
        console.print("nothing is running")
        return
    title = f"running now ({iso_utc(result.now)})"
    if fits(console, headers, rows):
        table = Table(title=title, title_justify="left")
        for column in headers:
            table.add_column(column, justify="right" if column == "attempt" else "left")
        for cells in rows:
            table.add_row(*cells)
        console.print(table)
    else:
        blocks(console, title, headers, rows)
    if result.total > len(rows):
        console.print(f"{len(rows):,} of {result.total:,} shown (--limit)")


def cancel_json(result: Cancelled) -> str:
    return json.dumps(
        {
            "job": result.job,
            **({"key": result.key} if result.key else {}),
            "period": period_json(result.period.start, result.period.end, result.label),
            "attempt": result.attempt,
            "owner": result.owner,
            "status": result.outcome,
            "runner_gone": result.gone,
            "seconds": round(result.seconds, 1),
        }
    )


def cancelled(console: Console, result: Cancelled) -> None:
    """One line: what became of the attempt asked to stop."""
    where = f"attempt {result.attempt} on {result.owner or '?'}"
    name = " ".join(filter(None, (result.job, result.key, result.label)))
    took = f" after {span(round(result.seconds))}" if result.seconds >= 1 else ""
    if result.outcome == "requested":
        again = "" if result.first else " (asked already: the first request stands)"
        said = (
            f"asked {name} ({where}) to stop{again}; "
            "its heartbeat sees the request within a third of its lease"
        )
    elif result.outcome == "cancelled" and result.gone:
        said = (
            f"cancelled {name} ({where}){took}: its runner was gone (its lease had run out), "
            "so the cancel recorded it; runnable again"
        )
    elif result.outcome == "cancelled":
        said = f"cancelled {name} ({where}){took}: the job was stopped; runnable again"
    elif result.outcome == "running":
        said = f"{name} ({where}) is still running{took}; the request stands"
    else:
        said = f"{name} ({where}) ended {result.outcome}{took}, before the request took effect"
    console.print(Text(safe(said), style=STYLE.get(result.outcome, "")), soft_wrap=True)
