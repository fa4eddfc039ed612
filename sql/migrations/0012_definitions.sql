-- Which project registered each job, and the definition it gave (its schedule, zone, start and
-- what it runs): a second project that defines the same job differently is refused before it
-- writes anything (catchup/core.py, Session._claim_definitions). NULL: registered before this
-- migration, or by a catchup that predates it; the first project to see it then records itself.
ALTER TABLE {schema}.jobs ADD COLUMN IF NOT EXISTS project text;
ALTER TABLE {schema}.jobs ADD COLUMN IF NOT EXISTS definition jsonb;

-- An attempt that stopped before its end without counting a failure (catchup was asked to stop,
-- or a claim handed over with a finish was given back) leaves its period `interrupted`, not
-- `failed`: reports tell the two apart. Periods whose last attempt was interrupted before this
-- migration get it from their history.
ALTER TABLE {schema}.runs ADD COLUMN IF NOT EXISTS interrupted boolean NOT NULL DEFAULT false;

UPDATE {schema}.runs r
SET interrupted = true
WHERE r.status = 'failed'
  AND (SELECT h.status FROM {schema}.history h
       WHERE h.job_id = r.job_id AND h.period_start = r.period_start
       ORDER BY h.attempt DESC LIMIT 1) = 'interrupted';

-- finish_attempt as in 0007, and it records whether the attempt was interrupted.
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
            interrupted = p_status = 'failed' AND NOT p_counts_as_failure,
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

-- How a scan classifies a period from its row, `interrupted` apart from `failed`. The
-- five-argument period_state() of 0005 stays for a catchup that predates this migration.
CREATE OR REPLACE FUNCTION {schema}.period_state(status text, failures integer,
                                                 interrupted boolean,
                                                 lease_expires_at timestamptz,
                                                 now timestamptz, max_attempts integer)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN status IS NULL THEN 'missing'
        WHEN status = 'succeeded' THEN 'succeeded'
        WHEN status = 'waived' THEN 'waived'
        WHEN status = 'running' AND lease_expires_at > now THEN 'running'
        WHEN status = 'running' THEN 'stale'
        WHEN failures >= max_attempts THEN 'exhausted'
        WHEN interrupted THEN 'interrupted'
        ELSE 'failed'
    END
$$;
