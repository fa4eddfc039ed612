-- The claim and the finish as functions on the server, called by sql/queries.sql's `claim` and
-- `finish`: one round trip each (the claim was BEGIN, lock, claim, COMMIT), and PL/pgSQL keeps
-- their plans for the life of the connection. catchup sends no protocol-level prepared
-- statements (a transaction-mode pooler would lose them), so before this every claim and every
-- finish was parsed and planned anew, about 40% of their cost. The statements inside are those
-- queries.sql held before this migration, unchanged but for the parameter names.

-- The one claim path. A new period starts at attempt 1; a failed period with attempts left and
-- its backoff elapsed, or a running one whose lease expired, is taken over as attempt + 1;
-- succeeded and waived periods are never claimed. With overlap forbidden, nothing is claimed
-- while another period of the job holds a live lease, and nothing at all while the job is
-- paused. Returns no row when nothing was claimed.
-- A replay asked for by a person may skip the backoff, and with --retry-exhausted the limit.
CREATE OR REPLACE FUNCTION {schema}.claim_period(
    p_lock_space text, p_job_id bigint, p_period_start timestamptz, p_period_end timestamptz,
    p_owner text, p_lease interval, p_max_attempts integer, p_allow_overlap boolean,
    p_ignore_backoff boolean, p_retry_exhausted boolean)
RETURNS TABLE (id bigint, period_start timestamptz, period_end timestamptz, attempt integer,
               lease_expires_at timestamptz, checkpoint text)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
    IF NOT p_allow_overlap THEN
        -- Serialises claims of one job until this transaction ends. The claim below is a
        -- statement of its own in a VOLATILE function, so its snapshot is taken after the lock
        -- and its overlap check sees every claim committed before.
        PERFORM pg_advisory_xact_lock(hashtext(p_lock_space), p_job_id::integer);
    END IF;
    RETURN QUERY
    WITH claimed AS (
        INSERT INTO {schema}.runs AS r
            (job_id, period_start, period_end, status, attempt, owner,
             claimed_at, heartbeat_at, lease_expires_at)
        SELECT p_job_id, p_period_start, p_period_end, 'running', 1, p_owner,
               clock_timestamp(), clock_timestamp(), clock_timestamp() + p_lease
        WHERE NOT EXISTS (
            SELECT 1 FROM {schema}.jobs j WHERE j.id = p_job_id AND j.paused_at IS NOT NULL)
        AND (p_allow_overlap OR NOT EXISTS (
            SELECT 1 FROM {schema}.runs o
            WHERE o.job_id = p_job_id
              AND o.status = 'running'
              AND o.lease_expires_at > clock_timestamp()
              AND o.period_start <> p_period_start))
        ON CONFLICT (job_id, period_start) DO UPDATE SET
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
        RETURNING r.id, r.job_id, r.period_start, r.period_end, r.attempt, r.owner,
                  r.claimed_at, r.lease_expires_at, r.checkpoint
    ), lost AS (
        UPDATE {schema}.history h
        SET status = 'lost', finished_at = c.claimed_at,
            error = 'lease expired; taken over by attempt ' || c.attempt
        FROM claimed c
        WHERE h.job_id = c.job_id AND h.period_start = c.period_start
          AND h.attempt = c.attempt - 1 AND h.status = 'running'
    ), opened AS (
        INSERT INTO {schema}.history (job_id, period_start, attempt, status, owner, started_at)
        SELECT job_id, period_start, attempt, 'running', owner, claimed_at FROM claimed
    )
    SELECT c.id, c.period_start, c.period_end, c.attempt, c.lease_expires_at, c.checkpoint
    FROM claimed c;
END
$$;

-- Records an attempt's outcome, fenced by the attempt: a runner whose period was taken over
-- writes nothing (no row returned), and a finish sent twice is applied once.
CREATE OR REPLACE FUNCTION {schema}.finish_attempt(
    p_job_id bigint, p_period_start timestamptz, p_attempt integer, p_status text,
    p_history_status text, p_counts_as_failure boolean, p_backoff interval,
    p_backoff_cap interval, p_exit_code integer, p_error text, p_output_tail text)
RETURNS TABLE (finished_at timestamptz, failures integer, retry_after timestamptz)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH finished AS (
        UPDATE {schema}.runs
        SET status = p_status,
            finished_at = clock_timestamp(),
            lease_expires_at = NULL,
            failures = failures + p_counts_as_failure::integer,
            -- exponential backoff: backoff after the first failure, doubling, at most the cap
            -- (or backoff itself when that is longer); failures here is the count before this
            retry_after = CASE
                WHEN p_status <> 'failed' THEN NULL
                WHEN NOT p_counts_as_failure THEN clock_timestamp()
                ELSE clock_timestamp()
                     + least(p_backoff * power(2, least(failures, 30))::float8,
                             greatest(p_backoff_cap, p_backoff))
            END,
            exit_code = p_exit_code,
            error = p_error,
            output_tail = p_output_tail
        WHERE job_id = p_job_id AND period_start = p_period_start AND attempt = p_attempt
          AND status = 'running'
        RETURNING job_id, period_start, attempt, finished_at, failures, retry_after
    ), closed AS (
        UPDATE {schema}.history h
        SET status = p_history_status, finished_at = f.finished_at, exit_code = p_exit_code,
            error = p_error, output_tail = p_output_tail
        FROM finished f
        WHERE h.job_id = f.job_id AND h.period_start = f.period_start AND h.attempt = f.attempt
    )
    SELECT f.finished_at, f.failures, f.retry_after FROM finished f;
END
$$;

-- A worker with a backlog records one period's outcome and claims its next period in one
-- transaction: one round trip and one commit where there were two. The finish comes first and
-- is the same fenced finish; a fenced finish claims nothing and returns no row. A row whose id
-- is null: finished, and the next period was not claimable.
-- Both commit together or not at all, so after a lost answer the finish's row tells whether
-- the claim happened too.
CREATE OR REPLACE FUNCTION {schema}.finish_then_claim(
    p_job_id bigint, p_period_start timestamptz, p_attempt integer, p_status text,
    p_history_status text, p_counts_as_failure boolean, p_backoff interval,
    p_backoff_cap interval, p_exit_code integer, p_error text, p_output_tail text,
    p_lock_space text, p_next_job_id bigint, p_next_start timestamptz, p_next_end timestamptz,
    p_owner text, p_lease interval, p_max_attempts integer, p_allow_overlap boolean,
    p_ignore_backoff boolean, p_retry_exhausted boolean)
RETURNS TABLE (finished_at timestamptz, failures integer, retry_after timestamptz,
               id bigint, period_start timestamptz,
               period_end timestamptz, attempt integer, lease_expires_at timestamptz,
               checkpoint text)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    f record;
    c record;
BEGIN
    SELECT * INTO f FROM {schema}.finish_attempt(
        p_job_id, p_period_start, p_attempt, p_status, p_history_status, p_counts_as_failure,
        p_backoff, p_backoff_cap, p_exit_code, p_error, p_output_tail);
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO c FROM {schema}.claim_period(
        p_lock_space, p_next_job_id, p_next_start, p_next_end, p_owner, p_lease,
        p_max_attempts, p_allow_overlap, p_ignore_backoff, p_retry_exhausted);
    RETURN QUERY SELECT f.finished_at, f.failures, f.retry_after, c.id, c.period_start,
                        c.period_end, c.attempt, c.lease_expires_at, c.checkpoint;
END
$$;
