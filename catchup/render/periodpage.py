"""``/jobs/NAME/PERIOD``: one period's page, what ``catchup why`` and ``catchup history
--period`` say of it: its state and what explains it, the commands that would move it, the
upstream periods it waits for (each linked to its own page), who runs it now and the
``catchup cancel`` that would stop it, its checkpoint, every attempt (host, times, exit code,
error, the end of its output tail) and the changes people made. Read when asked for (the other
pages are rendered from the newest scan), cached until the next scan."""

from __future__ import annotations

import json
from datetime import datetime

from ..ledger.rows import HistoryRow
from ..results import PeriodReport, Why
from ..vocabulary import AttemptStatus, RunStatus
from .json import _why, history_json
from .pasted import command
from .text import LEGEND, iso_utc, safe, span
from .web import Site, Verdict, frame, render
from .webparts import job_path, period_link

# how an attempt's status is shown: the period state whose colour and glyph it borrows
ATTEMPT_LOOK = {
    AttemptStatus.running: "running",
    AttemptStatus.succeeded: "succeeded",
    AttemptStatus.failed: "failed",
    AttemptStatus.lost: "stale",
    AttemptStatus.interrupted: "interrupted",
    AttemptStatus.cancelled: "cancelled",
}
TAIL_SHOWN = 4_000  # characters of each attempt's output tail on the page (its end)
BAD = {"failed", "exhausted", "stale"}
FINE = {"succeeded", "waived", "excluded", "not due", "running"}


def _verdict(state: str) -> Verdict:
    if state in BAD:
        return Verdict("bad", "✖", state)
    if state in FINE:
        return Verdict("ok", "✓" if state != "running" else "▶", state)
    return Verdict("warn", "!", state)


def _upstream(why: Why, key: str) -> list[dict[str, object]]:
    return [
        {
            "job": u.job,
            "label": u.label,
            "state": u.state if u.state in LEGEND else None,
            "state_text": u.state,
            # an upstream period of the same key is labelled with it, as this one is
            "href": period_link(
                u.job, u.period.start, key if u.label.startswith(f"{key} ") else ""
            ),
            "said": u.said[0] if u.said else "",
        }
        for u in why.upstream
    ]


def _attempt(row: HistoryRow, now: datetime | None) -> dict[str, object]:
    ended = row.finished_at or now
    took = None if ended is None else span(round((ended - row.started_at).total_seconds()))
    tail = row.output_tail or ""
    return {
        "attempt": row.attempt,
        "status": str(row.status),
        "look": ATTEMPT_LOOK.get(row.status, "failed"),
        "owner": row.owner,
        "started": iso_utc(row.started_at),
        "finished": None if row.finished_at is None else iso_utc(row.finished_at),
        "took": took,
        "running": row.status == AttemptStatus.running,
        "exit_code": row.exit_code,
        "error": row.error,
        "tail": safe(tail[-TAIL_SHOWN:], lines=True) if tail else None,
        "cut": len(tail) > TAIL_SHOWN,
    }


def period_page(report: PeriodReport, site: Site) -> str:
    why, history, row = report.why, report.history, report.row
    job, start = why.job, why.period.start
    key = report.key
    said = _verdict(why.state)
    now = None if row is None else row.now
    running = None
    if row is not None and row.status == RunStatus.running:
        left = None if row.lease_expires_at is None else row.lease_expires_at - row.now
        current = next((a for a in history.attempts if a.attempt == row.attempt), None)
        since = None if current is None else current.started_at
        running = {
            "attempt": row.attempt,
            "owner": row.owner or "?",
            "for": "?" if since is None else span(round((row.now - since).total_seconds())),
            "gone": left is not None and left.total_seconds() < 0,
            "lease": "?" if left is None else span(round(abs(left.total_seconds()))),
            "cancel": command("cancel", job, report.value or iso_utc(start), key=key, reason=True),
        }
    kept = history.compacted
    context = frame(
        site,
        f"{why.label} of {job}: {why.state}",
        period_link(job, start, key, api=True),
        [(job, job_path(job)), (why.label, None)],
    )
    context.update(
        verdict=said,
        job=job,
        label=why.label,
        state=why.state if why.state in LEGEND else None,
        start=iso_utc(start),
        end=iso_utc(why.period.end),
        said=list(why.said),
        commands=list(why.commands),
        upstream=_upstream(why, key),
        more_upstream=why.more,
        running=running,
        checkpoint=None if row is None else row.checkpoint,
        attempts=[_attempt(a, now) for a in history.attempts],
        total_attempts=history.total_attempts,
        # attempts numbered past those kept: the earlier ones' detail was compacted
        compacted_attempts=max(
            0, max((a.attempt for a in history.attempts), default=0) - history.total_attempts
        ),
        compacted=None
        if kept is None
        else {
            "status": kept.status,
            "attempts": kept.attempt,
            "failures": kept.failures,
            "first": iso_utc(kept.claimed_at) if kept.claimed_at else "?",
            "finished": iso_utc(kept.finished_at) if kept.finished_at else "?",
            "at": iso_utc(kept.compacted_at),
        },
        changes=[
            {
                "at": iso_utc(e.at),
                "action": str(e.action),
                "previous": e.previous or "",
                "actor": e.actor,
                "reason": e.reason or "",
            }
            for e in history.changes
        ],
        total_changes=history.total_changes,
    )
    return render("period.html.j2", context)


def period_document(report: PeriodReport) -> str:
    """The period's page as JSON: ``why --json`` and ``history --json --period`` (each
    attempt with its output tail too), its checkpoint and whether it runs now."""
    history = json.loads(history_json(report.history))
    row = report.row
    document = {
        "why": _why(report.why),
        "history": history,
        "checkpoint": None if row is None else row.checkpoint,
        "running": row is not None and row.status == RunStatus.running,
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
