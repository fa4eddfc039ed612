"""``catchup exclude``: windows of periods nobody expected (a maintenance window, a migration
that took the database away), recorded afterwards with who and why, and undone the same way.
A window names local dates (each job's own zone) or times; its periods are excluded from the
next scan on (:mod:`catchup.scan.excluded`), and every change is an event in the audit trail."""

from __future__ import annotations

from datetime import datetime

from ..config.job import Job
from ..errors import ConfigError
from ..results import Window, Windows
from ..schedule import iso_utc, zone
from ..schedule.exclusions import Days, ExcludeError, Times, read_entry
from ..session import Session
from ..vocabulary import EventAction


def read_window(text: str) -> Days | Times:
    """A window as a person writes it: a date, dates ``A..B`` (both included) or times
    ``A..B`` (``[A, B)``); a :class:`ConfigError` in one line otherwise."""
    try:
        entry = read_entry(text, "window")
    except ExcludeError as exc:
        raise ConfigError(str(exc).replace("exclude entry", "window", 1)) from None
    if not isinstance(entry, Days | Times):
        raise ConfigError(
            f"window {text!r}: write a date or a range A..B (rules belong in the job's exclude)"
        )
    return entry


def span_of(job: Job, entry: Days | Times) -> tuple[datetime, datetime]:
    """The window as UTC ``[lo, hi)`` on ``job``'s clock."""
    tz = zone(job.timezone)
    lo, hi = next(entry.spans(tz, datetime.min, datetime.max))
    return lo, hi


def record(
    session: Session,
    jobs: list[Job],
    entry: Days | Times,
    key: str | None,
    reason: str,
    actor: str,
    *,
    every: bool = False,
) -> Windows:
    """The window recorded for each job (of ``key``), in one transaction. A job none of whose
    periods starts in it is refused (a window of 02:00 to 04:00 over a daily job): with
    ``every`` (``--all``) it is left out, unless every job is."""
    ledger = session.ledger
    done: list[Window] = []
    spans = {job.name: span_of(job, entry) for job in jobs}
    empty = [job.name for job in jobs if job.timeline.count(*spans[job.name]) == 0]
    if empty and (not every or len(empty) == len(jobs)):
        raise ConfigError(
            f"window {entry.text}: no period of {', '.join(empty[:3])} starts in it; nothing "
            f"was recorded (a period is excluded when its start falls in a window)"
        )
    with ledger.transaction():
        for job in [j for j in jobs if j.name not in empty]:
            lo, hi = spans[job.name]
            job_id = session.registered_id(job.name)
            ledger.record_exclusion(job_id, key, lo, hi, reason, actor)
            ledger.record_events(
                job_id, EventAction.exclude, [lo], [iso_utc(hi)], reason, actor, key=key or ""
            )
            count = job.timeline.count(lo, hi)
            done.append(Window(job.name, key, lo, hi, count, reason, actor))
    return Windows(EventAction.exclude, tuple(done))


def undo(
    session: Session,
    jobs: list[Job],
    entry: Days | Times,
    key: str | None,
    reason: str,
    actor: str,
) -> Windows:
    """The live windows of each job (of ``key``) within the window, undone in one
    transaction; a :class:`ConfigError` (nothing written) when there is none."""
    ledger = session.ledger
    done: list[Window] = []
    with ledger.transaction():
        for job in jobs:
            lo, hi = span_of(job, entry)
            job_id = session.registered_id(job.name)
            for row in ledger.undo_exclusions(job_id, key, lo, hi, reason, actor):
                ledger.record_events(
                    job_id,
                    EventAction.include,
                    [row.lo],
                    [iso_utc(row.hi)],
                    reason,
                    actor,
                    key=key or "",
                )
                count = job.timeline.count(row.lo, row.hi)
                done.append(Window(job.name, key, row.lo, row.hi, count, row.reason, row.actor))
        if not done:
            names = ", ".join(job.name for job in jobs)
            raise ConfigError(
                f"no window recorded for {names} lies within {entry.text}; nothing was undone"
            )
    return Windows(EventAction.include, tuple(done))
