"""Why a claim found nothing to do: said in words (paused, already succeeded, exhausted and how
to run it again, running elsewhere, blocked by another period of the job or by upstream periods
not done), and whether trying again soon could help."""

from __future__ import annotations

from datetime import datetime

import psycopg

from ..config.job import Job
from ..errors import DatabaseError
from ..ledger import Ledger
from ..ledger.rows import Blocked, Waiting
from ..render.pasted import command
from ..scan import evidence
from ..schedule import Period, iso_utc
from ..session import Session
from ..vocabulary import RunStatus


def excluded_by(ledger: Ledger, job: Job, job_id: int | None, period: Period) -> str | None:
    """What excludes ``period`` of ``job`` (of its key): its ``exclude``, or a window recorded
    afterwards (``catchup exclude``) in the ledger's job ``job_id``; None when nothing does."""
    if (by := job.excluded(period.start, period.end).at(period.start)) is not None:
        return by
    window = None if job_id is None else ledger.exclusion_at(job_id, job.key, period.start)
    return None if window is None else window.by


def why_not(session: Session, job: Job, job_id: int, period: Period) -> tuple[str, bool]:
    """Why a claim found nothing to do, and whether it is worth trying again soon."""
    try:
        return _reason(session, job, job_id, period)
    except (psycopg.OperationalError, DatabaseError):
        return "the database went away; try again", True


def _reason(session: Session, job: Job, job_id: int, period: Period) -> tuple[str, bool]:
    ledger = session.ledger
    job_row = ledger.job_rows([job.name]).get(job.name)
    if job_row is not None and job_row.paused_at is not None:
        return f"{job.name} is paused (since {iso_utc(job_row.paused_at)})", False
    if job.key and (since := ledger.key_paused(job_id, job.key)) is not None:
        return f"{job.name} {job.key} is paused (since {iso_utc(since)})", False
    row = ledger.run_row(job_id, period.start, job.key)
    if row is not None:
        if row.status == RunStatus.succeeded:
            return f"already succeeded (attempt {row.attempt})", False
        if row.status == RunStatus.waived:
            return "waived by hand", False
        if row.status == RunStatus.running and row.lease_live:
            return f"running elsewhere: attempt {row.attempt} on {row.owner}", False
        if row.status == RunStatus.failed and row.failures >= job.max_attempts:
            failed = f"failed {row.failures} times (max_attempts = {job.max_attempts})"
            label = job.period_value(period.start)
            again = (
                f"`{command('replay', '--job', job.name, '--since', label, '--max-periods', '1')} "
                f"--retry-exhausted` or `{command('reset', job.name, label)} --reason …` runs "
                "it again"
            )
            return f"exhausted: {failed}; {again}", False
        if row.status == RunStatus.running:
            return (
                f"attempt {row.attempt} lost its lease and no attempts are left "
                f"(max_attempts = {job.max_attempts})",
                False,
            )
        if (
            row.status == RunStatus.failed
            and row.retry_after is not None
            and row.retry_after > row.now
        ):
            return f"failed; next retry after {iso_utc(row.retry_after)}", False
    blocker = ledger.blocker(job_id, period.start, job.key, job.whole_job_overlap)
    if blocker is not None:
        other = job.label(blocker.period_start)
        return (
            f"another period ({other}) is running on {blocker.owner} and overlap is forbidden",
            True,
        )
    # The claim met a blocker that has finished since: claimable again, so worth another try.
    return "another period of the job was running; try again", True


def blocked_by(session: Session, job: Job, period: Period, blocked: Blocked) -> str:
    """``waiting for export 2026-11-25T03:00:00Z .. 2026-11-25T05:00:00Z (failed), …``: the
    upstream periods not done, as ranges of one job and state."""
    ups = {session.registered_id(up.name): up for up, _ in session.needs(job, period)}
    found = [
        (ups[w.job_id], ups[w.job_id].timeline.period(w.period_start), w.state)
        for w in blocked.waiting
    ]
    return f"waiting for {waiting_for(found)}; nothing claimed"


def unverified_upstream(session: Session, job: Job, period: Period) -> Blocked | None:
    """The upstream periods ``period`` waits for that succeeded without the evidence their
    job's query looks for (``unverified``: a gap, so not done), read just before the claim;
    an evidence query that cannot say counts as not verified. None when there are none."""

    by_job: dict[str, tuple[Job, list[Period]]] = {}
    for up, p in session.needs(job, period):
        if up.evidence is not None:
            by_job.setdefault(up.name, (up, []))[1].append(p)
    waiting: list[Waiting] = []
    for up, periods in by_job.values():
        up_id = session.registered_id(up.name)
        lo, hi = periods[0].start, periods[-1].end
        found = evidence.read(session.ledger, up, up_id, lo, hi, now=period.end)
        # a query that cannot say verifies nothing
        bad = {p.start for p in periods} if found.error is not None else set(found.unverified)
        waiting += [
            Waiting(up_id, p.start, "succeeded", "unverified") for p in periods if p.start in bad
        ]
    return Blocked(tuple(waiting)) if waiting else None


def waiting_for(found: list[tuple[Job, Period, str]]) -> str:
    """``export 2026-11-25T03:00:00Z .. 2026-11-25T05:00:00Z (failed)``: what the first period
    of a blocked range waits for, as ranges of one upstream job and state."""
    runs: list[tuple[Job, str, datetime, datetime]] = []
    for up, period, state in sorted(found, key=lambda f: (f[0].name, f[1].start)):
        last = runs[-1] if runs else None
        if (
            last
            and last[0].name == up.name
            and last[1] == state
            and up.timeline.after(last[3]) == period.start
        ):
            runs[-1] = (up, state, last[2], period.start)
        else:
            runs.append((up, state, period.start, period.start))
    parts = [
        f"{up.name} {up.label(lo) if lo == hi else f'{up.label(lo)} .. {up.label(hi)}'} ({state})"
        for up, state, lo, hi in runs
    ]
    return ", ".join(parts[:3]) + (f" and {len(parts) - 3} more" if len(parts) > 3 else "")
