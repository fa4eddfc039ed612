-- A keyed job's keys: the user's keys query (read-only, bounded in time, as evidence is), the
-- key history the ledger keeps (job_keys, sql/migrations/0014), and the scan of (key, period).
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Statements of catchup/ledger/keys.py (names unique across files).

-- name: keys_probe
-- The keys query's columns, without running it.
SELECT * FROM ({keys}) AS k LIMIT 0;

-- name: keys_read
-- The keys query's rows: the key as text, and from when it is expected (a date is that day's
-- local midnight in the job's zone, a timestamp without a zone a UTC time). At most
-- %(limit)s rows are read, so a query that returns too many is refused, not loaded.
SELECT k.key::text, {since} FROM ({keys}) AS k {names} LIMIT %(limit)s;

-- name: keys_since_none
NULL::timestamptz

-- name: keys_since_date
(k.since::timestamp AT TIME ZONE %(zone)s)

-- name: keys_since_timestamp
(k.since AT TIME ZONE 'UTC')

-- name: keys_since_timestamptz
k.since

-- name: key_history
-- A job's keys as the ledger knows them, with when each was first and last seen; what scans
-- verified of each as two arrays, the ranges' lower and upper bounds (read in binary, twice as
-- fast as the multirange itself).
SELECT key, expected_from, first_seen, last_seen, gone_at, paused_at,
       CASE WHEN verified IS NOT NULL
            THEN ARRAY(SELECT lower(r) FROM unnest(verified) AS r) END,
       CASE WHEN verified IS NOT NULL
            THEN ARRAY(SELECT upper(r) FROM unnest(verified) AS r) END
FROM {schema}.job_keys
WHERE job_id = %(job_id)s
ORDER BY key;

-- name: lock_key_rows
-- A job's key rows (of %(keys)s, or all of them), locked in key order before they are updated:
-- record_keys and record_verified update many of them, each in its own order, and two ticks
-- doing one each would deadlock without it.
SELECT key FROM {schema}.job_keys
WHERE job_id = %(job_id)s AND (%(keys)s::text[] IS NULL OR key = ANY(%(keys)s::text[]))
ORDER BY key
FOR UPDATE;

-- name: record_keys
-- What one read of the keys saw: new keys are recorded (expected from the read's date, else the
-- job's start when the ledger had no key of the job yet, else now), keys seen again are seen
-- again (and no longer gone; a date read now moves when they are expected from), and keys the read did not return are gone from now on. Under the
-- job's row lock (lock_job_row), so two reads at once record one history.
WITH first_read AS (
    SELECT NOT EXISTS (SELECT 1 FROM {schema}.job_keys WHERE job_id = %(job_id)s) AS yes
), seen AS (
    SELECT * FROM unnest(%(keys)b::text[], %(froms)b::timestamptz[]) AS s (key, since)
), upserted AS (
    INSERT INTO {schema}.job_keys AS k (job_id, key, expected_from, first_seen, last_seen)
    SELECT %(job_id)s, s.key,
           coalesce(s.since, e.expected_from,
                    CASE WHEN f.yes THEN %(start)s::timestamptz ELSE clock_timestamp() END),
           clock_timestamp(), clock_timestamp()
    FROM seen s CROSS JOIN first_read f
    LEFT JOIN {schema}.job_keys e ON e.job_id = %(job_id)s AND e.key = s.key
    ON CONFLICT (job_id, key) DO UPDATE SET
        last_seen = excluded.last_seen,
        gone_at = NULL,
        expected_from = excluded.expected_from,
        -- expected from earlier now: what was verified says nothing of the periods before
        -- (those not expected while it was gone were never verified)
        verified = CASE WHEN excluded.expected_from < k.expected_from THEN NULL
                        ELSE k.verified END
    RETURNING k.key
), gone AS (
    UPDATE {schema}.job_keys k SET gone_at = clock_timestamp()
    WHERE k.job_id = %(job_id)s AND k.gone_at IS NULL AND NOT k.key = ANY(%(keys)b::text[])
    RETURNING k.key
)
SELECT (SELECT count(*) FROM upserted), (SELECT count(*) FROM gone);

-- name: pause_key
UPDATE {schema}.job_keys SET paused_at = coalesce(paused_at, clock_timestamp())
WHERE job_id = %(job_id)s AND key = %(key)s
RETURNING paused_at;

-- name: key_paused
SELECT paused_at FROM {schema}.job_keys
WHERE job_id = %(job_id)s AND key = %(key)s AND paused_at IS NOT NULL;

-- name: resume_key
UPDATE {schema}.job_keys SET paused_at = NULL
WHERE job_id = %(job_id)s AND key = %(key)s AND paused_at IS NOT NULL
RETURNING key;

-- name: scan_keys
-- Each key's expected periods that have not succeeded, classified as a scan classifies a
-- period, collapsed into ranges of one key and one state (gaps and islands over the periods'
-- ordinal numbers). Two parts: the rows that are not succeeded (the small partial index
-- runs_unfinished), and the periods with no row at all (the holes: scan_holes_merged or
-- scan_holes_probed), looked for only in each key's stretches of ordinals [i0, i1) that
-- earlier scans did not verify (job_keys.verified; all of them the first time). Succeeded
-- periods are not returned.
WITH k AS (
    SELECT * FROM unnest(%(keys)b::text[], %(froms)b::timestamptz[], %(gones)b::timestamptz[])
         AS k (key, expected_from, gone_at)
), p AS (
    SELECT * FROM unnest(%(starts)b::timestamptz[], %(ends)b::timestamptz[]) WITH ORDINALITY
         AS p (s, e, i)
), u AS (
    SELECT u.key, g.i
    FROM unnest(%(ukeys)b::text[], %(i0s)b::bigint[], %(i1s)b::bigint[]) AS u (key, i0, i1)
    CROSS JOIN LATERAL generate_series(u.i0, u.i1 - 1) AS g (i)
), j AS (
    SELECT k.key, p.i, p.s,
           {schema}.period_state(r.status, r.failures, r.interrupted,
                                 r.interrupted AND {schema}.ended_cancelled(r.job_id, r.key, r.period_start),
                                 r.lease_expires_at,
                                 %(now)s, %(max_attempts)s) AS state
    FROM {schema}.runs r
    JOIN k ON k.key = r.key
    JOIN p ON p.s = r.period_start
    WHERE r.job_id = %(job_id)s AND r.status <> 'succeeded'
      AND r.period_start >= %(first)s AND r.period_start < %(until)s
      AND p.e > k.expected_from AND (k.gone_at IS NULL OR p.s < k.gone_at)
    UNION ALL
    {holes}
)
SELECT key, state, min(s) AS first, max(s) AS last, count(*) AS periods
FROM (SELECT j.*, j.i - row_number() OVER (PARTITION BY j.key, j.state ORDER BY j.i) AS g
      FROM j) AS islands
GROUP BY key, state, g
ORDER BY first, key;

-- name: scan_holes_merged
-- The holes when many periods are unverified (a first scan): one pass over the job's rows in
-- key order against the stretches' periods, sorted (a merge anti-join).
SELECT u.key, u.i, u.s, 'missing'
    FROM (SELECT u.key, u.i, (%(starts)b::timestamptz[])[u.i] AS s FROM u) AS u
    WHERE NOT EXISTS (
        SELECT 1 FROM {schema}.periods r
        WHERE r.job_id = %(job_id)s AND r.key = u.key AND r.period_start = u.s)

-- name: scan_holes_probed
-- The holes when few periods are unverified (a later scan: the holes found before, and the
-- newest periods): one index probe per (key, period), forced by LATERAL ... LIMIT 1, where the
-- merge would read every row of the job (the planner cannot tell how many periods the
-- stretches hold, and guesses a thousand each). The start is read from the array by ordinal.
SELECT u.key, u.i, (%(starts)b::timestamptz[])[u.i], 'missing'
    FROM u
    LEFT JOIN LATERAL (
        SELECT true AS had FROM {schema}.periods r
        WHERE r.job_id = %(job_id)s AND r.key = u.key
          AND r.period_start = (%(starts)b::timestamptz[])[u.i]
        LIMIT 1) AS h ON true
    WHERE h.had IS NULL

-- name: record_verified
-- What scans verified of each key (its ranges of period starts that have a row each), after
-- lock_scan_state found no row removed since this scan's snapshot (the job's generation) and
-- the schedules it scanned (its signature).
UPDATE {schema}.job_keys k SET verified = v.ranges
FROM (
    SELECT key, range_agg(tstzrange(lo, hi)) AS ranges
    FROM unnest(%(keys)b::text[], %(los)b::timestamptz[], %(his)b::timestamptz[])
         AS v (key, lo, hi)
    GROUP BY key
) v
WHERE k.job_id = %(job_id)s AND k.key = v.key;

-- name: forget_verified
-- The job's schedules changed: what scans verified under the old ones says nothing now.
WITH forgotten AS (
    UPDATE {schema}.job_keys SET verified = NULL
    WHERE job_id = %(job_id)s AND verified IS NOT NULL
)
UPDATE {schema}.scan_state SET signature = %(signature)s WHERE job_id = %(job_id)s;
