-- (Written to be applied again over itself, as every migration is: OR REPLACE.)
-- claim_periods(), the batch's claim, as claim_period() in 0030: a period whose runs row is
-- gone while its history stays is claimed as the attempt after its history's newest (it was
-- claimed as attempt 1, failing on history_identity each time); nothing else of 0029 changes.

-- claim_periods as in 0029, a new row's attempt after its history's.
CREATE OR REPLACE FUNCTION {schema}.claim_periods(
    p_lock_space text, p_job_id bigint, p_keys text[], p_starts timestamptz[],
    p_ends timestamptz[], p_owner text, p_lease interval, p_max_attempts integer,
    p_allow_overlap boolean, p_whole_job boolean, p_ignore_backoff boolean,
    p_retry_exhausted boolean)
RETURNS TABLE (ord integer, id bigint, period_start timestamptz, period_end timestamptz,
               attempt integer, lease_expires_at timestamptz, checkpoint text)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    lock_key integer;
    seen timestamptz;
BEGIN
    IF NOT p_allow_overlap THEN
        -- as in 0015: the locks in their own order, the claim a statement of its own
        FOR lock_key IN
            SELECT DISTINCT hashtext(CASE WHEN u.k = '' OR p_whole_job THEN p_lock_space
                                          ELSE p_lock_space || '/' || u.k END)
            FROM unnest(p_keys) AS u (k)
            ORDER BY 1
        LOOP
            PERFORM pg_advisory_xact_lock(lock_key, p_job_id::integer);
        END LOOP;
    END IF;
    SELECT CASE WHEN w.failover THEN w.seen_at END INTO seen FROM {schema}.failover_window(true) w;
    RETURN QUERY
    WITH wanted AS (
        SELECT DISTINCT ON (CASE WHEN p_whole_job AND NOT p_allow_overlap THEN '' ELSE u.k END,
                            CASE WHEN p_allow_overlap THEN u.s END)
               u.n::integer AS n, u.k, u.s, u.f
        FROM unnest(p_keys, p_starts, p_ends) WITH ORDINALITY AS u (k, s, f, n)
        ORDER BY CASE WHEN p_whole_job AND NOT p_allow_overlap THEN '' ELSE u.k END,
                 CASE WHEN p_allow_overlap THEN u.s END, u.s
    ), claimed AS (
        INSERT INTO {schema}.runs AS r
            (job_id, key, period_start, period_end, status, attempt, owner,
             claimed_at, heartbeat_at, lease_expires_at)
        SELECT p_job_id, w.k, w.s, w.f, 'running',
               -- the attempt after any its history has (a row a person deleted: 1 otherwise)
               1 + coalesce((SELECT max(h.attempt) FROM {schema}.history h
                             WHERE h.job_id = p_job_id AND h.key = w.k
                               AND h.period_start = w.s), 0),
               p_owner, clock_timestamp(), clock_timestamp(), clock_timestamp() + p_lease
        FROM wanted w
        WHERE NOT EXISTS (
            SELECT 1 FROM {schema}.jobs j WHERE j.id = p_job_id AND j.paused_at IS NOT NULL)
        AND (w.k = '' OR NOT EXISTS (
            SELECT 1 FROM {schema}.job_keys k
            WHERE k.job_id = p_job_id AND k.key = w.k AND k.paused_at IS NOT NULL))
        AND (p_allow_overlap OR p_whole_job OR NOT EXISTS (
            -- another period of this key runs (the index runs_running_key)
            SELECT 1 FROM {schema}.runs o
            WHERE o.job_id = p_job_id AND o.key = w.k
              AND o.status = 'running'
              AND o.lease_expires_at > clock_timestamp()
              AND o.period_start <> w.s))
        AND (p_allow_overlap OR NOT p_whole_job OR NOT EXISTS (
            -- overlap = "forbid-job": another period of any of the job's keys runs
            SELECT 1 FROM {schema}.runs o
            WHERE o.job_id = p_job_id
              AND o.status = 'running'
              AND o.lease_expires_at > clock_timestamp()
              AND (o.period_start <> w.s OR o.key <> w.k)))
        AND NOT ({schema}.is_suspect(seen, w.f, NULL, NULL, NULL)
                 AND NOT EXISTS (SELECT 1 FROM {schema}.runs x
                                 WHERE x.job_id = p_job_id AND x.key = w.k
                                   AND x.period_start = w.s))
        ORDER BY w.k, w.s
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
        SELECT c.job_id, c.key, c.period_start, c.attempt, 'running', c.owner, c.claimed_at
        FROM claimed c
    )
    SELECT w.n, c.id, c.period_start, c.period_end, c.attempt, c.lease_expires_at,
           c.checkpoint
    FROM claimed c JOIN wanted w ON w.k = c.key AND w.s = c.period_start
    ORDER BY w.n;
    IF FOUND THEN
        -- last: the timeline's row is the last lock a claim's transaction takes (no cycle
        -- with a finish-then-claim that holds a row this claim waits for)
        PERFORM {schema}.note_claim();
    END IF;
END
$$;
