"""Changing the ledger by hand, every change audited: waive (``mark``), record what ran
elsewhere (``adopt``), make runnable again (``reset``), windows nobody expected
(``exclude``), rename, retire, pause and resume; a
running job's checkpoint; and the schema's migration."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from typing import Literal

from ..config.job import Job
from ..errors import ConfigError
from ..maintenance.retention import Compacted
from ..render.pasted import command
from ..results import (
    Cancelled,
    Changes,
    Migrated,
    Paused,
    Renamed,
    Resumed,
    Retired,
    Windows,
)
from ..scan.window import Moment
from ..schedule import Period
from ..session import Session
from .base import Base, check_actor, check_reason, instant, texts

# Imports inside functions: at first use, so a command loads only the capability it runs.


class Changing(Base):
    def mark(  # noqa: PLR0913
        self,
        job: str,
        periods: Sequence[str | date | datetime],
        *,
        kind: Literal["done", "skip"],
        reason: str,
        actor: str | None = None,
        key: str | None = None,
        keys: Iterable[str] = (),
        all_keys: bool = False,
    ) -> Changes:
        """Waive ``periods`` (``"2026-10-03"`` or ``"2026-10-01..2026-10-07"``): done out of
        band or skipped on purpose; audited. Refused whole when any of them is running. A job
        with keys: of ``key`` (and ``keys``), or ``all_keys``: every key expected in them."""
        from ..changes import operations

        if kind not in ("done", "skip"):
            raise ConfigError("mark needs --done or --skip")
        why = check_reason(reason, required=True)
        who = check_actor(actor)
        assert why is not None
        session, pairs = self._changed(job, periods, key, keys, all_keys)
        return operations.each_key(
            session,
            pairs,
            lambda spec, chosen: operations.mark(
                session, spec, chosen, skip=kind == "skip", reason=why, actor=who
            ),
        )

    def _changed(
        self,
        job: str,
        periods: Sequence[str | date | datetime],
        key: str | None,
        keys: Iterable[str],
        all_keys: bool,
    ) -> tuple[Session, list[tuple[Job, list[Period]]]]:
        """The session, and the periods of each key a mark or reset names (all checked
        before anything is written)."""
        from ..changes import operations

        spec, wanted = self._keys_asked(job, key, keys, all_keys)
        if spec.keyed and wanted is None and not all_keys:
            raise ConfigError(f"{spec.name} has keys: name the key with --key, or --all-keys")
        session = self.session
        spec = session.resolve(spec, write=False)  # bad periods are refused before any write
        chosen = operations.parse_periods(spec, texts(periods))
        return session, operations.by_key(session, spec, chosen, wanted)

    def adopt(
        self,
        jobs: Iterable[str],
        *,
        since: Moment | None = None,
        until: Moment | None = None,
        reason: str,
        actor: str | None = None,
    ) -> list[Changes]:
        """Record the untracked periods of ``jobs`` (output exists, no ledger row) as waived,
        audited as ``adopt``: for a job that ran elsewhere before catchup."""
        from ..changes import operations
        from ..scan.window import check_window

        why = check_reason(reason, required=True)
        who = check_actor(actor)
        assert why is not None
        chosen = self.select(jobs)
        for job in chosen:  # before the session opens: bad input touches no database
            if job.evidence is None:
                raise ConfigError(f"{job.name} has no evidence query: nothing shows what ran")
            if job.keyed:
                raise ConfigError(
                    f"{job.name} has keys: adopt does not take a keyed job yet; "
                    f"`{command('mark', job.name)} PERIOD --key K --done --reason …` records "
                    "one key's periods"
                )
        check_window(chosen, since, until)
        return operations.adopt(
            self.session,
            chosen,
            since=since,
            until=until,
            reason=why,
            actor=who,
        )

    def reset(
        self,
        job: str,
        periods: Sequence[str | date | datetime],
        *,
        reason: str,
        actor: str | None = None,
        key: str | None = None,
        keys: Iterable[str] = (),
        all_keys: bool = False,
    ) -> Changes:
        """Make succeeded, waived or exhausted periods runnable again; audited. A job with
        keys: of ``key`` (and ``keys``), or ``all_keys``: every key expected in them."""
        from ..changes import operations

        why = check_reason(reason, required=True)
        who = check_actor(actor)
        assert why is not None
        session, pairs = self._changed(job, periods, key, keys, all_keys)
        return operations.each_key(
            session,
            pairs,
            lambda spec, chosen: operations.reset(session, spec, chosen, reason=why, actor=who),
        )

    def cancel(
        self,
        job: str,
        period: Moment,
        *,
        reason: str,
        actor: str | None = None,
        key: str | None = None,
        wait: bool = True,
    ) -> Cancelled:
        """Ask the runner of ``period``, on whatever host, to stop it (its heartbeat sees the
        request within a third of the lease); audited. With ``wait``, until the attempt is
        recorded ``cancelled`` (no failure counted, runnable again), or ended first, or its
        lease, grace and a few seconds more have passed. Refused when it is not running."""
        from ..changes.cancel import cancel

        why = check_reason(reason, required=True)
        who = check_actor(actor)
        assert why is not None
        spec = self.one_key(job, key)
        start = instant(period, spec)
        session = self.session
        spec = session.resolve(spec, write=False)
        return cancel(
            session,
            spec,
            spec.period_starting(start),
            reason=why,
            actor=who,
            wait=wait,
        )

    def rename(self, old: str, new: str, *, reason: str, actor: str | None = None) -> Renamed:
        """Give the ledger's job ``old`` the name ``new``: its id, and with it every run,
        attempt, change, coverage and alert range, goes along (audited). A row for ``new`` that
        a command registered after the config was edited, and that holds nothing, is
        replaced."""
        from ..changes.operations import rename

        why = check_reason(reason, required=True)
        who = check_actor(actor)
        assert why is not None
        rename(self.session, old, new, reason=why, actor=who)
        jobs = self.config.jobs
        return Renamed(old, new, config_behind=old in jobs and new not in jobs)

    def retire(self, job: str, *, reason: str, actor: str | None = None) -> Retired:
        """Record the ledger's job ``job`` (no longer configured) as gone on purpose: it is
        no longer said to be missing from the config; its history stays."""
        from ..changes.operations import retire

        why = check_reason(reason, required=True)
        who = check_actor(actor)
        assert why is not None
        retire(self.session, job, reason=why, actor=who)
        return Retired(job)

    def exclude(
        self,
        jobs: Iterable[str],
        window: str,
        *,
        reason: str,
        actor: str | None = None,
        key: str | None = None,
        all_jobs: bool = False,
        undo: bool = False,
    ) -> Windows:
        """Record ``window`` (``"2026-12-01"``, ``"2026-12-01..2026-12-02"`` or times
        ``"2026-12-01T02:00Z..2026-12-01T04:00Z"``) over ``jobs`` (``all_jobs``: every job of
        the config; ``key``: one key of a job with keys) as periods nobody expected; audited.
        ``undo``: the windows recorded within it undone. Everything is checked before
        anything is written."""
        from ..changes import windows

        why = check_reason(reason, required=True)
        who = check_actor(actor)
        assert why is not None
        names = list(jobs)
        if all_jobs == bool(names):
            raise ConfigError("exclude: name the jobs, or --all for every job (not both)")
        entry = windows.read_window(window)
        chosen = self.select(None if all_jobs else names, None if key is None else [key])
        if undo:
            return windows.undo(self.session, chosen, entry, key, why, who)
        return windows.record(self.session, chosen, entry, key, why, who, every=all_jobs)

    def pause(
        self,
        job: str,
        *,
        reason: str | None = None,
        actor: str | None = None,
        key: str | None = None,
    ) -> Paused:
        """Suspend ``job`` (or one ``key`` of it): nothing claims its periods until it is
        resumed."""
        from ..changes import operations

        why = check_reason(reason, required=False)
        who = check_actor(actor)
        (spec,) = self.select([job], None if key is None else [key])
        spec = spec.for_key(key) if key is not None else spec
        since = operations.pause(self.session, spec, reason=why, actor=who)
        return Paused(spec.name, since, spec.key)

    def resume(
        self,
        job: str,
        *,
        reason: str | None = None,
        actor: str | None = None,
        key: str | None = None,
    ) -> Resumed:
        """Resume ``job`` (or one ``key`` of it); the next tick follows its catch-up policy (no
        flood)."""
        from ..changes import operations

        why = check_reason(reason, required=False)
        who = check_actor(actor)
        (spec,) = self.select([job], None if key is None else [key])
        spec = spec.for_key(key) if key is not None else spec
        resumed = operations.resume(self.session, spec, reason=why, actor=who)
        return Resumed(
            spec.name, resumed, spec.catchup, spec.catchup_window, spec.max_per_tick, spec.key
        )

    def checkpoint(
        self, value: str, *, run_id: int | None = None, attempt: int | None = None
    ) -> bool:
        """From inside a running job: save progress for a later attempt of its period, fenced
        by the attempt. ``run_id`` and ``attempt`` default to ``CATCHUP_RUN_ID`` and
        ``CATCHUP_ATTEMPT``. False when the attempt no longer owns its period."""
        if run_id is None or attempt is None:
            try:
                run_id = int(os.environ["CATCHUP_RUN_ID"])
                attempt = int(os.environ["CATCHUP_ATTEMPT"])
            except (KeyError, ValueError):
                raise ConfigError(
                    "catchup checkpoint runs inside a job: CATCHUP_RUN_ID and CATCHUP_ATTEMPT "
                    "are not set"
                ) from None
        return self.session.ledger.save_checkpoint(run_id, attempt, value)

    def compact(
        self,
        *,
        jobs: Iterable[str] | None = None,
        before: Moment | None = None,
        dry_run: bool = False,
    ) -> Compacted:
        """Drop the detail of settled runs that ended before ``before`` (UTC; default: now
        minus ``[ledger] keep_detail``), keeping each period's fact: what ``catchup compact``
        does. ``dry_run``: only count what would go."""
        from ..config.values import parse_instant
        from ..maintenance.compaction import compact

        try:
            cut = None if before is None else parse_instant(before)
        except ValueError as exc:
            raise ConfigError(f"--until: {exc}") from None
        chosen = self.select(jobs)
        return compact(self.session, chosen, before=cut, dry_run=dry_run)

    def migrate(self) -> Migrated:
        """Create or upgrade the ledger schema."""
        session = self._open(prepare=False)
        applied = session.ledger.migrate()
        if session.durable:  # as a session that prepares the ledger (Session)
            session.ledger.declare_durable()
        return Migrated(self.config.schema, tuple(applied), session.ledger.version())
