"""The facade's footing: the config a :class:`~catchup.api.Catchup` was given (or found), the
job selection every command uses, the session opened on first use, and the checks of values
a person types (reasons, periods) that every family of operations shares."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Self

from ..config.bounds import Bound
from ..config.job import Config, Job
from ..config.resolve import resolve_config
from ..config.values import (
    blank,
    invisible,
    key_problem,
    parse_instant,
    storable,
    type_name,
)
from ..errors import ConfigError
from ..postgres import database as db
from ..results import Connected
from ..scan.window import Moment
from ..session import Session

if TYPE_CHECKING:
    from ..config.reloading import ConfigWatch

# Imports inside functions: at first use, so a command loads only the capability it runs.

MAX_REASON = 1000


def reason_problem(reason: str) -> str | None:
    """What is wrong with a reason, if anything: it is kept in the audit trail, so it must say
    something, and not too much."""
    if blank(reason):
        return "must say why (it is kept in the history)"
    if storable(reason) != reason:
        return "it holds a NUL or a lone surrogate, which the ledger cannot store"
    if len(reason) > MAX_REASON:
        return f"at most {MAX_REASON:,} characters"
    return None


def check_reason(reason: str | None, *, required: bool) -> str | None:
    if reason is None and not required:
        return None
    if reason is not None and not isinstance(reason, str):
        raise ConfigError(f"--reason: expected text, got {type_name(reason)}")
    problem = reason_problem(reason or "")
    if problem is not None:
        raise ConfigError(f"--reason: {problem}")
    return reason


MAX_ACTOR = 200


def check_actor(actor: str | None) -> str:
    """Who made a change, as the audit trail keeps it: ``actor`` checked (text PostgreSQL can
    store, on one line), or ``$USER@host`` when none is given."""
    from ..changes.operations import default_actor

    if actor is None or actor == "":
        return default_actor()
    if not isinstance(actor, str):
        raise ConfigError(f"--actor: expected text, got {type_name(actor)}")
    if storable(actor) != actor or any(invisible(c) and c != " " for c in actor):
        raise ConfigError(f"--actor {actor[:40]!a}: it holds a control or invisible character")
    if blank(actor) or len(actor) > MAX_ACTOR:
        raise ConfigError(f"--actor: from 1 to {MAX_ACTOR} characters, something visible")
    return actor


def check(bound: Bound, value: float) -> None:
    """A number a command takes, checked against its one bound (the CLI's option reads it
    too); a :class:`ConfigError` saying the range."""
    if (said := bound.problem(value)) is not None:
        raise ConfigError(said)


class Base:
    """What every operation stands on: the config, the job selection and the one open
    session (see :class:`catchup.api.Catchup`)."""

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
        loaded, self._reloadable = resolve_config(
            config, jobs=jobs, schema=schema, require_config=require_config, project=project
        )
        self._log_output = False
        self.given = loaded  # as read, before what this process adds (log_output)
        self.config = self._as_run(loaded)
        self._schema = schema
        self._dsn = dsn
        self._on_connect = on_connect
        self._session: Session | None = None
        # the ledger may be made without reading the keys first (firstread): the scheduler's,
        # which keeps leading whatever a job's keys do
        self._keys_checked = False

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

    def _open(
        self, *, prepare: bool = True, start_embedded: bool = True, writes: bool = True
    ) -> Session:
        if self._session is None:
            if prepare and writes:  # a config whose every job fails its keys: nothing made
                self._keys_first(list(self.config.jobs.values()))
            target = self._target(start_embedded=start_embedded)
            self._session = Session(self.config, target, prepare=prepare, writes=writes)
            if self._on_connect is not None:
                self._on_connect(self.connected)
        return self._session

    def _keys_first(self, jobs: list[Job]) -> None:
        """Before a command first opens the ledger (which makes it): when it is not made yet
        and every one of ``jobs`` fails its keys, that failure, with nothing written
        (:mod:`catchup.scan.firstread`)."""
        if self._session is None and not self._keys_checked:
            from ..scan.firstread import keys_before_making

            config = self.config
            keys_before_making(
                jobs,
                config.schema,
                config.project,
                lambda: db.resolve(self._dsn, config.dsn, embedded_allowed=config.embedded),
            )
            self._keys_checked = True  # asked once: the answer holds for this facade

    @property
    def session(self) -> Session:
        """The open ledger (opened, and the schema brought up to date, on first use)."""
        return self._open()

    @property
    def connected(self) -> Connected:
        import psycopg

        from ..reports.jobs import unconfigured

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
            session.moved,
            session.target.relocated,
        )

    @property
    def database(self) -> str:
        """Which database is in use, without the password."""
        return self.session.target.describe()

    def job(self, name: str) -> Job:
        """The configured job ``name``; a :class:`ConfigError` naming the known ones if none."""
        return self.config.job(name)

    def select(self, names: Iterable[str] | None, keys: Iterable[str] | None = None) -> list[Job]:
        """The jobs named (in that order), or every job when none are: the one job selection
        every command uses. With ``keys`` (``--key``), the jobs with keys, each cut to those
        keys; a named job without keys is refused."""
        chosen = list(names or ())
        jobs = (
            list(self.config.jobs.values())
            if not chosen
            else [self.config.job(name) for name in dict.fromkeys(chosen)]
        )
        wanted = tuple(dict.fromkeys(keys or ()))
        if not wanted:
            self._keys_first(jobs)
            return jobs
        for key in wanted:
            if (said := key_problem(key)) is not None:
                raise ConfigError(f"--key {said}")
        if chosen and (plain := [j.name for j in jobs if not j.keyed]):
            raise ConfigError(f"--key: {plain[0]} has no keys")
        keyed = [replace(j, selected_keys=wanted) for j in jobs if j.keyed]
        if not keyed:
            raise ConfigError("--key: no job has keys")
        from ..scan.keyed import check_selected

        self._keys_first(keyed)
        check_selected(self.session, keyed)  # a key the job lacks: refused before any write
        return keyed

    def one_key(self, name: str, key: str | None) -> Job:
        """Job ``name``'s periods of ``key``: a job with keys needs one, a job without none."""
        (job,) = self.select([name], None if key is None else [key])
        if job.keyed and key is None:
            raise ConfigError(f"{job.name} has keys: name the key with --key")
        return job.for_key(key) if key is not None else job

    def _keys_asked(
        self, name: str, key: str | None, keys: Iterable[str], all_keys: bool
    ) -> tuple[Job, tuple[str, ...] | None]:
        """Job ``name`` and the keys of it a command names (``key`` and ``keys``, each checked
        as ``--key`` is), or None for every key: ``all_keys``, or a job with keys given none.
        A job without keys takes neither."""
        if isinstance(keys, str):
            raise ConfigError("keys: expected a list of keys, not one string")
        wanted = tuple(dict.fromkeys([*([] if key is None else [key]), *keys]))
        if all_keys and wanted:
            raise ConfigError("--all-keys or --key, not both")
        if all_keys and not (job := self.job(name)).keyed:
            raise ConfigError(f"--all-keys: {job.name} has no keys")
        (job,) = self.select([name], wanted or None)
        return job, (wanted or None) if job.keyed else ()

    def config_watch(self) -> ConfigWatch | None:
        """A watch on this config's file, for a process that reloads it; None when the
        config did not come from a file (or jobs were added in code)."""
        if not self._reloadable or self.config.path is None:
            return None
        from ..config.reloading import ConfigWatch

        return ConfigWatch(self.config, schema=self._schema)

    def use_config(self, config: Config) -> None:
        """Use ``config`` from now on (a reload, :mod:`catchup.config.reloading`): the session open
        with the old one is closed, the next operation opens one with the new."""
        self.close()
        self.given = config
        self.config = self._as_run(config)

    @property
    def log_output(self) -> bool:
        """Every job's output also written to stderr a prefixed line at a time where it is not
        streamed (tick, replay, scheduler), as a job's ``log_output = true`` does for that
        job: ``app.log_output = True`` (``--log-output``)."""
        return self._log_output

    @log_output.setter
    def log_output(self, on: bool) -> None:
        self._log_output = on
        self.use_config(self.given)

    def _as_run(self, config: Config) -> Config:
        """``config`` with what this process was asked for on top (every job's output logged)."""
        return replace(config, log_output=True) if self._log_output else config

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def instant(value: Moment, job: Job) -> datetime:
    try:
        return parse_instant(value, job.timezone)
    except ValueError as exc:
        raise ConfigError(f"{job.name}: {exc}") from None


def texts(periods: Sequence[str | date | datetime]) -> list[str]:
    if not periods:
        raise ConfigError("name at least one period")
    return [p if isinstance(p, str) else p.isoformat() for p in periods]
