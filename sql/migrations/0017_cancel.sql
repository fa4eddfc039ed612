-- `catchup cancel JOB PERIOD --reason R`: a person asks the runner of one running attempt,
-- wherever it runs, to stop. The request is a row here; the runner's heartbeat reads it (the
-- heartbeat statement returns it beside the new lease), stops the job and records the attempt
-- as cancelled: the run failed with no failure counted (interrupted, runnable again at once),
-- the attempt's history row 'cancelled'. A request names the attempt it is for, so it never
-- touches the next attempt of the same period. The request is audited in events ('cancel').
--
-- A new table and two widened checks, NOT VALID: every row already there holds the narrower
-- check it replaces, so nothing scans history (which can be large) under the lock a claim waits
-- on. Like 0012, 0014 and 0016 it can run again over a ledger that has it.

CREATE TABLE IF NOT EXISTS {schema}.cancels (
    job_id bigint NOT NULL REFERENCES {schema}.jobs (id),
    key text NOT NULL DEFAULT '',
    period_start timestamptz NOT NULL,
    attempt integer NOT NULL,
    reason text NOT NULL,
    actor text NOT NULL,
    requested_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (job_id, key, period_start, attempt)
);

ALTER TABLE {schema}.history DROP CONSTRAINT IF EXISTS history_status_check;
ALTER TABLE {schema}.history ADD CONSTRAINT history_status_check
    CHECK (status IN ('running', 'succeeded', 'failed', 'lost', 'interrupted', 'cancelled')) NOT VALID;

ALTER TABLE {schema}.events DROP CONSTRAINT IF EXISTS events_action_check;
ALTER TABLE {schema}.events ADD CONSTRAINT events_action_check
    CHECK (action IN ('done', 'skip', 'reset', 'pause', 'resume', 'schedule', 'start', 'adopt',
                      'rename', 'retire', 'cancel')) NOT VALID;
