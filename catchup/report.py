"""Rendering for people (Rich) and for scripts (JSON). Knows neither click nor the database."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from .models import HistoryRow, JobLine, Outcome
from .schedule import iso_utc

STYLE = {
    "succeeded": "green",
    "waived": "cyan",
    "running": "blue",
    "skipped": "dim",
    "failed": "red",
    "exhausted": "bold red",
    "lost": "magenta",
    "interrupted": "yellow",
    "missing": "yellow",
    "stale": "magenta",
}


def outcome(console: Console, result: Outcome) -> None:
    text = Text()
    text.append(f"{result.job} {result.label}", style="bold")
    if result.attempt is not None:
        text.append(f" attempt {result.attempt}")
    text.append(": ")
    text.append(result.status, style=STYLE.get(result.status, ""))
    if result.seconds is not None:
        text.append(f" in {result.seconds:.1f}s")
    if result.detail:
        text.append(f" ({result.detail})")
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
            line.schedule,
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
    table = Table(title=f"history of {job}", title_justify="left")
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
            row.owner or "",
            iso_utc(row.started_at),
            took,
            "" if row.exit_code is None else str(row.exit_code),
            row.error or "",
        )
    console.print(table)
    if show_output and rows and rows[0].output_tail:
        console.rule(f"output of attempt {rows[0].attempt} (tail)")
        console.print(Text(rows[0].output_tail), soft_wrap=True)


def history_json(rows: Sequence[HistoryRow]) -> str:
    return _dumps(
        [
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
        ]
    )


def _dumps(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
