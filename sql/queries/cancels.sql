-- catchup cancel: a person asks the runner of one running attempt to stop (sql/migrations/0017).
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Time comes from clock_timestamp() on the server, never from the host.
-- Statements of catchup/ledger/cancels.py, one per "-- name:" header (names unique across files).

-- name: cancel_target
-- The period's row, locked until the request commits: its attempt, who runs it, whether its
-- lease still holds (a runner renews it only while it does), the database clock's now, and
-- the period's state as a scan names it. A compacted period (sql/migrations/0020) is read as
-- the succeeded one it is.
WITH locked AS (
    SELECT r.status, r.attempt, r.owner, r.claimed_at, r.lease_expires_at,
           r.status = 'running' AND r.lease_expires_at > clock_timestamp() AS live,
           clock_timestamp() AS now,
           {schema}.period_state(r.status, r.failures, r.interrupted,
                                 r.interrupted AND {schema}.ended_cancelled(r.job_id, r.key, r.period_start),
                                 r.lease_expires_at,
                                 clock_timestamp(), %(max_attempts)s) AS state
    FROM {schema}.runs r
    WHERE r.job_id = %(job_id)s AND r.key = %(key)s AND r.period_start = %(period_start)s
    FOR UPDATE
)
SELECT * FROM locked
UNION ALL
SELECT 'succeeded', c.attempt, NULL, c.claimed_at, NULL, false, clock_timestamp(),
       {schema}.period_state('succeeded', c.failures, false, NULL, clock_timestamp(),
                             %(max_attempts)s)
FROM {schema}.compacted c
WHERE c.job_id = %(job_id)s AND c.key = %(key)s AND c.period_start = %(period_start)s
  AND NOT EXISTS (SELECT 1 FROM locked);

-- name: request_cancel
-- The request for this one attempt, which the attempt's heartbeat reads. A second request for
-- the same attempt keeps the first: first is false, and actor and reason are the first's.
WITH added AS (
    INSERT INTO {schema}.cancels (job_id, key, period_start, attempt, reason, actor)
    VALUES (%(job_id)s, %(key)s, %(period_start)s, %(attempt)s, %(reason)s, %(actor)s)
    ON CONFLICT DO NOTHING
    RETURNING actor, reason
)
SELECT true AS first, actor, reason FROM added
UNION ALL
SELECT false, c.actor, c.reason
FROM {schema}.cancels c
WHERE c.job_id = %(job_id)s AND c.key = %(key)s AND c.period_start = %(period_start)s
  AND c.attempt = %(attempt)s AND NOT EXISTS (SELECT FROM added);

-- name: cancel_progress
-- Where the asked attempt stands now: its history row's status (cancelled once its runner
-- stopped it; succeeded or failed when it ended first), whether the period's row is still that
-- attempt, running with a live lease, and when that lease runs out.
SELECT h.status AS attempt_status, r.attempt AS current_attempt, r.status,
       r.status = 'running' AND r.lease_expires_at > clock_timestamp() AS live,
       r.lease_expires_at, clock_timestamp() AS now
FROM {schema}.runs r
LEFT JOIN {schema}.history h
  ON h.job_id = r.job_id AND h.key = r.key AND h.period_start = r.period_start
 AND h.attempt = %(attempt)s
WHERE r.job_id = %(job_id)s AND r.key = %(key)s AND r.period_start = %(period_start)s;
