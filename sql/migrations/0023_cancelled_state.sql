-- A period whose last attempt a person cancelled (catchup cancel, 0017) is `cancelled` in
-- every scan, report, page and /metrics. Before this it read `interrupted` there, while `why`
-- and `history` said cancelled. The run's row holds what 0017 recorded (failed, no failure
-- counted, interrupted); the attempt's history row, 'cancelled', tells the two apart.
--
-- Two functions, nothing stored: no row is written or read again by this migration. The
-- six-argument period_state() of 0012 stays for a catchup that predates this migration. Like
-- every CREATE OR REPLACE, it can run again over a ledger that has it.

-- Whether the period's last attempt ended cancelled: its history row (0017 writes it so), read
-- through history's (job_id, key, period_start, attempt) key. Asked of interrupted rows only,
-- so a scan still reads only runs_unfinished for every other row.
CREATE OR REPLACE FUNCTION {schema}.ended_cancelled(p_job_id bigint, p_key text,
                                                    p_period_start timestamptz)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce((SELECT h.status = 'cancelled' FROM {schema}.history h
                     WHERE h.job_id = p_job_id AND h.key = p_key
                       AND h.period_start = p_period_start
                     ORDER BY h.attempt DESC LIMIT 1), false)
$$;

-- As 0012's, with `cancelled` apart from `interrupted`: an interrupted attempt a person asked
-- to stop (cancelled: what ended_cancelled() says).
CREATE OR REPLACE FUNCTION {schema}.period_state(status text, failures integer,
                                                 interrupted boolean, cancelled boolean,
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
        WHEN interrupted AND cancelled THEN 'cancelled'
        WHEN interrupted THEN 'interrupted'
        ELSE 'failed'
    END
$$;
