"""JSON for scripts: UTC times with ``Z``, and every period as UTC ``start`` and ``end`` plus
the ``label`` people see (``period`` repeats the start, as scripts written for 0.1 read it)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from ..maintenance.findings import Finding
from ..results import (
    Batch,
    History,
    JobScan,
    JobsReport,
    KeysReport,
    Migrated,
    NotDue,
    Outcome,
    Pinged,
    Range,
    ScanReport,
    Why,
)
from ..scan.targets import KeysFailure
from ..scheduler.pulsefacts import Pulse
from .text import iso_utc


def dumps(value: object, *, indent: int | None = None) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False)


def period_json(start: datetime, end: datetime, label: str) -> dict[str, str]:
    """How JSON names a period everywhere."""
    return {"period": iso_utc(start), "start": iso_utc(start), "end": iso_utc(end), "label": label}


def outcome_json(result: Outcome) -> dict[str, Any]:
    return {
        "job": result.job,
        **({"key": result.key} if result.key else {}),
        **period_json(result.period.start, result.period.end, result.label),
        "attempt": result.attempt,
        "status": result.status,
        "detail": result.detail or None,
        "exit_code": result.exit_code,
        "seconds": None if result.seconds is None else round(result.seconds, 3),
        **({"keys_failed": keys_failed_json((f,))[0]} if (f := result.keys_failed) else {}),
    }


def keys_json(report: KeysReport) -> str:
    """``{"job", "expected", "gone", "paused", "read_at", "keys": [{"key", "expected_from",
    "first_seen", "last_seen", "gone_at", "paused_at"}], "next_after"}``: the counts are of
    every key, the list the report's (all, or a page: ``next_after`` the key to list the next
    page after, null at the last)."""
    return "".join(keys_json_chunks([report]))


def keys_json_chunks(pages: Iterable[KeysReport]) -> Iterator[str]:
    """:func:`keys_json` of the keys of several pages, one after another (the counts, and
    ``next_after``, the first's and the last's), in pieces of a thousand keys: a million keys
    are written as they are read, never held as one document."""

    said: dict[datetime, str] = {}  # the few times a million keys share, each written once

    def at(value: datetime | None) -> str | None:
        if value is None:
            return None
        text = said.get(value)
        if text is None:
            text = iso_utc(value)
            if len(said) < 4096:
                said[value] = text
        return text

    last: KeysReport | None = None
    written = 0
    for page in pages:
        if last is None:
            counts = page.counts
            head = {"job": page.job, "expected": counts.expected, "gone": counts.gone}
            head |= {"paused": counts.paused, "read_at": at(counts.read_at)}
            yield dumps(head)[:-1] + ', "keys": ['
        last, keys = page, page.keys
        for n in range(0, len(keys), 1000):
            part = [
                {
                    "key": k.key,
                    "expected_from": at(k.expected_from),
                    "first_seen": at(k.first_seen),
                    "last_seen": at(k.last_seen),
                    "gone_at": at(k.gone_at),
                    "paused_at": at(k.paused_at),
                }
                for k in keys[n : n + 1000]
            ]
            yield (", " if written else "") + dumps(part)[1:-1]  # one list's items
            written += len(part)
    if last is not None:
        yield f"], {dumps({'next_after': last.next_after})[1:]}"


def pinged_json(result: Pinged) -> str:
    """``{"job", "key", "ping", "verdict", "attempt", "detail", "period", "start", "end",
    "label"}`` (the period's keys null when none was due)."""
    period = (
        period_json(result.period.start, result.period.end, result.label or "")
        if result.period is not None
        else dict.fromkeys(("period", "start", "end", "label"))
    )
    return dumps(
        {
            "job": result.job,
            "key": result.key or None,
            "ping": result.kind,
            "verdict": result.verdict,
            "attempt": result.attempt,
            "detail": result.detail,
            **period,
        }
    )


def not_due_json(result: NotDue) -> dict[str, Any]:
    return {
        "job": result.job,
        "status": "not-due",
        "first": period_json(result.first.start, result.first.end, result.label),
        "due": iso_utc(result.due),
    }


def batch_json(batch: Batch) -> str:
    """``{"dry_run", "periods": [{"job", "period", "start", "end", "label", "attempt",
    "status", "detail"}, ...], "totals": {...}}`` (and ``"held": {job: old name}``): what a
    replay or tick did, or (a dry run) would do."""
    return "".join(batch_json_chunks(batch))


def batch_json_chunks(batch: Batch) -> Iterator[str]:
    """:func:`batch_json` in pieces: a dry run's plan is written as it is read."""
    if not batch.dry_run:
        yield _batch_json(batch)
        return
    yield '{"dry_run": true, "periods": ['
    pieces: list[str] = []
    for n, p in enumerate(batch.plan):
        period = {
            "job": p.job.name,
            **({"key": p.job.key} if p.job.key else {}),
            **period_json(p.period.start, p.period.end, p.job.label(p.period.start)),
            "attempt": None,
            "status": p.state,
        }
        pieces.append((", " if n else "") + dumps(period))
        if len(pieces) >= 1000:
            yield "".join(pieces)
            pieces.clear()
    totals = {"planned": batch.planned} | _left_alone(batch)
    held = ', "held": ' + dumps(dict(batch.held)) if batch.held else ""
    yield "".join(pieces) + '], "totals": ' + dumps(totals) + _upstream(batch) + held + "}"


def _left_alone(batch: Batch) -> dict[str, int]:
    """``untracked``: periods a replay left alone because their output exists (when any)."""
    return {"untracked": batch.untracked} if batch.untracked else {}


def _upstream(batch: Batch) -> str:
    """``, "upstream": {"export": 48}``: the upstream periods planned because the asked-for
    ones wait for them; nothing when there are none."""
    return ', "upstream": ' + dumps(dict(batch.upstream)) if batch.upstream else ""


def _batch_json(batch: Batch) -> str:
    return dumps(
        {
            "dry_run": False,
            "periods": [
                {
                    "job": o.job,
                    **({"key": o.key} if o.key else {}),
                    **period_json(o.period.start, o.period.end, o.label),
                    "attempt": o.attempt,
                    "status": o.status,
                    "detail": o.detail or None,
                }
                for o in batch.outcomes
            ],
            "totals": batch.totals
            | _left_alone(batch)
            | ({"deferred": batch.deferred} if batch.deferred else {})
            | ({"compacted": batch.compacted} if batch.compacted else {}),
            **({"upstream": dict(batch.upstream)} if batch.upstream else {}),
            # each held job (nothing of it planned) and the old name it looks like
            **({"held": dict(batch.held)} if batch.held else {}),
            **({"left_to_max_per_tick": dict(batch.left.later)} if batch.left.later else {}),
            **(
                {
                    "outside_catchup_window": {
                        job: {"periods": n, "first": iso_utc(first)}
                        for job, n, first in batch.left.outside
                    }
                }
                if batch.left.outside
                else {}
            ),
            **({"keys_failed": keys_failed_json(batch.keys_failed)} if batch.keys_failed else {}),
        }
    )


def keys_failed_json(failed: tuple[KeysFailure, ...]) -> list[dict[str, object]]:
    """Each keyed job whose keys query failed: why, and how many keys it went on with."""
    return [{"job": f.job, "error": f.error, "keys": f.known} for f in failed]


def jobs_json(report: JobsReport) -> str:
    return dumps(
        [
            {
                "job": line.job,
                "schedule": line.schedule,
                "timezone": line.timezone,
                "first_period": line.first_period,
                "first_period_start": iso_utc(line.first_start) if line.first_start else None,
                "last_success": line.last_success,
                "last_success_start": (
                    iso_utc(line.last_success_start) if line.last_success_start else None
                ),
                "next_due": iso_utc(line.next_due) if line.next_due else None,
                "expected": line.expected,
                "done": line.done,
                "running": line.running,
                "failed": line.failed,
                "exhausted": line.exhausted,
                "interrupted": line.interrupted,
                "cancelled": line.cancelled,
                "paused": line.paused,
                **({} if line.paused_keys is None else {"paused_keys": list(line.paused_keys)}),
            }
            for line in report.lines
        ],
        indent=2,
    )


def history_json(history: History) -> str:
    return dumps(
        {
            "attempts": [
                {
                    **({"key": row.key} if row.key else {}),
                    "period": iso_utc(row.period_start),
                    "label": history.label(row.period_start),
                    "attempt": row.attempt,
                    "status": row.status,
                    "owner": row.owner,
                    "started_at": iso_utc(row.started_at),
                    "finished_at": iso_utc(row.finished_at) if row.finished_at else None,
                    "exit_code": row.exit_code,
                    "error": row.error,
                    "output_tail": row.output_tail,
                }
                for row in history.attempts
            ],
            "total_attempts": history.total_attempts,
            "compacted": None
            if (kept := history.compacted) is None
            else {
                "status": kept.status,
                "attempts": kept.attempt,
                "failures": kept.failures,
                "first_claimed_at": iso_utc(kept.claimed_at) if kept.claimed_at else None,
                "finished_at": iso_utc(kept.finished_at) if kept.finished_at else None,
                "compacted_at": iso_utc(kept.compacted_at),
            },
            "compacted_periods": history.compacted_periods,
            "changes": [
                {
                    **({"key": e.key} if e.key else {}),
                    "period": iso_utc(e.period_start) if e.period_start else None,
                    "label": history.label(e.period_start) if e.period_start else None,
                    "action": e.action,
                    "previous": e.previous,
                    "reason": e.reason,
                    "actor": e.actor,
                    "at": iso_utc(e.at),
                }
                for e in history.changes
            ],
            "total_changes": history.total_changes,
        },
        indent=2,
    )


def _gap_json(job: JobScan, gap: Range) -> dict[str, object]:
    found: dict[str, object] = {
        "status": gap.state,
        "first": iso_utc(gap.first),
        "last": iso_utc(gap.last),
        "periods": gap.periods,
        "first_label": job.label(gap.first),
        "last_label": job.label(gap.last),
    }
    if (waits := job.waits(gap)) is not None:
        found["blocked_by"] = waits
    if (keys := job.keys_in(gap)) is not None:
        found["keys"] = list(keys)
    return found


def scan_json(report: ScanReport) -> str:
    """Exactly the shape documented in DESIGN.md (plus ``paused`` per job, and labels)."""
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
        head = dumps(
            {
                "job": job.job,
                "schedule": job.schedule,
                "timezone": job.timezone,
                "expected": job.expected,
                **({"keys": job.keys} if job.keys or job.range_keys else {}),
                **{str(state): count for state, count in _counts(job)},
                "paused": job.paused,
                **({"paused_keys": list(job.paused_keys)} if job.keys or job.range_keys else {}),
                **({"error": job.evidence_error} if job.evidence_error else {}),
                **({"keys_error": job.keys_error} if job.keys_error else {}),
            }
        )
        yield (", " if n else "") + head[:-1] + ', "gaps": ['
        batch: list[str] = []
        for i, gap in enumerate(job.gaps):
            batch.append((", " if i else "") + dumps(_gap_json(job, gap)))
            if len(batch) >= 1000:
                yield "".join(batch)
                batch = []
        yield "".join(batch) + "]}"
    yield "]"
    if (failover := report.failover) is not None:  # the ledger's last failover, if any
        window = failover.window
        said = {
            "timeline": failover.timeline,
            "seen_at": iso_utc(failover.seen_at),
            "window_seconds": None if window is None else round(window, 3),
        }
        yield ', "failover": ' + dumps(said)
    yield (
        "}"
        if report.pulse is None
        else ', "scheduler": ' + dumps(scheduler_json(report.pulse)) + "}"
    )


def scheduler_json(pulse: Pulse) -> dict[str, object]:
    """The scheduler's pulse, as every other format shows it: the last tick, its host, the
    usual interval between ticks (seconds), and the warnings."""
    return {
        "last_tick": None if pulse.last_tick is None else iso_utc(pulse.last_tick),
        "last_host": pulse.last_host,
        "interval_seconds": None if pulse.interval is None else round(pulse.interval),
        "stopped": pulse.stopped,
        "warnings": pulse.warnings,
        "leader": None
        if (lead := pulse.leader) is None
        else {
            "holder": lead.holder,
            "term": lead.term,
            "since": iso_utc(lead.since),
            "expires_at": iso_utc(lead.expires_at),
            "live": lead.live,
        },
        "ticks_beside_leader": [
            {"host": host, "ticks": count, "last": iso_utc(at)} for host, count, at in pulse.beside
        ],
        "due_to_start": None
        if (late := pulse.late) is None
        else {
            "periods": late.count,
            "p50_seconds": round(late.p50, 3),
            "p99_seconds": round(late.p99, 3),
            "max_seconds": round(late.worst, 3),
            "waiting": late.waiting,
        },
    }


# the order of the counts in scan --json (DESIGN.md): a new state is appended, never inserted
JSON_STATES = (
    "succeeded",
    "waived",
    "running",
    "missing",
    "failed",
    "exhausted",
    "stale",
    "interrupted",
    "cancelled",
    "unverified",
    "untracked",
    "blocked",
    "outdated",
    "suspect",
    "excluded",
)


def _counts(job: JobScan) -> Sequence[tuple[str, int]]:
    by_name = {str(state): count for state, count in job.counts.items()}
    return [(state, by_name[state]) for state in JSON_STATES]


def why_json(result: Why) -> str:
    """``catchup why --json``: the period, its state, what explains it, the commands that
    would move it, and the upstream periods it waits for (the same shape, nested)."""
    return json.dumps(_why(result), indent=2)


def _why(result: Why) -> dict[str, object]:
    return {
        "job": result.job,
        "period": iso_utc(result.period.start),
        "end": iso_utc(result.period.end),
        "label": result.label,
        "state": result.state,
        "said": list(result.said),
        "commands": list(result.commands),
        "upstream": [_why(u) for u in result.upstream],
        "more_upstream": result.more,
        **(
            {"keys": [{"state": s, "count": n, "first": list(ks)} for s, n, ks in result.keys]}
            if result.keys
            else {}
        ),
    }


def migrated_json(result: Migrated) -> str:
    return dumps(
        {"schema": result.schema, "applied": list(result.applied), "version": result.version}
    )


def findings_json(found: Sequence[Finding]) -> str:
    """The doctor's findings, in the order found, and how many are serious (exit 1)."""
    return dumps(
        {
            "findings": [{"level": f.level, "topic": f.topic, "text": f.text} for f in found],
            "serious": sum(f.level == "serious" for f in found),
        }
    )
