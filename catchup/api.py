"""The library facade: every operation of catchup as one call with typed inputs and a typed
result. The command line (``catchup.cli``) parses, calls one of these, renders the result and
maps it to an exit code; the Python API is this class. So the two cannot disagree."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import date, datetime
from pathlib import Path
from typing import Literal

from . import db, sqlfiles
from .claim import choose_period, run_period
from .config import find_config, load_config
from .doctor import Finding
from .errors import ConfigError, DatabaseError
from .explain import Explanation
from .job import Config, Job
from .models import ClaimRules, Outcome, ScanReport
from .results import (
    Batch,
    Changes,
    Connected,
    History,
    JobsReport,
    Migrated,
    NotDue,
    Paused,
    Planned,
    Renamed,
    Resumed,
    Retired,
)
from .session import Session
from .values import blank, parse_instant, project_problem
from .window import Moment

MAX_REASON = 1000
MAX_WORKERS = 64
HISTORY_LIMIT = 50


def reason_problem(reason: str) -> str | None:
    """What is wrong with a reason, if anything: it is kept in the audit trail, so it must say
    something, and not too much."""
    if blank(reason):
        return "must say why (it is kept in the history)"
    if len(reason) > MAX_REASON:
        return f"at most {MAX_REASON:,} characters"
    return None


def check_reason(reason: str | None, *, required: bool) -> str | None:
    if reason is None and not required:
        return None
    problem = reason_problem(reason or "")
    if problem is not None:
        raise ConfigError(f"--reason: {problem}")
    return reason


def code_origin(project: str | None) -> Path:
    """What names a project of jobs declared in code: ``project`` if given, else the script
    that runs (``python billing.py``: billing.py), else the working folder."""
    if project is not None:  # checked by Catchup()
        return Path.cwd() / f"python-{project}"
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    return Path(main).resolve() if main else Path.cwd() / "python"


class Catchup:
    """A ledger and its jobs.

    Load ``catchup.toml`` (``Catchup("catchup.toml")``, or ``Catchup()`` to find it like the
    CLI does) or declare jobs in code (``Catchup(jobs=[make_job(...)], dsn=...)``): those are a
    project of their own (named by ``project``, else by the script that runs), never the
    catchup.toml of the folder it runs in, so no job there is redefined. The database
    is chosen as by the CLI: ``dsn``, then ``CATCHUP_DSN``, ``[database] dsn``, ``DATABASE_URL``,
    ``PG*``, else the embedded PostgreSQL. It is opened on first use; use the object as a
    context manager, or call :meth:`close`.

    Times given as a bare date (``"2026-11-25"`` or a :class:`~datetime.date`) or without an
    offset are in each job's own time zone; a time with ``Z`` or an offset is absolute.
    """

    def __init__(
        self,
        config: Config | str | Path | None = None,
        *,
        jobs: Iterable[Job] = (),
        dsn: str | None = None,
        schema: str | None = None,
        require_config: bool = False,
        on_connect: Callable[[Connected], None] | None = None,
        project: str | None = None,
    ) -> None:
        declared = {job.name: job for job in jobs}
        if project is not None and (said := project_problem(project)) is not None:
            raise ConfigError(f"project: {said}")
        if isinstance(config, Config):
            loaded = config
        elif declared and config is None:
            # jobs in code are a project of their own: never the catchup.toml of the folder
            # this happens to run in (its jobs of the same names would be redefined)
            loaded = Config(
                path=None,
                schema=schema or "catchup",
                schema_given=schema is not None,
                origin=code_origin(project),
            )
        else:
            path = find_config(None if config is None else str(config))
            if path is None and require_config and not declared:
                raise ConfigError(
                    f"no catchup.toml in {Path.cwd()} or its parents (use --config or "
                    "CATCHUP_CONFIG)"
                )
            loaded = load_config(path, schema=schema)
        if project is not None:
            loaded = replace(loaded, project_name=project)
        if declared:
            loaded = replace(
                loaded,
                jobs={**loaded.jobs, **declared},
                schema=schema or loaded.schema,
                schema_given=loaded.schema_given or schema is not None,
            )
        self.config = loaded
        self._dsn = dsn
        self._on_connect = on_connect
        self._session: Session | None = None

    # -- the ledger ------------------------------------------------------------------------

    def _target(self, *, start_embedded: bool = True) -> db.Target:
        config = self.config
        return db.resolve(
            self._dsn,
            config.dsn,
            embedded_allowed=config.embedded,
            project=config.project,
            start_embedded=start_embedded,
        )

    def _open(self, *, prepare: bool = True, start_embedded: bool = True) -> Session:
        if self._session is None:
            target = self._target(start_embedded=start_embedded)
            self._session = Session(self.config, target, prepare=prepare)
            if self._on_connect is not None:
                self._on_connect(self.connected)
        return self._session

    @property
    def session(self) -> Session:
        """The open ledger (opened, and the schema brought up to date, on first use)."""
        return self._open()

    @property
    def connected(self) -> Connected:
        import psycopg

        from .reports import unconfigured

        session = self.session
        try:
            gone, lookalikes = unconfigured(session)
        except psycopg.Error:  # a ledger not yet migrated (serve and doctor only read)
            gone, lookalikes = (), ()
        return Connected(
            session.target.describe(),
            db.server_version(session.conn),
            self.config.schema,
            session.target.note,
            gone,
            lookalikes,
        )

    @property
    def database(self) -> str:
        """Which database is in use, without the password."""
        return self.session.target.describe()

    def job(self, name: str) -> Job:
        """The configured job ``name``; a :class:`ConfigError` naming the known ones if none."""
        return self.config.job(name)

    def select(self, names: Iterable[str] | None) -> list[Job]:
        """The jobs named (in that order), or every job when none are: the one job selection
        every command uses."""
        chosen = list(names or ())
        if not chosen:
            return list(self.config.jobs.values())
        return [self.config.job(name) for name in dict.fromkeys(chosen)]

    # -- running -----------------------------------------------------------------------------

    def run(
        self,
        job: str,
        period: Moment | None = None,
        *,
        interrupted: threading.Event | None = None,
        stream: bool = False,
        ignore_evidence: bool = False,
    ) -> Outcome | NotDue:
        """Run one period (default: the latest due) through the claim path. :class:`NotDue`
        when no period is due yet; a :class:`ConfigError` for a period that is not a period
        start or not due (nothing is written then). A period whose output exists but that the
        ledger never saw (the job's evidence) is skipped, unless ``ignore_evidence``."""
        spec = self.job(job)
        start = None if period is None else _instant(period, spec)
        session = self.session
        spec = session.resolve(spec, write=False)  # a bad period is refused before any write
        chosen = choose_period(spec, session.now(), start)
        if chosen is None:
            first = spec.timeline.period(spec.anchor)
            return NotDue(spec.name, first, spec.label(first.start), first.end + spec.delay)
        return run_period(
            session,
            spec,
            chosen,
            interrupted=interrupted,
            stream=stream,
            rules=ClaimRules(ignore_evidence=ignore_evidence),
        )

    def tick(
        self,
        *,
        jobs: Iterable[str] | None = None,
        workers: int = 4,
        interrupted: threading.Event | None = None,
        on_done: Callable[[Outcome], None] | None = None,
        max_time: float | None = None,
    ) -> Batch:
        """Run what each job's catch-up policy allows, on a pool of ``workers``: what
        ``catchup tick`` does. After ``max_time`` seconds nothing new starts."""
        from .replay import tick

        if not 1 <= workers <= MAX_WORKERS:
            raise ConfigError(f"--workers {workers}: from 1 to {MAX_WORKERS}")
        if max_time is not None and not 1 <= max_time <= 86400:
            raise ConfigError(f"--max-time {max_time:g}s: from 1 second to 1 day")
        chosen = self.select(jobs)
        return tick(
            self.session,
            chosen,
            workers=workers,
            interrupted=interrupted,
            on_done=on_done,
            max_time=max_time,
        )

    def replay(
        self,
        *,
        since: Moment,
        until: Moment | None = None,
        jobs: Iterable[str] | None = None,
        workers: int = 1,
        limit: int | None = None,
        dry_run: bool = False,
        stop_on_failure: bool = False,
        retry_exhausted: bool = False,
        unverified: bool = False,
        reason: str | None = None,
        actor: str | None = None,
        interrupted: threading.Event | None = None,
        on_plan: Callable[[int], None] | None = None,
        on_start: Callable[[Planned], None] | None = None,
        on_done: Callable[[Outcome], None] | None = None,
    ) -> Batch:
        """Run the gaps, oldest first: what ``catchup replay`` does. ``unverified`` also runs
        succeeded periods that left no evidence again (each reset with ``reason``, audited)."""
        from .operations import default_actor
        from .replay import Audit, replay
        from .window import check_window

        if unverified and reason is None:
            raise ConfigError("--unverified needs --reason: it runs succeeded periods again")
        why = check_reason(reason, required=False)
        chosen = self.select(jobs)
        check_window(chosen, since, until)  # before the session opens (and migrates)
        audit = Audit(why, actor or default_actor()) if unverified and why else None
        return replay(
            self.session,
            chosen,
            since=since,
            until=until,
            limit=limit,
            workers=workers,
            dry_run=dry_run,
            stop_on_failure=stop_on_failure,
            retry_exhausted=retry_exhausted,
            unverified=audit,
            interrupted=interrupted,
            on_plan=on_plan,
            on_start=on_start,
            on_done=on_done,
        )

    # -- looking -------------------------------------------------------------------------

    def scan(
        self,
        *,
        jobs: Iterable[str] | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
        full: bool = False,
        calendars: bool = False,
    ) -> ScanReport:
        """The gap detector: what ``catchup scan`` reports (with the scheduler's pulse, and a
        calendar per job when asked)."""
        from .scan import scan
        from .window import check_window

        chosen = self.select(jobs)
        check_window(chosen, since, until)  # before the session opens (and migrates)
        return scan(
            self.session, chosen, since=since, until=until, full=full, grids=calendars, pulse=True
        )

    def notify(self, report: ScanReport) -> list[str]:
        """Tell ``[alerts]``'s webhooks what changed in ``report``'s gap ranges since they were
        last told (once, whichever replica gets there first), and post what is due: the
        problems, a line each (a webhook's URL never appears)."""
        from . import alerts

        config = self.config.alerts
        if config is None:
            raise ConfigError("--notify needs an [alerts] section with a webhook in catchup.toml")
        ledger = self.session.ledger
        rows = ledger.job_rows([job.job for job in report.jobs])
        alerts.record(ledger, config, report, {name: row.id for name, row in rows.items()})
        return alerts.deliver(ledger, config)

    def jobs(self) -> JobsReport:
        """``catchup jobs``: per job, schedule, last success, next due, done of expected."""
        from .pulse import scheduler_health
        from .reports import overview, unconfigured

        session = self.session
        lines = overview(session, list(self.config.jobs.values()))
        gone, _ = unconfigured(session)
        return JobsReport(session.target.describe(), tuple(lines), scheduler_health(session), gone)

    def history(
        self, job: str, *, period: Moment | None = None, limit: int = HISTORY_LIMIT
    ) -> History:
        """The attempts of ``job`` (or of one period), newest first, and the changes made to it."""
        if not 1 <= limit <= 100_000:
            raise ConfigError(f"--limit {limit}: from 1 to 100,000")
        spec = self.job(job)
        start = None if period is None else _instant(period, spec)
        session = self.session
        spec = session.resolve(spec, write=False)
        # by the ledger's id, read-only: a job renamed_from an old name shows that job's past
        row = session.job_rows(write=False).get(job)
        job_id = -1 if row is None else row.id  # never registered: no history yet
        attempts, total_attempts = session.ledger.history(job_id, start, limit)
        changes, total_changes = session.ledger.events(job_id, start, limit)
        return History(
            job,
            start,
            limit,
            tuple(attempts),
            total_attempts,
            tuple(changes),
            total_changes,
            labeler=spec.label,
        )

    def explain(self, job: str, *, start: Moment | None = None, count: int = 10) -> Explanation:
        """``count`` periods of ``job`` from the one containing ``start`` (default: the current
        one): bounds, lengths, due times and DST notes."""
        from .explain import explain

        if not 1 <= count <= 1000:
            raise ConfigError(f"--count {count}: from 1 to 1,000")
        spec = self.job(job)
        start_at = None if start is None else _instant(start, spec)
        session = self.session
        everyone = session.resolve_all(list(self.config.jobs.values()), write=False)
        spec = session.resolve(spec, write=False)
        return explain(spec, everyone, now=session.now(), start=start_at, count=count)

    # -- changing the ledger by hand -----------------------------------------------------

    def mark(
        self,
        job: str,
        periods: Sequence[str | date | datetime],
        *,
        kind: Literal["done", "skip"],
        reason: str,
        actor: str | None = None,
    ) -> Changes:
        """Waive ``periods`` (``"2026-10-03"`` or ``"2026-10-01..2026-10-07"``): done out of
        band or skipped on purpose; audited. Refused whole when any of them is running."""
        from . import operations

        if kind not in ("done", "skip"):
            raise ConfigError("mark needs --done or --skip")
        why = check_reason(reason, required=True)
        assert why is not None
        spec = self.job(job)
        session = self.session
        spec = session.resolve(spec, write=False)  # bad periods are refused before any write
        chosen = operations.parse_periods(spec, _texts(periods))
        return operations.mark(
            session,
            spec,
            chosen,
            skip=kind == "skip",
            reason=why,
            actor=actor or operations.default_actor(),
        )

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
        from . import operations
        from .window import check_window

        why = check_reason(reason, required=True)
        assert why is not None
        chosen = self.select(jobs)
        for job in chosen:  # before the session opens: bad input touches no database
            if job.evidence is None:
                raise ConfigError(f"{job.name} has no evidence query: nothing shows what ran")
        check_window(chosen, since, until)
        return operations.adopt(
            self.session,
            chosen,
            since=since,
            until=until,
            reason=why,
            actor=actor or operations.default_actor(),
        )

    def reset(
        self,
        job: str,
        periods: Sequence[str | date | datetime],
        *,
        reason: str,
        actor: str | None = None,
    ) -> Changes:
        """Make succeeded, waived or exhausted periods runnable again; audited."""
        from . import operations

        why = check_reason(reason, required=True)
        assert why is not None
        spec = self.job(job)
        session = self.session
        spec = session.resolve(spec, write=False)
        chosen = operations.parse_periods(spec, _texts(periods))
        return operations.reset(
            session, spec, chosen, reason=why, actor=actor or operations.default_actor()
        )

    def rename(self, old: str, new: str, *, reason: str, actor: str | None = None) -> Renamed:
        """Give the ledger's job ``old`` the name ``new``: its id, and with it every run,
        attempt, change, coverage and alert range, goes along (audited). A row for ``new`` that
        a command registered after the config was edited, and that holds nothing, is
        replaced."""
        from .operations import default_actor, rename

        why = check_reason(reason, required=True)
        assert why is not None
        rename(self.session, old, new, reason=why, actor=actor or default_actor())
        return Renamed(old, new)

    def retire(self, job: str, *, reason: str, actor: str | None = None) -> Retired:
        """Record the ledger's job ``job`` (no longer configured) as gone on purpose: it is
        no longer said to be missing from the config; its history stays."""
        from .operations import default_actor, retire

        why = check_reason(reason, required=True)
        assert why is not None
        retire(self.session, job, reason=why, actor=actor or default_actor())
        return Retired(job)

    def pause(self, job: str, *, reason: str | None = None, actor: str | None = None) -> Paused:
        """Suspend ``job``: nothing claims its periods until it is resumed."""
        from . import operations

        why = check_reason(reason, required=False)
        spec = self.job(job)
        since = operations.pause(
            self.session, spec, reason=why, actor=actor or operations.default_actor()
        )
        return Paused(spec.name, since)

    def resume(self, job: str, *, reason: str | None = None, actor: str | None = None) -> Resumed:
        """Resume ``job``; the next tick follows its catch-up policy (no flood)."""
        from . import operations

        why = check_reason(reason, required=False)
        spec = self.job(job)
        resumed = operations.resume(
            self.session, spec, reason=why, actor=actor or operations.default_actor()
        )
        return Resumed(spec.name, resumed, spec.catchup, spec.catchup_window, spec.max_per_tick)

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

    def migrate(self) -> Migrated:
        """Create or upgrade the ledger schema."""
        session = self._open(prepare=False)
        applied = session.ledger.migrate()
        return Migrated(self.config.schema, tuple(applied), session.ledger.version())

    @staticmethod
    def doctor(config: str | None = None, dsn: str | None = None) -> list[Finding]:
        """Check the config, the database, a pooler, the clocks, the schedules and the
        scheduler; works when the config or the database is broken (that is a finding)."""
        from .doctor import examine

        return examine(config, dsn)

    def serve(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 9187,
        refresh: float = 60.0,
        stop: threading.Event,
        on_listening: Callable[[str], None] | None = None,
    ) -> None:
        """``catchup serve``: scan every ``refresh`` seconds, read-only, and serve the status
        page, ``/metrics``, ``/api/scan``, ``/healthz`` and ``/readyz`` until ``stop``."""
        from .scan import scan
        from .serve import Watcher, serve

        target = self._target()
        jobs = list(self.config.jobs.values())

        def scan_now() -> ScanReport:
            # it looks, it never migrates; and it never starts an embedded server someone
            # stopped (it started it once, above, when it had to)
            session = self._open(prepare=False, start_embedded=False)
            self._on_connect = None  # the database line is said once, not at each reconnect
            version, latest = session.ledger.version(), len(sqlfiles.migrations())
            if version < latest:
                raise DatabaseError(
                    f"the ledger (schema {self.config.schema}) is at version {version} of "
                    f"{latest}: `catchup migrate` brings it up to date (serve only reads)"
                )
            return scan(
                session, jobs, since=None, until=None, grids=True, pulse=True, read_only=True
            )

        def after(report: ScanReport) -> list[str]:
            return self.notify(report) if self.config.alerts is not None else []

        watcher = Watcher(
            scan_now,
            self.close,
            after=after,
            scrub=lambda text: db.scrub(text, target.conninfo),
            refresh=refresh,
            database=target.describe(),
            schema=self.config.schema,
        )
        serve(watcher, host, port, stop, on_listening)

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def __enter__(self) -> Catchup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _instant(value: Moment, job: Job) -> datetime:
    try:
        return parse_instant(value, job.timezone)
    except ValueError as exc:
        raise ConfigError(f"{job.name}: {exc}") from None


def _texts(periods: Sequence[str | date | datetime]) -> list[str]:
    if not periods:
        raise ConfigError("name at least one period")
    return [p if isinstance(p, str) else p.isoformat() for p in periods]
