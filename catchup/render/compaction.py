"""What ``catchup compact`` did, for people and for scripts, and the size of a ledger."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ..maintenance.retention import Compacted, JobCompaction
from .json import dumps
from .tables import blocks, fits
from .text import iso_utc, safe


def size(count: float) -> str:
    """Bytes for people: ``812 B``, ``4.2 MB``, ``1.3 GB``."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(count) < 1000 or unit == "TB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    raise AssertionError("unreachable")


def _note(job: JobCompaction) -> str:
    if job.busy:
        return "another host is compacting it"
    if job.left:
        return "more left: the next run goes on"
    return ""


def compacted(console: Console, result: Compacted) -> None:
    """A row per job: the periods compacted (or, dry, that would be), the attempts dropped."""
    verb = "would compact" if result.dry_run else "compacted"
    noted = any(_note(j) for j in result.jobs)
    headers = ["job", "periods", "attempts"] + (["detail"] if result.dry_run else [])
    headers += ["note"] if noted else []
    rows = [
        [
            safe(j.job),
            f"{j.periods:,}",
            f"{j.attempts:,}",
            *([size(j.bytes or 0)] if result.dry_run else []),
            *([_note(j)] if noted else []),
        ]
        for j in result.jobs
    ]
    title = f"{verb}: the settled runs that ended before {iso_utc(result.before)}"
    if fits(console, headers, rows):
        console.print(title)
        table = Table()
        for column in headers:
            table.add_column(
                column, justify="right" if column in ("periods", "attempts") else "left"
            )
        for cells in rows:
            table.add_row(*cells)
        console.print(table)
    else:
        blocks(console, title, headers, rows)
    went = "would go" if result.dry_run else "dropped"
    console.print(
        f"{result.periods:,} periods {verb}, {result.attempts:,} attempts {went};"
        " each period keeps its outcome and is never claimed again"
    )


def compacted_json(result: Compacted) -> str:
    jobs: list[dict[str, Any]] = [
        {
            "job": j.job,
            "periods": j.periods,
            "attempts": j.attempts,
            **({"bytes": j.bytes} if result.dry_run else {}),
            "busy": j.busy,
            "left": j.left,
        }
        for j in result.jobs
    ]
    return dumps(
        {
            "before": iso_utc(result.before),
            "dry_run": result.dry_run,
            "periods": result.periods,
            "attempts": result.attempts,
            "jobs": jobs,
        }
    )
