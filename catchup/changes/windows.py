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
    body = " ".join(str(text).split())
    forms = (
        "write a date (2026-12-01) or a range A..B of dates or of times "
        "(2026-12-01T02:00Z..2026-12-01T04:00Z)"
    )
    if body.upper().startswith(("RRULE:", "CALENDAR:")) or len(body.split()) == 5:
        raise ConfigError(f"window {body!r}: {forms}; rules and calendars go in exclude")
    try:
        entry = read_entry(body, "window")
    except ExcludeError as exc:
        said = str(exc)
        if "excludes nothing" in said or ": not " in said or "is empty" in said:
            raise ConfigError(f"window {body!r}: {forms}") from None
        raise ConfigError(said.replace("exclude entry", "window", 1)) from None
    assert isinstance(entry, Days | Times)
    return entry


def spans_of(job: Job, entry: Days | Times) -> list[tuple[datetime, datetime]]:
    """The window as UTC ``[lo, hi)`` on ``job``'s clock: two spans for local times the
    night the clocks go back (both readings), none inside the hour they skip."""
    tz = zone(job.timezone)
    return [(lo, hi) for lo, hi in entry.spans(tz, datetime.min, datetime.max) if lo < hi]


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
    """The window recorded for each job (of ``key``), in one transaction; one recorded and
    live already is said so, not recorded twice. A job none of whose periods starts in it is
    refused (a window of 02:00 to 04:00 over a daily job): with ``every`` (``--all``) it is
    left out, unless every job is."""
    ledger = session.ledger
    done: list[Window] = []
    spans = {job.name: spans_of(job, entry) for job in jobs}
    empty = [j.name for j in jobs if not sum(j.timeline.count(*s) for s in spans[j.name])]
    if empty and (not every or len(empty) == len(jobs)):
        raise ConfigError(
            f"window {entry.text}: no period of {', '.join(empty[:3])} starts in it; nothing "
            f"was recorded (a period is excluded when its start falls in a window)"
        )
    with ledger.transaction():
        for job in [j for j in jobs if j.name not in empty]:
            job_id = session.registered_id(job.name)
            for lo, hi in spans[job.name]:
                new = ledger.record_exclusion(job_id, key, lo, hi, reason, actor) is not None
                if new:
                    ledger.record_events(
                        job_id, EventAction.exclude, [lo], [_to(hi)], reason, actor, key=key or ""
                    )
                count = job.timeline.count(lo, hi)
                done.append(Window(job.name, key, lo, hi, count, reason, actor, new))
    return Windows(EventAction.exclude, tuple(done))


def _to(hi: datetime) -> str:
    """What the audit trail keeps of a window beside its start: its end."""
    return f"window to {iso_utc(hi)}"


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
            job_id = session.registered_id(job.name)
            lo = min((s[0] for s in spans_of(job, entry)), default=None)
            hi = max((s[1] for s in spans_of(job, entry)), default=None)
            if lo is None or hi is None:
                continue
            for row in ledger.undo_exclusions(job_id, key, lo, hi, reason, actor):
                ledger.record_events(
                    job_id,
                    EventAction.include,
                    [row.lo],
                    [_to(row.hi)],
                    reason,
                    actor,
                    key=key or "",
                )
                count = job.timeline.count(row.lo, row.hi)
                done.append(Window(job.name, key, row.lo, row.hi, count, row.reason, row.actor))
        if not done:
            names = ", ".join(job.name for job in jobs)
            of = f" of key {key}" if key is not None else " (a key's window: undo it with --key)"
            raise ConfigError(
                f"no window recorded for {names}{of} lies within {entry.text}; nothing was undone"
            )
    return Windows(EventAction.include, tuple(done))
