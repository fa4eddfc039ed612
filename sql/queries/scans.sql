-- The gap detector: the snapshot, coverage, the shortcut and the full statements.
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Time comes from clock_timestamp() on the server, never from the host.
-- Statements of catchup/ledger/scans.py, one per "-- name:" header (names unique across files).
-- These read jobs without keys: every row they read has key '' (which keeps the primary key,
-- (job_id, key, period_start), in period order for them).

-- name: scan_snapshot
-- A scan reads coverage and the rows it vouches for from one snapshot, and writes nothing.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;

-- name: scan_settings
-- Periods are UTC intervals: calendar arithmetic in this transaction is done in UTC whatever the
-- server's default, and the gaps-and-islands sorts stay in memory.
SET LOCAL TimeZone = 'UTC';
SET LOCAL work_mem = '64MB';

-- name: scan_state
SELECT job_id, signature, generation FROM {schema}.scan_state
WHERE job_id = ANY(%(job_ids)s::bigint[]);

-- name: coverage
SELECT c.job_id, c.first, c.last
FROM unnest(%(job_ids)s::bigint[], %(firsts)s::timestamptz[], %(untils)s::timestamptz[])
     AS w (job_id, first, until)
JOIN {schema}.coverage c ON c.job_id = w.job_id AND c.last >= w.first AND c.first < w.until
ORDER BY c.job_id, c.first;

-- name: open_scan_state
INSERT INTO {schema}.scan_state (job_id, signature) VALUES (%(job_id)s, %(signature)s)
ON CONFLICT (job_id) DO NOTHING
RETURNING generation;

-- name: lock_scan_state
SELECT signature, generation FROM {schema}.scan_state WHERE job_id = %(job_id)s FOR UPDATE;

-- name: reset_coverage
-- The schedule or start changed: what was verified under the old one says nothing now.
WITH gone AS (DELETE FROM {schema}.coverage WHERE job_id = %(job_id)s)
UPDATE {schema}.scan_state SET signature = %(signature)s WHERE job_id = %(job_id)s;

-- name: replace_coverage
-- The window [first, until) was verified: its coverage is replaced by what the scan found.
WITH gone AS (
    DELETE FROM {schema}.coverage
    WHERE job_id = %(job_id)s AND first >= %(first)s AND last < %(until)s
)
INSERT INTO {schema}.coverage (job_id, first, last)
SELECT %(job_id)s, f, l FROM unnest(%(firsts)b::timestamptz[], %(lasts)b::timestamptz[]) AS u (f, l)
ON CONFLICT (job_id, first) DO UPDATE SET last = greatest({schema}.coverage.last, excluded.last);

-- name: scan_unfinished
-- For each job's window, every period that has a row but is not succeeded, collapsed into runs
-- of consecutive periods in the same state (gaps and islands). Reads only the partial index.
WITH w AS (
    SELECT *
    FROM unnest(%(job_ids)s::bigint[], %(firsts)s::timestamptz[], %(untils)s::timestamptz[],
                %(steps)s::interval[], %(max_attempts)s::integer[])
         AS w (job_id, first, until, step, max_attempts)
), classified AS (
    SELECT w.job_id, w.step, r.period_start,
           {schema}.period_state(r.status, r.failures, r.interrupted,
                                 r.interrupted AND {schema}.ended_cancelled(r.job_id, r.key, r.period_start),
                                  r.lease_expires_at, %(now)s, w.max_attempts) AS state
    FROM w
    JOIN {schema}.runs r
      ON r.job_id = w.job_id AND r.key = '' AND r.status <> 'succeeded'
     AND r.period_start >= w.first AND r.period_start < w.until
), grouped AS (
    -- consecutive periods of one state share period_start - n * step
    SELECT job_id, period_start, state,
           period_start - row_number() OVER (PARTITION BY job_id, state ORDER BY period_start)
                          * step AS island
    FROM classified
)
SELECT job_id, state, min(period_start) AS first, max(period_start) AS last,
       count(*) AS periods
FROM grouped
GROUP BY job_id, state, island
ORDER BY job_id, first;

-- name: scan_missing
-- (The big arrays travel in binary (the b placeholders): cheaper to send than their text.)
-- The holes between the rows that exist, inside each range [lo, hi) of a job that no scan has
-- verified yet: runs of missing periods. Reads the primary key only (index-only once vacuumed).
-- last is the range's last period start (hi may be cut short by a schedule change).
SELECT u.job_id, h.first, h.last
FROM unnest(%(job_ids)b::bigint[], %(los)b::timestamptz[], %(his)b::timestamptz[],
            %(steps)s::interval[], %(lasts)b::timestamptz[]) AS u (job_id, lo, hi, step, last)
CROSS JOIN LATERAL (
    -- before each row whose predecessor (or the range's start) is not the period before it
    SELECT coalesce(p.previous + u.step, u.lo) AS first, p.period_start - u.step AS last
    FROM (
        SELECT r.period_start, lag(r.period_start) OVER (ORDER BY r.period_start) AS previous
        FROM {schema}.periods r
        WHERE r.job_id = u.job_id AND r.key = '' AND r.period_start >= u.lo
          AND r.period_start < u.hi
    ) p
    WHERE p.period_start > coalesce(p.previous + u.step, u.lo)
    UNION ALL
    -- after the range's last row, or the whole range when it has none
    SELECT coalesce(m.last_row + u.step, u.lo), u.last
    FROM (
        SELECT max(r.period_start) AS last_row
        FROM {schema}.periods r
        WHERE r.job_id = u.job_id AND r.key = '' AND r.period_start >= u.lo
          AND r.period_start < u.hi
    ) m
    WHERE coalesce(m.last_row + u.step, u.lo) <= u.last
) h
ORDER BY u.job_id, h.first;

-- name: scan_full
-- The plain detector: every expected period from generate_series, left-joined to the ledger,
-- classified, and collapsed into runs of one state. Reads the whole window.
WITH classified AS (
    SELECT e.period_start,
           {schema}.period_state(r.status, r.failures, r.interrupted,
                                 r.interrupted AND {schema}.ended_cancelled(r.job_id, r.key, r.period_start),
                                  r.lease_expires_at, %(now)s, %(max_attempts)s) AS state
    FROM generate_series(%(first)s::timestamptz, %(last)s::timestamptz,
                         %(step)s::interval) AS e (period_start)
    LEFT JOIN {schema}.periods r
           ON r.job_id = %(job_id)s AND r.key = '' AND r.period_start = e.period_start
), grouped AS (
    SELECT period_start, state,
           period_start - row_number() OVER (PARTITION BY state ORDER BY period_start)
                          * %(step)s::interval AS island
    FROM classified
)
SELECT %(job_id)s::bigint AS job_id, state, min(period_start) AS first,
       max(period_start) AS last, count(*) AS periods
FROM grouped
GROUP BY state, island
ORDER BY first;

-- name: last_success
-- The newest succeeded period of each job without keys (key '': the primary key's order).
SELECT w.job_id,
       (SELECT r.period_start FROM {schema}.periods r
        WHERE r.job_id = w.job_id AND r.key = '' AND r.status = 'succeeded'
        ORDER BY r.period_start DESC
        LIMIT 1) AS last_success
FROM unnest(%(job_ids)s::bigint[]) AS w (job_id);

-- name: last_success_keys
-- The newest succeeded period of a job with keys (of %(keys)s, or every key the job has when
-- null): each key's newest, by the primary key.
SELECT max(l.period_start)
FROM unnest(coalesce(%(keys)s::text[],
                     ARRAY(SELECT j.key FROM {schema}.job_keys j WHERE j.job_id = %(job_id)s)))
     AS k (key)
CROSS JOIN LATERAL (
    SELECT r.period_start FROM {schema}.periods r
    WHERE r.job_id = %(job_id)s AND r.key = k.key AND r.status = 'succeeded'
    ORDER BY r.period_start DESC
    LIMIT 1
) l;

-- name: local_series
-- The SQL generator of a wall-clock schedule's boundaries (tests compare it with Python's).
SELECT period_start FROM {schema}.local_series(%(origin)s::timestamp, %(step)s::interval,
                                               %(k0)s, %(n)s, %(tz)s)
ORDER BY k;

-- name: scan_unfinished_rows
-- For windows of wall-clock schedules: every period with a row that is not succeeded, one by
-- one (grouped into runs in Python, which knows the schedule). Reads only the partial index.
SELECT w.job_id,
       {schema}.period_state(r.status, r.failures, r.interrupted,
                             r.interrupted AND {schema}.ended_cancelled(r.job_id, r.key, r.period_start),
                                  r.lease_expires_at, %(now)s, w.max_attempts) AS state,
       r.period_start
FROM unnest(%(job_ids)s::bigint[], %(firsts)s::timestamptz[], %(untils)s::timestamptz[],
            %(max_attempts)s::integer[]) AS w (job_id, first, until, max_attempts)
JOIN {schema}.runs r
  ON r.job_id = w.job_id AND r.key = '' AND r.status <> 'succeeded'
 AND r.period_start >= w.first AND r.period_start < w.until
ORDER BY w.job_id, r.period_start;

-- name: scan_listed_missing
-- For wall-clock schedules: which of the listed period starts (numbered consecutively within
-- each piece) have no row, as runs of consecutive periods. Reads the primary key only.
WITH listed AS (
    SELECT * FROM unnest(%(job_ids)b::bigint[], %(pieces)b::integer[], %(starts)b::timestamptz[])
        WITH ORDINALITY AS e (job_id, piece, period_start, i)
), missing AS (
    SELECT l.*, l.i - row_number() OVER (PARTITION BY l.job_id, l.piece ORDER BY l.i) AS island
    FROM listed l
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.periods r
                      WHERE r.job_id = l.job_id AND r.key = ''
                        AND r.period_start = l.period_start)
)
SELECT job_id, min(period_start) AS first, max(period_start) AS last, count(*) AS periods
FROM missing
GROUP BY job_id, piece, island
ORDER BY job_id, first;

-- name: scan_full_calendar
-- The plain detector for a wall-clock calendar schedule: its periods generated in SQL by
-- local_series, left-joined to the ledger, classified, collapsed into runs of one state.
WITH classified AS (
    SELECT e.k, e.period_start,
           {schema}.period_state(r.status, r.failures, r.interrupted,
                                 r.interrupted AND {schema}.ended_cancelled(r.job_id, r.key, r.period_start),
                                  r.lease_expires_at, %(now)s, %(max_attempts)s) AS state
    FROM {schema}.local_series(%(origin)s::timestamp, %(step)s::interval, %(k0)s, %(n)s,
                               %(tz)s) AS e
    LEFT JOIN {schema}.periods r
           ON r.job_id = %(job_id)s AND r.key = '' AND r.period_start = e.period_start
)
SELECT %(job_id)s::bigint AS job_id, state, min(period_start) AS first,
       max(period_start) AS last, count(*) AS periods
FROM (SELECT *, k - row_number() OVER (PARTITION BY state ORDER BY k) AS island
      FROM classified) g
GROUP BY state, island
ORDER BY first;

-- name: scan_full_listed
-- The plain detector for cron and RRULE schedules: the period starts listed by Python.
WITH classified AS (
    SELECT e.i, e.period_start,
           {schema}.period_state(r.status, r.failures, r.interrupted,
                                 r.interrupted AND {schema}.ended_cancelled(r.job_id, r.key, r.period_start),
                                  r.lease_expires_at, %(now)s, %(max_attempts)s) AS state
    FROM unnest(%(starts)b::timestamptz[]) WITH ORDINALITY AS e (period_start, i)
    LEFT JOIN {schema}.periods r
           ON r.job_id = %(job_id)s AND r.key = '' AND r.period_start = e.period_start
)
SELECT %(job_id)s::bigint AS job_id, state, min(period_start) AS first,
       max(period_start) AS last, count(*) AS periods
FROM (SELECT *, i - row_number() OVER (PARTITION BY state ORDER BY i) AS island
      FROM classified) g
GROUP BY state, island
ORDER BY first;

-- name: upstream_states
-- The states of upstream jobs' rows, one span [lo, hi) of one job each (numbered from 1), for
-- the periods of downstream jobs that wait for them (after): what is not succeeded or waived,
-- or has no row, is not done. One statement for every span a scan needs.
SELECT x.n, r.period_start,
       {schema}.period_state(r.status, r.failures, r.interrupted,
                             r.interrupted AND {schema}.ended_cancelled(r.job_id, r.key, r.period_start),
                             r.lease_expires_at,
                             %(now)s::timestamptz, x.max_attempts)
FROM unnest(%(job_ids)s::bigint[], %(los)s::timestamptz[], %(his)s::timestamptz[],
            %(max_attempts)s::integer[]) WITH ORDINALITY AS x (job_id, lo, hi, max_attempts, n)
JOIN {schema}.periods r
  ON r.job_id = x.job_id AND r.key = '' AND r.period_start >= x.lo AND r.period_start < x.hi
ORDER BY x.n, r.period_start;

-- name: succeeded_runs
-- One job's succeeded rows at these period starts: when each finished and at which attempt (a
-- downstream period that finished before an upstream one ran again is outdated).
SELECT period_start, finished_at, attempt
FROM {schema}.periods
WHERE job_id = %(job_id)s AND key = '' AND status = 'succeeded'
  AND period_start = ANY(%(starts)s::timestamptz[])
ORDER BY period_start;

-- name: succeeded_key_runs
-- A keyed job's succeeded rows at these period starts, of every key (or of %(keys)s when
-- given): when each finished (a downstream period that finished before an upstream one ran
-- again is outdated).
SELECT key, period_start, finished_at
FROM {schema}.periods
WHERE job_id = %(job_id)s AND status = 'succeeded'
  AND period_start = ANY(%(starts)s::timestamptz[])
  AND (%(keys)s::text[] IS NULL OR key = ANY(%(keys)s::text[]))
ORDER BY key, period_start;

-- name: rerun_runs
-- Upstream jobs' rows, one span [lo, hi) of one job each (numbered from 1), that succeeded at a
-- later attempt (run again after a reset or a failure): the only upstream periods that can make
-- a downstream one outdated. Rare, and found through their own small index (runs_reruns).
SELECT x.n, r.period_start, r.period_end, r.finished_at, r.key
FROM unnest(%(job_ids)s::bigint[], %(los)s::timestamptz[], %(his)s::timestamptz[])
     WITH ORDINALITY AS x (job_id, lo, hi, n)
JOIN {schema}.periods r
  ON r.job_id = x.job_id AND r.period_start >= x.lo AND r.period_start < x.hi
WHERE r.status = 'succeeded' AND r.attempt > 1
ORDER BY x.n, r.period_start, r.key;
