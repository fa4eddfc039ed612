"""Period arithmetic: pure functions of a schedule, a time zone and ``now``; no I/O, no clock.

A schedule is a sequence of boundaries (UTC instants); a period runs from one boundary to the
next. Two families:

- **elapsed time** (:class:`Fixed`): ``hourly``, ``every N minutes|hours``, and in UTC also
  ``daily``, ``weekly`` and ``every N days|weeks``: boundaries ``origin + k * step``. SQL can do
  this arithmetic itself.
- **wall clock** (:class:`WallStep`, :class:`Cron`, :class:`RRule`): the schedule is evaluated on
  the job's local clock and each local time is turned into a UTC instant by :func:`to_utc`.

The one DST rule (:func:`to_utc`) is PostgreSQL's own: a local time the clocks skip is read with
the offset from before the change (02:30 on a spring-forward night in Berlin lands at 03:30
CEST, the gap's length later), and a local time that happens twice means the second one (after
the clocks went back). Local times that land on the same instant count once, so a DST change
never makes two periods out of one or none out of one.

The parts: ``zones`` (time zones, the DST rule, periods, formats), ``steps`` (fixed and
wall-clock steps), ``cron``, ``rrule``, ``parse`` (expressions into schedules), ``timeline``
(every schedule a job has had) and ``labels`` (the names of periods). The reconciliation of
the ledger's schedule history is :mod:`catchup.schedule.reconcile`.
"""

from __future__ import annotations

from .cron import Cron, parse_cron
from .labels import human_label, period_label
from .parse import parse_schedule
from .rrule import RRule, parse_rrule
from .steps import Fixed, Schedule, Wall, WallStep
from .timeline import Segment, Timeline
from .zones import (
    UTC_NAMES,
    Period,
    ScheduleError,
    as_utc,
    is_utc,
    iso_utc,
    span,
    to_utc,
    to_wall,
    transitions,
    written_wall,
    zone,
)

__all__ = [
    "UTC_NAMES",
    "Cron",
    "Fixed",
    "Period",
    "RRule",
    "Schedule",
    "ScheduleError",
    "Segment",
    "Timeline",
    "Wall",
    "WallStep",
    "as_utc",
    "human_label",
    "is_utc",
    "iso_utc",
    "parse_cron",
    "parse_rrule",
    "parse_schedule",
    "period_label",
    "span",
    "to_utc",
    "to_wall",
    "transitions",
    "written_wall",
    "zone",
]
