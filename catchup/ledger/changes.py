"""Reading a job's history, and the changes people make (mark, reset, pause, resume) with
their audit trail; the scheduler's ticks."""

from __future__ import annotations

from datetime import datetime

from psycopg import errors as pg_errors
from psycopg.rows import class_row

from ..config.values import storable
from ..schedule import Period
from ..vocabulary import EventAction
from .base import LedgerBase
from .rows import EventRow, HistoryRow, LockedRow, Unconfigured


class Changing(LedgerBase):
    def history(
        self,
        job_id: int,
        period_start: datetime | None = None,
        limit: int = 50,
        key: str | None = None,
        attempt: int | None = None,
    ) -> tuple[list[HistoryRow], int]:
        """The newest ``limit`` attempts (of ``key``; None: of every key; ``attempt``: that
        one only), and how many there are in all."""
        params = {
            "job_id": job_id,
            "period_start": period_start,
            "limit": limit,
            "key": key,
            "attempt": attempt,
        }
        with self.conn.cursor(row_factory=class_row(HistoryRow)) as cur:
            rows = cur.execute(self._q("history"), params).fetchall()
        return rows, rows[0].total if rows else 0

    def rename_job(self, old: str, new: str, reason: str, actor: str) -> str | None:
        """Rename ``old`` to ``new``, keeping its id (and so everything recorded for it); an
        empty row for ``new`` (registered after the config was edited) is removed. None when
        done, else why not. A session registering ``new`` meanwhile (a scheduler's tick read
        the edited config) commits its row between this one's look and its rename: the
        rename is then asked once more, and finds that row, empty, to remove."""
        params = {"old": old, "new": new, "reason": reason, "actor": actor}
        try:
            with self.transaction():
                row = self.conn.execute(self._q("rename_job"), params).fetchone()
        except pg_errors.UniqueViolation:
            with self.transaction():  # the row is there now, and locked by the rename
                row = self.conn.execute(self._q("rename_job"), params).fetchone()
        assert row is not None
        job_id, why = row
        return None if job_id is not None else str(why)

    def retire_job(self, name: str, reason: str, actor: str) -> bool:
        """Record ``name`` as gone on purpose (its history stays); False when the ledger has
        no such job."""
        with self.transaction():
            row = self.conn.execute(self._q("retire_job"), {"name": name}).fetchone()
            if row is None:
                return False
            self.record_events(row[0], EventAction.retire, [None], [None], reason, actor)
        return True

    def unconfigured_jobs(self, names: list[str]) -> list[Unconfigured]:
        """The ledger's jobs that ``names`` (a config's) lacks and nobody retired, with each
        one's newest succeeded period and last schedule."""
        with self.conn.cursor(row_factory=class_row(Unconfigured)) as cur:
            return cur.execute(self._q("unconfigured_jobs"), {"names": names}).fetchall()

    def names_without_runs(self, names: list[str]) -> set[str]:
        rows = self.conn.execute(self._q("names_without_runs"), {"names": names}).fetchall()
        return {str(name) for (name,) in rows}

    def record_tick(self, host: str, term: int | None = None) -> datetime | None:
        """Record this tick (``term``: the scheduler leader's, None for ``catchup tick``);
        returns the time of the previous one, if any."""
        params = {"host": host, "term": term}
        row = self.conn.execute(self._q("record_tick"), params).fetchone()
        return row[0] if row else None

    def last_tick(self) -> datetime | None:
        """The latest tick's time, read and not recorded (what the next tick would see)."""
        row = self.conn.execute(self._q("last_tick")).fetchone()
        return row[0] if row else None

    # -- reconciliation, pausing, the scheduler's pulse ---------------------------------------

    def lock_periods(self, job_id: int, starts: list[datetime], key: str = "") -> list[LockedRow]:
        """The rows of ``starts`` (of ``key``) that exist, locked until the transaction ends;
        compacted ones first moved back into runs (sql/migrations/0020) to be changed there."""
        params = {"schema": self.schema, "job_id": job_id, "starts": starts, "key": key}
        self.conn.execute(self._q("revive_periods"), params)
        with self.conn.cursor(row_factory=class_row(LockedRow)) as cur:
            return cur.execute(
                self._q("lock_periods"), {"job_id": job_id, "starts": starts, "key": key}
            ).fetchall()

    def mark_periods(
        self, job_id: int, periods: list[Period], note: str, key: str = ""
    ) -> list[datetime]:
        rows = self.conn.execute(
            self._q("mark_periods"),
            {
                "job_id": job_id,
                "key": key,
                "starts": [p.start for p in periods],
                "ends": [p.end for p in periods],
                "note": note,
            },
        ).fetchall()
        return [row[0] for row in rows]

    def decide_suspects(
        self, job_id: int, periods: list[Period], decision: str, note: str, key: str = ""
    ) -> dict[datetime, int]:
        """Decide those of ``periods`` that are suspect after a failover (sql/migrations/0021):
        ``lost``, ``adopted`` or ``waived``; the start of each decided, with its attempt now."""
        params = {
            "job_id": job_id,
            "key": key,
            "starts": [p.start for p in periods],
            "ends": [p.end for p in periods],
            "decision": decision,
            "note": storable(note),
        }
        return {r[0]: r[1] for r in self.conn.execute(self._q("decide_suspects"), params)}

    def reset_periods(
        self, job_id: int, starts: list[datetime], note: str, key: str = ""
    ) -> list[datetime]:
        params = {"job_id": job_id, "starts": starts, "note": note, "key": key}
        rows = self.conn.execute(self._q("reset_periods"), params).fetchall()
        return [row[0] for row in rows]

    def record_events(
        self,
        job_id: int,
        action: EventAction,
        starts: list[datetime | None],
        previous: list[str | None],
        reason: str | None,
        actor: str,
        key: str = "",
    ) -> None:
        self.conn.execute(
            self._q("record_events"),
            {
                "job_id": job_id,
                "key": key,
                "action": action,
                "starts": starts,
                "previous": previous,
                "reason": reason,
                "actor": actor,
            },
        )

    def pause_job(self, job_id: int) -> datetime:
        """Pause the job (kept if already paused); since when it is paused."""
        return self._instant("pause_job", {"job_id": job_id})

    def resume_job(self, job_id: int) -> bool:
        """Resume the job; False when it was not paused."""
        return self.conn.execute(self._q("resume_job"), {"job_id": job_id}).fetchone() is not None

    def events(
        self, job_id: int, period_start: datetime | None, limit: int, key: str | None = None
    ) -> tuple[list[EventRow], int]:
        """The newest ``limit`` changes (of ``key`` and of the whole job; None: of every
        key), and how many there are in all."""
        params = {"job_id": job_id, "period_start": period_start, "limit": limit, "key": key}
        with self.conn.cursor(row_factory=class_row(EventRow)) as cur:
            rows = cur.execute(self._q("events"), params).fetchall()
        return rows, rows[0].total if rows else 0

    def recent_ticks(self, limit: int = 50) -> list[tuple[str, datetime, int | None]]:
        """The newest ticks: host, time, and the scheduler's term (None: ``catchup tick``)."""
        rows = self.conn.execute(self._q("recent_ticks"), {"limit": limit}).fetchall()
        return [(row[0], row[1], row[2]) for row in rows]

    def first_starts(self, job_ids: list[int], limit: int) -> list[tuple[int, datetime, datetime]]:
        """Job id, period start and first start of each period started in the last hour."""
        params = {"job_ids": job_ids, "limit": limit}
        rows = self.conn.execute(self._q("first_starts"), params).fetchall()
        return [(row[0], row[1], row[2]) for row in rows]

    def periods_with_runs(
        self, job_ids: list[int], starts: list[datetime]
    ) -> list[tuple[int, datetime]]:
        """Of the pairs (``job_ids[n]``, ``starts[n]``), those the ledger has a run of."""
        params = {"job_ids": job_ids, "starts": starts}
        rows = self.conn.execute(self._q("periods_with_runs"), params).fetchall()
        return [(row[0], row[1]) for row in rows]

    def ticks_beside_leader(self, since: datetime) -> list[tuple[str, int, datetime]]:
        """Hosts whose ``catchup tick`` ran since the scheduler's lead was taken (``since``,
        within the last hour): host, how many ticks, the newest."""
        rows = self.conn.execute(self._q("ticks_beside_leader"), {"since": since}).fetchall()
        return [(row[0], row[1], row[2]) for row in rows]

    def crowded_minutes(self) -> list[tuple[datetime, list[str]]]:
        return [(row[0], list(row[1])) for row in self.conn.execute(self._q("crowded_minutes"))]
