"""``catchup explain``: a job's periods spelled out, pure arithmetic with ``now`` passed in."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice, pairwise
from zoneinfo import ZoneInfo

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
class Moved:
    """A period's boundary that a spring-forward gap moved: the local time the schedule meant
    does not exist that night, and the boundary falls where the clocks resume."""

    edge: str  # "start" or "end"
    scheduled: datetime  # the local time the schedule meant (naive: it does not exist)
    at: datetime  # where the boundary is (UTC)
    shared: bool  # it lands on a local time scheduled anyway: one boundary for both


@dataclass(frozen=True)
class LocalTime:
    """One of a schedule's local times that a DST change skips or repeats, and where its
    period starts (one period each, never two, never none)."""

    scheduled: datetime  # the local time as scheduled (naive)
    start: datetime  # the instant its period starts (UTC)
    shared: bool  # skipped, and landing on a local time scheduled anyway: one period there


@dataclass(frozen=True)
class ClockChange:
    """A DST change of the job's time zone and the schedule's local times it skips (clocks go
    forward) or repeats (clocks go back)."""

    at: datetime  # UTC
    offset_change: timedelta  # the new offset minus the old: positive when clocks go forward
    local_before: datetime  # the wall clock reading it jumps from (naive)
    local_after: datetime  # the reading it jumps to (naive)
    local_times: tuple[LocalTime, ...]  # empty for a schedule that counts elapsed time


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
    clock_changes: tuple[tuple[datetime, timedelta], ...] = ()  # inside it: (UTC, offset change)
    moved: tuple[Moved, ...] = ()  # its boundaries a spring-forward gap moved
    # what of its job's exclude excludes it (windows recorded afterwards are the ledger's)
    excluded_by: str | None = None


@dataclass(frozen=True)
class Explanation:
    job: str
    schedule: str
    timezone: str
    delay: timedelta
    spread: timedelta
    rows: tuple[Row, ...]
    warnings: tuple[str, ...]
    now: datetime  # the clock it was explained by (see clock)
    clock: str = "database"  # whose clock `now` is: "database", or "host" (no ledger used)
    # the DST changes in the 400 days from the first period shown, as data (warnings: in words)
    dst_changes: tuple[ClockChange, ...] = ()


def explain(
    job: Job,
    others: Iterable[Job],
    *,
    now: datetime,
    start: datetime | None,
    count: int,
    clock: str = "database",
) -> Explanation:
    """``count`` periods from the one containing ``start`` (default: the current one), ``now``
    read from ``clock`` ("database" or "host")."""
    timeline = job.timeline
    first = timeline.floor(start or now) or job.anchor
    everyone = {other.name: other for other in others}
    periods = islice(timeline.periods(first, datetime.max.replace(tzinfo=first.tzinfo)), count)
    rows = [_row(job, period, now, everyone) for period in periods]
    # DST nights from the first period shown: `--from 2027-03-27` asks about that spring
    shown = timeline.schedule_at(first)
    return Explanation(
        job.name,
        job.schedule.text,
        job.timezone,
        job.delay,
        job.spread,
        tuple(rows),
        tuple(_warnings(job, list(everyone.values()), now, first)),
        now,
        clock,
        () if is_utc(job.timezone) else tuple(clock_changes(shown, first)),
    )


def _row(job: Job, period: Period, now: datetime, everyone: dict[str, Job]) -> Row:
    """One period: its bounds, when it falls due, and what DST does to it."""
    tz = zone(job.timezone)
    due = period.end + job.delay
    changes = tuple(transitions(tz, period.start, period.end))
    schedule = job.timeline.schedule_at(period.start)
    moved = tuple(
        m
        for edge, t in (("start", period.start), ("end", period.end))
        if (m := _moved_edge(schedule, edge, t)) is not None
    )
    notes = [_clock_change(at, delta) for at, delta in changes]
    notes += [_moved_note(m, tz) for m in moved]
    excluded = job.excluded(period.start, period.end).at(period.start)
    return Row(
        period,
        job.label(period.start),
        period.start.astimezone(tz),
        period.end.astimezone(tz),
        due,
        due <= now and excluded is None,
        "; ".join(notes) or None,
        None if excluded else _waits(job, period, everyone),
        changes,
        moved,
        excluded,
    )


def _moved_edge(schedule: Schedule, edge: str, t: datetime) -> Moved | None:
    scheduled = _moved(schedule, t)
    if scheduled is None:
        return None
    return Moved(edge, scheduled, t, _scheduled(schedule, to_wall(t, zone(schedule.timezone))))


def _moved_note(m: Moved, tz: ZoneInfo) -> str:
    """The words of a moved boundary: the period starts at, or runs until, a local time after
    the clocks went forward. Never "ends": under the DST column, or after "DST" where a period
    is printed as a block, "DST the period ends at 04:00 EEST" reads as DST ending, which is
    the opposite of what happens that night."""
    at = m.at.astimezone(tz)
    where = "starts at" if m.edge == "start" else "runs until"
    head = f"the period {where} {at:%H:%M %Z}: the scheduled {m.scheduled:%H:%M} does not "
    if m.shared:
        return head + f"exist that night and falls on this {at:%H:%M}, one boundary for both"
    later = span(to_wall(m.at, tz) - m.scheduled)
    return head + f"exist that night and moves {later} later"


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


def clock_changes(schedule: Schedule, now: datetime) -> list[ClockChange]:
    """The DST changes of the schedule's time zone in the 400 days from ``now``, each with the
    schedule's local times it skips or repeats (a schedule of local times only)."""
    tz = zone(schedule.timezone)
    found = []
    for at, delta in transitions(tz, now, now + LOOKAHEAD):
        before = to_wall(at - timedelta(microseconds=1), tz) + timedelta(microseconds=1)
        after = to_wall(at, tz)
        lo, hi = (before, after) if delta > timedelta(0) else (after, before)
        walls = (
            [w for w in islice(schedule.walls_from(lo), 1000) if w < hi]
            if isinstance(schedule, Wall)
            else []
        )
        local_times = []
        for w in walls:
            instant = to_utc(w, tz)
            shared = delta > timedelta(0) and _scheduled(schedule, to_wall(instant, tz))
            local_times.append(LocalTime(w, instant, shared))
        found.append(ClockChange(at, delta, before, after, tuple(local_times)))
    return found


def dst_warnings(schedule: Schedule, now: datetime) -> list[str]:
    """The schedule's local times that a DST change in the 400 days from ``now`` skips or repeats,
    and what catchup does with them (one period each, never two, never none)."""
    changes = clock_changes(schedule, now)
    if not isinstance(schedule, Wall):
        if changes:
            return [
                f"{schedule.text!r} counts elapsed time: its periods stay the same length "
                "across DST changes, so their local start times shift with the clock"
            ]
        return []
    found = []
    for change in changes:
        found += [_local_time_note(schedule, change, t) for t in change.local_times[:3]]
        if len(change.local_times) > 3:
            lo = min(change.local_before, change.local_after)
            found.append(f"… and {len(change.local_times) - 3} more local times on {lo:%Y-%m-%d}")
    return found


def _local_time_note(schedule: Schedule, change: ClockChange, t: LocalTime) -> str:
    tz = zone(schedule.timezone)
    w, local = t.scheduled, t.start.astimezone(tz)
    if change.offset_change > timedelta(0):
        lo, hi = change.local_before, change.local_after
        where = f"{local:%H:%M %Z} ({iso_utc(t.start)})"
        what = (
            f"it falls on {where}, which is scheduled too: one period starts there, not two"
            if t.shared
            else f"that period starts {span(change.offset_change)} later, at {where}"
        )
        return (
            f"{w:%H:%M} on {w:%Y-%m-%d} does not exist in {schedule.timezone} (clocks "
            f"jump from {lo:%H:%M} to {hi:%H:%M}): {what} (systemd would skip it; cron "
            f"and croniter run it at {hi:%H:%M})"
        )
    first = w.replace(fold=0).replace(tzinfo=tz)
    return (
        f"{w:%H:%M} on {w:%Y-%m-%d} happens twice in {schedule.timezone} (clocks go "
        f"back {span(-change.offset_change)} at {change.local_before:%H:%M}): the period starts "
        f"at the second, {local:%H:%M %Z} ({iso_utc(t.start)}) (systemd, cron and croniter "
        f"take the first, {first:%H:%M %Z})"
    )


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
    if row.excluded_by is not None:
        return f"due never: excluded by {row.excluded_by}"
    if row.is_due:
        return f"due since {iso_utc(row.due)}"
    left = int((row.due - now).total_seconds())
    days, rest = divmod(left, 86400)
    hours, rest = divmod(rest, 3600)
    if days >= 2:
        return f"due {iso_utc(row.due)} (in {days}d{hours:02d}h)"
    return f"due {iso_utc(row.due)} (in {days * 24 + hours}h{rest // 60:02d}m)"
