-- Batched claims: many periods of one job claimed, renewed, recorded and reclaimed in one
-- round trip each (sql/migrations/0015). {schema} is replaced by the quoted schema identifier
-- through psycopg.sql; values are always %(name)s parameters (arrays as %(name)b: sent in
-- binary, five times cheaper to encode than as text). Time comes from clock_timestamp() on
-- the server, never from the host.
-- Statements of catchup/ledger/batches.py, one per "-- name:" header (names unique across files).

-- name: claim_many
-- Many periods of one job claimed in one round trip: {schema}.claim_periods()
-- (sql/migrations/0015) claims each through claim_period(), the one claim path; a row per
-- period claimed, by its place (1-based) in the arrays.
SELECT * FROM {schema}.claim_periods(
    %(schema)s, %(job_id)s::bigint, %(keys)b::text[], %(starts)b::timestamptz[],
    %(ends)b::timestamptz[], %(owner)s, %(lease)s::interval, %(max_attempts)s::integer,
    %(allow_overlap)s, %(whole_job)s, %(ignore_backoff)s, %(retry_exhausted)s);

-- name: finish_many
-- Many attempts of one job recorded in one round trip, each fenced by its attempt:
-- {schema}.finish_periods() (sql/migrations/0015); a row per attempt recorded, by its place.
SELECT * FROM {schema}.finish_periods(
    %(job_id)s::bigint, %(keys)b::text[], %(starts)b::timestamptz[], %(attempts)b::integer[],
    %(statuses)b::text[], %(history_statuses)b::text[], %(counts_as_failure)b::boolean[],
    %(backoff)s::interval, %(backoff_cap)s::interval, %(exit_codes)b::integer[],
    %(errors)b::text[], %(output_tails)b::text[]);

-- name: heartbeat_many
-- The leases of many attempts of one job extended at once (a batch's running period and those
-- claimed with it, still to start), each as heartbeat does one: only while that attempt holds
-- a live lease. Rows locked in key and start order, as finish_periods() writes them. Beside
-- each new expiry: who asked that attempt to stop and why (catchup cancel), or nulls.
WITH mine AS (
    SELECT r.job_id, r.key, r.period_start
    FROM {schema}.runs r
    JOIN unnest(%(keys)b::text[], %(starts)b::timestamptz[], %(attempts)b::integer[])
         AS n (key, period_start, attempt)
      ON r.key = n.key AND r.period_start = n.period_start AND r.attempt = n.attempt
    WHERE r.job_id = %(job_id)s AND r.status = 'running'
      AND r.lease_expires_at > clock_timestamp()
    ORDER BY r.key, r.period_start
    FOR UPDATE OF r
), renewed AS (
    UPDATE {schema}.runs u
    SET heartbeat_at = clock_timestamp(), lease_expires_at = clock_timestamp() + %(lease)s
    FROM mine
    WHERE u.job_id = mine.job_id AND u.key = mine.key AND u.period_start = mine.period_start
    RETURNING u.job_id, u.key, u.period_start, u.attempt, u.lease_expires_at
)
SELECT n.key, n.period_start, n.lease_expires_at, c.actor, c.reason
FROM renewed n
LEFT JOIN {schema}.cancels c
  ON c.job_id = n.job_id AND c.key = n.key AND c.period_start = n.period_start
 AND c.attempt = n.attempt;

-- name: reclaim_many
-- After a lost connection: the claims of many periods of one job this owner made, if the
-- commit went through after all (reclaim, for a batch); by place in the arrays.
SELECT n.ord::integer, r.id, r.period_start, r.period_end, r.attempt, r.lease_expires_at,
       r.checkpoint
FROM unnest(%(keys)b::text[], %(starts)b::timestamptz[]) WITH ORDINALITY AS n (key, period_start, ord)
JOIN {schema}.runs r
  ON r.job_id = %(job_id)s AND r.key = n.key AND r.period_start = n.period_start
WHERE r.status = 'running' AND r.owner = %(owner)s AND r.lease_expires_at > clock_timestamp();
