"""catchup's closed vocabulary: every state and status as an enum, equal to the strings in SQL.

Members are ``StrEnum`` whose names are their values, so they compare equal to the text the
database returns and are sent to it as that text. ``tests/integration/test_vocabulary.py``
checks them against the ``CHECK`` lists of the migrations and what ``period_state()`` returns.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """``runs.status``: where a period's one row stands."""

    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    waived = "waived"


class AttemptStatus(StrEnum):
    """``history.status``: how one attempt of a period ended."""

    running = "running"
    succeeded = "succeeded"
    failed = "failed"
    lost = "lost"
    interrupted = "interrupted"
    # stopped on a person's request (catchup cancel): no failure counted, runnable again
    cancelled = "cancelled"


class PeriodState(StrEnum):
    """What a scan says of an expected period (``period_state()`` in SQL; ``untracked`` and
    ``unverified`` come from a job's evidence query), mildest first: the order a calendar cell
    uses to show the worst of the periods it covers."""

    succeeded = "succeeded"
    waived = "waived"
    # nobody expects it: its start falls in a day or range its job's ``exclude`` names, or in
    # a window recorded afterwards (catchup exclude); never claimed, never a gap
    excluded = "excluded"
    untracked = "untracked"  # its output exists, the ledger has no row: done elsewhere
    running = "running"
    unverified = "unverified"  # succeeded in the ledger, but no evidence of its output
    # succeeded, but an upstream period it waited for (after) ran again after it finished
    outdated = "outdated"
    missing = "missing"
    # due and not run, waiting for upstream periods (its job's ``after``) that are not done
    blocked = "blocked"
    # its last attempt stopped before its end (catchup was asked to stop, or a claim handed
    # over was given back) and counted no failure: runnable again at once
    interrupted = "interrupted"
    # interrupted because a person asked (catchup cancel): no failure counted, runnable again
    cancelled = "cancelled"
    stale = "stale"
    # after a failover: the old primary may have claimed or finished it, the new one does not
    # show it settled; not run until its evidence or a person decides (sql/migrations/0021)
    suspect = "suspect"
    failed = "failed"
    exhausted = "exhausted"

    @property
    def is_gap(self) -> bool:
        return self in GAP_STATES


GAP_STATES = frozenset(
    {
        PeriodState.missing,
        PeriodState.blocked,
        PeriodState.interrupted,
        PeriodState.cancelled,
        PeriodState.failed,
        PeriodState.exhausted,
        PeriodState.stale,
        PeriodState.suspect,
        PeriodState.unverified,
        PeriodState.outdated,
    }
)
# derived from a job's evidence query, never by period_state() in SQL
EVIDENCE_STATES = frozenset({PeriodState.untracked, PeriodState.unverified})
# derived by the scan, never by period_state() in SQL: the evidence's, excluded, blocked and
# outdated
DERIVED_STATES = EVIDENCE_STATES | {
    PeriodState.excluded,
    PeriodState.blocked,
    PeriodState.outdated,
    PeriodState.suspect,
}
# what an exclusion takes over: a gap with no outcome that stands (succeeded, waived and
# running keep theirs; unverified and outdated periods succeeded in the ledger)
EXCLUDABLE = GAP_STATES - {PeriodState.unverified, PeriodState.outdated}
# what replay runs without being asked for more (exhausted only with --retry-exhausted); a
# suspect period's claim is refused until its evidence (read then) or a person decides it
REPLAYABLE = frozenset(
    {
        PeriodState.missing,
        PeriodState.suspect,
        PeriodState.blocked,
        PeriodState.interrupted,
        PeriodState.cancelled,
        PeriodState.failed,
        PeriodState.stale,
    }
)


class JobChange(StrEnum):
    """What ``catchup plan`` says a config change does to a job the ledger has, or would."""

    added = "added"  # new to the ledger
    held = "held"  # new, with the schedule of a job the config no longer names: nothing runs
    renamed = "renamed"  # renamed_from a job the ledger has: its periods kept under the new name
    redefined = "redefined"  # its schedule, zone, start, what it runs or its settings differ
    unchanged = "unchanged"
    removed = "removed"  # the ledger has it, the config no longer names it


class OutcomeStatus(StrEnum):
    """What a command did with one period (run, tick, replay): in this order in totals."""

    succeeded = "succeeded"
    failed = "failed"
    skipped = "skipped"
    # not claimed: upstream periods it waits for (``after``) are not done; nothing written
    blocked = "blocked"
    lost = "lost"
    interrupted = "interrupted"
    cancelled = "cancelled"  # stopped on a person's request (catchup cancel); not a failure
    error = "error"  # a database error on this one period (the batch goes on with the others)
    # the job cannot start (its program, module or folder is missing): nothing was claimed and
    # no attempt counted; a configuration error (exit 2), the batch goes on with the others
    unstartable = "unstartable"

    @property
    def is_failure(self) -> bool:
        """Counts as a failed job for the exit code (1)."""
        return self in (OutcomeStatus.failed, OutcomeStatus.lost)


class EventAction(StrEnum):
    """``events.action``: a change made to a job or its periods, kept in the audit trail."""

    done = "done"
    skip = "skip"
    reset = "reset"
    pause = "pause"
    resume = "resume"
    schedule = "schedule"
    start = "start"
    adopt = "adopt"  # an untracked period (its output exists) recorded as waived
    rename = "rename"  # the job's name changed; its id, and everything keyed by it, kept
    retire = "retire"  # the job is gone on purpose: no longer said to be missing from a config
    cancel = "cancel"  # a person asked a running attempt to stop (catchup cancel)
    ping = "ping"  # an observed job's ping that settled nothing, or a log line (catchup/pings/)
    exclude = "exclude"  # a window of periods nobody expected recorded (catchup exclude)
    include = "include"  # such a window undone (catchup exclude --undo)


class PingKind(StrEnum):
    """What a ping says, as healthchecks' ping API says it (``/ping/<uuid>``, ``/start``,
    ``/fail``, ``/log``, ``/<exit status>``)."""

    start = "start"
    success = "success"
    fail = "fail"
    log = "log"


class PingVerdict(StrEnum):
    """What a ping did to its period."""

    started = "started"  # claimed: running until its finish, or its lease runs out
    succeeded = "succeeded"
    failed = "failed"
    logged = "logged"  # a log line, kept in the audit trail
    kept = "kept"  # the period was settled already: recorded, never unsettled
    busy = "busy"  # the period runs under another claim (a replay): recorded, that claim wins
    not_due = "not_due"  # no period of the job is due yet: nothing written


class Ended(StrEnum):
    """How a job's process or callable ended, before anything is written."""

    exited = "exited"
    timeout = "timeout"
    lost = "lost"
    interrupted = "interrupted"
    cancelled = "cancelled"  # a person asked for it to stop (catchup cancel)
