"""Per-key periods: a job with ``keys`` runs one period per key (tenant, region, shard), each
(job, key, period) claimed, fenced and recorded on its own. Here: the keys read and their
history recorded, a keyed job's scan (each key's ranges, and the ranges grouped across keys),
and the (key, period) items a replay or a tick runs."""

from __future__ import annotations

import bisect
import contextlib
import heapq
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from datetime import datetime
from itertools import chain
from typing import Any

import psycopg

from ..claims import suspects
from ..config.job import Job
from ..config.values import key_problem
from ..errors import EXIT_DATABASE, EXIT_USAGE, CatchupError, ConfigError, DatabaseError, first_line
from ..ledger import KeysDiff, KeysRaced, KeysRead, Ledger, diff_keys, read_keys
from ..maintenance.findings import Finding
from ..postgres import database as db
from ..results import COUNTED_STATES, JobScan, KeysReport, Planned, Range
from ..session import Session
from ..vocabulary import PeriodState
from . import evidence
from .coverage import signature
from .keyblocked import grouped
from .keyevidence import with_evidence
from .targets import (
    NONE_SETTLED,
    Judged,
    KeyCounts,
    KeyRange,
    KeyRow,
    KeysFailure,
    Prejudged,
    ScanTarget,
    Settled,
)
from .verified import Read, unverified, verified_now
from .window import Moment, window


class KeysFailed(CatchupError):
    """A keyed job's keys query failed: a database error (exit 3: an error, a timeout, an
    unreachable ``keys_dsn``) or rows that are refused (exit 2). One line, no password."""

    def __init__(self, message: str, *, database: bool) -> None:
        super().__init__(message)
        self.database = database
        self.exit_code = EXIT_DATABASE if database else EXIT_USAGE


def source_keys(ledger: Ledger, job: Job) -> tuple[KeysRead, bool]:
    """The job's keys as its config gives them now: its list, or its query's rows (on the
    ledger's database or ``keys_dsn``), each checked; and whether they come with a date. A
    :class:`KeysFailed` when the query fails or what it returns is refused."""
    if isinstance(job.keys, tuple):
        return KeysRead(list(job.keys)), False
    rows, dated = _queried(
        ledger, job, lambda conn: read_keys(conn, *_asked(ledger, job), _seconds(job))
    )
    return _checked(job, rows), dated


def changed_keys(ledger: Ledger, job: Job, job_id: int) -> Source:
    """:func:`source_keys` as what changed against the key history of ``job_id``
    (:class:`KeysDiff`), when the job's keys are a query on the ledger's database: only the
    keys that changed, and those that look odd, come here. Otherwise every key read."""
    if not isinstance(job.keys, str) or job.keys_dsn is not None:
        return source_keys(ledger, job)[0]
    held = max(job_id, 0)  # 0: a job not registered yet, no key held
    diff = _queried(
        ledger,
        job,
        lambda conn: (diff_keys(conn, *_asked(ledger, job), held, _seconds(job)), True),
    )
    if diff[0].twice is not None or any(key_problem(key) is not None for key in diff[0].odd):
        # a key refused: said as a read of every key says it, naming its row
        return source_keys(ledger, job)[0]
    diff[0].odd = []
    return diff[0]


def _seconds(job: Job) -> float:
    """How long one read of the job's keys query may take (keys_timeout)."""
    return job.keys_timeout.total_seconds()


def _asked(ledger: Ledger, job: Job) -> tuple[str, str, str]:
    assert isinstance(job.keys, str)
    return job.keys, job.timezone, ledger.schema


def _queried[T](
    ledger: Ledger, job: Job, run: Callable[[psycopg.Connection[Any]], tuple[T, bool]]
) -> tuple[T, bool]:
    """What ``run`` makes of the job's keys query on its connection (the ledger's, or one to
    its ``keys_dsn``); a :class:`KeysFailed` when the query fails or its columns are refused."""
    where = f"jobs.{job.name}.keys"
    try:
        if job.keys_dsn is None:
            return run(ledger.conn)
        else:
            target = db.Target(conninfo=job.keys_dsn, source=f"jobs.{job.name}.keys_dsn")
            with db.connect(target, application="catchup-keys", writes=False) as conn:
                return run(conn)
    except psycopg.Error as exc:
        if isinstance(exc, psycopg.OperationalError) and ledger.conn.broken:
            raise
        said = db.scrub(first_line(exc), job.keys_dsn or "")
        raise KeysFailed(f"{where}: the keys query failed: {said}", database=True) from None
    except ConfigError as exc:
        raise KeysFailed(f"{where}: the keys query {exc}", database=False) from None
    except DatabaseError as exc:  # keys_dsn unreachable, too old
        raise KeysFailed(f"{where}: {exc}", database=True) from None


def _checked(job: Job, rows: KeysRead) -> KeysRead:
    """``rows`` when every key can be one and none is returned twice; else the first
    problem, by row, as a :class:`KeysFailed`."""
    seen: set[str] = set()
    for n, key in enumerate(rows.keys, start=1):
        if (problem := key_problem(key)) is not None:
            raise _refused(job, n, key, problem)
        if key in seen:
            raise _refused(job, n, key, None)
        seen.add(key)
    return rows


def _refused(job: Job, n: int, key: object, problem: str | None) -> KeysFailed:
    """A row of the keys query refused: its key's ``problem``, or (None) returned twice."""
    where = f"jobs.{job.name}.keys"
    if problem is None:
        return KeysFailed(f"{where}: the key {key!a} is returned twice", database=False)
    return KeysFailed(f"{where}: row {n}: the key {problem}", database=False)


# what a job's keys source gave: keys, and from when each is expected; or what they changed
Source = KeysRead | KeysDiff


def read_sources(ledger: Ledger, jobs: list[Job]) -> dict[str, Source]:
    """Each keyed job's keys as its source gives them now, read before anything is written:
    a keys query that fails, or returns what it must not, leaves the ledger as it was."""
    return {job.name: source_keys(ledger, job)[0] for job in jobs if job.keyed}


def read_each(session: Session, jobs: list[Job]) -> tuple[dict[str, Source], dict[str, KeysFailed]]:
    """:func:`read_sources` where one job's failure is that job's: the keys read (a query on
    the ledger's database as what it changed, against none for a job not registered yet:
    changed_keys), and
    the failures by job (each such job goes on with the keys it read last: :func:`with_keys`).
    When every one of ``jobs`` failed and none has keys read before, nothing could run: the
    first failure is raised, and nothing is written."""
    read: dict[str, Source] = {}
    failed: dict[str, KeysFailed] = {}
    rows = session.job_rows(write=False) if any(job.keyed for job in jobs) else {}
    for job in jobs:
        if job.keyed:
            try:
                row = rows.get(job.name)
                read[job.name] = changed_keys(session.ledger, job, row.id if row else 0)
            except KeysFailed as exc:
                failed[job.name] = exc
    if failed and len(failed) == len(jobs):
        if not any(n in rows and session.ledger.has_keys(rows[n].id) for n in failed):
            raise next(iter(failed.values()))
    return read, failed


def known_keys(ledger: Ledger, job: Job, job_id: int, now: datetime) -> list[KeyRow]:
    """:func:`current_keys` read-only; when the keys query fails, the keys the ledger
    recorded when it last read them (a read that decides nothing: an upstream's keys, a
    ``--key`` checked)."""
    return known_or_last(ledger, job, job_id, now)[0]


def known_or_last(
    ledger: Ledger, job: Job, job_id: int, now: datetime
) -> tuple[list[KeyRow], KeysFailed | None]:
    """:func:`known_keys`, and the keys query's failure when they are the keys read last."""
    try:
        return current_keys(ledger, job, job_id, now, write=False), None
    except KeysFailed as exc:
        return (ledger.key_history(job_id) if job_id > 0 else []), exc


def current_keys(
    ledger: Ledger,
    job: Job,
    job_id: int,
    now: datetime,
    write: bool,
    source: Source | None = None,
) -> list[KeyRow]:
    """The job's keys with their history: read from its source (unless given, as
    :func:`read_sources` read them), recorded (with ``write``), and merged with what the
    ledger knew. Without ``write`` nothing is written, and the keys are what recording them
    would give."""
    if write and job_id > 0:
        record_read(ledger, job, job_id, source)
        return ledger.key_history(job_id)
    seen = source if isinstance(source, KeysRead) else source_keys(ledger, job)[0]
    known = {row.key: row for row in ledger.key_history(job_id)} if job_id > 0 else {}
    merged = {key: replace(row, gone_at=row.gone_at or now) for key, row in known.items()}
    for key, since in seen:
        row = known.get(key)
        if row is None:
            expected = since or (job.anchor if not known else now)
            merged[key] = KeyRow(key, expected, now, now)
        else:
            expected = since or row.expected_from
            verified = None if expected < row.expected_from else back(row)
            merged[key] = replace(
                row,
                gone_at=None,
                last_seen=now,
                expected_from=expected,
                verified=verified,
                follows=row.follows and row.gone_at is None,
            )
    return [merged[k] for k in sorted(merged)]


def key_report(
    ledger: Ledger,
    job: Job,
    job_id: int,
    now: datetime,
    *,
    after: str | None = None,
    limit: int | None = None,
    counts: KeyCounts | None = None,
) -> KeysReport:
    """The job's keys as the ledger recorded them, in key order, as people see them
    (:func:`from_start`): those after ``after`` (None: from the first), at most ``limit``
    (None: all), with what counts them all (``counts``, when a page before counted them: ten
    million keys are counted once, not once a page). A million keys are read a page at a
    time."""
    if job_id <= 0:  # never registered: no key recorded
        return KeysReport(job.name, now, (), KeyCounts(), labeler=job.label)
    counts = ledger.key_counts(job_id) if counts is None else counts
    rows = ledger.key_page(job_id, after, None if limit is None else limit + 1)
    more = limit is not None and len(rows) > limit
    shown = rows[:limit] if more else rows
    last = shown[-1].key if more and shown else None
    shown_from = from_start(job, shown)
    return KeysReport(job.name, now, shown_from, counts, last, after, labeler=job.label)


def record_read(ledger: Ledger, job: Job, job_id: int, source: Source | None) -> None:
    """Record one read of the job's keys (``source``, or read now): what changed of them.
    What a read changed against another job's history (the job was renamed since) is not
    this one's: its keys are read again."""
    if isinstance(source, KeysDiff) and source.job_id in (job_id, 0):
        # (0: read before the job was registered, against no key: every key it returned)
        with contextlib.suppress(KeysRaced):  # another read's record, just made, stands
            ledger.record_key_changes(source, job_id=job_id, start=job.anchor)
        return
    seen = source if isinstance(source, KeysRead) else source_keys(ledger, job)[0]
    with contextlib.suppress(KeysRaced):  # the job's row went meanwhile (renamed over)
        ledger.record_keys(job_id, seen, start=job.anchor)


def back(row: KeyRow) -> tuple[tuple[datetime, datetime], ...] | None:
    """What was verified of a key seen again: of one that was gone, only what lies before it
    went (its ranges reached the job's horizon, not the periods of its absence), as recording
    it does (record_keys)."""
    if row.gone_at is None or row.verified is None:
        return row.verified
    gone = row.gone_at
    return tuple((a, min(b, gone)) for a, b in row.verified if a < gone)


def selected(job: Job, keys: list[KeyRow], failed: KeysFailed | None = None) -> list[KeyRow]:
    """``keys`` cut to the job's ``--key`` selection; a ConfigError names a key it lacks (and,
    when ``keys`` are those read last, the keys query's ``failed``: a new key is not known)."""
    if not job.selected_keys:
        return keys
    by_key = {row.key: row for row in keys}
    unknown = [k for k in job.selected_keys if k not in by_key]
    if unknown:
        known = ", ".join(list(by_key)[:5]) + (", …" if len(by_key) > 5 else "")
        whose = "its keys" if failed is None else "its keys read last"
        said = f"{job.name} has no key {unknown[0]!a} ({whose}: {known or 'none'})"
        raise ConfigError(said if failed is None else f"{said}; {failed}")
    return [by_key[k] for k in job.selected_keys]


def check_selected(session: Session, jobs: list[Job]) -> None:
    """Refuse (a ConfigError, from :func:`selected`) a ``--key`` that one of ``jobs`` has
    neither in its keys' source nor in its key history. Nothing is written: the command that
    asked has not started, and a refusal must leave the ledger as it was."""
    rows = session.job_rows(write=False)
    now = session.now()
    for job in jobs:
        row = rows.get(job.name)
        selected(job, *known_or_last(session.ledger, job, row.id if row else 0, now))


def expected_count(keys: list[KeyRow], starts: list[datetime], ends: list[datetime]) -> int:
    """How many (key, period) pairs are expected: a key's periods end after it is expected and
    start before it is gone."""
    total = 0
    for row in keys:
        lo = bisect.bisect_right(ends, row.expected_from)
        hi = len(starts) if row.gone_at is None else bisect.bisect_left(starts, row.gone_at)
        total += max(0, hi - lo)
    return total


def scan_keyed(  # noqa: PLR0913
    ledger: Ledger,
    job: Job,
    job_id: int,
    keys: list[KeyRow],
    *,
    now: datetime,
    since: Moment | None,
    until: Moment | None,
    paused: bool,
    record: bool = True,
    all_keys: bool = False,
    deferred: bool = False,
    prejudged: Judged | None = None,
) -> JobScan:
    """A keyed job's scan: its (key, period) pairs in the window, by state; each key's ranges,
    grouped (one per state and span, with the keys each holds). Holes (no row) are looked for
    after what scans verified of each key, and (``record``) what this one verified recorded.
    ``deferred``: every key, not read: those the window needs read here, the others counted."""
    first, end = window(job, now, since, until)
    periods = [(p.start, p.end) for p in job.timeline.periods(first, end)]
    starts, ends = [s for s, _ in periods], [e for _, e in periods]
    moves = record and all_keys  # only a scan of every key may move the job's horizon
    settled = NONE_SETTLED
    if deferred:  # (``prejudged``: what settling its keys writes, judged beside their read)
        keys, settled = window_keys(ledger, job, job_id, periods, moves, prejudged)
    expected = expected_count(keys, starts, ends) + settled.expected(len(periods))
    found = key_ranges(
        ledger, job, job_id, (keys, settled), (periods, end), now=now, record=(record, moves)
    )
    last_success = job_success(ledger, job_id, (keys, settled), found, periods, until is None)
    evidence_error = None
    if job.evidence is not None and expected and job_id > 0:
        seen = evidence.read_keys(ledger, job, job_id, first, end, [k.key for k in keys])
        evidence_error = seen.error
        if seen.error is None:
            found = with_evidence(job.timeline, keys, found, seen.untracked, seen.unverified)
    if expected and job_id > 0 and (failover := ledger.failover()) is not None:
        found = suspects.apply_keyed(ledger, job, job_id, found, failover, first, end)
    ranges, range_keys = grouped(found)
    return JobScan(
        job=job.name,
        schedule=job.schedule.text,
        timezone=job.timezone,
        daily_or_longer=job.schedule.daily_or_longer,
        paused=paused,
        first=first if expected else None,
        until=end if expected else None,
        expected=expected,
        counts=counted(found, expected),
        ranges=ranges,
        last_success=last_success,
        labeler=job.label,
        keys=len(keys) + settled.count,
        evidence=job.evidence is not None,
        evidence_error=evidence_error,
        key_ranges=tuple(found),
        range_keys=range_keys,
        paused_keys=tuple(sorted(k.key for k in keys if k.paused_at is not None)),
    )


def job_success(
    ledger: Ledger,
    job_id: int,
    read: tuple[list[KeyRow], Settled],
    found: list[KeyRange],
    periods: list[tuple[datetime, datetime]],
    to_now: bool,
) -> datetime | None:
    """A keyed job's newest succeeded period: from its scan when the window reaches ``now``
    (its newest periods are the job's newest) and some key succeeded in one of them; else as
    the ledger says (of the keys ``read``, or, when some were only counted, of every key)."""
    keys, settled = read
    last = newest_success(keys, found, periods, settled) if to_now else None
    if last is None and job_id > 0:
        asked = None if settled.count else [k.key for k in keys]  # None: every key of the job
        last = ledger.last_success_of_keys(job_id, asked)
    return last


def window_keys(
    ledger: Ledger,
    job: Job,
    job_id: int,
    periods: list[tuple[datetime, datetime]],
    settle: bool = False,
    prejudged: Judged | None = None,
) -> tuple[list[KeyRow], Settled]:
    """The keys of a job whose keys were recorded and not read back (a deferred target) that a
    scan of ``periods`` must look at, the settled ones counted (Ledger.keys_to_scan), when
    what scans verified holds for its schedules past the window; every key otherwise (other
    schedules, a job with evidence to read of each key). With ``settle`` (a scan that records
    what it verified of every key), when the window reaches past the job's horizon (or there
    is none yet), what it would record of the keys with a row each period there (and the cut
    of those without, presumed complete or following) is written first in one statement, only
    where it changes a key's ranges, and the horizon moved (Ledger.settle_complete_keys; on a
    first scan, what ``prejudged`` judged beside the first read, when it still holds)."""
    if job.evidence is None and periods and job_id > 0:
        sig = signature(job)
        state = ledger.scan_states([job_id]).get(job_id)
        horizon = ledger.key_horizon(job_id) if state is not None and state[0] == sig else None
        until = periods[-1][1]
        if settle and _settles(horizon, periods):
            judged = prejudged(periods) if prejudged is not None and horizon is None else None
            if _settled_as_judged(ledger, job_id, sig, state, judged) or (
                ledger.settle_complete_keys(job_id, sig, (state, horizon), periods)
            ):
                horizon = ledger.key_horizon(job_id)
        if horizon is not None and horizon >= until:
            return ledger.keys_to_scan(job_id, periods, sig)
    return (ledger.key_history(job_id) if job_id > 0 else []), NONE_SETTLED


def _settled_as_judged(
    ledger: Ledger,
    job_id: int,
    signature: str,
    state: tuple[str, int] | None,
    judged: Prejudged | None,
) -> bool:
    """What a first read's keys were judged beside it written (Ledger.settle_prejudged), when
    it judged them under the scan state read now, of these schedules (or of none: a state a
    removal made holds no scan's ranges). A judgement is of the scan's periods, or none is
    taken (Prejudging.take)."""
    return (
        judged is not None
        and judged.job_id == job_id
        and judged.state == state
        and (state is None or state[0] in ("", signature))  # ("": a removal's, no ranges)
        and ledger.settle_prejudged(signature, judged)
    )


def _settles(horizon: datetime | None, periods: list[tuple[datetime, datetime]]) -> bool:
    """Whether a scan of every key of ``periods`` settles the complete keys in SQL first: a
    first scan (no horizon), or a window that reaches past the horizon from before it (the
    periods between were looked at: a scan of them all would move it)."""
    return horizon is None or periods[0][0] <= horizon < periods[-1][1]


def counted(found: list[KeyRange], expected: int) -> dict[str, int]:
    """The (key, period) pairs in each state: those of ``found``, the rest succeeded."""
    counts: dict[str, int] = dict.fromkeys(COUNTED_STATES, 0)
    for r in found:
        counts[r.state] += r.periods
    counts[PeriodState.succeeded] = expected - sum(
        v for k, v in counts.items() if k != PeriodState.succeeded
    )
    return counts


def key_ranges(
    ledger: Ledger,
    job: Job,
    job_id: int,
    read: tuple[list[KeyRow], Settled],
    window: tuple[list[tuple[datetime, datetime]], datetime],
    *,
    now: datetime,
    record: tuple[bool, bool],
) -> list[KeyRange]:
    """Each key's ranges of periods that have not succeeded in the ``window`` (its periods,
    and its end), holes looked for only outside what earlier scans verified; with
    ``record`` (whether to record, whether the keys ``read`` are every key of the job), what
    this one verified is recorded, and the job's horizon moved when they are. The keys read
    are those to look at, and those settled in the window, counted."""
    periods, end = window
    keys, settled = read
    keep, moves = record
    starts, ends = [s for s, _ in periods], [e for _, e in periods]
    with ledger.scan_snapshot():  # the generation and the rows it vouches for, together
        state = ledger.scan_states([job_id]).get(job_id) if job_id > 0 else None
        horizon = ledger.key_horizon(job_id) if state is not None else None
        valid = state is not None and state[0] == signature(job)
        checked = unverified(keys, starts, ends, valid)
        found = ledger.scan_keys(
            job_id,
            keys,
            periods,
            checked,
            now=now,
            max_attempts=job.max_attempts,
            settled=settled,
        )
    if keep and job_id > 0 and checked:
        scanned = Read(valid, horizon, moves, settled.with_row(len(periods) - 1))
        grown, moved = verified_now(keys, scanned, checked, found, starts, ends, end)
        if (first := next(grown, None)) is not None or not valid or moved != horizon:
            seen = (state, horizon if valid else None)
            changed = chain(() if first is None else (first,), grown)
            ledger.record_verified(job_id, signature(job), seen, changed, moved)
    return found


def newest_success(
    keys: list[KeyRow],
    found: list[KeyRange],
    periods: list[tuple[datetime, datetime]],
    settled: Settled = NONE_SETTLED,
    look: int = 3,
) -> datetime | None:
    """The newest of the window's last ``look`` periods that some key succeeded in, from the
    scan's own ranges (a key expected there that no range of it holds has a succeeded row:
    what scans verified has a row each, and every row not succeeded is in ``found``, a
    settled key's too: those of ``found`` not among ``keys``); None when none of them has
    (the ledger then says)."""
    names = {k.key for k in keys} if settled.count else set()
    for i in range(len(periods) - 1, max(-1, len(periods) - 1 - look), -1):
        start, end = periods[i]
        held = {r.key for r in found if r.first <= start <= r.last}  # the few not succeeded
        if settled.with_row(i) > len(held - names):  # a settled key's row there succeeded
            return start
        if any(
            end > k.expected_from and (k.gone_at is None or start < k.gone_at) and k.key not in held
            for k in keys
        ):
            return start
    return None


def gap_items(job: Job, result: JobScan, states: frozenset[str]) -> Iterator[Planned]:
    """Every (key, period) of a keyed job's gaps in ``states``, oldest first, then by key: the
    ranges grouped across keys merged (a few streams, not one per key), one job per key."""
    timeline = job.timeline
    jobs: dict[str, Job] = {}

    def of(r: Range | KeyRange, keys: tuple[str, ...]) -> Iterator[tuple[datetime, str, Planned]]:
        state = PeriodState(r.state)
        ordered = sorted(keys)
        for period in timeline.periods(r.first, timeline.after(r.last)):
            for key in ordered:
                if (keyed := jobs.get(key)) is None:
                    keyed = jobs[key] = job.for_key(key)
                yield period.start, key, Planned(keyed, period, state)

    if len(result.range_keys) == len(result.ranges):
        grouped = zip(result.ranges, result.range_keys, strict=True)
        streams = [of(r, keys) for r, keys in grouped if r.state in states]
    else:
        streams = [of(r, (r.key,)) for r in result.key_ranges if r.state in states]
    for _, _, item in heapq.merge(*streams, key=lambda t: (t[0], t[1])):
        yield item


def with_keys(
    ledger: Ledger,
    targets: list[ScanTarget],
    now: datetime,
    write: bool,
    sources: dict[str, Source] | None = None,
    failed: dict[str, KeysFailed] | None = None,
) -> list[ScanTarget]:
    """``targets`` with each keyed job's keys (read unless in ``sources``, recorded with
    ``write``, cut to those asked for). A job whose keys query ``failed`` keeps the keys the
    ledger recorded when it last read them, unchanged (none: nothing of it runs), and says so
    (``keys_failed``)."""
    out = []
    for t in targets:
        if t.job.keyed and (why := (failed or {}).get(t.job.name)) is not None:
            keys = selected(t.job, ledger.key_history(t.job_id) if t.job_id > 0 else [])
            known = sum(1 for k in keys if k.gone_at is None)
            told = KeysFailure(t.job.name, str(why), why.database, known)
            t = replace(t, keys=tuple(keys), keys_failed=told, all_keys=not t.job.selected_keys)
        elif (
            t.job.keyed
            and t.job_id > 0
            and not t.job.selected_keys
            and (write or as_held(t, sources))
        ):
            # every key, recorded (or, read-only, as recorded) and not read back: its scan
            # reads those its window needs
            if write:
                record_read(ledger, t.job, t.job_id, (sources or {}).pop(t.job.name, None))
            t = replace(t, keys=(), all_keys=True, deferred=True)
        elif t.job.keyed:  # the keys read handed over, not held here while recorded
            given = (sources or {}).pop
            keys = current_keys(ledger, t.job, t.job_id, now, write, given(t.job.name, None))
            keys = selected(t.job, keys)
            t = replace(t, keys=tuple(keys), all_keys=not t.job.selected_keys)
        out.append(t)
    return out


def as_held(t: ScanTarget, sources: dict[str, Source] | None) -> bool:
    """Whether a read-only scan of ``t`` (a keyed job) may take its keys as the ledger holds
    them: what its keys query returns now changed nothing of them."""
    read = (sources or {}).get(t.job.name)
    return (
        isinstance(read, KeysDiff) and read.job_id == t.job_id and not (read.changed or read.gone)
    )


def keys_findings(ledger: Ledger, jobs: list[Job]) -> list[Finding]:
    """``catchup doctor``: each keys query run once, read-only and bounded as a tick runs it
    (on its ``keys_dsn`` when it has one), one line per job: how many keys, or why none."""
    found = []
    for job in jobs:
        if not isinstance(job.keys, str):
            continue
        try:
            rows, _ = source_keys(ledger, job)
        except KeysFailed as exc:
            found.append(Finding("serious", "keys", f"{job.name}: {exc}"))
            continue
        where = "its keys_dsn" if job.keys_dsn else "the ledger's database"
        said = f"{job.name}: the keys query returns {len(rows):,} key(s) on {where}"
        found.append(Finding("ok", "keys", said))
    return found


def from_start(job: Job, rows: Iterable[KeyRow]) -> tuple[KeyRow, ...]:
    """The keys as people see them: none expected before the job's start (a keys query's
    date column may say 2019 for a job that starts in 2026)."""
    start = job.anchor
    return tuple(k if k.expected_from >= start else replace(k, expected_from=start) for k in rows)
