"""The scheduler's pulse: when `catchup tick` last ran, from where, how often, and whether it
stopped; who leads ``catchup scheduler``, and whether a CronJob or timer still ticks beside
it; how long periods waited between falling due and starting. Read by ``scan``, ``jobs``,
``doctor`` and ``serve``."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Iterable
from datetime import datetime, timedelta

import psycopg

from ..config.job import Job
from ..ledger.rows import JobRow
from ..session import Session
from .pulsefacts import Lateness, Pulse, due_within

LATENESS_ROWS = 20_000  # periods read for the due-to-start latency (the last hour's)
LATENESS_WINDOW = timedelta(hours=1)


def read_pulse(session: Session, jobs: Iterable[Job] | None = None) -> Pulse:
    """When the scheduler last ticked, and whether ticks stopped (none for three of their usual
    intervals) or come from several hosts in the same minute; who leads the built-in
    scheduler (``catchup scheduler``), if it ever ran, and which hosts' ``catchup tick`` ran
    while it led; and, given ``jobs``, how late their periods of the last hour started."""
    now = session.now()
    try:
        leader = session.ledger.leader_now()
    # a ledger from before migration 0018 (or 0024, the lanes), read where nothing migrates
    except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn):
        leader = None
    beside = (
        tuple(session.ledger.ticks_beside_leader(leader.since))
        if leader is not None and leader.live
        else ()
    )
    leads = leader is not None and leader.live
    late = lateness(session, list(jobs), now, waiting=leads) if jobs is not None else None
    ticks = session.ledger.recent_ticks(50)
    crowded = tuple((minute, tuple(hosts)) for minute, hosts in session.ledger.crowded_minutes())
    if not ticks:
        return Pulse(None, None, None, False, crowded, now, leader, beside, late)
    # the usual interval is `catchup tick`'s (a CronJob's): the scheduler ticks when due
    plain = sorted({at for _, at, term in ticks if term is None})
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(plain)]
    gaps = [g for g in gaps if g >= 30]  # ticks from replicas in one minute are one beat
    interval = statistics.median(gaps) if len(gaps) >= 2 else None
    last_host, last, _ = ticks[0]
    leading = leader is not None and leader.live
    stopped = not leading and interval is not None and (now - last).total_seconds() > 3 * interval
    return Pulse(last, last_host, interval, stopped, crowded, now, leader, beside, late)


def lateness(
    session: Session, jobs: list[Job], now: datetime, *, waiting: bool = False
) -> Lateness | None:
    """How long the periods that fell due in the last hour waited to start (their first
    attempt's claim), and with ``waiting`` (a scheduler leads: it starts each as it falls
    due), those still waiting, since they fell due (every worker busy, or the leader held
    up); None when none did."""
    rows = session.job_rows(write=False)
    # a job with a ping is its own cron's to start: its pings never make the scheduler late
    by_id = {rows[job.name].id: job for job in jobs if job.name in rows and job.ping is None}
    if not by_id:
        return None
    resolved = {job.name: job for job in session.resolve_all(list(by_id.values()), write=False)}
    waits = []
    for job_id, start, started in session.ledger.first_starts(list(by_id), LATENESS_ROWS):
        job = resolved[by_id[job_id].name]
        due = job.timeline.period(start).end + job.delay
        if now - due <= LATENESS_WINDOW and started >= due:  # not a replay, nor run early
            waits.append((started - due).total_seconds())
    unstarted = _unstarted(session, rows, by_id, resolved, now) if waiting else []
    return Lateness.of(waits, [(now - due).total_seconds() for due in unstarted])


def _unstarted(
    session: Session,
    rows: dict[str, JobRow],
    by_id: dict[int, Job],
    resolved: dict[str, Job],
    now: datetime,
) -> list[datetime]:
    """When each period that fell due in the last hour, and that a tick would start now, fell
    due, of those the ledger has no run of: still waiting. Only what waits on the scheduler
    alone: not a keyed job's (its keys each wait apart), a paused or held one's, nor one
    that waits for upstream periods (``after``). ``rows``: the jobs' rows, read once."""
    held = session.held()
    ids, starts, dues = [], [], []
    for job_id, job in by_id.items():
        row = rows[job.name]
        if job.keyed or job.after or row.paused_at is not None or job.name in held:
            continue
        for period in due_within(resolved[job.name], now, LATENESS_WINDOW, LATENESS_ROWS):
            ids.append(job_id)
            starts.append(period.start)
            dues.append(period.end + resolved[job.name].delay)
    if not ids:
        return []
    ran = set(session.ledger.periods_with_runs(ids, starts))
    return [
        due
        for job_id, start, due in zip(ids, starts, dues, strict=True)
        if (job_id, start) not in ran
    ]
