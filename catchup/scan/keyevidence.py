"""A keyed job's evidence put into its scan (pure): its missing periods that have evidence
become ``untracked`` (done elsewhere: not a gap, never run), its succeeded periods without
evidence ``unverified`` (a gap), key by key, only where the key is expected."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..schedule import Timeline
from ..vocabulary import PeriodState
from .targets import KeyRange, KeyRow


def with_evidence(
    timeline: Timeline,
    keys: Sequence[KeyRow],
    found: Sequence[KeyRange],
    untracked: Sequence[tuple[str, datetime]],
    unverified: Sequence[tuple[str, datetime]],
) -> list[KeyRange]:
    """``found`` (each key's ranges not succeeded) with the evidence's states, by key and
    start."""
    rows = {k.key: k for k in keys}

    def expected(key: str, start: datetime) -> bool:
        row = rows.get(key)
        if row is None:
            return False
        return timeline.after(start) > row.expected_from and (
            row.gone_at is None or start < row.gone_at
        )

    marks: dict[str, set[datetime]] = {}
    for key, start in untracked:
        if expected(key, start):
            marks.setdefault(key, set()).add(start)
    out: list[KeyRange] = []
    for r in found:
        held = marks.get(r.key)
        if (
            r.state != PeriodState.missing
            or not held
            or not any(r.first <= t <= r.last for t in held)
        ):
            out.append(r)
            continue
        out.extend(_split(timeline, r, held))
    by_key: dict[str, list[datetime]] = {}
    for key, start in unverified:
        if expected(key, start):
            by_key.setdefault(key, []).append(start)
    for key, starts in by_key.items():
        out.extend(_runs(timeline, key, PeriodState.unverified, sorted(set(starts))))
    return sorted(out, key=lambda r: (r.key, r.first))


def _split(timeline: Timeline, r: KeyRange, held: set[datetime]) -> list[KeyRange]:
    """A missing range cut where its periods have evidence (those untracked)."""
    out: list[KeyRange] = []
    state, first, last, n = "", r.first, r.first, 0
    for period in timeline.periods(r.first, timeline.after(r.last)):
        now = PeriodState.untracked if period.start in held else PeriodState.missing
        if n and now == state:
            last, n = period.start, n + 1
            continue
        if n:
            out.append(KeyRange(r.key, state, first, last, n))
        state, first, last, n = now, period.start, period.start, 1
    if n:
        out.append(KeyRange(r.key, state, first, last, n))
    return out


def _runs(timeline: Timeline, key: str, state: str, starts: list[datetime]) -> list[KeyRange]:
    """Sorted starts of one key joined into ranges of consecutive periods."""
    out: list[KeyRange] = []
    first = last = starts[0]
    n = 1
    for t in starts[1:]:
        if t == timeline.after(last):
            last, n = t, n + 1
        else:
            out.append(KeyRange(key, state, first, last, n))
            first = last = t
            n = 1
    out.append(KeyRange(key, state, first, last, n))
    return out
