"""``catchup compact`` and a tick's slice of it: each job's settled runs finished before the
cutoff lose their detail and keep their fact, batch by batch (``Ledger.compact_batch``, one
transaction each, so a kill loses at most the batch that was open and the next run goes on from
the job's cursor; sized so a batch holds its rows for about 50 ms at most)."""

from __future__ import annotations

import threading
import time
from datetime import datetime

from ..config.job import Job
from ..session import Session
from .findings import Finding
from .retention import (
    BATCH_PERIODS,
    Compacted,
    JobCompaction,
    LedgerSize,
    cutoff,
    next_batch,
    size_lines,
)


def compact(
    session: Session,
    jobs: list[Job],
    *,
    before: datetime | None = None,
    dry_run: bool = False,
    max_periods: int | None = None,
    max_time: float | None = None,
    interrupted: threading.Event | None = None,
) -> Compacted:
    """Compact each of ``jobs`` up to the cutoff (``before``, else now minus ``[ledger]
    keep_detail``). At most ``max_periods`` runs looked at in all and nothing new started after
    ``max_time`` seconds: a job cut short says so (``left``), and the next run goes on."""
    now = session.ledger.now()
    until = cutoff(now, session.config.keep_detail, before)
    rows = session.job_rows(write=False)
    started = time.monotonic()
    budget = max_periods
    done: list[JobCompaction] = []
    size = BATCH_PERIODS  # shrunk while batches take longer than BATCH_SECONDS
    for job in jobs:
        row = rows.get(job.name)
        if row is None:  # never registered: nothing recorded, nothing to compact
            done.append(JobCompaction(job.name, 0, 0, 0 if dry_run else None, False, False))
            continue
        if dry_run:
            plan = session.ledger.compaction_plan(row.id, until)
            done.append(
                JobCompaction(job.name, plan.periods, plan.attempts, plan.bytes, False, False)
            )
            continue
        periods = attempts = 0
        busy = left = False
        while True:
            if (
                (interrupted is not None and interrupted.is_set())
                or (max_time is not None and time.monotonic() - started >= max_time)
                or (budget is not None and budget <= 0)
            ):
                left = True
                break
            limit = size if budget is None else min(size, budget)
            took = time.monotonic()
            batch = session.ledger.compact_batch(row.id, until, limit)
            size = next_batch(limit, time.monotonic() - took)
            if batch.through is None:
                busy = True
                break
            periods += batch.periods
            attempts += batch.attempts
            if budget is not None:
                budget -= batch.looked
            if batch.looked < limit:  # nothing left before the cutoff
                break
        done.append(JobCompaction(job.name, periods, attempts, None, busy, left))
    return Compacted(until, dry_run, tuple(done))


def measure(session: Session, jobs: list[Job], now: datetime) -> LedgerSize:
    """The ledger's tables and oldest detail, and with ``[ledger] keep_detail`` how far each
    of ``jobs``' compaction is behind: read-only, for the doctor and ``/metrics``."""
    ledger = session.ledger
    keep = session.config.keep_detail
    until = None if keep is None else now - keep
    behind: dict[str, datetime] = {}
    if until is not None:
        rows = session.job_rows(write=False)
        for job in jobs:
            if job.name in rows:
                oldest = ledger.compaction_behind(rows[job.name].id, until).oldest
                if oldest is not None:
                    behind[job.name] = oldest
    return LedgerSize(tuple(ledger.table_sizes()), ledger.oldest_detail(), until, behind)


def ledger_findings(session: Session, now: datetime) -> list[Finding]:
    """The doctor's lines on the ledger: its size, its oldest detail, and how far compaction
    is behind ``keep_detail``."""
    size = measure(session, list(session.config.jobs.values()), now)
    return [
        Finding(level, "ledger", text)
        for level, text in size_lines(size, session.config.keep_detail)
    ]
