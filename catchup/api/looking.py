"""Looking at the ledger, read-only: the gap scan and its alerts, the jobs overview, one job's
history, the periods explained, the doctor, and the status page that serves them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..config.bounds import (
    ATTEMPT_MOST,
    EXPLAIN_COUNT,
    HISTORY_LIMIT,
    KEYS_LIMIT,
    KEYS_SHOWN,
    PS_LIMIT,
)
from ..config.job import Config, Job
from ..config.reloading import reread
from ..config.values import key_problem, type_name
from ..errors import ConfigError, DatabaseError
from ..ledger import sqlfiles
from ..ledger.rows import JobRow
from ..maintenance.findings import Finding
from ..maintenance.retention import LedgerSize
from ..postgres import database as db
from ..reports.explain import Explanation
from ..results import (
    History,
    JobsReport,
    KeysReport,
    PageFacts,
    PeriodReport,
    Running,
    ScanReport,
    Why,
)
from ..scan.targets import KeyCounts
from ..scan.window import Moment
from ..session import Session
from .base import Base, check, instant

if TYPE_CHECKING:
    from ..serve.pinging import PingDesk
    from ..serve.watcher import Watcher

# Imports inside functions: at first use, so a command loads only the capability it runs.

PERIOD_WAIT = 5.0  # seconds a period page waits for the reads before it (then: 503)
PERIOD_ATTEMPTS = 50  # the newest attempts and changes a period page shows


class Looking(Base):
    def scan(
        self,
        *,
        jobs: Iterable[str] | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
        full: bool = False,
        calendars: bool = False,
        keys: Iterable[str] | None = None,
    ) -> ScanReport:
        """The gap detector: what ``catchup scan`` reports (with the scheduler's pulse, and a
        calendar per job when asked)."""
        from ..scan.detector import scan
        from ..scan.window import check_window

        chosen = self.select(jobs, keys)
        check_window(chosen, since, until)  # before the session opens (and migrates)
        return scan(
            self.session,
            chosen,
            since=since,
            until=until,
            full=full,
            calendars=calendars,
            pulse=True,
        )

    def notify(self, report: ScanReport) -> list[str]:
        """Tell ``[alerts]``'s webhooks what changed in ``report``'s gap ranges since they were
        last told (once, whichever replica gets there first), and post what is due: the
        problems, a line each (a webhook's URL never appears)."""
        from ..reports import alerts

        config = self.config.alerts
        if config is None:
            raise ConfigError("--notify needs an [alerts] section with a webhook in catchup.toml")
        ledger = self.session.ledger
        rows = ledger.job_rows([job.job for job in report.jobs])
        ids = {name: row.id for name, row in rows.items()}
        alerts.record(ledger, config, report, ids, self.config.title, self.config.serve.public_url)
        return alerts.deliver(ledger, config)

    def keys(
        self,
        job: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        counts: KeyCounts | None = None,
    ) -> KeysReport:
        """``catchup keys JOB``: the job's keys in key order, with when each was first and
        last seen and from when it is expected, as its keys query (or list) gives them now,
        recorded: all of them, or the first ``limit``. With ``after`` (a report's
        ``next_after``; ``""``: from the first key), the keys after it as the ledger recorded
        them, the source not read again: a million keys are listed a page at a time. With
        ``counts`` (the first page's; only with ``after``), the report carries those instead
        of counting every key again for each page."""
        from ..scan.keyed import changed_keys, key_report, record_read

        spec = self.job(job)
        if not spec.keyed:
            raise ConfigError(f"{spec.name} has no keys (give it keys = [...] or a SELECT)")
        _page_asked(after, limit)
        if counts is not None and after is None:
            raise ConfigError("counts: a first page's counts, for a later page: give after too")
        session = self.session
        if after is None:
            # read before anything is written, as a scan reads them: only what changed
            row = session.job_rows(write=False).get(spec.name)
            read = changed_keys(session.ledger, spec, row.id if row else 0)
            job_id = session.registered_id(spec.name)
            record_read(session.ledger, spec, job_id, read)
        else:
            job_id = session.registered_id(spec.name)
        now = session.now()
        return key_report(
            session.ledger, spec, job_id, now, after=after, limit=limit, counts=counts
        )

    def jobs(self) -> JobsReport:
        """``catchup jobs``: per job, schedule, last success, next due, done of expected."""
        from ..reports.jobs import overview, unconfigured
        from ..scheduler.pulse import read_pulse

        session = self.session
        jobs = list(self.config.jobs.values())
        lines, failed = overview(session, jobs)
        gone, _ = unconfigured(session)
        pulse = read_pulse(session, jobs)
        return JobsReport(session.target.describe(), tuple(lines), pulse, gone, failed)

    def history(
        self,
        job: str,
        *,
        period: Moment | None = None,
        limit: int = HISTORY_LIMIT.default or 1,
        key: str | None = None,
        attempt: int | None = None,
    ) -> History:
        """The attempts of ``job`` (or of one period, of one ``key``; or one ``attempt`` of
        the period), newest first, and the changes made to it."""
        check(HISTORY_LIMIT, limit)
        if attempt is not None and (period is None or not 1 <= attempt <= ATTEMPT_MOST):
            raise ConfigError(
                "--attempt needs --period (the attempts are a period's)"
                if period is None
                else f"--attempt: expected 1 to {ATTEMPT_MOST:,}, got {attempt}"
            )
        (spec,) = self.select([job], None if key is None else [key])
        session = self.session
        spec = session.resolve(spec, write=False)
        # a period's start, as why takes it (a time inside one is refused, naming its start)
        start = None if period is None else spec.period_starting(instant(period, spec)).start
        # by the ledger's id, read-only: a job renamed_from an old name shows that job's past
        row = session.job_rows(write=False).get(job)
        job_id = -1 if row is None else row.id  # never registered: no history yet
        key = key if spec.keyed else ""  # a job with keys: every key's, unless one is named
        attempts, total_attempts = session.ledger.history(job_id, start, limit, key, attempt)
        changes, total_changes = session.ledger.events(job_id, start, limit, key)
        record = (
            session.ledger.compacted_run(job_id, key, start)
            if start is not None and key is not None
            else None
        )
        compacted, compacted_at = session.ledger.compaction_totals(job_id)
        return History(
            job,
            start,
            limit,
            tuple(attempts),
            total_attempts,
            tuple(changes),
            total_changes,
            labeler=spec.label,
            compacted=record,
            compacted_periods=compacted,
            compacted_at=compacted_at,
            attempt=attempt,
            key=key or "",
        )

    def explain(
        self, job: str, *, start: Moment | None = None, count: int = EXPLAIN_COUNT.default or 1
    ) -> Explanation:
        """``count`` periods of ``job`` from the one containing ``start`` (default: the current
        one): bounds, lengths, due times and DST notes. With ``start``, no ledger is opened:
        the job as configured (its schedule counted from its ``start``, not the schedule history
        the ledger records) and ``now`` from this host's clock (``clock`` says which)."""
        from ..reports.explain import explain

        check(EXPLAIN_COUNT, count)
        spec = self.job(job)
        if start is not None:  # from the config alone: no database, no embedded server
            everyone = list(self.config.jobs.values())
            start_at = instant(start, spec)
            now = datetime.now(UTC)
            return explain(spec, everyone, now=now, start=start_at, count=count, clock="host")
        session = self.session
        everyone = session.resolve_all(list(self.config.jobs.values()), write=False)
        spec = session.resolve(spec, write=False)
        return explain(spec, everyone, now=session.now(), start=None, count=count)

    def ps(self, *, limit: int = PS_LIMIT.default or 1) -> Running:
        """Every period running now on every host (at most ``limit``, oldest claim first): job,
        key, period, attempt, host:pid, since when, how long its lease has left. Read-only."""
        from ..changes.cancel import running

        check(PS_LIMIT, limit)
        return running(self.session, limit)

    def why(
        self,
        job: str,
        period: Moment,
        *,
        key: str | None = None,
        keys: Iterable[str] = (),
        all_keys: bool = False,
    ) -> Why:
        """Why one period of ``job`` is in its state (not due, running, blocked by which
        upstream periods down the chain, failed and when it retries, exhausted, paused, done),
        and the command that would move it. Read-only. A job with keys and not one ``key``:
        its keys summed up (of ``keys``, else every key): how many in each state, which."""
        from ..render.pasted import keyed
        from ..reports.why import explain_period

        spec, wanted = self._keys_asked(job, key, keys, all_keys)
        if spec.keyed and (wanted is None or len(wanted) > 1):
            from ..reports.whykeys import keys_summary

            spec = self.session.resolve(spec, write=False)
            at = spec.period_starting(instant(period, spec))
            return keys_summary(self.session, spec, at, self.session.now(), wanted)
        spec = spec.for_key(wanted[0]) if wanted else spec
        start = instant(period, spec)
        session = self.session
        spec = session.resolve(spec, write=False)
        said = explain_period(session, spec, spec.period_starting(start), session.now())
        if not spec.key:
            return said
        # one key's period: named by its key, and every command that would move it too
        row = session.job_rows(write=False).get(spec.name)
        if (outside := self._unexpected(spec, row, said)) is not None:
            return outside
        paused = None if row is None else session.ledger.key_paused(row.id, spec.key)
        first = (
            ()
            if paused is None
            else (f"{spec.name} {spec.key} is paused since {paused:%Y-%m-%dT%H:%M:%SZ}",)
        )
        return replace(
            said,
            label=f"{spec.key} {said.label}",
            said=(*first, *said.said),
            commands=tuple(keyed(c, spec.key) for c in said.commands),
        )

    def _unexpected(self, spec: Job, row: JobRow | None, said: Why) -> Why | None:
        """A key's period before the key was expected or after it was gone: not expected,
        nothing to move (``why`` said missing, and its ``run`` ran it)."""
        from ..scan.keyed import known_keys

        rows = known_keys(self.session.ledger, spec, row.id if row else 0, self.session.now())
        known = next((r for r in rows if r.key == spec.key), None)
        why = None if known is None else known.unexpected(said.period.start)
        if why is None:
            return None
        return replace(
            said, label=f"{spec.key} {said.label}", state="not expected", said=(why,), commands=()
        )

    def period(
        self,
        job: str,
        period: Moment,
        *,
        key: str | None = None,
        limit: int = HISTORY_LIMIT.default or 1,
    ) -> PeriodReport:
        """One period as its page shows it: what ``why`` and ``history --period`` say, and its
        ledger row (owner, checkpoint). ``period`` may be any time inside the period (a cell of
        a job's grid names the period its day or hour starts in). Read-only."""
        check(HISTORY_LIMIT, limit)
        spec = self.one_key(job, key)
        session = self.session
        with session.reading():  # the jobs' rows read once, for all that follows
            return self._period(session, spec, job, period, key, limit)

    def _period(
        self, session: Session, spec: Job, job: str, period: Moment, key: str | None, limit: int
    ) -> PeriodReport:
        resolved = session.resolve(spec, write=False)
        at = instant(period, resolved)
        found = resolved.timeline.containing(at)
        start = resolved.period_starting(at).start if found is None else found.start
        said = self.why(job, start, key=key)
        history = self.history(job, period=start, key=key, limit=limit)
        row = session.job_rows(write=False).get(job)
        run = None if row is None else session.ledger.run_row(row.id, start, resolved.key or "")
        return PeriodReport(said, history, run, resolved.key or "", resolved.period_value(start))

    @staticmethod
    def doctor(config: str | None = None, dsn: str | None = None) -> list[Finding]:
        """Check the config, the database, a pooler, the clocks, the schedules and the
        scheduler; works when the config or the database is broken (that is a finding)."""
        from ..maintenance.doctor import examine

        return examine(config, dsn)

    def _ping_desk(self) -> PingDesk:
        """Where ``serve`` writes pings: facades that run periods (their ``ping``), each on its
        own connection, for the jobs with a ``ping`` in the config as it is now."""
        from ..serve.pinging import PingDesk
        from .running import Running as Runner  # not results.Running, which ps returns

        def jobs() -> dict[str, str]:
            return {j.ping: j.name for j in self.config.jobs.values() if j.ping is not None}

        def key() -> str | None:
            return self.config.serve.ping_key

        return PingDesk(lambda: Runner(self.config, dsn=self._dsn), jobs, key)

    def serve(  # noqa: C901, PLR0913, PLR0915
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 9187,
        refresh: float = 60.0,
        stop: threading.Event,
        on_listening: Callable[[str], None] | None = None,
        configs: Callable[[], Config] | None = None,
        notice: Callable[[], str | None] = lambda: None,
        option: str = "--listen",
        on_watcher: Callable[[Watcher], None] | None = None,
        reload: threading.Event | None = None,
        say: Callable[[str], None] = lambda line: None,
    ) -> None:
        """``catchup serve``: scan every ``refresh`` seconds, read-only, and serve the status
        page, ``/metrics``, ``/api/scan``, ``/healthz`` and ``/readyz`` until ``stop``.
        ``configs`` gives the config to serve at each scan (``catchup scheduler --serve``
        reloads it), ``notice`` why it is not the file's newest (then not ready). ``reload``
        (a SIGHUP sets it): the file is read again then and when it changes, said with
        ``say``, and scanned at once (:func:`catchup.config.reloading.reread`)."""
        import psycopg

        from ..scan.detector import scan
        from ..serve.httpd import serve
        from ..serve.watcher import Watcher

        target = self._target()
        jobs = list(self.config.jobs.values())
        watch = self.config_watch() if reload is not None else None
        if watch is not None:
            configs = lambda: watch.state.config  # noqa: E731 (read at each scan)
            notice = lambda: watch.state.notice  # noqa: E731

        def scan_now() -> ScanReport:
            nonlocal jobs
            if configs is not None and (newest := configs()) is not self.given:
                self.use_config(newest)  # the next scan's session reads with it
                jobs = list(newest.jobs.values())
            # it looks, it never migrates; and it never starts an embedded server someone
            # stopped (it started it once, above, when it had to)
            session = self._open(prepare=False, start_embedded=False, writes=False)
            self._on_connect = None  # the database line is said once, not at each reconnect
            version, latest = session.ledger.version(), len(sqlfiles.migrations())
            if version < latest:
                raise DatabaseError(
                    f"the ledger (schema {self.config.schema}) is at version {version} of "
                    f"{latest}: `catchup migrate` brings it up to date (serve only reads)"
                )
            return scan(
                session, jobs, since=None, until=None, calendars=True, pulse=True, read_only=True
            )

        def keys_now() -> list[KeysReport]:
            # keyed jobs' first page of keys as the ledger recorded them (the scan has read
            # their keys queries; a page after the first is read when asked for: keys_after)
            from ..scan.keyed import key_report

            keyed = [job for job in jobs if job.keyed]
            if not keyed:
                return []
            session = self._open(prepare=False, start_embedded=False, writes=False)  # as scan_now's
            rows, now = session.job_rows(write=False), session.now()
            ids = {job.name: rows[job.name].id if job.name in rows else 0 for job in keyed}
            return [
                key_report(session.ledger, job, ids[job.name], now, limit=KEYS_SHOWN)
                for job in keyed
            ]

        def size_now() -> LedgerSize:
            from ..maintenance.compaction import measure

            session = self._open(prepare=False, start_embedded=False, writes=False)  # as scan_now's
            return measure(session, jobs, session.now())

        def facts_now() -> PageFacts:
            from ..serve.pagefacts import read_facts

            session = self._open(prepare=False, start_embedded=False, writes=False)  # as scan_now's
            return read_facts(session, jobs)

        def after(report: ScanReport) -> list[str]:
            return self.notify(report) if self.config.alerts is not None else []

        # a period's page, and a page of keys after the first, is read when asked for, on a
        # connection of its own, one at a time
        reader = Looking(self.config, dsn=self._dsn)
        reading = threading.Lock()

        def read_now[T](read: Callable[[Looking], T]) -> T | None:
            if not reading.acquire(timeout=PERIOD_WAIT):
                return None  # busy: told 503, try again
            try:
                if reader.config is not self.config:  # reloaded: the reader follows
                    reader.use_config(self.config)
                # its jobs' rows read at most once a scan, not on every page
                reader._open(prepare=False, start_embedded=False, writes=False).keep_rows(refresh)
                try:
                    return read(reader)
                except psycopg.Error:
                    reader.close()  # the next read starts from a new connection
                    raise
            finally:
                reading.release()

        def period_now(name: str, period: str, key: str | None) -> PeriodReport | None:
            return read_now(lambda r: r.period(name, period, key=key, limit=PERIOD_ATTEMPTS))

        def keys_after(name: str, after: str) -> KeysReport | None:
            return read_now(lambda r: r.keys(name, after=after, limit=KEYS_SHOWN))

        watcher = Watcher(
            scan_now,
            self.close,
            after=after,
            keys=keys_now,
            size=size_now,
            facts=facts_now,
            period=period_now,
            key_page=keys_after,
            scrub=lambda text: db.scrub(text, target.conninfo),
            refresh=refresh,
            title=self.config.title,
            notice=notice,
        )
        if on_watcher is not None:  # to render the pages again, or scan, when things change
            on_watcher(watcher)
        if watch is not None and reload is not None:
            reread(watch, watcher, reload, stop, say)
        desk = self._ping_desk()
        try:
            serve(watcher, host, port, stop, on_listening, option, desk)
        finally:
            reader.close()
            desk.close()


def _page_asked(after: str | None, limit: int | None) -> None:
    """A page of keys asked for: ``after`` a key (or ``""``: from the first, or None), its
    ``limit`` a count within :data:`~catchup.config.bounds.KEYS_LIMIT` (or None: all)."""
    if after is not None and after != "" and (problem := key_problem(after)) is not None:
        raise ConfigError(f"after: not a key: {problem}")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise ConfigError(f"limit: expected a whole number of keys, got {type_name(limit)}")
        check(KEYS_LIMIT, limit)
