"""Batched claims: a worker's next periods of one keyed job (one per key, most often one day
of every tenant) claimed in one round trip, run one after another, and recorded in another.

Each period is still its own row, lease, attempt and fence, claimed by the one claim path
(``claim_periods()`` calls ``claim_period()`` for each). What a batch changes is when: the
periods claimed with the one running wait with their leases held, renewed with the running
period's (one statement for all), and their outcomes are recorded together. So a batch is only
as big as its job's periods run in about :data:`BATCH_SECONDS` (from how long they took so
far, and never more than a quarter of the lease), and what ran is recorded at once when one
fails and otherwise every :data:`FLUSH_SECONDS`: a process killed mid-batch leaves at most that
much run and unrecorded, and its claimed periods that never started running until their leases
run out; the next claims take them over as attempt + 1, as they take over a killed single
period (each counted as a failed attempt, like that one)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime

from ..config.job import Job
from ..errors import Unconfirmed
from ..execution.calls import Begun, CallSequence
from ..execution.callthread import CallThread
from ..execution.runner import Execution
from ..execution.setup import call_context, execute, logs
from ..execution.setup import held as held_claim
from ..ledger import FinishFields, Many
from ..ledger.rows import Claim, Finished, Renewed
from ..results import ClaimRules, Outcome, Planned
from ..session import Session, owner_name
from ..vocabulary import Ended, OutcomeStatus
from .batchrecord import EXPIRED, RELEASED, failed, fields, lose, outcome_of, told
from .failover import Held
from .lease import LeaseKeeper
from .path import BACKOFF_CAP
from .reconnecting import claim_many_surely, finish_many_surely
from .refusal import why_not
from .suspects import recreated_many

BATCH_MAX = 256  # periods claimed in one round trip, at most
BATCH_SECONDS = 0.5  # a batch is sized to run in about this long
# what ran is recorded at least this often: a process killed mid-batch leaves at most this
# much of what ran unrecorded (to run again as attempt 2), where one period leaves its finish
FLUSH_SECONDS = 0.05


def batchable(item: Planned) -> bool:
    """Whether ``item`` may be claimed with other periods of its job: a keyed job's period
    that waits for nothing and needs no evidence read before its claim or after its run."""
    job = item.job
    return bool(job.key) and job.evidence is None and not job.after and not job.verify


class Sizes:
    """How many periods of each job a worker claims at once: 1 until one of its periods has
    run, then as many as run in about BATCH_SECONDS (a moving average of their times), at
    most ``most`` and at most a quarter of the lease's worth."""

    def __init__(self, most: int = BATCH_MAX) -> None:
        self.most = most
        self._seconds: dict[str, float] = {}

    def note(self, job: Job, seconds: float | None) -> None:
        if seconds is None:
            return
        seen = self._seconds.get(job.name)
        self._seconds[job.name] = seconds if seen is None else 0.8 * seen + 0.2 * seconds

    def size(self, job: Job) -> int:
        seconds = self._seconds.get(job.name)
        if seconds is None or self.most <= 1:
            return 1
        budget = min(BATCH_SECONDS, job.lease.total_seconds() / 4)
        return max(1, min(self.most, int(budget / max(seconds, 1e-4))))


def run_batch(  # noqa: PLR0913
    session: Session,
    items: list[Planned],
    *,
    rules: ClaimRules,
    stop: threading.Event,
    halted: Callable[[], bool],
    calls: CallThread,
    report: Callable[[list[tuple[Planned, Outcome]]], None],
    on_start: Callable[[Planned], None] | None = None,
) -> list[Planned]:
    """Claim ``items`` (periods of one job, distinct keys) in one round trip, run those claimed
    in order and ``report`` their outcomes once recorded (a list: those one statement recorded).
    Returns the items whose claim was refused only because another period of their key runs
    (overlap forbidden): the caller runs those one by one, waiting."""
    job = items[0].job
    job_id = session.registered_id(job.name)
    if (why := session.cannot_start(job)) is not None:
        detail = f"{why}; not claimed, no attempt counted"
        report(
            [(item, outcome_of(item, OutcomeStatus.unstartable, detail=detail)) for item in items]
        )
        return []
    many = Many(
        job_id,
        [i.job.key for i in items],
        [i.period.start for i in items],
        [i.period.end for i in items],
        owner_name(),
        job.lease,
        job.max_attempts,
        job.overlap == "allow",
        rules.ignore_backoff,
        rules.retry_exhausted,
        job.whole_job_overlap,
    )
    granted = time.monotonic()
    try:
        claims = claim_many_surely(session, many)
    except Unconfirmed as exc:  # durable_claims: claimed on the primary only, none started
        report([(item, outcome_of(item, OutcomeStatus.error, detail=str(exc))) for item in items])
        return []
    batch = _Batch(session, job_id, items, claims, granted, report, halted, on_start)
    try:
        if job.call is not None:
            batch.run_calls(stop, calls)
        else:
            batch.run_commands(stop)
        batch.flush()
    except BaseException:
        batch.give_back()  # the caller failed (its output went away, say): nothing stranded
        raise
    blocked: list[Planned] = []
    for item in (items[n] for n in range(len(items)) if n not in claims):
        detail, waits = why_not(session, item.job, job_id, item.period)
        if waits:
            blocked.append(item)
        else:
            report([(item, outcome_of(item, OutcomeStatus.skipped, detail=detail))])
    return blocked


class _Batch:
    """The claimed periods of one batch: their leases (renewed together), each one's start
    (or release), and their outcomes, recorded together."""

    def __init__(  # noqa: PLR0913
        self,
        session: Session,
        job_id: int,
        items: list[Planned],
        claims: dict[int, Claim],
        granted: float,
        report: Callable[[list[tuple[Planned, Outcome]]], None],
        halted: Callable[[], bool],
        on_start: Callable[[Planned], None] | None,
    ) -> None:
        self.session, self.job_id, self.items, self.claims = session, job_id, items, claims
        self.job = items[0].job
        self.lease = self.job.lease.total_seconds()
        self.report, self.halted, self.on_start = report, halted, on_start
        # when each claimed period's lease was last given (0: it is gone)
        self.given = {n: granted for n in claims}
        self.waiting = sorted(claims)  # claimed, not started yet
        # run (or released unrun: why), not recorded yet
        self.ran: list[tuple[int, Execution | str]] = []
        self.first_ran = 0.0
        self.labels: dict[datetime, str] = {}
        self.values: dict[datetime, str] = {}
        self.sequence: CallSequence | None = None  # the calls running now, if any

    def label(self, item: Planned) -> str:
        """The period's label, found once for all the keys that share the period."""
        start = item.period.start
        if (found := self.labels.get(start)) is None:
            found = self.labels[start] = self.job.label(start)
        return found

    def value(self, item: Planned) -> str:
        """``{period}`` of the period, found once for all the keys that share it."""
        start = item.period.start
        if (found := self.values.get(start)) is None:
            found = self.values[start] = self.job.period_value(start)
        return found

    def held(self, ns: list[int]) -> list[tuple[str, datetime, int]]:
        items, claims = self.items, self.claims
        return [(items[n].job.key, items[n].period.start, claims[n].attempt) for n in ns]

    def mine(self, ns: list[int]) -> list[Held]:
        """What this runner holds of each of ``ns``, to write its row again after a failover
        lost it."""
        items, claims = self.items, self.claims
        return [held_claim(items[n].job, self.job_id, items[n].period, claims[n]) for n in ns]

    def renew(self, ns: list[int], within: float) -> dict[int, Renewed]:
        """Renew the leases of ``ns`` in one statement; the renewal of each still held (a row
        a failover lost written again)."""
        sent = time.monotonic()
        heartbeats = self.session.heartbeats
        kept = heartbeats.renew_many(
            self.job_id, self.held(ns), self.job.lease, within, self.mine(ns)
        )
        got = {}
        for n in ns:
            at = kept.get((self.items[n].job.key, self.items[n].period.start))
            self.given[n] = 0.0 if at is None else sent
            if at is not None:
                got[n] = at
        return got

    def begin(self, n: int) -> tuple[Callable[[float], Renewed | None], float] | str:
        """Whether ``n`` may start now: the renewal for its keeper (its own lease with those
        still waiting behind it) and when its lease was given; or why not."""
        self.waiting.remove(n)
        if self.halted():
            return RELEASED
        age = time.monotonic() - self.given[n]
        if self.given[n] and self.lease / 3 < age < self.lease:
            # the periods before it ran long: renew what still waits
            self.renew([n, *self.waiting], self.lease - age)
            age = time.monotonic() - self.given[n]
        if not self.given[n] or age >= self.lease:
            return EXPIRED  # fenced: if taken over already, its release writes nothing
        if self.on_start:
            self.on_start(self.items[n])
        behind = list(self.waiting)

        def renew_running(within: float) -> Renewed | None:
            return self.renew([n, *behind], within).get(n)

        return renew_running, self.given[n]

    def give_back(self) -> None:
        """Something failed above the batch: what ran is recorded (told to no one), what was
        claimed and not started is given back at once; best effort, the leases cover the rest."""
        self.report = lambda told: None
        try:
            if self.sequence is not None:
                for n, what in self.sequence.halt():
                    self.add(n, what)
            for n in list(self.waiting):
                self.waiting.remove(n)
                self.add(n, RELEASED)
            self.flush()
        except Exception:
            pass

    def add(self, n: int, ended: Execution | str) -> None:
        item = self.items[n]
        if isinstance(ended, Execution) and ended.ended == Ended.lost:
            lose(self.session, self.job_id, item, self.claims[n].attempt, ended)
            self.report([(item, told(item, self.claims[n].attempt, ended, None))])
            return
        if not self.ran:
            self.first_ran = time.monotonic()
        self.ran.append((n, ended))

    def due(self, failed: bool) -> bool:
        """Whether what ran is recorded now: a failure (told at once: stop_on_failure stops
        before the next starts), or the oldest unrecorded ended FLUSH_SECONDS ago."""
        return bool(self.ran) and (failed or time.monotonic() - self.first_ran >= FLUSH_SECONDS)

    def flush(self) -> None:
        if not self.ran:
            return
        ran, self.ran = self.ran, []
        held = self.held([n for n, _ in ran])
        done: list[tuple[str, datetime, int, FinishFields]] = [
            (*h, fields(self.job, ended)) for h, (_, ended) in zip(held, ran, strict=True)
        ]
        finished = finish_many_surely(
            self.session, self.job_id, done, self.job.retry_backoff, BACKOFF_CAP
        )
        if unrecorded := [place for place in range(len(ran)) if place not in finished]:
            finished.update(self.recorded_again(ran, done, unrecorded))
        outcomes = []
        for place, (n, ended) in enumerate(ran):
            item = self.items[n]
            label = self.label(item)
            outcomes.append(
                (item, told(item, self.claims[n].attempt, ended, finished.get(place), label))
            )
        self.report(outcomes)

    def recorded_again(
        self,
        ran: list[tuple[int, Execution | str]],
        done: list[tuple[str, datetime, int, FinishFields]],
        places: list[int],
    ) -> dict[int, Finished]:
        """Of the ``places`` in ``done`` that were not recorded, those whose rows a failover
        lost: written again and recorded, by place."""
        mine = self.mine([ran[p][0] for p in places])
        made = recreated_many(self.session, self.job_id, mine, self.job.lease)
        again = [p for p in places if done[p][:2] in made]
        if not again:
            return {}
        finished = finish_many_surely(
            self.session,
            self.job_id,
            [done[p] for p in again],
            self.job.retry_backoff,
            BACKOFF_CAP,
        )
        return {again[n]: f for n, f in finished.items()}

    def run_commands(self, stop: threading.Event) -> None:
        """Each claimed period's command, one after another."""
        for n in list(self.waiting):
            begun = self.begin(n)
            if isinstance(begun, str):
                self.add(n, begun)
                continue
            if self.due(False):
                self.flush()
            renew, granted = begun
            item = self.items[n]
            execution = execute(
                self.session,
                item.job,
                self.job_id,
                item.period,
                self.claims[n],
                stop,
                False,
                renew=renew,
                granted=granted,
            )
            self.add(n, execution)
            if self.due(failed(execution)):
                self.flush()

    def run_calls(self, stop: threading.Event, calls: CallThread) -> None:
        """Each claimed period's call, back to back on the worker's call thread
        (:class:`CallSequence`), watched and recorded from here."""

        def begin(n: int) -> Begun:
            begun = self.begin(n)
            if isinstance(begun, str):
                return begun
            renew, granted = begun
            item = self.items[n]
            ctx = call_context(
                self.session, item.job, item.period, self.claims[n], self.value(item)
            )
            return ctx, LeaseKeeper(renew, self.job.lease, granted)

        # a call given up on (timed out, its lease lost) ends its sequence, and the periods
        # still waiting go on in a new one (on a new thread: that call may still run)
        while self.waiting and not self.halted():
            sequence = self.sequence = CallSequence(
                self.job, calls, stop, begin, list(self.waiting), logs(self.session, self.job)
            )
            for ended in sequence.results():
                for n, what in ended:
                    self.add(n, what)
                if self.due(any(isinstance(e, Execution) and failed(e) for _, e in ended)):
                    self.flush()
                sequence.go_on()
        for n in list(self.waiting):  # never begun: asked to stop before them
            self.waiting.remove(n)
            self.add(n, RELEASED)
