-- (Written to be applied again over itself, as every migration is: IF NOT EXISTS.)
-- Windows recorded afterwards (catchup exclude): a span of a job's periods nobody expected (a
-- maintenance window, a migration that took the database away), with who recorded it and why.
-- A period whose start falls in a live window (undone_at null) is excluded: never claimed, never
-- a gap. An undo (catchup exclude --undo) keeps the row, with who undid it and why; both are
-- 'exclude' and 'include' events too, beside the other changes people make.
CREATE TABLE IF NOT EXISTS {schema}.exclusions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id bigint NOT NULL REFERENCES {schema}.jobs (id),
    key text,  -- null: every key of the job (and the one period series of a job without keys)
    lo timestamptz NOT NULL,
    hi timestamptz NOT NULL,
    reason text NOT NULL,
    actor text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    undone_at timestamptz,
    undone_by text,
    undo_reason text,
    CHECK (hi > lo)
);
CREATE INDEX IF NOT EXISTS exclusions_live ON {schema}.exclusions (job_id, lo) WHERE undone_at IS NULL;
-- one live window per (job, key, lo, hi): recorded twice, at once or not, it is one window
CREATE UNIQUE INDEX IF NOT EXISTS exclusions_one_live
    ON {schema}.exclusions (job_id, key, lo, hi) NULLS NOT DISTINCT WHERE undone_at IS NULL;

ALTER TABLE {schema}.events DROP CONSTRAINT IF EXISTS events_action_check;
ALTER TABLE {schema}.events ADD CONSTRAINT events_action_check
    CHECK (action IN ('done', 'skip', 'reset', 'pause', 'resume', 'schedule', 'start', 'adopt',
                      'rename', 'retire', 'cancel', 'ping', 'exclude', 'include')) NOT VALID;
