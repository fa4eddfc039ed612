"""The scheduler's lanes in ``catchup.toml`` (issue 49): ``[scheduler.lanes]``, each lane's
name and its own number of workers, and a job's ``lane``, which must name one of them. The
default lane (the jobs that name none) has the scheduler's ``--workers``."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .bounds import SCHEDULER_WORKERS
from .job import DEFAULT_LANE
from .jobs import suggest
from .values import name_problem, type_name


def parse_lanes(value: object, problem: Callable[[tuple[str, ...], str], None]) -> dict[str, int]:
    """``[scheduler.lanes]``: each lane's name and its own number of workers (the default
    lane's are the scheduler's --workers)."""
    if not isinstance(value, dict):
        problem(("scheduler",), "[scheduler] must be a table, like [scheduler.lanes] slow = 1")
        return {}
    for key in value:
        if key != "lanes":
            problem(("scheduler", key), f"scheduler.{key}: unknown key{suggest(key, {'lanes'})}")
    table = value.get("lanes", {})
    if not isinstance(table, dict):
        problem(("scheduler", "lanes"), "scheduler.lanes: a table of lanes, like slow = 1")
        return {}
    lanes: dict[str, int] = {}
    for name, workers in table.items():
        where = ("scheduler", "lanes", name)
        if name == DEFAULT_LANE:
            default = "the default lane's workers are the scheduler's --workers"
            problem(where, f"scheduler.lanes.{name}: {default}")
        elif (said := name_problem(name, "lane")) is not None:
            problem(where, f"scheduler.lanes: {said}")
        elif isinstance(workers, bool) or not isinstance(workers, int):
            wanted = f"a whole number of workers, got {type_name(workers)}"
            problem(where, f"scheduler.lanes.{name}: {wanted}")
        elif SCHEDULER_WORKERS.problem(workers) is not None:
            bounds = f"{SCHEDULER_WORKERS.low} to {SCHEDULER_WORKERS.high}"
            problem(where, f"scheduler.lanes.{name}: expected {bounds} workers, got {workers}")
        else:
            lanes[name] = workers
    return lanes


def lane_unknown(lane: str, lanes: Mapping[str, int]) -> str:
    """Why a job's ``lane`` is refused: [scheduler.lanes] has no such lane."""
    if lane == DEFAULT_LANE:
        return f"{lane!r} is the lane of jobs without one: leave lane out"
    known = f" (it has {', '.join(sorted(lanes))})" if lanes else ""
    return f"[scheduler.lanes] has no lane {lane!r}{suggest(lane, set(lanes)) or known}"
