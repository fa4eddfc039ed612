-- The claim path: claim, reclaim, heartbeat, finish (fenced by the attempt), lose.
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Time comes from clock_timestamp() on the server, never from the host.
-- Statements of catchup/ledger/claims.py, one per "-- name:" header (names unique across files).

-- name: claim
-- The one claim path, one round trip: {schema}.claim_period() (sql/migrations/0014) takes the
-- job's (or the key's) lock when overlap is forbidden, then claims (job, key, period); see its
-- comments for the rules. lock_space is the schema's name: the lock is per ledger and per job.
SELECT * FROM {schema}.claim_period(
    %(schema)s, %(job_id)s::bigint, %(key)s::text, %(period_start)s, %(period_end)s,
    %(owner)s, %(lease)s::interval, %(max_attempts)s::integer, %(allow_overlap)s,
    %(whole_job)s, %(ignore_backoff)s, %(retry_exhausted)s);

-- name: upstream_not_done
-- The upstream periods a claim waits for (a job's `after`) that are not done: succeeded or
-- waived is done; anything else, or no row, is not, named by its state as a scan names it.
-- Sent in the claim's transaction: the rows read (in runs, or compacted) are locked FOR SHARE
-- until it ends, so a reset of an upstream period cannot commit between this check and the
-- claim (it waits for the claim, or the check waits for it and reads what it wrote).
SELECT n.job_id, n.period_start, r.status,
       {schema}.period_state(r.status, r.failures, r.interrupted,
                             r.interrupted AND {schema}.ended_cancelled(n.job_id, n.key, n.period_start),
                             r.lease_expires_at, clock_timestamp(), n.max_attempts)
FROM unnest(%(job_ids)s::bigint[], %(keys)s::text[], %(starts)s::timestamptz[],
            %(max_attempts)s::integer[])
     AS n (job_id, key, period_start, max_attempts)
LEFT JOIN LATERAL (
    SELECT u.status, u.failures, u.interrupted, u.lease_expires_at FROM {schema}.runs u
    WHERE u.job_id = n.job_id AND u.key = n.key AND u.period_start = n.period_start
    FOR SHARE
) r ON true
LEFT JOIN LATERAL (
    SELECT true AS done FROM {schema}.compacted c
    WHERE c.job_id = n.job_id AND c.key = n.key AND c.period_start = n.period_start
    FOR SHARE
) c ON true
WHERE c.done IS NULL AND (r.status IS NULL OR r.status NOT IN ('succeeded', 'waived'))
ORDER BY n.period_start, n.job_id;

-- name: heartbeat
-- Extends the lease only while this attempt still holds it: a lease that has run out is gone,
-- even if nobody has taken the period over yet. Beside the new expiry: who asked this attempt
-- to stop and why (catchup cancel, sql/migrations/0017), or nulls.
WITH renewed AS (
    UPDATE {schema}.runs
    SET heartbeat_at = clock_timestamp(), lease_expires_at = clock_timestamp() + %(lease)s
    WHERE job_id = %(job_id)s AND key = %(key)s AND period_start = %(period_start)s
      AND attempt = %(attempt)s AND status = 'running' AND lease_expires_at > clock_timestamp()
    RETURNING job_id, key, period_start, attempt, lease_expires_at
)
SELECT n.lease_expires_at, c.actor, c.reason
FROM renewed n
LEFT JOIN {schema}.cancels c
  ON c.job_id = n.job_id AND c.key = n.key AND c.period_start = n.period_start
 AND c.attempt = n.attempt;

-- name: finish
-- Fenced by the attempt: {schema}.finish_attempt() (sql/migrations/0014) writes nothing for a
-- runner whose period was taken over, and a finish sent twice is applied once.
SELECT * FROM {schema}.finish_attempt(
    %(job_id)s::bigint, %(key)s::text, %(period_start)s, %(attempt)s::integer, %(status)s::text,
    %(history_status)s::text, %(counts_as_failure)s, %(backoff)s::interval,
    %(backoff_cap)s::interval, %(exit_code)s::integer, %(error)s::text, %(output_tail)s::text);

-- name: finish_then_claim
-- One period's finish and the next period's claim in one transaction:
-- {schema}.finish_then_claim() (sql/migrations/0014). No row: the finish was fenced off and
-- nothing was claimed; a row whose id is null: finished, and the next period not claimable.
SELECT * FROM {schema}.finish_then_claim(
    %(job_id)s::bigint, %(key)s::text, %(period_start)s, %(attempt)s::integer, %(status)s::text,
    %(history_status)s::text, %(counts_as_failure)s, %(backoff)s::interval,
    %(backoff_cap)s::interval, %(exit_code)s::integer, %(error)s::text, %(output_tail)s::text,
    %(schema)s, %(next_job_id)s::bigint, %(next_key)s::text, %(next_start)s, %(next_end)s,
    %(owner)s, %(lease)s::interval, %(max_attempts)s::integer, %(allow_overlap)s,
    %(whole_job)s, %(ignore_backoff)s, %(retry_exhausted)s);

-- name: lose
-- A runner that lost its lease says so in the history of its own attempt, if still open.
UPDATE {schema}.history
SET status = 'lost', finished_at = clock_timestamp(), error = %(error)s
WHERE job_id = %(job_id)s AND key = %(key)s AND period_start = %(period_start)s
  AND attempt = %(attempt)s AND status = 'running';

-- name: run_row
-- One period's row, read back after a claim found nothing to do or a commit's outcome was lost
-- (and shown on its page, with its checkpoint).
SELECT r.period_start, r.period_end, r.status, r.attempt, r.failures, r.owner,
       r.lease_expires_at, r.finished_at, r.retry_after, r.exit_code, r.error,
       r.lease_expires_at > clock_timestamp() AS lease_live,
       clock_timestamp() AS now, r.interrupted, r.checkpoint,
       -- interrupted because a person asked (catchup cancel): its attempt says so
       r.interrupted AND EXISTS (
           SELECT 1 FROM {schema}.history h
           WHERE h.job_id = r.job_id AND h.key = r.key AND h.period_start = r.period_start
             AND h.attempt = r.attempt AND h.status = 'cancelled') AS cancelled
FROM {schema}.periods r
WHERE r.job_id = %(job_id)s AND r.key = %(key)s AND r.period_start = %(period_start)s;

-- name: running_other
-- The live run that blocks a job (or, per key, one key of it) whose overlap is forbidden.
SELECT period_start, owner, lease_expires_at
FROM {schema}.runs
WHERE job_id = %(job_id)s AND (%(whole_job)s OR key = %(key)s)
  AND status = 'running' AND lease_expires_at > clock_timestamp()
  AND (period_start <> %(period_start)s OR key <> %(key)s)
ORDER BY period_start
LIMIT 1;

-- name: save_checkpoint
UPDATE {schema}.runs SET checkpoint = %(checkpoint)s
WHERE id = %(run_id)s AND attempt = %(attempt)s AND status = 'running'
RETURNING id;

-- name: reclaim
-- After a lost connection: the claim this owner made, if its commit went through after all.
SELECT id, period_start, period_end, attempt, lease_expires_at, checkpoint
FROM {schema}.runs
WHERE job_id = %(job_id)s AND key = %(key)s AND period_start = %(period_start)s
  AND status = 'running' AND owner = %(owner)s AND lease_expires_at > clock_timestamp();

-- name: recreate
-- Runners whose rows are gone (their claims were among the old primary's last commits, which a
-- failover lost: sql/migrations/0021) write them again, as the running attempts they hold, and
-- their history with them: one period's runner, or a batch's (its running period and those
-- claimed with it, all of one job). Each only when absent and claimed before the new timeline
-- was seen. A job registered in those lost seconds lost its row too: written again with the
-- id the runner holds (and the id sequence moved past it, which may have lost its advance with
-- them), unless that name or that id is in use now (then only a job row of this id and name
-- takes the runs). Each row written, with its lease's new expiry.
WITH w AS (
    SELECT w.seen_at FROM {schema}.failover_window(true) w WHERE w.failover
), job AS (
    INSERT INTO {schema}.jobs (id, name) OVERRIDING SYSTEM VALUE
    SELECT %(job_id)s::bigint, %(job)s::text FROM w
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.jobs j
                      WHERE j.name = %(job)s::text OR j.id = %(job_id)s::bigint)
      AND EXISTS (SELECT 1 FROM unnest(%(claimed)b::timestamptz[]) c WHERE c < w.seen_at)
    ON CONFLICT DO NOTHING
    RETURNING id
), moved AS (
    SELECT setval(pg_get_serial_sequence(format('%%I.jobs', %(schema)s::text), 'id'),
                  greatest(s.last_value, job.id))
    FROM job, {schema}.jobs_id_seq s
), made AS (
    INSERT INTO {schema}.runs (job_id, key, period_start, period_end, status, attempt, owner,
                               claimed_at, heartbeat_at, lease_expires_at)
    SELECT %(job_id)s::bigint, n.key, n.period_start, n.period_end, 'running', n.attempt,
           n.owner, n.claimed_at, clock_timestamp(), clock_timestamp() + %(lease)s
    FROM w, unnest(%(keys)b::text[], %(starts)b::timestamptz[], %(ends)b::timestamptz[],
                   %(attempts)b::integer[], %(owners)b::text[], %(claimed)b::timestamptz[])
            AS n (key, period_start, period_end, attempt, owner, claimed_at)
    WHERE n.claimed_at < w.seen_at
      AND (EXISTS (SELECT 1 FROM job)
           OR EXISTS (SELECT 1 FROM {schema}.jobs j
                      WHERE j.id = %(job_id)s::bigint AND j.name = %(job)s::text))
      AND NOT EXISTS (SELECT 1 FROM {schema}.runs x
                      WHERE x.job_id = %(job_id)s::bigint AND x.key = n.key
                        AND x.period_start = n.period_start)
    ORDER BY n.key, n.period_start
    ON CONFLICT (job_id, key, period_start) DO NOTHING
    RETURNING job_id, key, period_start, attempt, owner, claimed_at, lease_expires_at
), opened AS (
    INSERT INTO {schema}.history (job_id, key, period_start, attempt, status, owner,
                                  started_at)
    SELECT job_id, key, period_start, attempt, 'running', owner, claimed_at FROM made
    ON CONFLICT (job_id, key, period_start, attempt) DO NOTHING
)
SELECT made.key, made.period_start, made.lease_expires_at
FROM made, (SELECT count(*) FROM moved) m;

-- name: failover_window
-- The ledger's timeline and, after a failover, when it was seen and the newest commit the new
-- primary has from the old one (sql/migrations/0021); nothing is recorded.
SELECT timeline, seen_at, replayed_until, failover FROM {schema}.failover_window(false);

-- name: suspect_rows
-- The rows of one job (of every key, or of %(keys)s) that are suspect after the failover seen
-- at %(seen)s, in [lo, hi): running and not renewed since, or failed and not written since.
SELECT r.key, r.period_start
FROM {schema}.runs r
WHERE r.job_id = %(job_id)s AND r.status IN ('running', 'failed')
  AND r.period_start >= %(lo)s AND r.period_start < %(hi)s
  AND (%(keys)s::text[] IS NULL OR r.key = ANY(%(keys)s::text[]))
  AND {schema}.is_suspect(%(seen)s, r.period_end, r.status, r.heartbeat_at, r.finished_at)
ORDER BY r.key, r.period_start;

-- name: period_suspect
-- After a failover (none: no row), whether one period is suspect (sql/migrations/0021).
SELECT w.timeline, w.seen_at, w.replayed_until,
       {schema}.is_suspect(w.seen_at, %(period_end)s, r.status, r.heartbeat_at, r.finished_at)
FROM {schema}.failover_window(false) w
LEFT JOIN {schema}.periods r
       ON r.job_id = %(job_id)s AND r.key = %(key)s AND r.period_start = %(period_start)s
WHERE w.failover;
