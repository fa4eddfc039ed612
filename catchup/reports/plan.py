"""``catchup plan NEW.toml``: what a config change would do to the ledger before it is deployed,
read-only. Each job of the new config against the ledger (added, held, renamed, redefined,
unchanged; the ledger's jobs it no longer names, removed), a keyed job's keys as its new query
returns them against those recorded, its expected, excluded and gap periods from its start to
now under both configs, and the periods the first tick after the change would run that the
current config's would not (what makes ``plan`` exit 1). Both ticks are planned exactly as
``catchup tick`` plans (:func:`catchup.replay.runs.tick_choices`), on the database clock,
writing nothing."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from ..config.job import Job
from ..ledger.rows import JobRow, Unconfigured
from ..replay.runs import tick_choices
from ..results import JobPlan, JobScan, KeysChange, Planned
from ..scan.detector import prepare, scan_jobs
from ..scan.keyed import KeysFailed, current_keys
from ..session import Session, differences
from ..vocabulary import REPLAYABLE, JobChange, PeriodState

FIRST_KEYS = 3  # keys named of those that came or went (the rest counted)

# the settings that change what runs or when, compared between the current config and the new
# (what the ledger records, schedule, zone, start and what it runs, is compared there); a DSN
# or a ping is compared, never shown
SETTINGS = (
    "delay", "timeout", "lease", "kill_grace", "max_attempts", "retry_backoff", "overlap",
    "catchup", "catchup_window", "max_per_tick", "evidence", "evidence_dsn", "verify",
    "after", "when_outdated", "keys", "keys_dsn", "keys_timeout", "exclude", "lane", "ping",
    "log_output",
)  # fmt: skip


@dataclass(frozen=True)
class Side:
    """One config's view of the ledger: each job's tick choice (period starts by key) and its
    whole-history scan, by job name."""

    chosen: dict[str, set[tuple[str, datetime]]]
    left: dict[str, int]
    scans: dict[str, JobScan]


def plan_jobs(new: Session, old: Session | None) -> list[JobPlan]:
    """Every job of ``new``'s config and every job its ledger has that it no longer names,
    each with what the change does (``old``: the current config's session, on the same
    ledger; None: only the ledger is known)."""
    gone, held = new.unconfigured()
    held_as = dict(held)
    raw = new.ledger.job_rows(sorted(new.config.jobs))
    rows = new.job_rows(write=False)
    jobs = list(new.config.jobs.values())
    runnable = [j for j in jobs if j.name not in held_as and not j.observed]
    after = _side(new, runnable)
    before = _side(old, _runnable(old)) if old is not None else None
    olds = dict(old.config.jobs) if old is not None else {}
    now = new.now()
    plans = [
        _job_plan(job, raw, rows, held_as, _old(olds, job), after, before)
        for job in sorted(jobs, key=lambda j: j.name)
    ]
    plans = [_with_keys(new, p, new.config.jobs[p.job], rows, now) for p in plans]
    renamed = {job.renamed_from for job in jobs if job.renamed_from}
    return plans + [_removed(u, before) for u in gone if u.name not in renamed]


def _old(olds: dict[str, Job], job: Job) -> Job | None:
    """The current config's job of the new ``job``: by its name, else the one it renames."""
    found = olds.get(job.name)
    return found if found is not None or not job.renamed_from else olds.get(job.renamed_from)


def other_projects(session: Session) -> tuple[str, ...]:
    """The projects the ledger records as defining this config's jobs, other than it."""
    mine = session.config.registrant
    rows = session.job_rows(write=False)
    return tuple(sorted({r.project for r in rows.values() if r.project not in (None, mine)}))


def _runnable(session: Session) -> list[Job]:
    held = session.held()
    return [j for j in session.config.jobs.values() if j.name not in held and not j.observed]


def _side(session: Session, jobs: list[Job]) -> Side:
    """What ``session``'s config would do now: its first tick's choices, its whole scans."""
    if not jobs:
        return Side({}, {}, {})
    try:
        ready = prepare(session, jobs, write=False)
    except KeysFailed:  # every keyed job's query fails: the others are planned (said per job)
        return _side(session, [job for job in jobs if not job.keyed])
    _, choices = tick_choices(session, ready, session.ledger.last_tick(), record=False)
    chosen: dict[str, set[tuple[str, datetime]]] = {}
    left: dict[str, int] = {}
    for target, items, more in choices:
        chosen[target.job.name] = {_item(p) for p in items}
        left[target.job.name] = more
    scans = scan_jobs(
        session.ledger, ready.targets, now=ready.now, since=None, until=None, record=False
    )
    return Side(chosen, left, {scan.job: scan for scan in scans})


def _item(planned: Planned) -> tuple[str, datetime]:
    return planned.job.key, planned.period.start


def _job_plan(
    job: Job,
    raw: dict[str, JobRow],
    rows: dict[str, JobRow],
    held: dict[str, str],
    old: Job | None,
    after: Side,
    before: Side | None,
) -> JobPlan:
    """One configured job's change, against the ledger's row and the current config's job."""
    change, was, differs = _change(job, raw, rows, held, old)
    back = change != JobChange.added and before is not None and old is None and not was
    if back:  # the current config does not name it: added again, its past in the ledger
        change = JobChange.added
    named = was if change == JobChange.renamed and was else job.name  # the current config's
    chosen = after.chosen.get(job.name, set())
    earlier = before.chosen.get(named, set()) if before is not None else set()
    new_items = chosen - earlier
    scan = after.scans.get(job.name)
    prior = before.scans.get(named) if before is not None else None
    known = before is not None
    return JobPlan(
        job=job.name,
        change=change,
        was=was,
        differs=differs,
        at_once=tuple(sorted({start for _, start in new_items})),
        at_once_keys=len(new_items) if job.keyed else 0,
        already=len(chosen & earlier),
        left=after.left.get(job.name, 0),
        gaps=_gaps(scan),
        gaps_before=_gaps(prior) if known else None,
        expected=_expected(scan),
        expected_before=_expected(prior) if known else None,
        excluded=_excluded(scan),
        excluded_before=_excluded(prior) if known else None,
        labeler=job.label,
        paused=job.name in rows and rows[job.name].paused_at is not None,
        back=back,
    )


def _change(
    job: Job, raw: dict[str, JobRow], rows: dict[str, JobRow], held: dict[str, str], old: Job | None
) -> tuple[JobChange, str | None, tuple[str, ...]]:
    """Added, held, renamed, redefined or unchanged; the old name; what differs."""
    if job.name in held:
        return JobChange.held, held[job.name], ()
    row = rows.get(job.name)
    if row is None:
        return JobChange.added, None, ()
    differs = tuple(differences(row.definition, job.definition)) if row.definition else ()
    differs += _settings(old, job)
    if job.name not in raw and job.renamed_from:
        return JobChange.renamed, job.renamed_from, differs
    return (JobChange.redefined if differs else JobChange.unchanged), None, differs


def _settings(old: Job | None, new: Job) -> tuple[str, ...]:
    """The settings the current config's job gives otherwise than the new config's."""
    if old is None:
        return ()
    return tuple(name for name in SETTINGS if getattr(old, name) != getattr(new, name))


def _removed(job: Unconfigured, before: Side | None) -> JobPlan:
    scan = before.scans.get(job.name) if before is not None else None
    return JobPlan(
        job=job.name,
        change=JobChange.removed,
        expected_before=_expected(scan) if scan is not None else None,
        last_success=job.last_success,
    )


def _gaps(scan: JobScan | None) -> int:
    return sum(scan.counts.get(state, 0) for state in REPLAYABLE) if scan is not None else 0


def _expected(scan: JobScan | None) -> int:
    return scan.expected - _excluded(scan) if scan is not None else 0


def _excluded(scan: JobScan | None) -> int:
    return scan.counts.get(PeriodState.excluded, 0) if scan is not None else 0


def _with_keys(
    session: Session, plan: JobPlan, job: Job, rows: dict[str, JobRow], now: datetime
) -> JobPlan:
    """A keyed job's plan with its keys as the new query returns them, against the ledger's."""
    if not job.keyed or plan.change == JobChange.held:
        return plan
    job_id = rows[job.name].id if job.name in rows else 0
    recorded = {k.key for k in session.ledger.key_history(job_id) if k.gone_at is None}
    try:
        current = {
            k.key
            for k in current_keys(session.ledger, job, job_id, now, False)
            if k.gone_at is None
        }
    except KeysFailed as exc:
        return replace(plan, keys=KeysChange(0, 0, (), (), error=str(exc)))
    added, gone = sorted(current - recorded), sorted(recorded - current)
    change = KeysChange(len(added), len(gone), tuple(added[:FIRST_KEYS]), tuple(gone[:FIRST_KEYS]))
    return replace(plan, keys=change)
