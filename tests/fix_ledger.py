"""Ledgers built in SQL for tests of size: many settled periods with their attempts, written
straight into the tables (as years of ticks would have left them)."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def fill_settled(
    sql: Any, job_id: int, origin: datetime, n: int, *, step: str = "1 hour", skip_every: int = 0
) -> int:
    """``n`` periods of ``step`` from ``origin``, each succeeded at its second attempt (two
    history rows, an output tail), finished a year ago; every ``skip_every``-th left missing.
    Returns how many runs were written."""
    rows = sql(
        """
        WITH made AS (
            INSERT INTO {schema}.runs (job_id, period_start, period_end, status, attempt,
                                      failures, owner, claimed_at, finished_at, output_tail)
            SELECT %(job)s, s, s + %(step)s::interval, 'succeeded', 2, 1, 'host:1',
                   clock_timestamp() - interval '366 days',
                   clock_timestamp() - interval '365 days' + i * interval '1 ms',
                   repeat('output ', 20)
            FROM generate_series(0, %(n)s - 1) AS i,
                 LATERAL (SELECT %(origin)s::timestamptz + i * %(step)s::interval AS s) AS p
            WHERE %(skip)s = 0 OR i %% %(skip)s <> %(skip)s - 1
            RETURNING period_start, claimed_at, finished_at
        ), attempts AS (
            INSERT INTO {schema}.history (job_id, period_start, attempt, status, owner,
                                         started_at, finished_at, error, output_tail)
            SELECT %(job)s, m.period_start, a, CASE a WHEN 1 THEN 'failed' ELSE 'succeeded' END,
                   'host:1', m.claimed_at, m.finished_at,
                   CASE a WHEN 1 THEN 'exited with 1' END, repeat('output ', 20)
            FROM made m, generate_series(1, 2) AS a
        )
        SELECT count(*) FROM made
        """,
        {"job": job_id, "step": step, "n": n, "origin": origin, "skip": skip_every},
    )
    return int(rows[0][0])
