"""What ``catchup serve`` reads beside each scan for its pages (read-only): the periods
running now on every host, each job's failures that still stand, when each job is next due
and its periods spelled out as ``catchup explain`` does."""

from __future__ import annotations

from collections import defaultdict

from ..config.job import Job
from ..ledger.rows import FailureRow
from ..reports.explain import Explanation, explain
from ..results import PageFacts
from ..scheduler.leadership import next_due as when_due
from ..session import Session

# how many running periods a page lists, failures per job it shows, and how much of each
# failure's output tail (its end)
RUNNING_SHOWN = 200
FAILURES_SHOWN = 5
TAIL_SHOWN = 4_000
EXPLAINED = 3  # periods spelled out on a job's page


def read_facts(session: Session, jobs: list[Job]) -> PageFacts:
    now = session.now()
    resolved = session.resolve_all(jobs, write=False)
    running = tuple(session.ledger.running_periods(RUNNING_SHOWN))
    failures: defaultdict[str, list[FailureRow]] = defaultdict(list)
    for row in session.ledger.standing_failures([j.name for j in jobs], FAILURES_SHOWN, TAIL_SHOWN):
        failures[row.job].append(row)
    next_due = {}
    explained: dict[str, Explanation] = {}
    for job in resolved:
        next_due[job.name] = when_due(job, now)
        explained[job.name] = explain(job, resolved, now=now, start=None, count=EXPLAINED)
    return PageFacts(
        now=now,
        running=running,
        failures={name: tuple(rows) for name, rows in failures.items()},
        next_due=next_due,
        explained=explained,
        jobs={job.name: job for job in resolved},
    )
