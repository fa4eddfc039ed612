"""The pieces a missing range is cut into by the upstream periods it waits for: runs of
undone upstream periods (``UpstreamRun``, ``runs_of``), the pieces of a range each run holds
(``segments``), those pieces carried on by a job that waits for its own previous period
(``carried``), and what a blocked piece waits for in words (``said_of``). Shared by the scan
of jobs without keys (:mod:`catchup.scan.blocked`) and with keys
(:mod:`catchup.scan.keyblocked`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..config.job import Job
from ..results import Range


@dataclass(frozen=True, order=True)
class UpstreamRun:
    """Consecutive undone periods of one upstream job, all in one state."""

    up: Job = field(compare=False)
    first: datetime  # the first period's start
    last: datetime  # the last period's start
    end: datetime  # the last period's end
    state: str
    name: str = ""  # the upstream job's (orders and tells runs apart)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.up.name)


def segments(
    job: Job, lo: datetime, hi: datetime, runs: dict[str, list[UpstreamRun]], uppers: dict[str, Job]
) -> list[tuple[datetime, datetime, tuple[UpstreamRun, ...]]]:
    """``[lo, hi)`` (period starts of ``job``) cut where the upstream runs its periods wait
    for change: ``(a, b, runs)`` for each piece that waits for some, in order."""
    timeline = job.timeline
    events: list[tuple[datetime, int, UpstreamRun]] = []
    for dep in job.after:
        up = uppers[dep.job].timeline
        for run in runs.get(dep.job, []):
            if dep.periods == "overlapping":  # the periods that overlap the run
                a = timeline.floor(run.first) or timeline.first
                b = timeline.ceil(run.end)
            else:  # the periods whose latest upstream period before them is in the run
                a = timeline.ceil(up.after(run.first))
                b = timeline.ceil(up.after(run.end))
            a, b = max(a, lo), min(b, hi)
            if a < b:
                events += [(a, 1, run), (b, -1, run)]
    events.sort(key=lambda e: e[0])
    pieces: list[tuple[datetime, datetime, tuple[UpstreamRun, ...]]] = []
    active: dict[UpstreamRun, int] = {}
    i = 0
    while i < len(events):
        at = events[i][0]
        while i < len(events) and events[i][0] == at:
            _, step, run = events[i]
            active[run] = active.get(run, 0) + step
            if not active[run]:
                del active[run]
            i += 1
        if i < len(events) and active:
            nxt = events[i][0]
            now = tuple(sorted(active))
            if pieces and pieces[-1][1] == at and pieces[-1][2] == now:
                pieces[-1] = (pieces[-1][0], nxt, now)
            else:
                pieces.append((at, nxt, now))
    return pieces


def runs_of(
    undone: dict[tuple[str, datetime], str],
    ends: dict[tuple[str, datetime], datetime],
    uppers: dict[str, Job],
) -> dict[str, list[UpstreamRun]]:
    """``undone`` periods (upstream job, start) -> state, as runs per upstream job, in order."""
    spans: dict[str, list[list[Any]]] = {}  # name -> [first, last, end, state]
    for key in sorted(undone):
        name, start = key
        state, found = undone[key], spans.setdefault(name, [])
        if found and found[-1][3] == state and found[-1][2] == start:
            found[-1][1], found[-1][2] = start, ends[key]
        else:
            found.append([start, start, ends[key], state])
    return {
        name: [UpstreamRun(uppers[name], *span) for span in found] for name, found in spans.items()
    }


def said_of(job: Job, r: Range, runs: tuple[UpstreamRun, ...]) -> str:
    """What blocked range ``r`` waits for: each run, cut to the periods the range can need
    (a run that reaches past it is named as far as it concerns it)."""
    lo, hi = r.first, job.timeline.after(r.last)
    parts: list[str] = []
    for run in sorted(runs, key=lambda u: (u.name, u.first)):
        timeline = run.up.timeline
        first = max(run.first, timeline.floor(lo) or run.first)
        last = min(run.last, timeline.before(hi) or run.last)
        if first > last or run.up.name == job.name:
            first, last = run.first, run.last  # its own, or only what a previous one needs
        when = run.up.label(first)
        if first != last:
            when = f"{when} .. {run.up.label(last)}"
        parts.append(f"{run.up.name} {when} ({run.state})")
    return ", ".join(parts[:3]) + (f" and {len(parts) - 3} more" if len(parts) > 3 else "")


def carried(
    job: Job,
    lo: datetime,
    hi: datetime,
    pieces: list[tuple[datetime, datetime, tuple[UpstreamRun, ...]]],
) -> list[tuple[datetime, datetime, tuple[UpstreamRun, ...]]]:
    """``pieces`` of the missing range ``[lo, hi)`` of a job that waits for its own previous
    period: each period after the first waits for the one before it, so for everything that
    one waits for. From the first blocked period on (or the second, which waits for a first
    that waits for nothing) the rest of the range is blocked, by what each period and those
    before it wait for: a run of them is one range naming the root, never a nested text."""
    carried: tuple[UpstreamRun, ...] = ()
    cursor = lo
    if not pieces or pieces[0][0] > lo:
        cursor = job.timeline.after(lo)
        carried = (UpstreamRun(job, lo, lo, cursor, "missing"),)
    out: list[tuple[datetime, datetime, tuple[UpstreamRun, ...]]] = []
    for a, b, active in [*pieces, (hi, hi, ())]:
        if b <= cursor and a < hi:
            continue
        if cursor < a:  # waits for nothing itself: for what the one before it waits for
            out.append((cursor, a, carried))
        if a < b:
            carried = tuple(sorted({*carried, *active}))
            out.append((max(a, cursor), b, carried))
        cursor = max(cursor, b)
    merged: list[tuple[datetime, datetime, tuple[UpstreamRun, ...]]] = []
    for a, b, runs in out:
        if merged and merged[-1][1] == a and merged[-1][2] == runs:
            merged[-1] = (merged[-1][0], b, runs)
        else:
            merged.append((a, b, runs))
    return merged
