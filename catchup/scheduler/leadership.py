"""What the built-in scheduler (``catchup scheduler``) decides, pure: the lead it holds or
sees, and when it must wake next (the moment the next period of any job falls due). ``now``
is always passed in: the database clock."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..config.job import Job


@dataclass(frozen=True)
class Lead:
    """The lead this holder has after taking or keeping it."""

    term: int
    since: datetime
    expires_at: datetime
    now: datetime


@dataclass(frozen=True)
class Leader:
    """Who leads, as the ledger says (``jobs``, ``scan``, the page): live while its lease is."""

    holder: str
    term: int
    since: datetime
    expires_at: datetime
    renewed_at: datetime
    live: bool
    now: datetime
    # each lane's workers and how many were busy at the last renewal (None: a leader that
    # predates migration 0024)
    lanes: dict[str, list[int]] | None = None

    def lane(self, name: str) -> tuple[int, int] | None:
        """A lane's (workers, busy), as the live leader last said; None when it did not."""
        load = (self.lanes or {}).get(name) if self.live else None
        return None if load is None else (int(load[0]), int(load[1]))


def next_due(job: Job, now: datetime) -> datetime:
    """When ``job``'s next period falls due after ``now``: the end of the period after the
    newest due one, plus its delay (its first period's, before any is due)."""
    latest = job.timeline.latest_due(job.delay, now)
    until = latest.end if latest is not None else job.anchor
    return job.timeline.period(until).end + job.delay


def wake_in(
    jobs: Iterable[Job], now: datetime, most: float, retry: datetime | None = None
) -> float:
    """Seconds until the next period of any of ``jobs`` falls due, or ``retry`` (the soonest
    backoff of a failed period ends), at most ``most`` (and never below 0): how long the
    leader may sleep."""
    moments = [next_due(job, now) for job in jobs] + ([retry] if retry is not None else [])
    soonest = min(moments, default=None)
    if soonest is None:
        return most
    return max(0.0, min(most, (soonest - now) / timedelta(seconds=1)))
