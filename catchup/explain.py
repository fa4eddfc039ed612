"""``catchup explain``: a job's periods spelled out, pure arithmetic with ``now`` passed in."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from .config import Job
from .schedule import Period, iso_utc


@dataclass(frozen=True)
class Row:
    number: int  # the period's index from the job's first period
    period: Period
    due: datetime
    is_due: bool


@dataclass(frozen=True)
class Explanation:
    job: str
    schedule: str
    timezone: str
    delay: timedelta
    spread: timedelta
    rows: tuple[Row, ...]
    warnings: tuple[str, ...]


def explain(
    job: Job, others: Iterable[Job], *, now: datetime, start: datetime | None, count: int
) -> Explanation:
    """``count`` periods from the one containing ``start`` (default: the current one)."""
    schedule, anchor = job.schedule, job.anchor
    first = max(0, schedule.index(anchor, start or now))
    rows = []
    for k in range(first, first + count):
        period = schedule.period(anchor, k)
        due = period.end + job.delay
        rows.append(Row(k, period, due, due <= now))
    return Explanation(
        job.name,
        schedule.text,
        job.timezone,
        job.delay,
        job.spread,
        tuple(rows),
        tuple(_warnings(job, list(others))),
    )


def _on_the_hour(job: Job) -> bool:
    return job.schedule.aligned and job.delay.total_seconds() % 3600 == 0


def _warnings(job: Job, others: list[Job]) -> list[str]:
    found = []
    if _on_the_hour(job):
        crowd = [o.name for o in others if o.name != job.name and _on_the_hour(o)]
        also = f" with {len(crowd)} other job(s): {', '.join(crowd[:5])}" if crowd else ""
        found.append(
            f"due exactly on the hour{also}; set delay, or spread = true, to start off the hour"
        )
    if job.timezone in ("UTC", "Etc/UTC"):
        found.append("periods are UTC: no daylight-saving changes touch them")
    return found


def describe_due(row: Row, now: datetime) -> str:
    if row.is_due:
        return f"due since {iso_utc(row.due)}"
    left = row.due - now
    hours, rest = divmod(int(left.total_seconds()), 3600)
    return f"due {iso_utc(row.due)} (in {hours}h{rest // 60:02d}m)"
