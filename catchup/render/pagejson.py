"""Each status page also as JSON (``/api/jobs/NAME``, or ``Accept: application/json``): the
CLI's shapes. A job's document is ``scan --job NAME --json`` with what its page shows beside
it: the periods running now, its standing failures, when it is next due."""

from __future__ import annotations

import json
from dataclasses import replace

from ..ledger.rows import FailureRow
from ..results import PageFacts, ScanReport
from .json import period_json, scan_json
from .running import running_json
from .text import iso_utc


def failure_json(row: FailureRow, facts: PageFacts) -> dict[str, object]:
    job = facts.jobs.get(row.job)
    label = job.label(row.period_start) if job is not None else iso_utc(row.period_start)
    end = job.period_starting(row.period_start).end if job is not None else row.period_start
    return {
        **({"key": row.key} if row.key else {}),
        "period": period_json(row.period_start, end, label),
        "attempt": row.attempt,
        "failures": row.failures,
        "owner": row.owner,
        "finished_at": None if row.finished_at is None else iso_utc(row.finished_at),
        "exit_code": row.exit_code,
        "error": row.error,
        "output_tail": row.output_tail,
        "output_tail_cut": row.tail_cut,
        "retry_after": None if row.retry_after is None else iso_utc(row.retry_after),
    }


def job_json(report: ScanReport, facts: PageFacts | None, name: str) -> str | None:
    scan = next((j for j in report.jobs if j.job == name), None)
    if scan is None:
        return None
    document = json.loads(scan_json(replace(report, jobs=(scan,), calendars=())))
    if facts is not None:
        due = facts.next_due.get(name)
        document["next_due"] = None if due is None else iso_utc(due)
        document["running"] = [running_json(r, facts.jobs) for r in facts.running if r.job == name]
        document["failures"] = [failure_json(r, facts) for r in facts.failures.get(name, ())]
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
