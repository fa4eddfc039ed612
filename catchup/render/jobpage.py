"""``/jobs/NAME``: one job's page: its verdict, schedule, last success and next due, what
runs now, its gap ranges each with the command that runs it, its failures that still stand
(error, exit code, the end of the output tail), a grid of its periods with numbered days or
hours in its own zone, the jobs it runs after and before, and its periods spelled out as
``catchup explain`` does."""

from __future__ import annotations

import os
from datetime import datetime
from urllib.parse import quote

from rich.console import Console

from ..results import Calendar, PageFacts, ScanReport
from .explain import explanation
from .limits import GAP_LIMIT
from .text import LEGEND, iso_utc
from .web import Site, Verdict, frame, render
from .webparts import (
    counts,
    failure,
    gap_row,
    job_path,
    linked_cells,
    plural,
    running_rows,
    when,
)


def _explained(facts: PageFacts, name: str) -> str:
    said = facts.explained.get(name)
    if said is None:
        return "(not read yet)"
    with open(os.devnull, "w") as sink:
        console = Console(
            file=sink,
            width=48,  # too narrow for the table: a block per period, readable on a phone
            record=True,
            markup=False,
            highlight=False,
            emoji=False,
            color_system=None,
        )
        explanation(console, said)
    return console.export_text()


def _calendar(grid: Calendar, job: str | None) -> dict[str, object]:
    """The job page's grid of periods, each cell linked to its period's page (``job``; None:
    a keyed job's cells are per key, linked to none)."""
    return {
        "unit": grid.unit,
        "timezone": grid.timezone,
        "row_name": "month" if grid.unit == "day" else "day",
        "columns": [str(i + 1) for i in range(31)]
        if grid.unit == "day"
        else [f"{h:02}" for h in range(24)],
        "rows": list(zip([label for label, _ in grid.rows], linked_cells(grid, job), strict=True)),
        "truncated": grid.truncated,
    }


def job_page(
    report: ScanReport | None, facts: PageFacts | None, site: Site, name: str
) -> str | None:
    """``/jobs/NAME``; None when the scan has no such job."""
    scan = None if report is None else next((j for j in report.jobs if j.job == name), None)
    if report is None or scan is None:
        return None
    facts = facts or PageFacts(now=datetime.min)
    spec = facts.jobs.get(name)
    if scan.paused:
        said = Verdict("warn", "⏸", "paused")
    elif scan.gaps:
        said = Verdict("bad", "✖", plural(len(scan.gaps), "gap range"))
    elif scan.keys_error:  # what its keys would show is not known: never "no gaps"
        said = Verdict("bad", "✖", "keys query failed")
    else:
        said = Verdict("ok", "✓", "no gaps")
    grid = next((g for g in report.calendars if g.job == name), None)
    calendar = None if grid is None else _calendar(grid, None if scan.keys else name)
    everyone = facts.jobs.values()
    upstream = [] if spec is None else [(d.job, job_path(d.job)) for d in spec.after]
    downstream = [
        (other.name, job_path(other.name))
        for other in everyone
        if any(d.job == name for d in other.after)
    ]
    due = facts.next_due.get(name)
    context = frame(
        site, f"{name}: {said.text}", job_path(name, api=True), [(name, None)], job_path(name)
    )
    gaps = scan.gaps[:GAP_LIMIT]
    context.update(
        verdict=said,
        job={
            "name": name,
            "schedule": scan.schedule
            if scan.timezone == "UTC"
            else f"{scan.schedule} ({scan.timezone})",
            "paused": scan.paused,
            "last_success": when(spec, scan, scan.last_success),
            "next_due": "-" if due is None else iso_utc(due),
            "counts": counts(scan),
            "error": scan.evidence_error,
            "keys_error": scan.keys_error,
        },
        upstream=upstream,
        downstream=downstream,
        keys=scan.keys,
        paused_keys=scan.paused_keys,
        keys_href="/keys/" + quote(name, safe=""),
        running=running_rows(tuple(r for r in facts.running if r.job == name), facts),
        gaps=[gap_row(scan, gap, spec) for gap in gaps],
        gaps_more=len(scan.gaps) - len(gaps),
        failures=[failure(row, spec) for row in facts.failures.get(name, ())],
        calendar=calendar,
        legend=LEGEND,
        explain=_explained(facts, name),
    )
    return render("job.html.j2", context)
