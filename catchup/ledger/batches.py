"""The claim path for many periods of one job at once (a keyed job's periods, one per key):
claimed in one round trip, leases renewed in one, recorded in one, each period still its own
row, lease, attempt and fence (``sql/migrations/0015``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..config.values import storable
from .base import LedgerBase
from .claims import FinishFields
from .rows import Claim, Finished, Renewed


@dataclass(frozen=True)
class Many:
    """What :meth:`Batches.claim_many` claims: periods of one job, by key and start."""

    job_id: int
    keys: Sequence[str]
    starts: Sequence[datetime]
    ends: Sequence[datetime]
    owner: str
    lease: timedelta
    max_attempts: int
    allow_overlap: bool
    ignore_backoff: bool = False
    retry_exhausted: bool = False
    whole_job: bool = False


def _claims(rows: list[tuple[object, ...]]) -> dict[int, Claim]:
    found: dict[int, Claim] = {}
    for ord_, *fields in rows:
        assert isinstance(ord_, int)
        found[ord_ - 1] = Claim(*fields)  # type: ignore[arg-type]
    return found


class Batches(LedgerBase):
    def claim_many(self, many: Many) -> dict[int, Claim]:
        """Claim every period of ``many`` that can be claimed, by the rules of the one claim;
        the claims by index into ``many.keys``."""
        params = {
            "schema": self.schema,
            "job_id": many.job_id,
            "keys": list(many.keys),
            "starts": list(many.starts),
            "ends": list(many.ends),
            "owner": many.owner,
            "lease": many.lease,
            "max_attempts": many.max_attempts,
            "allow_overlap": many.allow_overlap,
            "whole_job": many.whole_job,
            "ignore_backoff": many.ignore_backoff,
            "retry_exhausted": many.retry_exhausted,
        }
        with self._committing(many.lease):
            return _claims(self.conn.execute(self._q("claim_many"), params).fetchall())

    def reclaim_many(
        self, job_id: int, keys: Sequence[str], starts: Sequence[datetime], owner: str
    ) -> dict[int, Claim]:
        """After a lost answer: the claims of ``many`` that this owner holds after all."""
        params = {"job_id": job_id, "keys": list(keys), "starts": list(starts), "owner": owner}
        return _claims(self.conn.execute(self._q("reclaim_many"), params).fetchall())

    def renew_many(
        self,
        job_id: int,
        held: Sequence[tuple[str, datetime, int]],
        lease: timedelta,
    ) -> dict[tuple[str, datetime], Renewed]:
        """Extend the leases of ``held`` (key, start, attempt), each fenced; the new expiry of
        each still held (and a cancel request for it), by (key, start)."""
        params = {
            "job_id": job_id,
            "keys": [k for k, _, _ in held],
            "starts": [s for _, s, _ in held],
            "attempts": [a for _, _, a in held],
            "lease": lease,
        }
        rows = self.conn.execute(self._q("heartbeat_many"), params).fetchall()
        return {(key, start): Renewed(at, actor, why) for key, start, at, actor, why in rows}

    def finish_many(
        self,
        job_id: int,
        done: Sequence[tuple[str, datetime, int, FinishFields]],
        backoff: timedelta,
        backoff_cap: timedelta,
    ) -> dict[int, Finished]:
        """Record each of ``done`` (key, start, attempt, outcome), fenced by its attempt; the
        ones recorded by index (an attempt taken over is left out)."""
        params = {
            "job_id": job_id,
            "keys": [d[0] for d in done],
            "starts": [d[1] for d in done],
            "attempts": [d[2] for d in done],
            "statuses": [d[3]["status"] for d in done],
            "history_statuses": [d[3]["history_status"] for d in done],
            "counts_as_failure": [d[3]["counts_as_failure"] for d in done],
            "backoff": backoff,
            "backoff_cap": backoff_cap,
            "exit_codes": [d[3]["exit_code"] for d in done],
            # what a job wrote is stored whatever it holds (see claims._finish_params)
            "errors": [_text(d[3]["error"]) for d in done],
            "output_tails": [_text(d[3]["output_tail"]) for d in done],
        }
        with self._committing():
            rows = self.conn.execute(self._q("finish_many"), params).fetchall()
        return {n - 1: Finished(at, failures, retry) for n, at, failures, retry in rows}


def _text(value: str | None) -> str | None:
    return None if value is None else storable(value)
