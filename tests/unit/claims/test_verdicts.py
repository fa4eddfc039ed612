"""How an execution ended → what the ledger records and what its outcome says: the one table
(claims/path.py: VERDICTS), without a database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from catchup.claims.path import SUCCEEDED, VERDICTS, described, finish_fields, verdict
from catchup.config.loading import make_job
from catchup.execution.runner import Execution
from catchup.ledger.rows import Finished
from catchup.results import Outcome
from catchup.schedule import Period
from catchup.vocabulary import AttemptStatus, Ended, OutcomeStatus, RunStatus

JOB = make_job("billing", "daily", "2026-10-01", command=["true"], max_attempts=3)
DAY = datetime(2026, 10, 2, tzinfo=UTC)
PERIOD = Period(DAY, DAY + timedelta(days=1))


def ended(how: Ended, error: str | None = "boom") -> Execution:
    return Execution(how, 0 if error is None else 1, error, "", 0.1)


def test_every_way_an_execution_ends_has_one_verdict() -> None:
    assert set(VERDICTS) == set(Ended)
    assert verdict(ended(Ended.exited, None)) is SUCCEEDED
    # a run that exited 0 but whose evidence was missing carries an error: failed
    assert verdict(ended(Ended.exited, "no evidence")).status == RunStatus.failed


@pytest.mark.parametrize(
    ("how", "attempt", "counts", "outcome"),
    [
        (Ended.exited, AttemptStatus.failed, True, OutcomeStatus.failed),
        (Ended.timeout, AttemptStatus.failed, True, OutcomeStatus.failed),
        (Ended.interrupted, AttemptStatus.interrupted, False, OutcomeStatus.interrupted),
        (Ended.cancelled, AttemptStatus.cancelled, False, OutcomeStatus.cancelled),
    ],
)
def test_what_is_recorded_and_told_agree(
    how: Ended, attempt: AttemptStatus, counts: bool, outcome: OutcomeStatus
) -> None:
    execution = ended(how)
    fields = finish_fields(JOB, execution)
    assert (fields["status"], fields["history_status"], fields["counts_as_failure"]) == (
        RunStatus.failed,
        attempt,
        counts,
    )
    base = Outcome(JOB.name, PERIOD, "2026-10-02", OutcomeStatus.succeeded, 1)
    finished = Finished(finished_at=DAY, failures=1 if counts else 0, retry_after=None)
    assert described(base, JOB, execution, finished).status == outcome
    # fenced off by a later attempt: lost, whatever the execution said
    assert described(base, JOB, execution, None).status == OutcomeStatus.lost
