"""Dependencies between jobs (``after``): which periods of an upstream job a period needs, the
order of jobs that runs upstream first, and the checks of the graph a config is refused for.
Pure: period arithmetic on each job's timeline, no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from ..schedule import Period, Timeline

HOW = ("overlapping", "previous")


@dataclass(frozen=True)
class Dependency:
    """One entry of a job's ``after``: the upstream job, and which of its periods a period
    needs: every one that overlaps it in UTC (``overlapping``), or the latest one that ends at
    or before its start (``previous``)."""

    job: str
    periods: Literal["overlapping", "previous"] = "overlapping"

    def __str__(self) -> str:
        return self.job if self.periods == "overlapping" else f"{self.job} (previous)"


def needed(timeline: Timeline, period: Period, how: str) -> list[Period]:
    """The periods of an upstream job (its ``timeline``, with its schedule history) that
    ``period`` needs; none before the upstream job's first period."""
    if how == "previous":
        # the upstream period holding period.start does not end before it; the one before does
        holding = timeline.floor(period.start)
        earlier = None if holding is None else timeline.before(holding)
        return [] if earlier is None else [timeline.period(earlier)]
    first = timeline.containing(period.start)
    lo = first.start if first is not None else timeline.first
    return list(timeline.periods(lo, period.end))


def parse_after(value: object) -> tuple[tuple[Dependency, ...], str | None]:
    """``after``'s value as written (a list of job names and ``{job = …, periods = …}``
    tables), and what is wrong with it, if anything."""
    if not isinstance(value, list):
        return (
            (),
            'expected a list of jobs, like ["export"] or [{ job = "x", periods = "previous" }]',
        )
    found: list[Dependency] = []
    for n, entry in enumerate(value, start=1):
        if isinstance(entry, str):
            found.append(Dependency(entry))
            continue
        if not isinstance(entry, dict):
            return (), f"entry {n}: expected a job's name or {{ job = …, periods = … }}"
        unknown = sorted(set(entry) - {"job", "periods"})
        if unknown:
            return (), f"entry {n}: unknown key {unknown[0]!r} (job and periods are known)"
        job, how = entry.get("job"), entry.get("periods", "overlapping")
        if not isinstance(job, str):
            return (), f"entry {n}: job must name a job"
        if how not in HOW:
            return (), f"entry {n}: periods must be overlapping or previous, got {how!r}"
        found.append(Dependency(job, how))
    names = [(d.job, d.periods) for d in found]
    if len(set(names)) != len(names):
        return (), "names a job twice"
    return tuple(found), None


def graph_problems(
    after: Mapping[str, Sequence[Dependency]],
    catchup: Mapping[str, str] | None = None,
    keys: Mapping[str, object] | None = None,
) -> dict[str, str]:
    """Per job, what is wrong with its ``after`` given every job's: an unknown job, a cycle
    of ``overlapping`` dependencies (named in order), or its own ``previous`` period on a job
    whose ``catchup`` policy (by job, default ``all``) leaves older periods unrun. A
    ``previous`` dependency looks back in time, so a job may depend on its own previous
    period, and a cycle through one is no deadlock. A job with ``keys`` (by job: the list or
    query) is waited for key by key, so only by a job with the same keys."""
    problems: dict[str, str] = {}
    for name, deps in after.items():
        for dep in deps:
            if dep.job not in after:
                problems[name] = f"{dep.job} is not a job of this config"
                break
            if dep.job == name and dep.periods == "overlapping":
                problems[name] = f'{name} cannot wait for its own periods (periods = "previous"?)'
                break
            theirs, ours = (keys or {}).get(dep.job), (keys or {}).get(name)
            if theirs is not None and theirs != ours:
                # a keyed upstream gates key by key: the downstream job needs the same keys
                problems[name] = (
                    f"{dep.job} has keys: only a job with the same keys can wait for it"
                )
                break
            policy = (catchup or {}).get(name, "all")
            if dep.job == name and policy != "all":
                # tick never runs the older periods it leaves: the next would wait for ever
                problems[name] = (
                    f'{name} waits for its own previous period, but catchup = "{policy}" '
                    'leaves older periods unrun, so each would wait for ever (catchup = "all")'
                )
                break
    edges = {
        name: [d.job for d in deps if d.periods == "overlapping" and d.job in after]
        for name, deps in after.items()
    }
    for cycle in _cycles(edges):
        first = cycle[0]
        problems.setdefault(first, "a cycle: " + " → ".join([*cycle, first]))
    return problems


def _cycles(edges: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """One cycle per strongly connected group of more than one job, in edge order."""
    state: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        state[v] = 1
        stack.append(v)
        for w in edges.get(v, ()):
            if state.get(w) == 1 and w != v:
                found.append(stack[stack.index(w) :])
            elif w not in state:
                visit(w)
        stack.pop()
        state[v] = 2

    for v in sorted(edges):
        if v not in state:
            visit(v)
    seen: set[frozenset[str]] = set()
    unique = []
    for cycle in found:
        key = frozenset(cycle)
        if key not in seen:
            seen.add(key)
            unique.append(cycle)
    return unique


def ranks(after: Mapping[str, Iterable[Dependency]]) -> dict[str, int]:
    """Each job's depth in the graph of ``overlapping`` dependencies: upstream jobs have a
    lower rank, so sorting one period start's work by rank runs upstream first."""
    memo: dict[str, int] = {}

    def rank(name: str, path: frozenset[str]) -> int:
        if name in memo:
            return memo[name]
        ups = [
            d.job
            for d in after.get(name, ())
            if d.periods == "overlapping" and d.job in after and d.job not in path
        ]
        memo[name] = 1 + max((rank(u, path | {name}) for u in ups), default=-1)
        return memo[name]

    return {name: rank(name, frozenset()) for name in after}
