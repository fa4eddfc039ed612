-- Changes people make and what they read back: history, marks, resets, pauses, renames, ticks.
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Time comes from clock_timestamp() on the server, never from the host.
-- Statements of catchup/ledger/changes.py, one per "-- name:" header (names unique across files).

-- name: history
-- total: how many attempts match in all, so a report cut at the limit can say so
-- key: one key's attempts (NULL: every key's); attempt: that attempt only (NULL: every one)
SELECT h.period_start, h.attempt, h.status, h.owner, h.started_at, h.finished_at,
       h.exit_code, h.error, h.output_tail, count(*) OVER () AS total, h.key
FROM {schema}.history h
WHERE h.job_id = %(job_id)s
  AND (%(period_start)s::timestamptz IS NULL OR h.period_start = %(period_start)s)
  AND (%(key)s::text IS NULL OR h.key = %(key)s)
  AND (%(attempt)s::integer IS NULL OR h.attempt = %(attempt)s)
ORDER BY h.period_start DESC, h.key, h.attempt DESC
LIMIT %(limit)s;

-- name: record_tick
-- Records this tick (term: the scheduler leader's, NULL for `catchup tick`) and returns the
-- previous one's time (NULL on the first tick).
WITH previous AS (
    SELECT max(at) AS at FROM {schema}.ticks
), recorded AS (
    INSERT INTO {schema}.ticks (host, term) VALUES (%(host)s, %(term)s)
)
SELECT at FROM previous;

-- name: last_tick
-- The latest tick's time (NULL before the first), read as the next tick would: `catchup plan`.
SELECT max(at) FROM {schema}.ticks;

-- name: revive_periods
-- Compacted periods about to be marked or reset move back into runs, as the succeeded
-- compacted rows they were (sql/migrations/0020), in the change's transaction.
SELECT {schema}.revive_periods(%(schema)s, %(job_id)s::bigint, %(key)s::text,
                               %(starts)s::timestamptz[]);

-- name: lock_periods
-- The rows a mark or reset is about to change, locked until it commits.
SELECT period_start, status, attempt, failures,
       status = 'running' AND lease_expires_at > clock_timestamp() AS live
FROM {schema}.runs
WHERE job_id = %(job_id)s AND key = %(key)s AND period_start = ANY(%(starts)s::timestamptz[])
ORDER BY period_start
FOR UPDATE;

-- name: mark_periods
-- Waive periods (done out of band, or skipped on purpose). A period that started running
-- meanwhile is left alone and not returned, so the caller can refuse the whole change. A row
-- made here carries the newest attempt its history has (a row a person deleted: 0 otherwise),
-- so a reset and the claim after it go on from there (sql/migrations/0030).
INSERT INTO {schema}.runs AS r (job_id, key, period_start, period_end, status, attempt,
                                finished_at, error)
SELECT %(job_id)s, %(key)s, s, e, 'waived',
       coalesce((SELECT max(h.attempt) FROM {schema}.history h
                 WHERE h.job_id = %(job_id)s AND h.key = %(key)s AND h.period_start = u.s), 0),
       clock_timestamp(), %(note)s
FROM unnest(%(starts)s::timestamptz[], %(ends)s::timestamptz[]) AS u (s, e)
ON CONFLICT (job_id, key, period_start) DO UPDATE SET
    status = 'waived', finished_at = clock_timestamp(), lease_expires_at = NULL,
    retry_after = NULL, error = excluded.error
WHERE r.status <> 'running'
RETURNING period_start;

-- name: reset_periods
-- Make finished periods runnable again: failed with no failures counted, due for a retry now.
-- The attempt number stays, so the next attempt is still a new fencing token. A compacted
-- period becomes an ordinary one again (its detail stays gone; its reset is in events).
UPDATE {schema}.runs
SET status = 'failed', failures = 0, interrupted = false, retry_after = clock_timestamp(),
    lease_expires_at = NULL, error = %(note)s, compacted_at = NULL
WHERE job_id = %(job_id)s AND key = %(key)s AND period_start = ANY(%(starts)s::timestamptz[])
  AND status IN ('succeeded', 'waived', 'failed')
RETURNING period_start;

-- name: record_events
INSERT INTO {schema}.events (job_id, key, period_start, action, previous, reason, actor)
SELECT %(job_id)s, %(key)s, s, %(action)s, p, %(reason)s, %(actor)s
FROM unnest(%(starts)s::timestamptz[], %(previous)s::text[]) AS u (s, p);

-- name: pause_job
UPDATE {schema}.jobs SET paused_at = coalesce(paused_at, clock_timestamp())
WHERE id = %(job_id)s
RETURNING paused_at;

-- name: resume_job
-- Returns a row only when the job was paused.
UPDATE {schema}.jobs SET paused_at = NULL WHERE id = %(job_id)s AND paused_at IS NOT NULL
RETURNING id;

-- name: events
-- key: one key's changes and the whole job's (NULL: every key's)
SELECT e.period_start, e.action, e.previous, e.reason, e.actor, e.at, count(*) OVER () AS total,
       e.key
FROM {schema}.events e
WHERE e.job_id = %(job_id)s
  AND (%(period_start)s::timestamptz IS NULL OR e.period_start = %(period_start)s
       OR e.period_start IS NULL)
  AND (%(key)s::text IS NULL OR e.key = %(key)s OR e.key = '')
ORDER BY e.at DESC
LIMIT %(limit)s;

-- name: recent_ticks
-- The scheduler's pulse: the latest ticks, newest first, with the leader's term of each tick
-- from `catchup scheduler` (NULL: `catchup tick`).
SELECT host, at, term FROM {schema}.ticks ORDER BY at DESC LIMIT %(limit)s;

-- name: crowded_minutes
-- Minutes of the last day in which `catchup tick` came from more than one host (the
-- scheduler's own ticks are fenced by their term: a failover is not a crowd).
SELECT date_trunc('minute', at) AS minute, array_agg(DISTINCT host ORDER BY host) AS hosts
FROM {schema}.ticks
WHERE at > clock_timestamp() - interval '1 day' AND term IS NULL
GROUP BY 1
HAVING count(DISTINCT host) > 1
ORDER BY 1 DESC
LIMIT 5;

-- name: ticks_beside_leader
-- The hosts whose `catchup tick` ran while the scheduler's lead was held (since it was taken,
-- within the last hour): a CronJob or timer left beside `catchup scheduler`.
SELECT host, count(*) AS ticks, max(at) AS at
FROM {schema}.ticks
WHERE term IS NULL AND at >= greatest(%(since)s, clock_timestamp() - interval '1 hour')
GROUP BY host
ORDER BY max(at) DESC
LIMIT 5;

-- name: rename_job
-- A job's new name, its id and every row keyed by it kept (sql/migrations/0011): NULL job_id
-- and the reason when it cannot be.
SELECT job_id, why FROM {schema}.rename_job(%(old)s, %(new)s, %(reason)s, %(actor)s);

-- name: retire_job
-- Returns the job's id when the ledger has it; retired_at is kept if it was retired already.
UPDATE {schema}.jobs SET retired_at = coalesce(retired_at, clock_timestamp())
WHERE name = %(name)s
RETURNING id;

-- name: unconfigured_jobs
-- Jobs the ledger has that a config does not name (and nobody retired): a rename the config
-- did not say, or a job removed by mistake. With each one's newest succeeded period and the
-- schedule it had last, and the project that defined it. A row that holds nothing (registered, never run nor changed, as
-- rename_job replaces: a name held while a rename was under way) has no past to lose.
SELECT j.name,
       (SELECT r.period_start FROM {schema}.periods r
        WHERE r.job_id = j.id AND r.status = 'succeeded'
        ORDER BY r.period_start DESC LIMIT 1) AS last_success,
       s.schedule, s.timezone, j.project
FROM {schema}.jobs j
LEFT JOIN LATERAL (
    SELECT schedule, timezone FROM {schema}.schedules
    WHERE job_id = j.id ORDER BY since DESC LIMIT 1
) s ON true
WHERE j.retired_at IS NULL AND NOT (j.name = ANY(%(names)s::text[]))
  AND (EXISTS (SELECT 1 FROM {schema}.periods r WHERE r.job_id = j.id)
       OR EXISTS (SELECT 1 FROM {schema}.history h WHERE h.job_id = j.id)
       OR EXISTS (SELECT 1 FROM {schema}.events e
                  WHERE e.job_id = j.id AND e.action NOT IN ('schedule', 'start')))
ORDER BY j.name;

-- name: names_without_runs
-- Which of these names the ledger has no run for (new to it, or registered and never run).
SELECT n FROM unnest(%(names)s::text[]) AS n
WHERE NOT EXISTS (
    SELECT 1 FROM {schema}.jobs j JOIN {schema}.periods r ON r.job_id = j.id WHERE j.name = n
);

-- name: first_starts
-- When each period's first attempt started (claimed), of the periods started in the last hour
-- and finished since (runs_finished) or running now (runs_running): the pulse's due-to-start
-- latency. One row per job and period (a keyed job's first key to start). The hour's start is
-- read once (a subquery: clock_timestamp() itself is volatile, and an index cannot seek by
-- it), so each index is read from there on, not the whole of it: flat in the ledger's size.
WITH since AS MATERIALIZED (SELECT clock_timestamp() - interval '1 hour' AS at)
SELECT r.job_id, r.period_start, min(r.claimed_at) AS started_at
FROM (
    SELECT f.job_id, f.period_start, f.claimed_at
    FROM {schema}.runs f
    WHERE f.job_id = ANY(%(job_ids)s) AND f.finished_at > (SELECT at FROM since)
      AND f.attempt = 1 AND f.claimed_at > (SELECT at FROM since)
    UNION ALL
    SELECT g.job_id, g.period_start, g.claimed_at
    FROM {schema}.runs g
    WHERE g.job_id = ANY(%(job_ids)s) AND g.status = 'running'
      AND g.attempt = 1 AND g.claimed_at > (SELECT at FROM since)
) r
GROUP BY r.job_id, r.period_start
LIMIT %(limit)s;

-- name: periods_with_runs
-- Of these (job, unkeyed period) pairs, those the ledger has a run of: the rest fell due and
-- wait to start (the pulse's due-to-start latency counts them as late as they are).
SELECT c.job_id, c.period_start
FROM unnest(%(job_ids)s::bigint[], %(starts)s::timestamptz[]) AS c(job_id, period_start)
WHERE EXISTS (SELECT 1 FROM {schema}.runs r
              WHERE r.job_id = c.job_id AND r.key = '' AND r.period_start = c.period_start);

-- name: decide_suspects
-- Suspect periods decided (lost, adopted, waived) by sql/migrations/0021's decide_suspects:
-- those decided, each with the attempt number it now has.
SELECT period_start, attempt
FROM {schema}.decide_suspects(%(job_id)s::bigint, %(key)s::text, %(starts)s::timestamptz[],
                              %(ends)s::timestamptz[], %(decision)s::text, %(note)s::text);
