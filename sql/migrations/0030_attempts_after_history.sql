-- (Written to be applied again over itself, as every migration is: OR REPLACE.)
-- A period whose runs row is gone while its history stays (a person deleted the row to run
-- it again: the scan reports it missing, sql/migrations/0020 forgets what scans verified of
-- it) was claimed again as attempt 1. Its history already had an attempt 1, so the claim
-- failed on history_identity, every time: the period could never run again. And the attempt
-- is the fencing token: an old attempt still running when its row went would have fenced its
-- writes into the new run. A claim that makes a row now numbers it after the newest attempt
-- its history has (1 when it has none); nothing else of claim_period() (0028) changes;
-- claim_periods(), the batch's claim, changes the same way in 0031.

-- claim_period as in 0028, a new row's attempt after its history's.
CREATE OR REPLACE FUNCTION {schema}.claim_period(
    p_lock_space text, p_job_id bigint, p_key text, p_period_start timestamptz,
    p_period_end timestamptz, p_owner text, p_lease interval, p_max_attempts integer,
    p_allow_overlap boolean, p_whole_job boolean, p_ignore_backoff boolean,
    p_retry_exhausted boolean)
RETURNS TABLE (id bigint, period_start timestamptz, period_end timestamptz, attempt integer,
               lease_expires_at timestamptz, checkpoint text)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    seen timestamptz;
BEGIN
    IF NOT p_allow_overlap THEN
        -- Serialises claims of one job (or one key of it) until this transaction ends. The
        -- claim below is a statement of its own in a VOLATILE function, so its snapshot is
        -- taken after the lock and its overlap check sees every claim committed before.
        PERFORM pg_advisory_xact_lock(
            hashtext(CASE WHEN p_key = '' OR p_whole_job THEN p_lock_space
                          ELSE p_lock_space || '/' || p_key END),
            p_job_id::integer);
    END IF;
    SELECT CASE WHEN w.failover THEN w.seen_at END INTO seen FROM {schema}.failover_window(true) w;
    RETURN QUERY
    WITH claimed AS (
        INSERT INTO {schema}.runs AS r
            (job_id, key, period_start, period_end, status, attempt, owner,
             claimed_at, heartbeat_at, lease_expires_at)
        SELECT p_job_id, p_key, p_period_start, p_period_end, 'running',
               -- the attempt after any its history has (a row a person deleted: 1 otherwise)
               1 + coalesce((SELECT max(h.attempt) FROM {schema}.history h
                             WHERE h.job_id = p_job_id AND h.key = p_key
                               AND h.period_start = p_period_start), 0),
               p_owner, clock_timestamp(), clock_timestamp(), clock_timestamp() + p_lease
        WHERE NOT EXISTS (
            SELECT 1 FROM {schema}.jobs j WHERE j.id = p_job_id AND j.paused_at IS NOT NULL)
        AND (p_key = '' OR NOT EXISTS (
            SELECT 1 FROM {schema}.job_keys k
            WHERE k.job_id = p_job_id AND k.key = p_key AND k.paused_at IS NOT NULL))
        AND (p_allow_overlap OR p_whole_job OR NOT EXISTS (
            -- another period of this key runs (the index runs_running_key)
            SELECT 1 FROM {schema}.runs o
            WHERE o.job_id = p_job_id AND o.key = p_key
              AND o.status = 'running'
              AND o.lease_expires_at > clock_timestamp()
              AND o.period_start <> p_period_start))
        AND (p_allow_overlap OR NOT p_whole_job OR NOT EXISTS (
            -- overlap = "forbid-job": another period of any of the job's keys runs
            SELECT 1 FROM {schema}.runs o
            WHERE o.job_id = p_job_id
              AND o.status = 'running'
              AND o.lease_expires_at > clock_timestamp()
              AND (o.period_start <> p_period_start OR o.key <> p_key)))
        AND NOT ({schema}.is_suspect(seen, p_period_end, NULL, NULL, NULL)
                 AND NOT EXISTS (SELECT 1 FROM {schema}.runs x
                                 WHERE x.job_id = p_job_id AND x.key = p_key
                                   AND x.period_start = p_period_start))
        ON CONFLICT (job_id, key, period_start) DO UPDATE SET
            status = 'running',
            attempt = r.attempt + 1,
            failures = r.failures + (r.status = 'running')::integer,
            owner = excluded.owner,
            claimed_at = excluded.claimed_at,
            heartbeat_at = excluded.heartbeat_at,
            lease_expires_at = excluded.lease_expires_at,
            finished_at = NULL,
            retry_after = NULL,
            exit_code = NULL,
            error = NULL
        WHERE ((r.status = 'failed'
                AND (r.failures < p_max_attempts OR p_retry_exhausted)
                AND (r.retry_after <= clock_timestamp() OR p_ignore_backoff))
            OR (r.status = 'running'
                AND r.lease_expires_at <= clock_timestamp()
                AND (r.failures + 1 < p_max_attempts OR p_retry_exhausted)))
          AND NOT {schema}.is_suspect(seen, r.period_end, r.status, r.heartbeat_at,
                                      r.finished_at)
        RETURNING r.id, r.job_id, r.key, r.period_start, r.period_end, r.attempt, r.owner,
                  r.claimed_at, r.lease_expires_at, r.checkpoint
    ), lost AS (
        UPDATE {schema}.history h
        SET status = 'lost', finished_at = c.claimed_at,
            error = 'lease expired; taken over by attempt ' || c.attempt
        FROM claimed c
        WHERE h.job_id = c.job_id AND h.key = c.key AND h.period_start = c.period_start
          AND h.attempt = c.attempt - 1 AND h.status = 'running'
    ), opened AS (
        INSERT INTO {schema}.history (job_id, key, period_start, attempt, status, owner,
                                      started_at)
        SELECT job_id, key, period_start, attempt, 'running', owner, claimed_at FROM claimed
    )
    SELECT c.id, c.period_start, c.period_end, c.attempt, c.lease_expires_at, c.checkpoint
    FROM claimed c;
    IF FOUND THEN
        -- last: the timeline's row is the last lock a claim's transaction takes (no cycle
        -- with a finish-then-claim that holds a row this claim waits for)
        PERFORM {schema}.note_claim();
    END IF;
END
$$;
