"""A scan's or a replay's window: ``--since`` and ``--until`` read in each job's own zone, and
the period starts a job is expected to have between them."""

from __future__ import annotations

from datetime import date, datetime

from ..config.job import Job
from ..config.values import parse_instant
from ..errors import ConfigError
from ..schedule import iso_utc

# A bound of a scan or replay window: an instant, or a date (or a time without an offset) that
# means the job's own local time, so one ``--since 2026-11-25`` is each job's local midnight.
Moment = datetime | date | str


def bound(value: Moment | None, job: Job) -> datetime | None:
    """``value`` as an instant for ``job``: a bare date is its local midnight."""
    if value is None:
        return None
    try:
        return parse_instant(value, job.timezone)
    except ValueError as exc:
        raise ConfigError(f"{job.name}: {exc}") from None


def check_window(jobs: list[Job], since: Moment | None, until: Moment | None) -> None:
    """Refuse ``--since`` not before ``--until`` (for any job, in its own zone)."""
    if since is None or until is None:
        return
    for job in jobs:
        lo, hi = bound(since, job), bound(until, job)
        if lo is not None and hi is not None and lo >= hi:
            raise ConfigError(f"--since {iso_utc(lo)} is not before --until {iso_utc(hi)}")


def window(
    job: Job, now: datetime, since: Moment | None, until: Moment | None
) -> tuple[datetime, datetime]:
    """``[first, end)``: the period starts a scan expects, both boundaries of the job.

    ``first`` is the first start at or after ``since`` (and the job's start); ``end`` excludes
    periods starting at or after ``until`` and periods not yet due. A bare date is the job's
    local midnight.
    """
    since, until = bound(since, job), bound(until, job)
    timeline, anchor = job.timeline, job.anchor
    first = anchor if since is None or since <= anchor else timeline.ceil(since)
    latest = timeline.latest_due(job.delay, now)
    end = latest.end if latest else anchor
    if until is not None:
        end = min(end, max(anchor, timeline.ceil(until)))
    return first, max(first, end)
