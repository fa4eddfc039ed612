-- Every schedule a job has had, and from when. A job's first row applies to all time before the
-- next row (its since is only when catchup first saw the job); each later row takes effect at
-- its since, a boundary of its schedule at or after the end of the period that was in progress
-- when the change was noticed, so periods before it keep the schedule they were due under.
CREATE TABLE {schema}.schedules (
    job_id       bigint NOT NULL REFERENCES {schema}.jobs (id),
    since        timestamptz NOT NULL,
    schedule     text NOT NULL,
    timezone     text NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    recorded_by  text NOT NULL,
    PRIMARY KEY (job_id, since)
);

-- The start the job was last configured with, so a change of it is noticed and audited.
ALTER TABLE {schema}.jobs ADD COLUMN start timestamptz;

ALTER TABLE {schema}.events DROP CONSTRAINT events_action_check;
ALTER TABLE {schema}.events ADD CONSTRAINT events_action_check
    CHECK (action IN ('done', 'skip', 'reset', 'pause', 'resume', 'schedule', 'start'));

-- The SQL side of wall-clock schedules (daily, weekly, monthly, every N days in a time zone):
-- n boundaries from the k0-th, each the local time origin + k * step read in zone tz by
-- PostgreSQL's DST rule (a skipped local time moves forward by the gap, a repeated one means
-- the second), which catchup's Python arithmetic follows too. Each boundary is computed from
-- the origin, never from the previous one: generate_series(start, stop, step, tz) adds the step
-- to the previous value, so a 02:30 moved to 03:30 by a spring-forward gap would stay at 03:30.
CREATE FUNCTION {schema}.local_series(origin timestamp, step interval, k0 bigint, n bigint,
                                      tz text)
RETURNS TABLE (k bigint, period_start timestamptz)
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT i, (origin + step * (k0 + i)) AT TIME ZONE tz FROM generate_series(0, n - 1) AS i
$$;

-- How a scan classifies a period from its row (no row: missing). Inlined by the planner.
CREATE FUNCTION {schema}.period_state(status text, failures integer, lease_expires_at timestamptz,
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
        ELSE 'failed'
    END
$$;
