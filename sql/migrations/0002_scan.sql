-- What a scan already knows: below complete_before, every period of the job (under the schedule
-- named by signature) is succeeded or waived, so a scan need not read it again.
CREATE TABLE {schema}.watermarks (
    job_id           bigint PRIMARY KEY REFERENCES {schema}.jobs (id),
    signature        text NOT NULL,
    complete_before  timestamptz NOT NULL,
    generation       bigint NOT NULL DEFAULT 0,
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Anything that reopens a period below the watermark (a reset, a row deleted or rewritten by
-- hand) lowers it, whichever code path or person did it. generation changes on every reopening,
-- so a scan that read an older ledger cannot raise the watermark over it.
-- The row is created if missing, so a scan that saw no watermark cannot create one over it.
CREATE FUNCTION {schema}.reopen_period() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.watermarks AS w (job_id, signature, complete_before, generation)
    VALUES (OLD.job_id, '', OLD.period_start, 1)
    ON CONFLICT (job_id) DO UPDATE
    SET complete_before = least(w.complete_before, OLD.period_start),
        generation = w.generation + 1,
        updated_at = clock_timestamp();
    RETURN NULL;
END;
$$;

CREATE TRIGGER runs_reopened AFTER UPDATE ON {schema}.runs
    FOR EACH ROW
    WHEN (OLD.status IN ('succeeded', 'waived')
          AND (NEW.status NOT IN ('succeeded', 'waived')
               OR NEW.period_start <> OLD.period_start OR NEW.job_id <> OLD.job_id))
    EXECUTE FUNCTION {schema}.reopen_period();

CREATE TRIGGER runs_deleted AFTER DELETE ON {schema}.runs
    FOR EACH ROW
    WHEN (OLD.status IN ('succeeded', 'waived'))
    EXECUTE FUNCTION {schema}.reopen_period();

-- The few rows a scan must classify one by one, without reading the succeeded history.
CREATE INDEX runs_unfinished ON {schema}.runs (job_id, period_start) WHERE status <> 'succeeded';

-- The number of a period on a job's grid: steps of step_seconds, or of step_months calendar
-- months (UTC), counted from anchor. Inlined by the planner.
CREATE FUNCTION {schema}.period_index(
    t timestamptz, anchor timestamptz, step_seconds bigint, step_months integer
) RETURNS bigint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN step_seconds > 0
        THEN floor(extract(epoch FROM t - anchor) / step_seconds)::bigint
        ELSE floor(((extract(year FROM t AT TIME ZONE 'UTC') * 12
                     + extract(month FROM t AT TIME ZONE 'UTC'))
                    - (extract(year FROM anchor AT TIME ZONE 'UTC') * 12
                       + extract(month FROM anchor AT TIME ZONE 'UTC'))) / step_months)::bigint
    END
$$;
