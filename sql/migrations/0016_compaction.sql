-- Compaction (catchup compact, [ledger] keep_detail): a settled period whose run ended long ago
-- keeps its row in runs, the fact that makes it unclaimable (status, attempt, failures, first
-- claim, finish, a waiver's note), and loses its detail: the attempts' history rows, the output
-- tail, the checkpoint, the owner. compacted_at says when.
--
-- Nothing here rewrites or scans a table under a lock a claim waits on: the column has no
-- default (a catalog change only), the check is NOT VALID (it holds for every row written from
-- now on, and trivially for the rows before, whose compacted_at is NULL), and the cursor table
-- is new. Like 0012 and 0014 it can run again over a ledger that has it.

ALTER TABLE {schema}.runs ADD COLUMN IF NOT EXISTS compacted_at timestamptz;

-- Only a settled period is ever compacted, and nothing makes a compacted one claimable again
-- without saying so: a reset clears compacted_at in the same statement.
ALTER TABLE {schema}.runs DROP CONSTRAINT IF EXISTS runs_compacted_settled;
ALTER TABLE {schema}.runs ADD CONSTRAINT runs_compacted_settled
    CHECK (compacted_at IS NULL OR status IN ('succeeded', 'waived')) NOT VALID;

-- How far each job's compaction has gone: every run finished before (through_at, through_id),
-- in the order of the runs_finished index, has been looked at. A run settles with its
-- finished_at set to the time it settles (a finish, a mark), so one settled later always
-- lies beyond the cursor.
CREATE TABLE IF NOT EXISTS {schema}.compaction (
    job_id bigint PRIMARY KEY REFERENCES {schema}.jobs (id),
    through_at timestamptz NOT NULL,
    through_id bigint NOT NULL,
    periods bigint NOT NULL DEFAULT 0,
    attempts bigint NOT NULL DEFAULT 0,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- rename_job as in 0014, and an empty new_name's compaction cursor goes too.
CREATE OR REPLACE FUNCTION {schema}.rename_job(
    old_name text, new_name text, why_reason text, by_actor text, OUT job_id bigint,
    OUT why text
) LANGUAGE plpgsql AS $$
DECLARE
    old_id bigint;
    new_id bigint;
BEGIN
    SELECT id INTO old_id FROM {schema}.jobs WHERE name = old_name FOR UPDATE;
    IF old_id IS NULL THEN
        why := format('the ledger has no job %s', old_name);
        RETURN;
    END IF;
    SELECT id INTO new_id FROM {schema}.jobs WHERE name = new_name FOR UPDATE;
    IF new_id IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM {schema}.runs r WHERE r.job_id = new_id)
           OR EXISTS (SELECT 1 FROM {schema}.history h WHERE h.job_id = new_id)
           OR EXISTS (SELECT 1 FROM {schema}.events e
                      WHERE e.job_id = new_id AND e.action NOT IN ('schedule', 'start')) THEN
            why := format('the ledger already has runs or changes for %s', new_name);
            RETURN;
        END IF;
        DELETE FROM {schema}.events e WHERE e.job_id = new_id;
        DELETE FROM {schema}.schedules s WHERE s.job_id = new_id;
        DELETE FROM {schema}.coverage c WHERE c.job_id = new_id;
        DELETE FROM {schema}.scan_state s WHERE s.job_id = new_id;
        DELETE FROM {schema}.evidence_state s WHERE s.job_id = new_id;
        DELETE FROM {schema}.alert_ranges a WHERE a.job_id = new_id;
        DELETE FROM {schema}.job_keys k WHERE k.job_id = new_id;
        DELETE FROM {schema}.compaction c WHERE c.job_id = new_id;
        DELETE FROM {schema}.jobs j WHERE j.id = new_id;
    END IF;
    UPDATE {schema}.jobs SET name = new_name, retired_at = NULL WHERE id = old_id;
    INSERT INTO {schema}.events (job_id, action, previous, reason, actor)
    VALUES (old_id, 'rename', old_name, why_reason, by_actor);
    job_id := old_id;
END
$$;
