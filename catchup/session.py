"""An open ledger for one config: the connection, the schema migrated, the jobs registered
(each with one definition) and their timelines as the ledger records them."""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import datetime
from typing import Any

import psycopg

from .changes.held import held_said, lookalikes
from .claims.failover import Moved
from .claims.lease import HeartbeatLine
from .config.job import Config, Job
from .config.upstream import needed
from .errors import ConfigError, DatabaseError
from .execution.preflight import cannot_start
from .ledger import Ledger
from .ledger.rows import JobRow, Unconfigured
from .postgres import database as db
from .schedule import Period, ScheduleError, Timeline
from .schedule.reconcile import reconcile


def owner_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Session:
    """An open ledger for one config: a connection, the schema made current, job ids known."""

    def __init__(
        self, config: Config, target: db.Target, *, prepare: bool = True, writes: bool = True
    ) -> None:
        self.config = config
        self.target = target
        self.durable = db.durable_claims(config.durable_claims)
        # writes=False: a session that only reads (serve's), fine on a role or server that may
        # only read (a read-only role for the page, a standby)
        self.writes = writes
        self.conn = db.connect(target, writes=writes)
        self.ledger = Ledger(self.conn, config.schema, durable=self.durable)
        # a new timeline of the server (a failover), said by the command that saw it first
        self.moved: Moved | None = None
        try:
            if prepare:
                self.ledger.ensure_schema()
                self.moved = self.ledger.note_timeline()  # before the declaration records it
                if self.durable:  # before its first claim: see sql/migrations/0021
                    self.ledger.declare_durable()
        except psycopg.Error as exc:
            self.conn.close()
            raise DatabaseError(f"cannot prepare schema {config.schema!r}: {exc}") from None
        self._job_ids: dict[str, int] = {}
        self._timelines: dict[str, Timeline] = {}
        self._upstream: dict[str, Job] = {}  # upstream jobs resolved, for needs()
        self._renamed = False
        self._startable: set[str] = set()  # jobs whose program or module was found
        self._keep_rows = 0.0  # keep_rows(): how long read-only rows are kept, in seconds
        self._kept: tuple[float, dict[str, JobRow]] | None = None
        self._held: dict[str, str] | None = None  # held(): each held job, and the old name
        # one job, one definition: another project's definition refused when rows are read
        # (catchup plan says it instead, as what the change would meet)
        self.definitions_checked = True
        # where leases are renewed: this session's own line, or one a pool of workers shares
        self.heartbeats = HeartbeatLine(target, config.schema)
        self._own_heartbeats = True

    def share_heartbeats(self, line: HeartbeatLine) -> None:
        """Renew leases on ``line`` (one connection for all of a pool's workers)."""
        self.heartbeats.close()
        self.heartbeats, self._own_heartbeats = line, False

    def share_registration(self, other: Session) -> None:
        """Take ``other``'s job ids and timelines (a pool worker from the caller's session):
        the jobs are registered once per command, and a worker sends no registration
        statement mid-batch, where a restart would end the batch instead of one period."""
        self._job_ids.update(other._job_ids)
        self._timelines.update(other._timelines)
        self._renamed = other._renamed
        self._held = other._held

    def registered_id(self, name: str) -> int:
        """The ledger id of the configured job ``name``, which is registered (with every other
        configured job, and their schedules recorded) the first time this session asks; a
        session that only reads (``writes=False``) reads it, -1 when the ledger has none."""
        if not self.writes:  # a session that only reads registers nothing: -1 has no row
            row = self.job_rows(write=False).get(name)
            return row.id if row is not None else -1
        if name not in self._job_ids:
            self._sync()
        return self._job_ids[name]

    def resolve(self, job: Job, *, write: bool = True) -> Job:
        """``job`` with the timeline the ledger records for it: every schedule it has had.
        With ``write=False`` nothing is recorded (the timeline is what would be)."""
        if job.name not in self._timelines:
            self._sync(write=write)
        return replace(job, timeline=self._timelines[job.name])

    def resolve_all(self, jobs: list[Job], *, write: bool = True) -> list[Job]:
        return [self.resolve(job, write=write) for job in jobs]

    def needs(self, job: Job, period: Period) -> list[tuple[Job, Period]]:
        """The upstream periods ``period`` of ``job`` waits for (its ``after``), each upstream
        job with the timeline the ledger records for it; an upstream period its job's
        ``exclude`` excludes is waited for by nobody."""
        found: list[tuple[Job, Period]] = []
        for dep in job.after:
            upstream = self._upstream.get(dep.job)
            if upstream is None or upstream.timeline is not self._timelines.get(dep.job):
                # resolved once per timeline: a plan asks for every period it holds
                upstream = self._upstream[dep.job] = self.resolve(self.config.job(dep.job))
            found += [
                (upstream, p)
                for p in needed(upstream.timeline, period, dep.periods)
                if upstream.excluded(p.start, p.end).at(p.start) is None
            ]
        return found

    def cannot_start(self, job: Job) -> str | None:
        """:func:`catchup.execution.preflight.cannot_start`, asked once per job while it can start
        (a
        backlog of periods checks its program or import once, not per period); and a held
        job (:mod:`catchup.changes.held`) starts nothing, whatever asks."""
        if (old := self.held().get(job.name)) is not None:
            return held_said(job.name, old)
        if job.name in self._startable:
            return None
        why = cannot_start(job)
        if why is None:
            self._startable.add(job.name)
        return why

    def unconfigured(self) -> tuple[list[Unconfigured], tuple[tuple[str, str], ...]]:
        """The ledger's jobs this config does not name (nobody retired them, and they hold
        something), and the held jobs among the configured ones: (new name, old name)."""
        config = self.config
        names = sorted(config.jobs)
        gone = [u for u in self.ledger.unconfigured_jobs(names) if u.name not in config.renames]
        held = lookalikes(config, gone, self._fresh(names)) if gone else ()
        if self._held is None:  # what the connection's notice read: held() need not again
            self._held = dict(held)
        return gone, held

    def _fresh(self, names: list[str]) -> list[str]:
        """The configured jobs new to the ledger (no run under their name), but those renamed
        from a job the ledger has: they take its rows at their first write, before anything
        else this session writes, so they are never new for long (nor ever held)."""
        renames = self.config.renames
        taken = set(self.ledger.job_rows(sorted(renames))) if renames else set()
        return [
            name
            for name in self.ledger.names_without_runs(names)
            if self.config.jobs[name].renamed_from not in taken
        ]

    def held(self) -> dict[str, str]:
        """Each configured job that is held, with the old name it looks like (nothing of it
        is claimed); read once, and again by :meth:`check_held`."""
        if self._held is None:
            self.unconfigured()
        return self._held or {}

    def check_held(self) -> dict[str, str]:
        """:meth:`held`, read again: a writing command's first step (the scheduler's session
        lives across ticks, and a ``catchup rename`` elsewhere releases a job, or holds one).
        When that changed, the jobs are registered again (a rename moved an id)."""
        before, self._held = self._held, None
        now = self.held()
        if before is not None and now != before:
            self._job_ids.clear()
            self._timelines.clear()
            self._upstream.clear()
            self._kept = None
        return now

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Within: the read-only ``job_rows`` are read once and kept (what one page reads
        many times, where nothing is written in between)."""
        kept = self._keep_rows  # rows kept already (serve's) are used, and stay kept after
        self._keep_rows = math.inf
        try:
            yield
        finally:
            self._keep_rows = kept
            if not kept:
                self._kept = None

    def keep_rows(self, seconds: float) -> None:
        """For a session that only reads (serve's period pages): the read-only ``job_rows``
        are read at most every ``seconds`` (a page of one period need not read a thousand
        jobs' rows); 0, as sessions start: on every call."""
        self._keep_rows, self._kept = seconds, None

    def job_rows(self, *, write: bool = True) -> dict[str, JobRow]:
        """Every configured job's ledger row, by its configured name: registered when
        ``write`` (after the renames ``renamed_from`` asks for); else as they would be (a job
        renamed from a name the ledger still has reads that job's row)."""
        if write:
            return self._registered_rows()
        if not self._keep_rows:
            return self._read_job_rows()
        if self._kept is None or time.monotonic() - self._kept[0] >= self._keep_rows:
            self._kept = (time.monotonic(), self._read_job_rows())
        return self._kept[1]

    def _read_job_rows(self) -> dict[str, JobRow]:
        rows = self.ledger.job_rows(sorted(self.config.jobs))
        olds = self.config.renames
        for old, row in self.ledger.job_rows(list(olds)).items() if olds else ():
            rows.setdefault(olds[old], replace(row, name=olds[old]))
        if self.definitions_checked:
            self._check_definitions(rows)  # before anything is written
        return rows

    def _registered_rows(self) -> dict[str, JobRow]:
        names = sorted(self.config.jobs)
        rows = self._read_job_rows()
        olds = self.config.renames
        if olds or any(n not in rows or rows[n].retired_at is not None for n in names):
            self.apply_renames()
            rows = self.ledger.register_jobs(names)  # new names, and retired ones back
        self._record_definitions(rows)  # steady state: every job known, nothing written
        return rows

    def _check_definitions(self, rows: dict[str, JobRow]) -> None:
        """One job, one definition: a job the ledger records as another project's, defined
        differently there, is refused (naming both), whatever this command was to do."""
        clashes = definition_clashes(self.config, rows)
        if clashes:
            raise ConfigError(clashes)

    def _record_definitions(self, rows: dict[str, JobRow]) -> None:
        """Record this project as the one that defines its jobs where no other does, and a
        changed definition of its own; steady state writes nothing."""
        mine = self.config.registrant
        for name, row in rows.items():
            job = self.config.jobs[name]
            if row.project == mine and row.definition == job.definition:
                continue
            if row.project not in (None, mine):
                continue  # another project's, defined alike (checked): it stays theirs
            if not self.ledger.record_definition(row.id, mine, job.definition):
                # another project took it in the meantime: refused as if it had been first
                self._check_definitions(self.ledger.job_rows([name]))

    def apply_renames(self) -> None:
        """``renamed_from``: a job the ledger still has under its old name takes the new one,
        keeping its id and all recorded for it (audited); once per session."""
        if self._renamed:
            return
        self._renamed = True
        asked = self.config.renames
        if not asked:
            return
        for old in self.ledger.job_rows(list(asked)):
            new = asked[old]
            where = str(self.config.path) if self.config.path else "code"
            why = self.ledger.rename_job(
                old, new, f"renamed_from in {where}", f"config, seen by {owner_name()}"
            )
            if why is not None:
                raise ConfigError(f"jobs.{new}.renamed_from: cannot rename {old} to {new}: {why}")

    def _sync(self, *, write: bool = True) -> None:
        """Register the configured jobs and record schedule or start changes (see
        :func:`catchup.schedule.reconcile.reconcile`); steady state is two reads and no writes."""
        rows = self.job_rows(write=write)
        ids = {n: r.id for n, r in rows.items()}
        stored = self.ledger.schedules(list(ids.values()))
        now = self.now()
        for name, job in self.config.jobs.items():
            job_id = ids.get(name, -1)
            start, recorded = stored.get(job_id, (None, []))
            try:
                chosen = reconcile(job.schedule, job.start, recorded, now, job.start_wall)
            except ScheduleError as exc:  # a row written by another version of catchup
                raise ConfigError(
                    f"{name}: the ledger's schedule history cannot be read here: {exc}"
                ) from None
            if write and (chosen.writes or start != job.start):
                chosen = self.ledger.record_schedule(
                    job_id,
                    lambda rows, at, j=job: reconcile(j.schedule, j.start, rows, at, j.start_wall),
                    job.start,
                    f"config, seen by {owner_name()}",
                )
            self._timelines[name] = chosen.timeline
        if write:
            self._job_ids = ids

    def now(self) -> datetime:
        return self.ledger.now()

    def transaction(self) -> AbstractContextManager[Any]:
        return self.ledger.transaction()

    def reconnect(self) -> None:
        """A new connection after the old one broke (server restart, cut connection)."""
        try:
            self.conn.close()
        except psycopg.Error:
            pass
        self.conn = db.connect(self.target, writes=self.writes)
        self.ledger = Ledger(self.conn, self.config.schema, durable=self.durable)
        if self.durable:  # on the server it reached: a failover's new primary, perhaps
            self.ledger.declare_durable()

    def close(self) -> None:
        if self._own_heartbeats:
            self.heartbeats.close()
        self.conn.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def definition_clashes(config: Config, rows: dict[str, JobRow]) -> list[str]:
    """A line per configured job that the ledger records as defined, differently, by a
    project other than ``config``'s: what each says, and the ways out."""
    mine = config.registrant
    said = []
    for name, row in sorted(rows.items()):
        job = config.jobs.get(name)
        if job is None or row.project in (None, mine) or row.definition == job.definition:
            continue
        said.append(
            f"jobs.{name}: this ledger's {name} is defined by another project, {row.project} "
            f"({describe_definition(row.definition)}); this one, {mine}, defines it as "
            f"{describe_definition(job.definition)}; they differ in "
            f"{', '.join(differences(row.definition, job.definition))}. One job has one "
            "definition: rename one of them, or give this config [project] name = "
            f"{json.dumps(row.project)} if it is that project"
        )
    return said


def describe_definition(definition: dict[str, object] | None) -> str:
    """A job's definition as a line says it: ``daily (UTC) from 2026-10-01T00:00:00Z, runs
    ./bill.sh`` (a command's program, never its arguments)."""
    if not definition:
        return "not recorded"
    return (
        f"{definition.get('schedule')} ({definition.get('timezone')}) from "
        f"{definition.get('start')}, runs {definition.get('runs')}"
    )


def differences(a: dict[str, object] | None, b: dict[str, object]) -> list[str]:
    """The parts of two definitions that differ, as people name them."""
    parts = {
        "schedule": "schedule",
        "timezone": "time zone",
        "start": "start",
        "runs_sha256": "what it runs",
    }
    return [said for key, said in parts.items() if (a or {}).get(key) != b.get(key)]
