"""Coverage: the ranges of a job's periods a scan verified have a row each, kept so the next
scan need not read them again (valid for one :func:`signature` of the job's schedules)."""

from __future__ import annotations

from datetime import datetime

from ..config.job import Job
from ..ledger import Ledger


def signature(job: Job) -> str:
    """What coverage is valid for: every schedule of the job and where each starts."""
    return job.timeline.signature


def record_coverage(  # noqa: PLR0913
    ledger: Ledger,
    job: Job,
    job_id: int,
    state: tuple[str, int] | None,
    first: datetime,
    end: datetime,
    covered: list[tuple[datetime, datetime]],
    present: list[tuple[datetime, datetime]],
) -> None:
    """Remember which periods have rows, unless rows disappeared since the scan read them."""
    mine = signature(job)
    clipped = [(max(a, first), b) for a, b in covered if b >= first]
    if state is not None and state[0] == mine and clipped == present:
        return  # nothing new learned: a steady-state scan writes nothing
    ledger.record_coverage(
        state,
        {
            "job_id": job_id,
            "signature": mine,
            "first": first,
            "until": end,
            "firsts": [a for a, _ in present],
            "lasts": [b for _, b in present],
        },
    )
