"""``catchup explain``: a job's periods spelled out, pure arithmetic with ``now`` passed in."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice, pairwise

from ..config.job import Job
from ..config.upstream import needed
from ..schedule import (
    Period,
    Schedule,
    Wall,
    is_utc,
    iso_utc,
    span,
    to_utc,
    to_wall,
    transitions,
    zone,
)

# How far ahead explain looks for local times that a DST change skips or repeats.
LOOKAHEAD = timedelta(days=400)


@dataclass(frozen=True)
class Row:
    period: Period
    label: str  # the one name of the period (Job.label)
    local_start: datetime  # in the job's time zone
    local_end: datetime
    due: datetime
    is_due: bool
    dst: str | None  # how a DST change inside the period changes its length
    waits: str | None = None  # the upstream periods it waits for (after), in words


@dataclass(frozen=True)
class Explanation:
    job: str
    schedule: str
    timezone: str
    delay: timedelta
    spread: timedelta
    rows: tuple[Row, ...]
    warnings: tuple[str, ...]
    now: datetime  # the database clock when it was explained


def explain(
    job: Job, others: Iterable[Job], *, now: datetime, start: datetime | None, count: int
) -> Explanation:
    """``count`` periods from the one containing ``start`` (default: the current one)."""
    timeline = job.timeline
    tz = zone(job.timezone)
    first = timeline.floor(start or now) or job.anchor
    everyone = {other.name: other for other in others}
    rows = []
    for period in islice(timeline.periods(first, datetime.max.replace(tzinfo=first.tzinfo)), count):
        due = period.end + job.delay
        notes = [
            _clock_change(at, delta) for at, delta in transitions(tz, period.start, period.end)
        ]
        schedule = timeline.schedule_at(period.start)
        for edge, t in (("starts", period.start), ("ends", period.end)):
            moved = _moved(schedule, t)
            if moved is not None:
                at = t.astimezone(tz)
                if _scheduled(schedule, to_wall(t, tz)):
                    notes.append(
                        f"the period {edge} at {at:%H:%M %Z}: the scheduled {moved:%H:%M} does "
                        f"not exist that night and falls on this {at:%H:%M}, one boundary for both"
                    )
                else:
                    notes.append(
                        f"the period {edge} at {at:%H:%M %Z}: the scheduled {moved:%H:%M} does "
                        f"not exist that night and moves {span(to_wall(t, tz) - moved)} later"
                    )
        dst = "; ".join(notes) or None
        rows.append(
            Row(
                period,
                job.label(period.start),
                period.start.astimezone(tz),
                period.end.astimezone(tz),
                due,
                due <= now,
                dst,
                _waits(job, period, everyone),
            )
        )
    return Explanation(
        job.name,
        job.schedule.text,
        job.timezone,
        job.delay,
        job.spread,
        tuple(rows),
        # DST nights from the first period shown: `--from 2027-03-27` asks about that spring
        tuple(_warnings(job, list(everyone.values()), now, first)),
        now,
    )


def _waits(job: Job, period: Period, everyone: dict[str, Job]) -> str | None:
    """``export 2026-03-09T23:00:00Z .. 2026-03-10T22:00:00Z (24)``, per upstream job."""
    parts = []
    for dep in job.after:
        up = everyone.get(dep.job)
        if up is None:
            continue
        found = needed(up.timeline, period, dep.periods)
        if not found:
            parts.append(f"{up.name}: none (before its start)")
            continue
        first, last = up.label(found[0].start), up.label(found[-1].start)
        parts.append(
            f"{up.name} {first}" + ("" if len(found) == 1 else f" .. {last} ({len(found)})")
        )
    return "; ".join(parts) or None


def falls_due_on_the_hour(job: Job, now: datetime) -> bool:
    """Every one of the job's next boundaries, plus its delay, lands on a whole UTC hour."""
    upcoming = list(islice(job.timeline.current.asc(now), 8))
    return all(b.minute == 0 and b.second == 0 for b in upcoming) and (
        job.delay.total_seconds() % 3600 == 0
    )


def _warnings(job: Job, others: list[Job], now: datetime, shown: datetime) -> list[str]:
    found = []
    segments = job.timeline.segments
    for before, seg in pairwise(segments):
        if seg.since is not None and seg.since > now - timedelta(days=31):
            found.append(
                f"schedule {before.schedule.text!r} until {iso_utc(seg.since)}, "
                f"{seg.schedule.text!r} from then: periods that began before a change keep "
                "the schedule they began under"
            )
    if falls_due_on_the_hour(job, now):
        crowd = [o.name for o in others if o.name != job.name and falls_due_on_the_hour(o, now)]
        also = f" with {len(crowd)} other job(s): {', '.join(crowd[:5])}" if crowd else ""
        found.append(
            f"due exactly on the hour{also}; set delay, or spread = true, to start off the hour"
        )
    if is_utc(job.timezone):
        found.append("periods are UTC: no daylight-saving changes touch them")
    else:
        found.extend(dst_warnings(job.timeline.schedule_at(shown), shown))
    return found


def dst_warnings(schedule: Schedule, now: datetime) -> list[str]:
    """The schedule's local times that a DST change in the 400 days from ``now`` skips or repeats,
    and what catchup does with them (one period each, never two, never none)."""
    tz = zone(schedule.timezone)
    if not isinstance(schedule, Wall):
        if transitions(tz, now, now + LOOKAHEAD):
            return [
                f"{schedule.text!r} counts elapsed time: its periods stay the same length "
                "across DST changes, so their local start times shift with the clock"
            ]
        return []
    found = []
    for at, delta in transitions(tz, now, now + LOOKAHEAD):
        before = to_wall(at - timedelta(microseconds=1), tz) + timedelta(microseconds=1)
        after = to_wall(at, tz)
        lo, hi = (before, after) if delta > timedelta(0) else (after, before)
        walls = [w for w in islice(schedule.walls_from(lo), 1000) if w < hi]
        for w in walls[:3]:
            instant = to_utc(w, tz)
            local = instant.astimezone(tz)
            if delta > timedelta(0):
                where = f"{local:%H:%M %Z} ({iso_utc(instant)})"
                what = (
                    f"it falls on {where}, which is scheduled too: one period starts there, not two"
                    if _scheduled(schedule, to_wall(instant, tz))
                    else f"that period starts {span(delta)} later, at {where}"
                )
                found.append(
                    f"{w:%H:%M} on {w:%Y-%m-%d} does not exist in {schedule.timezone} (clocks "
                    f"jump from {lo:%H:%M} to {hi:%H:%M}): {what} (systemd would skip it; cron "
                    f"and croniter run it at {hi:%H:%M})"
                )
            else:
                first = w.replace(fold=0).replace(tzinfo=tz)
                found.append(
                    f"{w:%H:%M} on {w:%Y-%m-%d} happens twice in {schedule.timezone} (clocks go "
                    f"back {span(-delta)} at {before:%H:%M}): the period starts at the second, "
                    f"{local:%H:%M %Z} ({iso_utc(instant)}) (systemd, cron and croniter take "
                    f"the first, {first:%H:%M %Z})"
                )
        if len(walls) > 3:
            found.append(f"… and {len(walls) - 3} more local times on {lo:%Y-%m-%d}")
    return found


def _scheduled(schedule: Schedule, wall: datetime) -> bool:
    """``wall`` is one of the schedule's own local times."""
    return isinstance(schedule, Wall) and next(schedule.walls_from(wall), None) == wall


def _clock_change(at: datetime, delta: timedelta) -> str:
    way = "forward" if delta > timedelta(0) else "back"
    return f"clocks go {way} {span(abs(delta))} at {iso_utc(at)}"


def _moved(schedule: Schedule, t: datetime) -> datetime | None:
    """The local time a boundary was meant to be, when a spring-forward gap moved it."""
    if not isinstance(schedule, Wall) or is_utc(schedule.timezone):
        return None
    tz = zone(schedule.timezone)
    wall = to_wall(t, tz)
    for w in islice(schedule.walls_from(wall - timedelta(hours=4)), 500):
        if w > wall:
            return None
        if w != wall and to_utc(w, tz) == t:
            return w
    return None


def describe_due(row: Row, now: datetime) -> str:
    if row.is_due:
        return f"due since {iso_utc(row.due)}"
    left = int((row.due - now).total_seconds())
    days, rest = divmod(left, 86400)
    hours, rest = divmod(rest, 3600)
    if days >= 2:
        return f"due {iso_utc(row.due)} (in {days}d{hours:02d}h)"
    return f"due {iso_utc(row.due)} (in {days * 24 + hours}h{rest // 60:02d}m)"
