"""``catchup why JOB PERIOD`` of a job with keys, no one key named: the period's keys summed up
(how many in each state, the first few keys of each state not done, the paused ones), read
from a read-only scan of that one period, as ``scan`` sees it. Read-only."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from ..config.job import Job
from ..render.pasted import command
from ..results import Why
from ..scan.detector import scan
from ..scan.keyed import known_keys, selected
from ..schedule import Period, iso_utc, span
from ..session import Session
from ..vocabulary import PeriodState

SHOWN = 5  # keys named per state (the rest counted)


def keys_summary(
    session: Session, job: Job, period: Period, now: datetime, keys: tuple[str, ...] | None
) -> Why:
    """``period`` of the keyed ``job`` across its keys (those of ``keys``; None: every key
    expected in it): a count per state, and what would move the keys not done."""

    chosen = job if keys is None else replace(job, selected_keys=keys)
    label, value = job.label(period.start), job.period_value(period.start)
    due = period.end + job.delay
    if due > now:
        wait = span(round((due - now).total_seconds()))
        later = f"not due yet for any key: due at {iso_utc(due)} (in {wait})"
        return Why(job.name, period, label, "not due", (later,))
    (result,) = scan(session, [chosen], since=period.start, until=period.end, read_only=True).jobs
    held: dict[str, list[str]] = {}
    for gap in result.ranges:
        held.setdefault(gap.state, []).extend(result.keys_in(gap) or ())
    counts = {PeriodState(s): n for s, n in result.counts.items() if n}
    order = sorted(counts, key=list(PeriodState).index, reverse=True)  # the worst first
    rows = session.job_rows(write=False)
    row = rows.get(job.name)
    known = selected(chosen, known_keys(session.ledger, job, row.id if row else 0, now))
    paused = sorted(k.key for k in known if k.paused_at is not None)
    total = sum(counts.values())
    said = [
        f"{total} key(s): " + ", ".join(f"{counts[s]} {s}" for s in order)
        if total
        else "no key is expected in this period"
    ]
    shown: list[tuple[str, int, tuple[str, ...]]] = []
    for state in order:
        first = tuple(sorted(held.get(state, ()))[:SHOWN])
        shown.append((str(state), counts[state], first))
        if state != PeriodState.succeeded and first:
            said.append(f"{state}: {_named(first, counts[state])}")
    if paused:
        shown.append(("paused", len(paused), tuple(paused[:SHOWN])))
        said.append(f"paused: {_named(tuple(paused[:SHOWN]), len(paused))}")
    if row is not None and row.paused_at is not None:
        said.append(f"{job.name} is paused since {iso_utc(row.paused_at)}")
    worst = next((str(s) for s in order), "no keys")
    return Why(
        job.name,
        period,
        label,
        worst,
        tuple(said),
        _commands(job, value, order, held, paused),
        keys=tuple(shown),
    )


def _named(keys: tuple[str, ...], count: int) -> str:
    more = f" and {count - len(keys)} more" if count > len(keys) else ""
    return ", ".join(keys) + more


def _commands(
    job: Job, value: str, order: list[PeriodState], held: dict[str, list[str]], paused: list[str]
) -> tuple[str, ...]:
    """Each value quoted as a shell word (``pasted``): a key comes from a tenants table, i.e.
    from customers."""
    name = job.name
    undone = [s for s in order if s != PeriodState.succeeded and held.get(s)]
    commands = []
    if any(s.is_gap for s in undone):
        commands.append(command("run", name, "--period", value))
    if undone:
        commands.append(command("why", name, value, key=sorted(held[undone[0]])[0]))
    if paused:
        commands.append(command("resume", name, key=paused[0]))
    if PeriodState.succeeded in order:
        commands.append(command("reset", name, value, "--all-keys", reason=True))
    return tuple(commands)
