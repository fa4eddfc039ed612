-- What the scheduler's leader publishes of its workers (issue 49): each lane's workers and how
-- many are busy, written with every renewal of its lease (a third of the lease apart, and right
-- before each start). `why` reads it to say a due period waits for a free worker; /metrics as
-- catchup_scheduler_workers and catchup_scheduler_workers_busy, by lane. A JSON object of
-- each lane's [workers, busy]; NULL from a leader that predates this migration.
ALTER TABLE {schema}.leader ADD COLUMN IF NOT EXISTS lanes jsonb;
