"""Ledger writes of the claim path that survive a broken connection: tried again through
reconnects for a bounded time, and read back when the answer to a commit was lost."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg

from ..errors import DatabaseError
from ..ledger import ClaimRequest, FinishFields, Many
from ..ledger.rows import Blocked, Claim, Finished
from ..results import UNCLAIMED, HandOff
from ..session import Session
from ..vocabulary import RunStatus

FINISH_RETRY_SECONDS = 120.0


def through_reconnects[T](session: Session, action: Callable[[bool], T]) -> T:
    """Run ``action``; when the connection breaks, reconnect with backoff (for at most
    FINISH_RETRY_SECONDS) and run it again, telling it that it runs after a reconnect, so it
    can read back what an earlier try may have committed."""

    def attempt(lost: bool) -> T:
        if lost or session.conn.broken or session.conn.closed:
            session.reconnect()
            return action(True)
        return action(False)

    return _retried(attempt)


def open_surely[T](opener: Callable[[], T]) -> T:
    """``opener()`` (a new session of a command already connected), tried again through a
    server restart for as long as a claim would be."""
    return _retried(lambda _: opener())


def _retried[T](attempt: Callable[[bool], T]) -> T:
    """``attempt(lost)`` until it returns, through connection errors, with backoff, for at
    most FINISH_RETRY_SECONDS; ``lost``: an earlier try failed."""
    delay = 0.2
    deadline = time.monotonic() + FINISH_RETRY_SECONDS
    lost = False
    while True:
        try:
            return attempt(lost)
        except (psycopg.OperationalError, DatabaseError):
            if time.monotonic() + delay > deadline:
                raise
            lost = True
            time.sleep(delay)
            delay = min(delay * 2, 5.0)


def claim_surely(session: Session, request: ClaimRequest) -> Claim | Blocked | None:
    """Claim; after a reconnect, a claim that committed after all (the row is ours and
    running) is reclaimed rather than left to expire."""
    r = request

    def claim(reconnected: bool) -> Claim | Blocked | None:
        if reconnected and (
            reclaimed := session.ledger.reclaim(r.job_id, r.period.start, r.owner, r.key)
        ):
            return reclaimed
        return session.ledger.claim_request(r)

    return through_reconnects(session, claim)


def finish_surely(
    session: Session,
    job_id: int,
    period_start: datetime,
    attempt: int,
    key: str = "",
    **fields: Any,
) -> Finished | None:
    """Write the finish; after a reconnect, read the row back instead of guessing whether the
    earlier commit happened."""

    def finish(reconnected: bool) -> Finished | None:
        if reconnected:
            row = session.ledger.run_row(job_id, period_start, key)
            if row is None or row.attempt != attempt:
                return None
            if row.status != RunStatus.running:
                assert row.finished_at is not None
                return Finished(row.finished_at, row.failures, row.retry_after)
        return session.ledger.finish(job_id, period_start, attempt, key, **fields)

    return through_reconnects(session, finish)


def finish_then_claim_surely(
    session: Session,
    job_id: int,
    period_start: datetime,
    attempt: int,
    next_request: ClaimRequest,
    fields: FinishFields,
    key: str = "",
) -> tuple[Finished | None, HandOff]:
    """The finish and the next claim in one transaction; when that fails, the finish on its
    own, and the next period left unclaimed (its own claim, in its own turn, says what is
    wrong with it). They commit together or not at all: after a lost answer the finish is read
    back as :func:`finish_surely` does, and the claim reclaimed if it committed."""
    try:
        finished, claim = session.ledger.finish_then_claim(
            job_id, period_start, attempt, next_request, key, **fields
        )
    except (psycopg.OperationalError, DatabaseError):
        finished = finish_surely(session, job_id, period_start, attempt, key, **fields)
        reclaimed = through_reconnects(
            session,
            lambda _: session.ledger.reclaim(
                next_request.job_id,
                next_request.period.start,
                next_request.owner,
                next_request.key,
            ),
        )
        return finished, UNCLAIMED if reclaimed is None else reclaimed
    except psycopg.Error:  # a deadlock, a trigger: rolled back whole, nothing of it written
        return finish_surely(session, job_id, period_start, attempt, key, **fields), UNCLAIMED
    if finished is None:  # fenced off, and so nothing claimed: the next period is its own
        return None, UNCLAIMED
    return finished, claim


def claim_many_surely(session: Session, many: Many) -> dict[int, Claim]:
    """:meth:`Ledger.claim_many` through reconnects: after a lost answer, the claims that
    committed after all (the rows ours and running) are taken back; none: claimed again."""

    def claim(reconnected: bool) -> dict[int, Claim]:
        if reconnected:
            back = session.ledger.reclaim_many(many.job_id, many.keys, many.starts, many.owner)
            if back:
                return back  # the batch commits whole: the rest were refused
        return session.ledger.claim_many(many)

    return through_reconnects(session, claim)


def finish_many_surely(
    session: Session,
    job_id: int,
    done: Sequence[tuple[str, datetime, int, FinishFields]],
    backoff: timedelta,
    backoff_cap: timedelta,
) -> dict[int, Finished]:
    """:meth:`Ledger.finish_many` through reconnects: after a lost answer, each row is read
    back (finished by this attempt already, taken over, or still to record)."""

    def finish(reconnected: bool) -> dict[int, Finished]:
        if not reconnected:
            return session.ledger.finish_many(job_id, done, backoff, backoff_cap)
        found: dict[int, Finished] = {}
        left: list[int] = []
        for i, (key, start, attempt, _) in enumerate(done):
            row = session.ledger.run_row(job_id, start, key)
            if row is None or row.attempt != attempt:
                continue
            if row.status != RunStatus.running:
                assert row.finished_at is not None
                found[i] = Finished(row.finished_at, row.failures, row.retry_after)
            else:
                left.append(i)
        if left:
            again = session.ledger.finish_many(
                job_id, [done[i] for i in left], backoff, backoff_cap
            )
            found.update({left[n]: f for n, f in again.items()})
        return found

    return through_reconnects(session, finish)
