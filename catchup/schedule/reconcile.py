"""Reconciling the ledger's schedule history with the configured schedule: which change to
record, and from when it takes effect. Pure (``now`` is passed in); the ledger records what
:func:`plan` decides (:meth:`catchup.ledger.Ledger.record_schedule`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from .parse import parse_schedule
from .rrule import RRule
from .steps import Schedule
from .timeline import Segment, Timeline


def _bind(
    schedule: Schedule, since: datetime, start: datetime, written: datetime | None
) -> Schedule:
    """A rule is counted from the job's start (its DTSTART); schedules that count steps from
    the start count them from where they take effect."""
    if isinstance(schedule, RRule):
        return schedule.bound(start, written)
    return schedule.bound(since)


def effective_from(
    timeline: Timeline,
    new: Schedule,
    seen: datetime,
    start: datetime,
    written: datetime | None = None,
) -> datetime:
    """When a schedule change noticed at ``seen`` takes effect: the first boundary of the new
    schedule at or after the end of the period in progress under the old one. Periods before it
    keep the old schedule, so a change never creates periods in the past."""
    current = timeline.floor(seen)
    if current is None:
        return timeline.first  # not started yet: the new schedule applies from the start
    end = timeline.after(current)
    return _bind(new, end, start, written).ceil(end)


def changed(
    timeline: Timeline,
    new: Schedule,
    since: datetime,
    start: datetime,
    written: datetime | None = None,
) -> Timeline:
    """``timeline`` with ``new`` in force from ``since`` (later segments dropped). A rule is
    counted from the job's start; schedules that count steps count them from ``since``."""
    if since <= timeline.first:
        return Timeline.single(new, start, written)
    kept = tuple(s for s in timeline.segments if s.since is None or s.since < since)
    return Timeline((*kept, Segment(since, _bind(new, since, start, written))), timeline.first)


@dataclass(frozen=True)
class Recorded:
    """A schedule as the ledger keeps it (see sql/migrations/0005_schedules.sql)."""

    since: datetime
    schedule: str
    timezone: str


@dataclass(frozen=True)
class Reconciliation:
    """What the ledger should record so that it agrees with the configured schedule."""

    timeline: Timeline
    add: Recorded | None = None  # a row to insert
    drop_after: datetime | None = None  # first delete the rows with since after this
    previous: Recorded | None = None  # the schedule being replaced, for the audit trail

    @property
    def writes(self) -> bool:
        return self.add is not None or self.drop_after is not None


def timeline_from(
    recorded: list[Recorded], start: datetime, written: datetime | None = None
) -> Timeline:
    """The timeline the ledger's rows describe, for a job configured to start at ``start``
    (written as the local time ``written``)."""
    first = parse_schedule(recorded[0].schedule, recorded[0].timezone, recorded=True)
    timeline = Timeline.single(first, start, written)
    for row in recorded[1:]:
        new = parse_schedule(row.schedule, row.timezone, recorded=True)
        timeline = changed(timeline, new, row.since, start, written)
    return timeline


_BEGINNING = datetime(1, 1, 1, tzinfo=UTC)


def reconcile(
    schedule: Schedule,
    start: datetime,
    recorded: list[Recorded],
    now: datetime,
    written: datetime | None = None,
) -> Reconciliation:
    """Compare the configured ``schedule`` with the ledger's rows at ``now`` (``start`` written
    as the local time ``written``).

    Nothing recorded: record it. The schedule in force matches: use the ledger's timeline
    (dropping a pending change the config no longer asks for). Otherwise a change: it takes
    effect where :func:`effective_from` says, replacing any change still pending; before the
    job's first period it simply replaces the schedule.
    """
    key = (schedule.canonical, schedule.timezone)
    mine = Recorded(now, *key)
    if not recorded:
        return Reconciliation(Timeline.single(schedule, start, written), add=mine)
    in_force = [r for i, r in enumerate(recorded) if i == 0 or r.since <= now]
    pending = recorded[len(in_force) :]
    current = timeline_from(in_force, start, written)
    last = in_force[-1]
    if (last.schedule, last.timezone) == key:
        return Reconciliation(current, drop_after=now if pending else None)
    if len(pending) == 1 and (pending[0].schedule, pending[0].timezone) == key:
        return Reconciliation(timeline_from(recorded, start, written))
    if current.floor(now) is None:  # no period has begun: nothing to keep
        replaced = Timeline.single(schedule, start, written)
        return Reconciliation(replaced, add=mine, drop_after=_BEGINNING, previous=last)
    since = effective_from(current, schedule, now, start, written)
    return Reconciliation(
        changed(current, schedule, since, start, written),
        add=Recorded(since, *key),
        drop_after=now if pending else None,
        previous=last,
    )
