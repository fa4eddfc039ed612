"""Every SQL call catchup makes: migrate, register jobs, claim, heartbeat, finish, read back."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import class_row

from . import sqlfiles
from .models import (
    Blocker,
    Claim,
    EventRow,
    Finished,
    HistoryRow,
    JobRow,
    JobSummary,
    RunRow,
)
from .schedule import Period, Plan, Recorded, iso_utc


class Ledger:
    """The ledger in ``schema``, through one autocommit connection."""

    def __init__(self, conn: psycopg.Connection[Any], schema: str) -> None:
        self.conn = conn
        self.schema = schema

    def _q(self, name: str) -> psycopg.sql.Composed:
        return sqlfiles.query(name, self.schema)

    def holds_jobs(self, names: list[str]) -> bool:
        """This schema already keeps a ledger for one of ``names``."""
        try:
            row = self.conn.execute(self._q("ledger_holds_jobs"), {"names": names}).fetchone()
        except (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName):
            return False
        return bool(row and row[0])

    def create_database(self, name: str) -> bool:
        """CREATE DATABASE ``name``; False when another process made it first."""
        try:
            self.conn.execute(sqlfiles.query_naming("create_database", self.schema, database=name))
        except pg_errors.DuplicateDatabase:
            return False
        return True

    # -- schema ------------------------------------------------------------------------------

    def version(self) -> int:
        """The applied schema version; 0 when the schema does not exist yet."""
        try:
            row = self.conn.execute(self._q("schema_version")).fetchone()
        except (pg_errors.UndefinedTable, pg_errors.InvalidSchemaName):
            return 0
        return int(row[0]) if row else 0

    def ensure_schema(self) -> list[str]:
        """Apply pending migrations, if any; returns the names applied."""
        latest = max(v for v, _, _ in sqlfiles.migrations())
        if self.version() >= latest:
            return []
        return self.migrate()

    def migrate(self) -> list[str]:
        """Apply pending migrations in one transaction, serialised across processes."""
        applied = []
        with self.conn.transaction():
            self.conn.execute(self._q("lock_migrations"), {"schema": self.schema})
            self.conn.execute(self._q("create_schema"))
            current = self.version()
            for version, name, text in sqlfiles.migrations():
                if version <= current:
                    continue
                self.conn.execute(sqlfiles.migration(text, self.schema))
                self.conn.execute(self._q("record_migration"), {"version": version, "name": name})
                applied.append(name)
        return applied

    # -- jobs --------------------------------------------------------------------------------

    def register_jobs(self, names: list[str]) -> dict[str, JobRow]:
        """Give every job a stable id (created on first sight); returns them by name."""
        self.conn.execute(self._q("register_jobs"), {"names": names})
        return self.job_rows(names)

    def schedules(self, job_ids: list[int]) -> dict[int, tuple[datetime | None, list[Recorded]]]:
        """Each job's recorded start and schedules, oldest first."""
        found: dict[int, tuple[datetime | None, list[Recorded]]] = {}
        for job_id, start, since, text, zone in self.conn.execute(
            self._q("job_schedules"), {"job_ids": job_ids}
        ):
            rows = found.setdefault(job_id, (start, []))[1]
            if since is not None:
                rows.append(Recorded(since, text, zone))
        return found

    def record_schedule(self, job_id: int, decide: Any, start: datetime, actor: str) -> Plan:
        """Bring the job's recorded schedule and start in line with its config, under a row lock
        so replicas that notice one change at once record it once. ``decide(recorded, now)``
        gives the :class:`~catchup.schedule.Plan` for the rows as they are now."""
        with self.conn.transaction():
            self.conn.execute(self._q("lock_job_row"), {"job_id": job_id})
            recorded_start, rows = self.schedules([job_id]).get(job_id, (None, []))
            now = self.now()
            chosen: Plan = decide(rows, now)
            if chosen.drop_after is not None:
                self.conn.execute(
                    self._q("drop_schedules"), {"job_id": job_id, "after": chosen.drop_after}
                )
            if chosen.add is not None:
                self.conn.execute(
                    self._q("add_schedule"),
                    {
                        "job_id": job_id,
                        "since": chosen.add.since,
                        "schedule": chosen.add.schedule,
                        "timezone": chosen.add.timezone,
                        "actor": actor,
                    },
                )
                if chosen.previous is not None:
                    old, new = chosen.previous, chosen.add
                    self._change(
                        job_id,
                        "schedule",
                        new.since,
                        f"{old.schedule} ({old.timezone})",
                        f"{new.schedule} ({new.timezone}) from {iso_utc(new.since)}",
                        actor,
                    )
            if recorded_start != start:
                if recorded_start is not None:
                    self._change(
                        job_id,
                        "start",
                        start,
                        iso_utc(recorded_start),
                        f"start {iso_utc(start)}",
                        actor,
                    )
                self.conn.execute(self._q("set_job_start"), {"job_id": job_id, "start": start})
        return chosen

    def _change(
        self, job_id: int, action: str, since: datetime, previous: str, now_is: str, actor: str
    ) -> None:
        self.conn.execute(
            self._q("record_change"),
            {
                "job_id": job_id,
                "since": since,
                "action": action,
                "previous": previous,
                "now_is": now_is,
                "actor": actor,
            },
        )

    def job_rows(self, names: list[str]) -> dict[str, JobRow]:
        """The jobs already known to the ledger, by name; writes nothing."""
        with self.conn.cursor(row_factory=class_row(JobRow)) as cur:
            return {row.name: row for row in cur.execute(self._q("job_ids"), {"names": names})}

    # -- the claim path ----------------------------------------------------------------------

    def now(self) -> datetime:
        row = self.conn.execute(self._q("server_now")).fetchone()
        assert row is not None
        return row[0]  # type: ignore[no-any-return]

    def claim(
        self,
        job_id: int,
        period: Period,
        *,
        owner: str,
        lease: timedelta,
        max_attempts: int,
        allow_overlap: bool,
        ignore_backoff: bool = False,
        retry_exhausted: bool = False,
    ) -> Claim | None:
        """The one atomic claim; None when another process has it or nothing is left to do."""
        params = {
            "schema": self.schema,
            "job_id": job_id,
            "period_start": period.start,
            "period_end": period.end,
            "owner": owner,
            "lease": lease,
            "max_attempts": max_attempts,
            "allow_overlap": allow_overlap,
            "ignore_backoff": ignore_backoff,
            "retry_exhausted": retry_exhausted,
        }
        with self.conn.transaction():
            if not allow_overlap:
                self.conn.execute(self._q("lock_job"), params)
            with self.conn.cursor(row_factory=class_row(Claim)) as cur:
                return cur.execute(self._q("claim"), params).fetchone()

    def adopt(self, job_id: int, period_start: datetime, owner: str) -> Claim | None:
        with self.conn.cursor(row_factory=class_row(Claim)) as cur:
            return cur.execute(
                self._q("adopt"),
                {"job_id": job_id, "period_start": period_start, "owner": owner},
            ).fetchone()

    def heartbeat(
        self, job_id: int, period_start: datetime, attempt: int, lease: timedelta
    ) -> datetime | None:
        """Extend the lease; None when this attempt no longer holds it."""
        row = self.conn.execute(
            self._q("heartbeat"),
            {"job_id": job_id, "period_start": period_start, "attempt": attempt, "lease": lease},
        ).fetchone()
        return row[0] if row else None

    def finish(
        self,
        job_id: int,
        period_start: datetime,
        attempt: int,
        *,
        status: str,
        history_status: str,
        counts_as_failure: bool,
        backoff: timedelta,
        backoff_cap: timedelta = timedelta(hours=6),
        exit_code: int | None,
        error: str | None,
        output_tail: str | None,
    ) -> Finished | None:
        """Record the outcome, fenced by ``attempt``; None when the period was taken over."""
        params = {
            "job_id": job_id,
            "period_start": period_start,
            "attempt": attempt,
            "status": status,
            "history_status": history_status,
            "counts_as_failure": counts_as_failure,
            "backoff": backoff,
            "backoff_cap": backoff_cap,
            "exit_code": exit_code,
            "error": error,
            "output_tail": output_tail,
        }
        with self.conn.cursor(row_factory=class_row(Finished)) as cur:
            return cur.execute(self._q("finish"), params).fetchone()

    def lose(self, job_id: int, period_start: datetime, attempt: int, error: str) -> None:
        self.conn.execute(
            self._q("lose"),
            {"job_id": job_id, "period_start": period_start, "attempt": attempt, "error": error},
        )

    def run_row(self, job_id: int, period_start: datetime) -> RunRow | None:
        with self.conn.cursor(row_factory=class_row(RunRow)) as cur:
            return cur.execute(
                self._q("run_row"), {"job_id": job_id, "period_start": period_start}
            ).fetchone()

    def blocker(self, job_id: int, period_start: datetime) -> Blocker | None:
        with self.conn.cursor(row_factory=class_row(Blocker)) as cur:
            return cur.execute(
                self._q("running_other"), {"job_id": job_id, "period_start": period_start}
            ).fetchone()

    def save_checkpoint(self, run_id: int, attempt: int, checkpoint: str) -> bool:
        row = self.conn.execute(
            self._q("save_checkpoint"),
            {"run_id": run_id, "attempt": attempt, "checkpoint": checkpoint},
        ).fetchone()
        return row is not None

    # -- reading -----------------------------------------------------------------------------

    def job_summary(self, job_id: int, since: datetime, until: datetime) -> JobSummary:
        with self.conn.cursor(row_factory=class_row(JobSummary)) as cur:
            row = cur.execute(
                self._q("job_summary"), {"job_id": job_id, "since": since, "until": until}
            ).fetchone()
        assert row is not None
        return row

    def history(
        self, job: str, period_start: datetime | None = None, limit: int = 50
    ) -> list[HistoryRow]:
        with self.conn.cursor(row_factory=class_row(HistoryRow)) as cur:
            return cur.execute(
                self._q("history"), {"job": job, "period_start": period_start, "limit": limit}
            ).fetchall()

    def record_tick(self, host: str) -> datetime | None:
        """Record this tick; returns the time of the previous one, if any."""
        row = self.conn.execute(self._q("record_tick"), {"host": host}).fetchone()
        return row[0] if row else None

    # -- reconciliation, pausing, the scheduler's pulse ---------------------------------------

    def lock_periods(self, job_id: int, starts: list[datetime]) -> list[tuple[Any, ...]]:
        return self.conn.execute(
            self._q("lock_periods"), {"job_id": job_id, "starts": starts}
        ).fetchall()

    def mark_periods(self, job_id: int, periods: list[Period], note: str) -> list[datetime]:
        rows = self.conn.execute(
            self._q("mark_periods"),
            {
                "job_id": job_id,
                "starts": [p.start for p in periods],
                "ends": [p.end for p in periods],
                "note": note,
            },
        ).fetchall()
        return [row[0] for row in rows]

    def reset_periods(self, job_id: int, starts: list[datetime], note: str) -> list[datetime]:
        rows = self.conn.execute(
            self._q("reset_periods"), {"job_id": job_id, "starts": starts, "note": note}
        ).fetchall()
        return [row[0] for row in rows]

    def record_events(
        self,
        job_id: int,
        action: str,
        starts: list[datetime | None],
        previous: list[str | None],
        reason: str | None,
        actor: str,
    ) -> None:
        self.conn.execute(
            self._q("record_events"),
            {
                "job_id": job_id,
                "action": action,
                "starts": starts,
                "previous": previous,
                "reason": reason,
                "actor": actor,
            },
        )

    def pause_job(self, job_id: int) -> datetime:
        row = self.conn.execute(self._q("pause_job"), {"job_id": job_id}).fetchone()
        assert row is not None
        return row[0]  # type: ignore[no-any-return]

    def resume_job(self, job_id: int) -> bool:
        """Resume the job; False when it was not paused."""
        return self.conn.execute(self._q("resume_job"), {"job_id": job_id}).fetchone() is not None

    def events(self, job_id: int, period_start: datetime | None, limit: int) -> list[EventRow]:
        with self.conn.cursor(row_factory=class_row(EventRow)) as cur:
            return cur.execute(
                self._q("events"),
                {
                    "job_id": job_id,
                    "period_start": period_start,
                    "limit": limit,
                },
            ).fetchall()

    def recent_ticks(self, limit: int = 50) -> list[tuple[str, datetime]]:
        rows = self.conn.execute(self._q("recent_ticks"), {"limit": limit}).fetchall()
        return [(row[0], row[1]) for row in rows]

    def crowded_minutes(self) -> list[tuple[datetime, list[str]]]:
        return [(row[0], list(row[1])) for row in self.conn.execute(self._q("crowded_minutes"))]
