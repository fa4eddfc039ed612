"""Catching up: ``replay`` runs the scan's gaps oldest-first, ``tick`` runs what each job's
catch-up policy allows. Both go through the one claim path, so any number of processes on any
number of hosts can do either at once and no period runs twice."""

from __future__ import annotations

import dataclasses
import functools
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from ..changes.operations import reset
from ..claims.batch import BATCH_MAX
from ..config.bounds import TICK_WORKERS
from ..config.job import Job
from ..ledger import Ledger
from ..results import Batch, ClaimRules, JobScan, Outcome, Planned, TickLeft
from ..scan.detector import Prepared, prepare, scan_jobs
from ..scan.outdated import with_outdated
from ..scan.targets import KeyRow, ScanTarget, keys_failed
from ..scan.window import Moment
from ..schedule import Period
from ..scheduler.inflight import Holding
from ..session import Session
from ..vocabulary import REPLAYABLE, PeriodState
from .dispatch import Flag
from .planning import DependencyOrder, gap_periods, oldest_first, plan_upstream, unexcluded
from .pool import run_planned


def replay(  # noqa: PLR0913
    session: Session,
    jobs: list[Job],
    *,
    since: Moment,
    until: Moment | None,
    limit: int | None = None,
    workers: int = 1,
    dry_run: bool = False,
    stop_on_failure: bool = False,
    retry_exhausted: bool = False,
    unverified: Audit | None = None,
    outdated: Audit | None = None,
    upstream: bool = True,
    interrupted: threading.Event | None = None,
    on_plan: Callable[[int], None] | None = None,
    on_start: Callable[[Planned], None] | None = None,
    on_done: Callable[[Outcome], None] | None = None,
    batch_size: int = BATCH_MAX,
) -> Batch:
    """Run the gaps the scan finds in ``[since, until)``, oldest first, through the claim path
    (a keyed job's short periods up to ``batch_size`` at a time: :mod:`catchup.claims.batch`).

    Missing, failed (at once, ignoring the backoff: a person asked) and stale periods; with
    ``retry_exhausted`` also those with no attempts left; with ``unverified`` (the reason and
    who gives it) also succeeded periods without evidence, and with ``outdated`` those an
    upstream re-run made outdated, each reset (audited) just before it runs again. Untracked
    periods (output exists, no ledger row) never run. Paused jobs are left alone. A dry run
    reads and plans but writes nothing. A bare date is each job's local midnight."""
    ready = prepare(session, jobs, since, until, write=not dry_run)
    states = (
        REPLAYABLE
        | ({PeriodState.exhausted} if retry_exhausted else set())
        | ({PeriodState.unverified} if unverified else set())
        | ({PeriodState.outdated} if outdated else set())
    )
    live = _live_gaps(session, ready, since, until, outdated is not None, record=not dry_run)
    order = DependencyOrder(session)
    extra = (
        plan_upstream(session, live, frozenset(states), ready.now, record=not dry_run)
        if upstream
        else {}
    )
    total = sum(i.periods for _, r in live for i in r.ranges if i.state in states)
    total += sum(len(items) for items in extra.values())
    untracked, untracked_keys = _untracked(live)
    planned = total if limit is None else min(total, limit)
    if on_plan:
        on_plan(planned)
    streams = [order.place(gap_periods(job, r, frozenset(states))) for job, r in live]
    streams += [order.place(iter(items)) for items in extra.values()]
    items = oldest_first(streams)
    told = tuple((name, len(found)) for name, found in extra.items() if found)
    if dry_run:
        plan = (item for _, item in zip(range(planned), items, strict=False))
        batch = Batch(planned=planned, outcomes=(), interrupted=False, dry_run=True, plan=plan)
    else:
        batch = run_planned(
            session,
            items,
            planned=planned,
            workers=workers,
            limit=limit,
            stop_on_failure=stop_on_failure,
            interrupted=interrupted,
            rules=ClaimRules(ignore_backoff=True, retry_exhausted=retry_exhausted),
            on_start=on_start,
            on_done=on_done,
            batch=batch_size,
            prepare=None
            if unverified is None and outdated is None
            else functools.partial(_reopen, unverified or outdated),
        )
    return dataclasses.replace(
        batch,
        untracked=untracked,
        untracked_keys=untracked_keys,
        upstream=told,
        keys_failed=keys_failed(ready.targets),
    )


def _untracked(live: list[tuple[Job, JobScan]]) -> tuple[int, bool]:
    """How many periods are untracked (a replay leaves them alone), and whether a keyed job's
    are among them."""
    untracked = sum(
        i.periods for _, r in live for i in r.ranges if i.state == PeriodState.untracked
    )
    return untracked, any(j.keyed and r.counts.get(PeriodState.untracked, 0) for j, r in live)


def _live_gaps(
    session: Session,
    ready: Prepared,
    since: Moment,
    until: Moment | None,
    outdated: bool,
    *,
    record: bool,
) -> list[tuple[Job, JobScan]]:
    """Each job's scan in the window (with its outdated periods when asked), paused jobs and
    observed ones (nothing to run: their cron's pings settle them) left alone."""
    targets = ready.targets
    results = scan_jobs(
        session.ledger, targets, now=ready.now, since=since, until=until, record=record
    )
    if outdated:
        results = [with_outdated(session, t.job, r) for t, r in zip(targets, results, strict=True)]
    return [
        (t.job, r)
        for t, r in zip(targets, results, strict=True)
        if not t.paused and not t.job.observed
    ]


@dataclass(frozen=True)
class Audit:
    """Why a person asked for a change, and who: kept with it in the audit trail."""

    reason: str
    actor: str


# what a tick writes in the audit trail when it runs an outdated period again by itself
RERUN = Audit("an upstream period it waited for ran again (when_outdated = rerun)", "catchup tick")


def _reopen(audit: Audit | None, session: Session, item: Planned) -> None:
    """Reset an unverified period (succeeded, no evidence) or an outdated one (succeeded before
    an upstream re-run) so the claim path runs it again."""

    if audit is not None and item.state in (PeriodState.unverified, PeriodState.outdated):
        reset(session, item.job, [item.period], reason=audit.reason, actor=audit.actor)


def tick(  # noqa: PLR0913
    session: Session,
    jobs: list[Job],
    *,
    workers: int = TICK_WORKERS.default or 1,
    interrupted: threading.Event | None = None,
    on_done: Callable[[Outcome], None] | None = None,
    max_time: float | None = None,
    draining: Flag | None = None,
    term: int | None = None,
    look_back: bool = False,
    holding: Holding | None = None,
) -> Batch:
    """What the one scheduler calls every few minutes: for each job, the due periods its
    catch-up policy allows, oldest first, on a pool of ``workers`` (one job's periods in order,
    the jobs taking turns), so a thousand due jobs need no more connections than a few.

    ``all``: every gap in ``catchup_window`` (at most ``max_per_tick``); ``latest``: the newest
    due period only; ``none``: the newest due period only if it became due since the previous
    tick. Paused jobs are skipped. Failed periods wait for their backoff. After ``max_time``
    seconds nothing new is started (what runs finishes): the rest waits for the next tick, so a
    tick started on schedule is never late behind the previous one's backlog. The batch says
    how many gap periods of each job ``max_per_tick`` left for later ticks and, with
    ``look_back`` (one more scan), how many lie before ``catchup_window`` (replay's, never a
    tick's). ``holding``: the scheduler's, whose other ticks still run
    (:mod:`catchup.scheduler.inflight`):
    what they hold is not planned again, and each period this one plans is held until done."""
    ready = prepare(session, jobs, scanned_from=_tick_scanned_from)
    now = ready.now
    previous = session.ledger.record_tick(socket.gethostname(), term)
    targets, choices = tick_choices(session, ready, previous)
    chosen_per_job: list[list[Planned]] = []
    planned = 0
    left: list[tuple[str, int]] = []
    for target, chosen, more in choices:
        if more > 0:
            left.append((target.job.name, more))
        if holding is not None:
            chosen = holding.plan(chosen)
        planned += len(chosen)
        if chosen:
            chosen_per_job.append(chosen)
    # the jobs with the fewest due periods first (a job on time before one with a backlog),
    # then taking turns: with --max-time cutting a tick short, a backlog never keeps another
    # job's on-time period waiting, tick after tick
    chosen_per_job.sort(key=lambda chosen: (len(chosen), chosen[0].job.name))
    order = DependencyOrder(session)
    if order.active:  # jobs wait for each other: upstream periods first, each job in order
        chosen_items = oldest_first([order.place(iter(chosen)) for chosen in chosen_per_job])
    else:
        chosen_items = round_robin([iter(chosen) for chosen in chosen_per_job])
    ran = run_planned(
        session,
        chosen_items,
        planned=planned,
        workers=max(1, min(workers, planned)),
        interrupted=interrupted,
        on_done=on_done if holding is None else _releasing(holding, on_done),
        max_time=max_time,
        prepare=functools.partial(_reopen, RERUN) if _reruns(targets) else None,
        draining=draining,
    )
    outside = before_window(session, targets, now) if look_back and not ran.interrupted else ()
    return dataclasses.replace(
        ran, left=TickLeft(tuple(left), outside), keys_failed=keys_failed(ready.targets)
    )


def tick_choices(
    session: Session, ready: Prepared, previous: datetime | None, *, record: bool = True
) -> tuple[list[ScanTarget], list[tuple[ScanTarget, list[Planned], int]]]:
    """What a tick runs of each due job of ``ready`` (``previous``: the last tick's time), by
    its catch-up policy, with how many gap periods ``max_per_tick`` leaves; and the targets
    scanned for it. ``record=False``: nothing written (``catchup plan``)."""
    due = [
        (target, latest)
        for target in ready.targets
        if not target.paused
        and (latest := target.job.timeline.latest_due(target.job.delay, ready.now)) is not None
    ]
    targets, gaps, rerun = _tick_gaps(session, due, ready.now, record)
    return targets, _tick_choices(session, due, gaps, rerun, previous)


def _tick_since(job: Job, now: datetime) -> datetime:
    """Where a tick's scan of ``job`` starts: its catchup_window, not before its start."""
    return max(job.anchor, now - job.catchup_window)


def _tick_scanned_from(job: Job, now: datetime) -> datetime | None:
    """Where a tick's scan of ``job`` starts; None: it scans only the catch-up-all jobs."""
    return _tick_since(job, now) if job.catchup == "all" else None


def _unscanned(job: Job, now: datetime) -> None:
    """``catchup run`` scans no job: no first read is judged."""


def _tick_gaps(
    session: Session, due: list[tuple[ScanTarget, Period]], now: datetime, record: bool
) -> tuple[list[ScanTarget], dict[str, JobScan], set[str]]:
    """The gaps of every catch-up-all job in one scan, each from its own window, and the jobs
    whose outdated periods run again (``when_outdated = "rerun"``)."""
    targets = [
        dataclasses.replace(target, since=_tick_since(target.job, now))
        for target, _ in due
        if target.job.catchup == "all"
    ]
    scanned = (
        scan_jobs(session.ledger, targets, now=now, since=None, until=None, record=record)
        if targets
        else []
    )
    gaps = {result.job: result for result in scanned}
    rerun = {t.job.name for t in _reruns(targets)}
    if rerun:  # when_outdated = "rerun": what an upstream re-run made outdated runs again
        for target in targets:
            if target.job.name in rerun:
                gaps[target.job.name] = with_outdated(session, target.job, gaps[target.job.name])
    return targets, gaps, rerun


def _reruns(targets: list[ScanTarget]) -> list[ScanTarget]:
    """The catch-up-all targets that run again what an upstream re-run made outdated."""
    return [t for t in targets if t.job.after and t.job.when_outdated == "rerun"]


def _tick_choices(
    session: Session,
    due: list[tuple[ScanTarget, Period]],
    gaps: dict[str, JobScan],
    rerun: set[str],
    previous: datetime | None,
) -> list[tuple[ScanTarget, list[Planned], int]]:
    """Each due job's choice (:func:`_tick_choice`); what was planned without a scan kept
    from the periods nobody expects, for every job in one statement."""
    choices = [
        (t, *_tick_choice(session.ledger, t, latest, (gaps, rerun), previous)) for t, latest in due
    ]
    unscanned = [p for t, chosen, _ in choices if job_unscanned(t.job, rerun) for p in chosen]
    if not unscanned:
        return choices
    kept = {id(p) for p in unexcluded(session, unscanned)}
    return [
        (t, [p for p in chosen if id(p) in kept] if job_unscanned(t.job, rerun) else chosen, n)
        for t, chosen, n in choices
    ]


def _tick_choice(
    ledger: Ledger,
    target: ScanTarget,
    latest: Period,
    scanned: tuple[dict[str, JobScan], set[str]],
    previous: datetime | None,
) -> tuple[list[Planned], int]:
    """What a tick runs of one due job by its catch-up policy, and how many of its gap periods
    ``max_per_tick`` leaves for later ticks (``scanned``: the jobs' gaps, and those that run
    again what an upstream re-run made outdated)."""
    gaps, rerun = scanned
    job = target.job
    if job.catchup == "all":
        runnable = REPLAYABLE | ({PeriodState.outdated} if job.name in rerun else set())
        chosen = list(_take(gap_periods(job, gaps[job.name], runnable), job.max_per_tick))
        return chosen, gap_count(job, gaps[job.name], runnable) - len(chosen)
    if job.catchup == "latest" or previous is None or latest.end + job.delay > previous:
        if job.keyed:
            return [
                Planned(job.for_key(k.key), latest, "due")
                for k in expected_at(ledger, target, latest)
            ], 0
        return [Planned(job, latest, "due")], 0
    return [], 0


def _releasing(
    holding: Holding, on_done: Callable[[Outcome], None] | None
) -> Callable[[Outcome], None]:
    """``on_done``, each period released by ``holding`` first (another tick may plan it)."""

    def done(outcome: Outcome) -> None:
        holding.done(outcome.job, outcome.key, outcome.period.start)
        if on_done is not None:
            on_done(outcome)

    return done


def job_unscanned(job: Job, rerun: set[str]) -> bool:
    """Whether a tick plans ``job``'s periods without its scan's exclusions: its newest due
    period (catch-up ``latest`` or ``none``), or outdated ones it runs again."""
    return job.catchup != "all" or job.name in rerun


def gap_count(job: Job, result: JobScan, states: frozenset[str]) -> int:
    """How many periods (of a job with keys: (key, period)s) of a scan's gaps are in
    ``states``: what :func:`gap_periods` would give, counted from the ranges."""
    # a range grouped across keys already counts each (key, period) of it (keychain.group)
    grouped = not job.keyed or len(result.range_keys) == len(result.ranges)
    ranges = result.ranges if grouped else result.key_ranges
    return sum(r.periods for r in ranges if r.state in states)


def before_window(
    session: Session, targets: list[ScanTarget], now: datetime
) -> tuple[tuple[str, int, datetime], ...]:
    """The gap periods of each catch-up-all job before its ``catchup_window`` and the first's
    start: no tick runs them (a replay does). One scan per window length, from the job's start."""
    older: dict[datetime, list[ScanTarget]] = {}
    for target in targets:  # each one's own window starts at target.since
        if target.since is not None and target.job.anchor < target.since:
            older.setdefault(target.since, []).append(
                dataclasses.replace(target, since=target.job.anchor)
            )
    jobs = {t.job.name: t.job for group in older.values() for t in group}
    found = [
        (result.job, gap_count(jobs[result.job], result, REPLAYABLE), result)
        for until, group in older.items()
        for result in scan_jobs(session.ledger, group, now=now, since=None, until=until)
    ]
    return tuple((name, n, _first_gap(result)) for name, n, result in found if n)


def _first_gap(result: JobScan) -> datetime:
    firsts = [r.first for r in result.ranges if r.state in REPLAYABLE]
    return min(firsts + [r.first for r in result.key_ranges if r.state in REPLAYABLE])


def expected_at(ledger: Ledger, target: ScanTarget, period: Period) -> list[KeyRow]:
    """The keys of a keyed job expected to have ``period`` (read, when the target's were not)."""
    keys = ledger.key_history(target.job_id) if target.deferred else target.keys
    return [
        k
        for k in keys
        if period.end > k.expected_from and (k.gone_at is None or period.start < k.gone_at)
    ]


def round_robin(streams: list[Iterator[Planned]]) -> Iterator[Planned]:
    """One period of each job in turn, each job's oldest first: no job waits behind another's
    backlog. Lazy: nothing is taken from a stream before it is needed."""
    turn = deque(streams)
    while turn:
        stream = turn.popleft()
        item = next(stream, None)
        if item is not None:
            yield item
            turn.append(stream)


def _take(items: Iterator[Planned], n: int) -> Iterator[Planned]:
    """At most ``n`` of ``items`` (of a job with keys: at most ``n`` of each key)."""
    taken: dict[str, int] = {}
    for item in items:
        got = taken.get(item.job.key, 0)
        if got >= n:
            if not item.job.key:
                return
            continue
        taken[item.job.key] = got + 1
        yield item


def run_keys(
    session: Session,
    job: Job,
    period: Period,
    workers: int,
    rules: ClaimRules,
    interrupted: threading.Event | None,
) -> Batch:
    """``catchup run`` of a job with keys: ``period`` of every key expected to have it (or of
    those asked for), on a pool of ``workers``."""
    ready = prepare(session, [job], scanned_from=_unscanned)
    (target,) = ready.targets
    planned = [
        Planned(ready.jobs[0].for_key(k.key), period, "due")
        for k in expected_at(session.ledger, target, period)
    ]
    if not rules.include_excluded:
        planned = unexcluded(session, planned)
    batch = run_planned(
        session,
        iter(planned),
        planned=len(planned),
        workers=max(1, min(workers, len(planned))),
        interrupted=interrupted,
        rules=rules,
    )
    return dataclasses.replace(batch, keys_failed=keys_failed(ready.targets))
