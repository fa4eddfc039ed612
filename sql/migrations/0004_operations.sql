-- Manual reconciliation and pausing, audited. A period marked done before it ever ran has
-- attempt 0: no attempt has been made, and the next real one is still attempt 1 or later.
ALTER TABLE {schema}.runs DROP CONSTRAINT runs_attempt_check;
ALTER TABLE {schema}.runs ADD CONSTRAINT runs_attempt_check CHECK (attempt >= 0);

-- Every change a person makes: marking, resetting, pausing, resuming.
CREATE TABLE {schema}.events (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id        bigint NOT NULL REFERENCES {schema}.jobs (id),
    period_start  timestamptz,
    action        text NOT NULL CHECK (action IN ('done', 'skip', 'reset', 'pause', 'resume')),
    previous      text,
    reason        text,
    actor         text NOT NULL,
    at            timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX events_job ON {schema}.events (job_id, at);
