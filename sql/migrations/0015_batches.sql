-- Batched claims: many periods of one job (a keyed job's day, one period per key) claimed in
-- one statement and finished in another, to save round trips and commits. These are the claim
-- and the finish of 0014 (claim_period(), finish_attempt()) for a set of periods, rule for
-- rule: each period is still its own row, lease, attempt and fence, claimed or refused as its
-- own claim would be (tests/integration/test_batches.py holds the two to the same answers).
-- The single ones stay as they are: made a batch of one, a single claim took 40% longer.

-- Claims every (key, start, end) of one job it can; returns those claimed, each with its place
-- (1-based) in the arrays.
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
BEGIN
    IF NOT p_allow_overlap THEN
        -- Serialises claims of one job (or of one key of it) until this transaction ends. The
        -- locks are taken in their own order, so two batches of overlapping keys never wait
        -- for each other in a cycle. The claim below is a statement of its own in a VOLATILE
        -- function, so its snapshot is taken after the locks and its overlap check sees every
        -- claim committed before.
        FOR lock_key IN
            SELECT DISTINCT hashtext(CASE WHEN u.k = '' OR p_whole_job THEN p_lock_space
                                          ELSE p_lock_space || '/' || u.k END)
            FROM unnest(p_keys) AS u (k)
            ORDER BY 1
        LOOP
            PERFORM pg_advisory_xact_lock(lock_key, p_job_id::integer);
        END LOOP;
    END IF;
    RETURN QUERY
    WITH wanted AS (
        -- each period once; with overlap forbidden, at most one period of each key (of the
        -- job, for forbid-job), the oldest: two claimed in one statement would run at once,
        -- as neither's overlap check sees the other
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
        SELECT p_job_id, w.k, w.s, w.f, 'running', 1, p_owner,
               clock_timestamp(), clock_timestamp(), clock_timestamp() + p_lease
        FROM wanted w
        WHERE NOT EXISTS (
            SELECT 1 FROM {schema}.jobs j WHERE j.id = p_job_id AND j.paused_at IS NOT NULL)
        AND (w.k = '' OR NOT EXISTS (
            SELECT 1 FROM {schema}.job_keys k
            WHERE k.job_id = p_job_id AND k.key = w.k AND k.paused_at IS NOT NULL))
        AND (p_allow_overlap OR NOT EXISTS (
            SELECT 1 FROM {schema}.runs o
            WHERE o.job_id = p_job_id
              AND (p_whole_job OR o.key = w.k)
              AND o.status = 'running'
              AND o.lease_expires_at > clock_timestamp()
              AND (o.period_start <> w.s OR o.key <> w.k)))
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
        WHERE (r.status = 'failed'
               AND (r.failures < p_max_attempts OR p_retry_exhausted)
               AND (r.retry_after <= clock_timestamp() OR p_ignore_backoff))
           OR (r.status = 'running'
               AND r.lease_expires_at <= clock_timestamp()
               AND (r.failures + 1 < p_max_attempts OR p_retry_exhausted))
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
END
$$;

-- Records the outcome of every (key, start, attempt) of one job, each fenced by its attempt:
-- returns those recorded, by their place in the arrays (an attempt taken over, or finished
-- already, is left out: a finish sent twice is applied once).
CREATE OR REPLACE FUNCTION {schema}.finish_periods(
    p_job_id bigint, p_keys text[], p_starts timestamptz[], p_attempts integer[],
    p_statuses text[], p_history_statuses text[], p_counts_as_failure boolean[],
    p_backoff interval, p_backoff_cap interval, p_exit_codes integer[], p_errors text[],
    p_output_tails text[])
RETURNS TABLE (ord integer, finished_at timestamptz, failures integer,
               retry_after timestamptz)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH given AS (
        SELECT DISTINCT ON (u.k, u.s) u.n::integer AS n, u.k, u.s, u.a, u.st, u.hs, u.cf,
               u.x, u.er, u.t
        FROM unnest(p_keys, p_starts, p_attempts, p_statuses, p_history_statuses,
                    p_counts_as_failure, p_exit_codes, p_errors, p_output_tails)
             WITH ORDINALITY AS u (k, s, a, st, hs, cf, x, er, t, n)
        ORDER BY u.k, u.s, u.n
    ), finished AS (
        UPDATE {schema}.runs r
        SET status = g.st,
            finished_at = clock_timestamp(),
            lease_expires_at = NULL,
            failures = r.failures + g.cf::integer,
            interrupted = g.st = 'failed' AND NOT g.cf,
            retry_after = CASE
                WHEN g.st <> 'failed' THEN NULL
                WHEN NOT g.cf THEN clock_timestamp()
                ELSE clock_timestamp()
                     + least(p_backoff * power(2, least(r.failures, 30))::float8,
                             greatest(p_backoff_cap, p_backoff))
            END,
            exit_code = g.x,
            error = g.er,
            output_tail = g.t
        FROM given g
        WHERE r.job_id = p_job_id AND r.key = g.k AND r.period_start = g.s
          AND r.attempt = g.a AND r.status = 'running'
        RETURNING g.n, r.job_id, r.key, r.period_start, r.attempt, r.finished_at, r.failures,
                  r.retry_after, g.hs, g.x, g.er, g.t
    ), closed AS (
        UPDATE {schema}.history h
        SET status = f.hs, finished_at = f.finished_at, exit_code = f.x, error = f.er,
            output_tail = f.t
        FROM finished f
        WHERE h.job_id = f.job_id AND h.key = f.key AND h.period_start = f.period_start
          AND h.attempt = f.attempt
    )
    SELECT f.n, f.finished_at, f.failures, f.retry_after FROM finished f ORDER BY f.n;
END
$$;
