"""Which period a ping settles: one rule, pure (the database clock passed in).

A cron fires when the period it covers is over: at the period's end, plus the job's ``delay``.
So a ping settles **the latest period due when it arrives** (the database clock). A ping up
to a minute before a period falls due counts as on time (a host's clock a little ahead of the
database's), never more than a quarter of the job's shortest period. A late run settles that
period until the next one falls due; later still, it is the next period's, and the one it
missed stays a gap. A finish settles the period its start claimed, however late it comes
(:mod:`catchup.pings.ingest`), and a ping that names its period settles that one (a backfill
the other scheduler runs)."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..config.job import Job
from ..errors import ConfigError
from ..schedule import Period, iso_utc

EARLY = timedelta(minutes=1)


def early(job: Job) -> timedelta:
    """How early a ping still counts as on time for ``job``."""
    return min(EARLY, job.timeline.current.typical() / 4)


def ping_period(job: Job, at: datetime) -> Period | None:
    """The period a ping arriving at ``at`` settles; None when none is due yet."""
    return job.timeline.latest_due(job.delay, at + early(job))


def named_period(job: Job, start: datetime, at: datetime) -> Period:
    """The period a ping names (``?period=``, ``--period``): a period's start, due by ``at``
    (with the same minute early); a :class:`ConfigError` saying why not."""
    period = job.period_starting(start)
    due = period.end + job.delay
    if due > at + early(job):
        raise ConfigError(
            f"{job.name}: period {job.label(period.start)} is not due until {iso_utc(due)} "
            f"(database clock: {iso_utc(at)}): a ping settles a period that is over"
        )
    return period
