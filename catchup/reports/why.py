"""``catchup why JOB PERIOD``: why one period is in its state, in words, and the command that
would move it: not due yet (and when), running where, blocked by which upstream periods (down
the chain to what blocks them), failed with which error and when the retry comes, exhausted,
paused, done, excluded (by what), outdated by which upstream re-run, untracked (done
elsewhere), suspect after a database failover, held (a rename in progress:
catchup/changes/held.py). Read-only."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from ..changes.held import held_said
from ..claims.failover import told
from ..claims.refusal import excluded_by
from ..config.job import DEFAULT_LANE, Job
from ..config.upstream import needed
from ..errors import CatchupError
from ..ledger.rows import JobRow, RunRow
from ..render.pasted import command
from ..results import Why
from ..scan import evidence
from ..schedule import Period, iso_utc, span
from ..session import Session
from ..vocabulary import RunStatus

# Imports inside functions: at first use: the driver's errors, only when a probe fails.

MAX_DEPTH = 6  # how far down a chain of blocks it follows
MAX_SHOWN = 5  # upstream periods explained per period (the rest counted)
TICK_RUNS = frozenset({"missing", "failed", "interrupted", "cancelled", "stale", "waiting"})
LANE_RUNNING = 1000  # running periods read to name what keeps a lane's workers busy


def explain_period(
    session: Session,
    job: Job,
    period: Period,
    now: datetime,
    depth: int = 0,
    rows: dict[str, JobRow] | None = None,
    seen: dict[tuple[str, datetime, int], Why] | None = None,
) -> Why:
    """Why ``period`` of ``job`` is where it is, on the database clock ``now``. ``seen``: the
    periods explained so far (the hours of a day waiting for one upstream day read it once)."""
    seen = seen if seen is not None else {}
    key = (job.name, period.start, depth)
    if key not in seen:
        rows = rows if rows is not None else session.job_rows(write=False)
        why = _explain(session, job, period, now, depth, rows, seen)
        seen[key] = _no_tick(job, period, now, why)
    return seen[key]


def _no_tick(job: Job, period: Period, now: datetime, why: Why) -> Why:
    """A gap no tick will ever run (it began before the job's ``catchup_window``): said."""
    if why.state not in TICK_RUNS or job.catchup != "all":
        return why
    if period.start >= now - job.catchup_window:
        return why
    said = (
        f"before catchup_window ({span(round(job.catchup_window.total_seconds()))}): no tick "
        "runs it; a replay (or the run below) does"
    )
    return replace(why, said=(*why.said, said))


@dataclass
class _Asked:
    """One period asked about, and what is said of it so far."""

    session: Session
    job: Job
    period: Period
    now: datetime
    said: list[str]

    @property
    def value(self) -> str:
        return self.job.period_value(self.period.start)

    def why(self, state: str, first: str | None, *commands: str) -> Why:
        """The answer: ``first`` said before the rest (the state's own line)."""
        said = ([first] if first is not None else []) + self.said
        label = self.job.label(self.period.start)
        return Why(self.job.name, self.period, label, state, tuple(said), commands)


def _explain(
    session: Session,
    job: Job,
    period: Period,
    now: datetime,
    depth: int,
    rows: dict[str, JobRow],
    seen: dict[tuple[str, datetime, int], Why],
) -> Why:
    row = rows.get(job.name)
    run = None if row is None else session.ledger.run_row(row.id, period.start, job.key)
    asked = _Asked(session, job, period, now, [])
    value = asked.value
    if row is not None and row.paused_at is not None:
        asked.said.append(
            f"{job.name} is paused since {iso_utc(row.paused_at)}: nothing claims its periods "
            f"until `{command('resume', job.name)}`"
        )
    if row is not None and (failover := session.ledger.suspect(row.id, period, job.key)):
        first = (
            f"suspect: {told(failover)}, so it may have claimed or finished this period; "
            "nothing claims it until its evidence (at its next claim) or a person decides"
        )
        done = command("mark", job.name, value, "--done", reason=True)
        again = command("reset", job.name, value, reason=True)
        return asked.why("suspect", first, done, again)
    if run is not None and run.status in (RunStatus.succeeded, RunStatus.waived):
        return _settled(asked, run, rows)
    if run is not None and run.status == RunStatus.running:
        return _running(asked, run)
    if by := excluded_by(session.ledger, job, None if row is None else row.id, period):
        first = f"excluded by {by}: nobody expects this period, nothing claims it"
        anyway = command("run", job.name, "--period", value, "--include-excluded")
        return asked.why("excluded", first, anyway)
    if run is not None and run.status == RunStatus.failed:
        return _failed(asked, run)
    return _not_run(asked, run is None, depth, rows, seen)


def _settled(asked: _Asked, run: RunRow, rows: dict[str, JobRow]) -> Why:
    """A succeeded period (or an outdated one: an upstream period ran again after it), or a
    waived one."""
    job, period, value = asked.job, asked.period, asked.value
    reset = command("reset", job.name, value, reason=True)
    if run.status == RunStatus.waived:
        return asked.why("waived", "waived by hand (`catchup history` says who and why)", reset)
    when = iso_utc(run.finished_at) if run.finished_at else "?"
    stale = _ran_again(asked.session, job, period, rows, run.finished_at)
    if stale is None:
        return asked.why("succeeded", f"succeeded at {when} (attempt {run.attempt})", reset)
    up, q, finished = stale
    first = (
        f"outdated: succeeded at {when} (attempt {run.attempt}), before {up.name} "
        f"{up.label(q.start)} succeeded again at {iso_utc(finished)}"
    )
    window = ("--since", value, "--until", iso_utc(period.end))
    rerun = command("replay", "--job", job.name, *window, "--outdated", reason=True)
    return asked.why("outdated", first, rerun)


def _running(asked: _Asked, run: RunRow) -> Why:
    """Running under a live lease, or stale: its runner stopped renewing it."""
    if run.lease_live:
        expires = iso_utc(run.lease_expires_at) if run.lease_expires_at else "?"
        first = f"running: attempt {run.attempt} on {run.owner}, lease until {expires}"
        return asked.why("running", first)
    first = (
        f"stale: attempt {run.attempt} on {run.owner} stopped renewing its lease; the next "
        "claim takes it over"
    )
    return asked.why("stale", first, _run_it(asked))


def _run_it(asked: _Asked) -> str:
    """The command that runs the period; of an observed job (its own cron runs it), the ping
    that settles it once that run is done by hand."""
    verb = "ping" if asked.job.observed else "run"
    return command(verb, asked.job.name, "--period", asked.value)


def _missing(asked: _Asked, due: datetime) -> Why:
    """Due and never run; for an observed job: no ping came for it, and the newest one that
    did."""
    if not asked.job.observed:
        return asked.why("missing", f"missing: due since {iso_utc(due)}, never run", _run_it(asked))
    ledger, job = asked.session.ledger, asked.job
    job_id = asked.session.registered_id(job.name)
    found = (
        ledger.last_success_of_keys(job_id, [job.key])
        if job.key
        else ledger.last_successes([job_id]).get(job_id)
    )
    last = (
        "none has settled a period yet"
        if found is None
        else f"the last one settled {job.label(found)}"
    )
    first = f"missing: due since {iso_utc(due)}, no ping for this period; {last}"
    return asked.why("missing", first, _run_it(asked))


def _failed(asked: _Asked, run: RunRow) -> Why:
    """Exhausted, failed (and when it is tried again), or stopped before its end (cancelled or
    interrupted: no failure counted)."""
    job, value, now = asked.job, asked.value, asked.now
    error = f": {run.error}" if run.error else ""
    if run.failures >= job.max_attempts:
        first = (
            f"exhausted: failed {run.failures} time(s) (max_attempts = {job.max_attempts}){error}"
        )
        once = ("--max-periods", "1", "--retry-exhausted")
        again = command("replay", "--job", job.name, "--since", value, *once)
        reset = command("reset", job.name, value, reason=True)
        return asked.why("exhausted", first, again, reset)
    if run.retry_after is not None and run.retry_after > now:
        left = span(round((run.retry_after - now).total_seconds()))
        retry = f"; the next try after {iso_utc(run.retry_after)} (in {left})"
    else:
        retry = "; it can run again now"
    if run.interrupted:  # stopped before its end (asked to, or cancelled): no failure
        word = "cancelled" if run.cancelled else "interrupted"
        first = f"{word} (attempt {run.attempt}, no failure counted){error}{retry}"
        return asked.why(word, first, _run_it(asked))
    # failures count toward max_attempts, not cancelled or interrupted attempts
    tried = f"failure {run.failures} of {job.max_attempts}, attempt {run.attempt}"
    return asked.why("failed", f"failed ({tried}){error}{retry}", _run_it(asked))


def _not_run(
    asked: _Asked,
    no_row: bool,
    depth: int,
    rows: dict[str, JobRow],
    seen: dict[tuple[str, datetime, int], Why],
) -> Why:
    """A period with no run to speak of: not due yet, held, blocked (each upstream period
    explained in turn), untracked, waiting for a worker, or missing."""
    session, job, period, now, value = (
        asked.session,
        asked.job,
        asked.period,
        asked.now,
        asked.value,
    )
    due = period.end + job.delay
    if due > now:
        wait = span(round((due - now).total_seconds()))
        return asked.why("not due", f"not due yet: due at {iso_utc(due)} (in {wait})")
    if no_row and (old := session.held().get(job.name)) is not None:
        first = f"held: due since {iso_utc(due)}; {held_said(job.name, old)}"
        return asked.why("held", first, command("rename", old, job.name, reason=True))
    waiting = _undone_upstream(session, job, period, now, rows)
    if waiting:
        shown = waiting[:MAX_SHOWN]
        deeper = (
            tuple(explain_period(session, up, p, now, depth + 1, rows, seen) for up, p in shown)
            if depth < MAX_DEPTH
            else ()
        )
        first = (
            f"blocked: due since {iso_utc(due)}, waiting for {len(waiting)} upstream "
            "period(s) not done"
        )
        blocked = asked.why("blocked", first, *_moving(job, period, waiting, deeper))
        return replace(blocked, upstream=deeper, more=len(waiting) - len(shown))
    if no_row and job.evidence is not None and _untracked(session, job, period):
        first = (
            "untracked: its output exists (evidence) but the ledger has no run; done "
            "elsewhere, so not a gap"
        )
        window = ("--since", value, "--until", iso_utc(period.end))
        return asked.why("untracked", first, command("adopt", job.name, *window, reason=True))
    if no_row and (busy := _lane_busy(session, job, now)) is not None:
        first = f"waiting: due since {iso_utc(due)}, waiting for a free worker {busy}"
        return asked.why("waiting", first, _run_it(asked))
    return _missing(asked, due)


def _lane_busy(session: Session, job: Job, now: datetime) -> str | None:
    """When the live scheduler leader said every worker of ``job``'s lane is busy: "in lane
    L: n of n busy with JOB PERIOD for 1h12m" (the lane's oldest running period); else None."""
    leader = session.ledger.leader_now()
    lane = job.lane or DEFAULT_LANE
    load = None if leader is None else leader.lane(lane)
    if load is None or load[1] < load[0]:
        return None
    workers, busy = load
    jobs = session.config.jobs
    mine = [
        r
        for r in session.ledger.running_periods(LANE_RUNNING)
        if r.job in jobs and (jobs[r.job].lane or DEFAULT_LANE) == lane
    ]
    said = f"in lane {lane}: {busy} of {workers} busy"
    if not mine:
        return said
    oldest = mine[0]
    with_key = f" {oldest.key}" if oldest.key else ""
    began = span(round((now - (oldest.claimed_at or now)).total_seconds()))
    what = f"{oldest.job}{with_key} {jobs[oldest.job].label(oldest.period_start)}"
    return f"{said} with {what} for {began}"


def _moving(
    job: Job, period: Period, waiting: list[tuple[Job, Period]], deeper: tuple[Why, ...]
) -> tuple[str, ...]:
    """One replay of this job up to this period (it plans the upstream periods it waits for
    by itself, upstream first), from its own earliest period the chain reaches (a previous
    one it waits for); and what a replay does not do by itself (an exhausted period upstream),
    from further down."""
    starts = [period.start, *_own_starts(job.name, deeper)]
    since = iso_utc(min(starts))
    replay = command("replay", "--job", job.name, "--since", since, "--until", iso_utc(period.end))
    extra = [c for w in deeper for c in w.commands if "--retry-exhausted" in c or " reset " in c]
    return tuple(dict.fromkeys([replay, *extra]))


def _own_starts(name: str, deeper: tuple[Why, ...]) -> list[datetime]:
    found: list[datetime] = []
    for why in deeper:
        if why.job == name:
            found.append(why.period.start)
        found += _own_starts(name, why.upstream)
    return found


def _undone_upstream(
    session: Session, job: Job, period: Period, now: datetime, rows: dict[str, JobRow]
) -> list[tuple[Job, Period]]:
    """The upstream periods ``period`` waits for that are not done (an excluded one is
    waited for by nobody): two statements."""
    wanted: list[tuple[Job, list[Period]]] = []
    for dep in job.after:
        up = session.resolve(session.config.job(dep.job), write=False)
        periods = needed(up.timeline, period, dep.periods)
        if periods:
            wanted.append((up, periods))
    spans = [
        (rows[up.name].id, periods[0].start, periods[-1].end, up.max_attempts)
        for up, periods in wanted
        if up.name in rows
    ]
    states = iter(session.ledger.upstream_states(spans, now))
    found: list[tuple[Job, Period]] = []
    for up, periods in wanted:
        read = next(states) if up.name in rows else {}
        found += [(up, p) for p in periods if read.get(p.start) not in ("succeeded", "waived")]
    if not found:
        return found
    up_ids = [rows[up.name].id if up.name in rows else 0 for up, _ in found]
    gone = session.ledger.excluded_among(
        [
            (i, job.key if up.keyed else "", p.start)
            for i, (up, p) in zip(up_ids, found, strict=True)
        ]
    )
    return [
        (up, p)
        for i, (up, p) in enumerate(found)
        if i not in gone and up.excluded(p.start, p.end).at(p.start) is None
    ]


def _ran_again(
    session: Session,
    job: Job,
    period: Period,
    rows: dict[str, JobRow],
    finished_at: datetime | None,
) -> tuple[Job, Period, datetime] | None:
    """The first upstream period ``period`` needs that succeeded again (a later attempt)
    after ``period`` finished: what makes it ``outdated``. One statement."""
    if not job.after or finished_at is None:
        return None
    wanted: list[tuple[Job, list[Period]]] = []
    for dep in job.after:
        up = session.resolve(session.config.job(dep.job), write=False)
        periods = needed(up.timeline, period, dep.periods)
        if periods and up.name in rows:
            wanted.append((up, periods))
    spans = [(rows[up.name].id, ps[0].start, ps[-1].end) for up, ps in wanted]
    for (up, periods), again in zip(wanted, session.ledger.rerun_runs(spans), strict=True):
        starts = {p.start: p for p in periods}
        for start, _, finished, key in again:
            if key not in ("", job.key or ""):
                continue  # another key's re-run of a keyed upstream
            if start in starts and finished > finished_at:
                return up, starts[start], finished
    return None


def _untracked(session: Session, job: Job, period: Period) -> bool:
    """Whether ``job``'s evidence shows output for ``period`` (False when it cannot say)."""
    import psycopg

    try:
        return evidence.present(session.ledger, job, period)
    except (psycopg.Error, CatchupError):
        return False
