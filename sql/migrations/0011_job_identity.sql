-- A job keeps its ledger identity (its id, and with it every run, attempt, change, coverage
-- range, evidence state and alert range) across a rename, and can be retired on purpose.
ALTER TABLE {schema}.jobs ADD COLUMN IF NOT EXISTS retired_at timestamptz;

ALTER TABLE {schema}.events DROP CONSTRAINT events_action_check;
ALTER TABLE {schema}.events ADD CONSTRAINT events_action_check
    CHECK (action IN ('done', 'skip', 'reset', 'pause', 'resume', 'schedule', 'start', 'adopt',
                      'rename', 'retire'));

-- Rename job old_name to new_name in one transaction, under both jobs' row locks. A row for
-- new_name that a command registered after the config was edited (no runs, no attempts, no
-- changes but the schedule and start it recorded itself) is removed first; one with anything
-- else is refused, as is an old name the ledger does not have. Returns the job's id, or NULL
-- with the reason in `why`. A later migration that adds a table referencing jobs must replace
-- this function (CREATE OR REPLACE) to remove that table's rows of an empty new_name too.
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
        DELETE FROM {schema}.jobs j WHERE j.id = new_id;
    END IF;
    UPDATE {schema}.jobs SET name = new_name, retired_at = NULL WHERE id = old_id;
    INSERT INTO {schema}.events (job_id, action, previous, reason, actor)
    VALUES (old_id, 'rename', old_name, why_reason, by_actor);
    job_id := old_id;
END
$$;
