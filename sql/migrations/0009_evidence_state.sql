-- What a scan verified of each job's evidence, so the next scan reads the evidence only where
-- something may have changed: every row that finished before verified_at in the job's periods
-- before verified_until had evidence, and no evidence lay outside a row there but in the
-- holes (which every scan looks at again). signature: the evidence query, its database, the
-- job's zone and schedules; a change starts over. `scan --full` re-reads everything.
CREATE TABLE IF NOT EXISTS {schema}.evidence_state (
    job_id          bigint PRIMARY KEY REFERENCES {schema}.jobs (id),
    signature       text NOT NULL,
    verified_until  timestamptz NOT NULL,
    verified_at     timestamptz NOT NULL
);

-- The rows of a job that changed since a time: re-run, replayed, marked or reset periods.
CREATE INDEX IF NOT EXISTS runs_finished ON {schema}.runs (job_id, finished_at);
