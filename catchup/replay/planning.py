"""What a replay or a tick plans, before anything is claimed: each job's gap periods (of a
keyed job, each key's), merged oldest first, placed after the upstream periods they wait for
(:class:`DependencyOrder`), and the upstream gaps a planned period needs that nobody asked for
(:func:`plan_upstream`, key by key for a keyed upstream); what a tick plans without a scan
kept from the periods nobody expects (:func:`unexcluded`)."""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Iterator
from datetime import datetime

from ..config.job import Job
from ..config.upstream import ranks
from ..results import JobScan, Planned
from ..scan.detector import scan_jobs
from ..scan.keyed import gap_items, known_keys
from ..scan.targets import ScanTarget
from ..schedule import Period
from ..session import Session
from ..vocabulary import PeriodState


def unexcluded(session: Session, items: list[Planned]) -> list[Planned]:
    """``items`` but the periods nobody expects: those their job's ``exclude`` names, and
    those a live window excludes (one statement) that have no outcome that stands. For what
    a tick plans without a scan (a newest due period, a key's, an outdated one run again):
    the claim path would refuse each of them, tick after tick."""
    kept = [
        i for i in items if i.job.excluded(i.period.start, i.period.end).at(i.period.start) is None
    ]
    if not kept:
        return kept
    asked = [(session.registered_id(i.job.name), i.job.key, i.period.start) for i in kept]
    gone = session.ledger.excluded_among(asked)
    return [item for n, item in enumerate(kept) if n not in gone]


def gap_periods(job: Job, result: JobScan, states: frozenset[str]) -> Iterator[Planned]:
    """Every period of the job's gaps in ``states``, oldest first (of a job with keys: every
    (key, period), then by key)."""
    if job.keyed:
        yield from gap_items(job, result, states)
        return
    timeline = job.timeline
    for range_ in result.ranges:
        if range_.state not in states:
            continue
        state = PeriodState(range_.state)
        for period in timeline.periods(range_.first, timeline.after(range_.last)):
            yield Planned(job, period, state)


def oldest_first(streams: list[Iterator[Planned]]) -> Iterator[Planned]:
    """Merge per-job streams by period start (for a job with upstream jobs, by what it waits
    for: :class:`DependencyOrder`), then job name, without materialising them."""
    if len(streams) == 1:
        return streams[0]  # a merge never reorders one stream: it is in its order already
    return heapq.merge(*streams, key=lambda p: (p.order or (p.period.start, 0), p.job.name))


class DependencyOrder:
    """Where a period goes in a plan when jobs wait for each other: no earlier than the
    upstream periods it needs (recursively), upstream jobs first among equals, so export(D)
    runs before billing(D) for every D, and D ascends. A job's periods keep their order."""

    def __init__(self, session: Session) -> None:
        self.session = session
        jobs = session.config.jobs.values()
        self.rank = ranks({job.name: job.after for job in jobs})
        self.active = any(job.after for job in jobs)
        self._memo: dict[tuple[str, datetime], datetime] = {}

    def key(
        self, job: Job, period: Period, needs: list[tuple[Job, Period]] | None = None
    ) -> datetime:
        """``needs``: what ``period`` waits for, when the caller has it already."""
        if not job.after:
            return period.start
        found = self._memo.get((job.name, period.start))
        if found is None:
            found = period.start
            for up, needed in needs if needs is not None else self.session.needs(job, period):
                found = max(found, self.key(up, needed))
            if len(self._memo) > 100_000:
                self._memo.clear()  # a plan of millions: keys are cheap to find again
            self._memo[(job.name, period.start)] = found
        return found

    def place(self, items: Iterator[Planned]) -> Iterator[Planned]:
        """``items`` (one job's, oldest first) with what each waits for and its place."""
        if not self.active:
            yield from items
            return
        for item in items:
            job, period = item.job, item.period
            waits = self.session.needs(job, period) if job.after else []
            needs = tuple((up.name, p.start) for up, p in waits)
            order = (self.key(job, period, waits), self.rank.get(job.name, 0))
            yield dataclasses.replace(item, needs=needs, order=order)


def plan_upstream(
    session: Session,
    live: list[tuple[Job, JobScan]],
    states: frozenset[str],
    now: datetime,
    record: bool = True,
) -> dict[str, list[Planned]]:
    """The gaps of jobs not asked for that the planned periods wait for (and what those wait
    for, down the chain), each job only over the periods needed: so ``replay --job billing``
    after an outage runs the export hours billing needs first. Paused, held and observed jobs
    are left alone."""
    asked = {job.name for job, _ in live}
    wanted: dict[str, set[tuple[str, datetime]]] = {}  # job -> (its key or "", start)
    rank = DependencyOrder(session).rank

    def need(job: Job, items: Iterator[Planned]) -> None:
        if not job.after:
            return
        for item in items:
            for up, q in session.needs(job, item.period):
                if up.name not in asked:  # a keyed upstream: the same key's period
                    key = item.job.key if up.keyed else ""
                    wanted.setdefault(up.name, set()).add((key or "", q.start))

    for job, result in live:
        need(job, gap_periods(job, result, states))
    found: dict[str, list[Planned]] = {}
    rows = session.job_rows(write=False)
    while wanted:
        name = max(wanted, key=lambda n: (rank.get(n, 0), n))  # downstream first
        pairs = wanted.pop(name)
        up = session.resolve(session.config.job(name), write=False)
        row = rows.get(name)
        if (row is not None and row.paused_at is not None) or name in session.held():
            # paused, or held (catchup/changes/held.py): its periods wait, as the claim would
            continue
        if up.observed:  # its cron runs it, pings settle it: nothing here can
            continue
        # a job the ledger has no row for yet (a dry run on a new ledger): every period missing
        job_id = row.id if row is not None else -1 - len(found)
        starts = [start for _, start in pairs]
        lo, hi = min(starts), up.timeline.after(max(starts))
        target = ScanTarget(up, job_id, False)
        if up.keyed:  # its keys that the periods planned need, as the ledger knows them
            target = _with_keys(session, target, {key for key, _ in pairs}, now)
        keep = record and row is not None  # a dry run writes nothing
        (result,) = scan_jobs(session.ledger, [target], now=now, since=lo, until=hi, record=keep)
        items = [
            p for p in gap_periods(up, result, states) if (p.job.key or "", p.period.start) in pairs
        ]
        found.setdefault(name, []).extend(items)
        asked.add(name)
        need(up, iter(items))
    return {name: sorted(items, key=lambda p: p.period.start) for name, items in found.items()}


def _with_keys(session: Session, target: ScanTarget, keys: set[str], now: datetime) -> ScanTarget:
    """``target`` (a keyed job) with those of ``keys`` it has, and their history; read only."""

    known = known_keys(session.ledger, target.job, target.job_id, now)
    return dataclasses.replace(target, keys=tuple(row for row in known if row.key in keys))
