"""The Python face of catchup: the same ledger, claim path and results as the command line."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from . import db
from .config import Config, Job, find_config, load_config
from .core import Session, choose_period, run_period
from .errors import ConfigError
from .models import Outcome, ScanReport
from .replay import Batch, replay, tick
from .scan import scan


class Catchup:
    """A ledger and its jobs.

    Load ``catchup.toml`` (``Catchup("catchup.toml")``, or ``Catchup()`` to find it like the
    CLI does) or declare jobs in code (``Catchup(jobs=[make_job(...)], dsn=...)``). The database
    is chosen as by the CLI: ``dsn``, then ``CATCHUP_DSN``, ``[database] dsn``, ``DATABASE_URL``,
    ``PG*``, else the embedded PostgreSQL. Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        config: Config | str | Path | None = None,
        *,
        jobs: Iterable[Job] = (),
        dsn: str | None = None,
        schema: str | None = None,
    ) -> None:
        declared = {job.name: job for job in jobs}
        if isinstance(config, Config):
            loaded = config
        elif config is not None:
            loaded = load_config(Path(config), schema=schema)
        elif declared:
            loaded = load_config(None, schema=schema)
        else:
            loaded = load_config(find_config(None), schema=schema)
        if declared:
            loaded = Config(
                path=loaded.path,
                jobs={**loaded.jobs, **declared},
                dsn=loaded.dsn,
                schema=schema or loaded.schema,
                embedded=loaded.embedded,
            )
        self.config = loaded
        self.session = Session(
            loaded,
            db.resolve(dsn, loaded.dsn, embedded_allowed=loaded.embedded, project=loaded.project),
        )

    @property
    def database(self) -> str:
        """Which database is in use, without the password."""
        return self.session.target.describe()

    def _jobs(self, names: Iterable[str] | None) -> list[Job]:
        if names is None:
            return list(self.config.jobs.values())
        return [self.config.job(name) for name in names]

    def run(self, job: str, period: datetime | None = None) -> Outcome:
        """Run one period (default: the latest due) through the claim path."""
        spec = self.session.resolve(self.config.job(job))
        chosen = choose_period(spec, self.session.now(), period)
        if chosen is None:
            raise ConfigError(f"{job}: nothing due yet")
        return run_period(self.session, spec, chosen, stream=False)

    def scan(
        self,
        *,
        jobs: Iterable[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        full: bool = False,
    ) -> ScanReport:
        """The gap detector: what ``catchup scan`` reports."""
        return scan(self.session, self._jobs(jobs), since=since, until=until, full=full)

    def replay(
        self,
        *,
        since: datetime,
        until: datetime | None = None,
        jobs: Iterable[str] | None = None,
        workers: int = 1,
        limit: int | None = None,
        dry_run: bool = False,
        stop_on_failure: bool = False,
        retry_exhausted: bool = False,
        interrupted: threading.Event | None = None,
    ) -> Batch:
        """Run the gaps, oldest first: what ``catchup replay`` does."""
        return replay(
            self.session,
            self._jobs(jobs),
            since=since,
            until=until,
            limit=limit,
            workers=workers,
            dry_run=dry_run,
            stop_on_failure=stop_on_failure,
            retry_exhausted=retry_exhausted,
            interrupted=interrupted,
        )

    def tick(self, *, jobs: Iterable[str] | None = None) -> Batch:
        """Run what each job's catch-up policy allows: what ``catchup tick`` does."""
        return tick(self.session, self._jobs(jobs))

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> Catchup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
