-- Compacted facts in a narrow table of their own (issue 27: at most 120 bytes a compacted
-- period). A succeeded period whose detail was compacted (0016) leaves runs for `compacted`:
-- its job, key, period (its start and its length in seconds), first claim, finish, attempt,
-- failures and the day it was compacted, about 76 bytes of heap and 36 of primary key (runs:
-- about 126 and 96 across its indexes). A waived one stays in runs with its waiver's note (who
-- and why), compacted as in 0016, and so does a period whose length is not a whole number of
-- seconds or more than 2^31 of them, or whose attempt or failures pass 32767.
--
-- job_id is bigint as in runs: the view below is both, and a cast in either of its branches
-- would keep every lookup of a job's periods from that table's primary key.
--
-- The rule that keeps a compacted period unclaimable: a period is in runs or in compacted,
-- never both and never neither once it had a row.
-- - Compaction moves a batch (DELETE from runs, INSERT here, one statement) holding the job's
--   compaction lock (an advisory lock, exclusive) until its transaction ends.
-- - Every row written into runs (a claim, a batch of claims, a mark, a demo) first takes that
--   lock shared, then looks here in a statement of its own (a VOLATILE trigger function: its
--   snapshot is taken after the lock), and is skipped when the period is here. So a claim
--   either comes before a batch (it meets the runs row, settled: refused as before) or after
--   it (it meets the fact here: refused), never between the batch's delete and its commit.
-- - A mark or reset of a compacted period first moves it back (revive_periods, the same
--   lock shared), then changes the runs row as it always did.
--
-- Readers that need every period (scans, upstream checks, evidence, the refusal's reason) read
-- the view `periods`: runs and compacted as one relation of runs' columns. Readers of running
-- or failed periods keep reading runs (compacted holds only succeeded ones).
--
-- Nothing here rewrites a table: the table and the view are new, the trigger and functions are
-- catalog changes. The rows 0016 compacted inside runs move here batch by batch: every job's
-- compaction cursor starts again from the beginning, and compaction moves what it passes (a
-- succeeded row compacted before is moved without being counted again). It can run again
-- over a ledger that has it.

CREATE TABLE IF NOT EXISTS {schema}.compacted (
    job_id bigint NOT NULL REFERENCES {schema}.jobs (id),
    period_start timestamptz NOT NULL,
    claimed_at timestamptz,
    finished_at timestamptz NOT NULL,
    period_seconds integer NOT NULL CHECK (period_seconds > 0),  -- period_end - period_start
    compacted_on date NOT NULL,
    attempt smallint NOT NULL CHECK (attempt >= 0),
    failures smallint NOT NULL,
    key text NOT NULL,
    CONSTRAINT compacted_pkey PRIMARY KEY (job_id, key, period_start) WITH (fillfactor = 100)
);

-- The periods that succeeded at a later attempt (run again after a reset or a failure), as
-- runs_reruns (0013) keeps them: what can make a downstream period outdated.
CREATE INDEX IF NOT EXISTS compacted_reruns ON {schema}.compacted (job_id, period_start)
    INCLUDE (period_seconds, finished_at) WHERE attempt > 1;

CREATE OR REPLACE VIEW {schema}.periods AS
SELECT r.id, r.job_id, r.key, r.period_start, r.period_end, r.status, r.attempt, r.failures,
       r.owner, r.claimed_at, r.heartbeat_at, r.lease_expires_at, r.finished_at, r.retry_after,
       r.exit_code, r.error, r.output_tail, r.checkpoint, r.interrupted, r.compacted_at
FROM {schema}.runs r
UNION ALL
SELECT NULL::bigint, c.job_id, c.key, c.period_start,
       c.period_start + c.period_seconds * interval '1 second', 'succeeded'::text,
       c.attempt::integer, c.failures::integer, NULL::text, c.claimed_at, NULL::timestamptz,
       NULL::timestamptz, c.finished_at, NULL::timestamptz, NULL::integer, NULL::text,
       NULL::text, NULL::text, false, c.compacted_on::timestamp AT TIME ZONE 'UTC'
FROM {schema}.compacted c;

-- The lock of the rule above, per ledger (the schema's name) and job.
CREATE OR REPLACE FUNCTION {schema}.run_written() RETURNS trigger LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtext('catchup compacted ' || TG_TABLE_SCHEMA),
                                         NEW.job_id::integer);
    IF EXISTS (SELECT 1 FROM {schema}.compacted c
               WHERE c.job_id = NEW.job_id AND c.key = NEW.key
                 AND c.period_start = NEW.period_start) THEN
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS runs_written ON {schema}.runs;
CREATE TRIGGER runs_written BEFORE INSERT ON {schema}.runs
    FOR EACH ROW EXECUTE FUNCTION {schema}.run_written();

-- A mark or reset of compacted periods: each moves back into runs as the succeeded, compacted
-- row it was (compacted_at the day it was compacted), before the change locks and writes it.
-- The delete runs to its end before the first insert (a loop over a DELETE … RETURNING), so
-- runs_written no longer finds the period here.
CREATE OR REPLACE FUNCTION {schema}.revive_periods(
    p_lock_space text, p_job_id bigint, p_key text, p_starts timestamptz[])
RETURNS integer LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v record;
    moved integer := 0;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtext('catchup compacted ' || p_lock_space),
                                         p_job_id::integer);
    FOR v IN
        DELETE FROM {schema}.compacted c
        WHERE c.job_id = p_job_id AND c.key = p_key AND c.period_start = ANY(p_starts)
        RETURNING c.*
    LOOP
        INSERT INTO {schema}.runs (job_id, key, period_start, period_end, status, attempt,
                                   failures, claimed_at, finished_at, compacted_at)
        VALUES (v.job_id, v.key, v.period_start,
                v.period_start + v.period_seconds * interval '1 second', 'succeeded', v.attempt,
                v.failures, v.claimed_at, v.finished_at,
                v.compacted_on::timestamp AT TIME ZONE 'UTC');
        moved := moved + 1;
    END LOOP;
    RETURN moved;
END
$$;

-- A removed row of a period that is still in the ledger (moved from runs to compacted by the
-- same statement) removed nothing: what scans verified stays. Otherwise as in 0014.
CREATE OR REPLACE FUNCTION {schema}.rows_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (
        SELECT g.job_id, g.key, g.period_start FROM removed g
        WHERE NOT EXISTS (SELECT 1 FROM {schema}.periods p
                          WHERE p.job_id = g.job_id AND p.key = g.key
                            AND p.period_start = g.period_start)
    ), bumped AS (
        INSERT INTO {schema}.scan_state AS s (job_id, signature, generation)
        SELECT DISTINCT job_id, '', 1 FROM gone
        ON CONFLICT (job_id) DO UPDATE SET generation = s.generation + 1
    ), forgotten AS (
        DELETE FROM {schema}.coverage c
        USING gone g
        WHERE c.job_id = g.job_id AND c.first <= g.period_start AND c.last >= g.period_start
    )
    UPDATE {schema}.job_keys k SET verified = NULL
    FROM (SELECT DISTINCT job_id, key FROM gone) g
    WHERE k.job_id = g.job_id AND k.key = g.key AND k.verified IS NOT NULL;
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS compacted_deleted ON {schema}.compacted;
CREATE TRIGGER compacted_deleted AFTER DELETE ON {schema}.compacted
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.rows_removed();

-- rename_job as in 0016, and a job with compacted periods has runs.
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
           OR EXISTS (SELECT 1 FROM {schema}.compacted c WHERE c.job_id = new_id)
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

-- The rows 0016 compacted inside runs are moved by the next compactions, from the start.
UPDATE {schema}.compaction SET through_at = '-infinity', through_id = 0
WHERE EXISTS (SELECT 1 FROM {schema}.runs r
              WHERE r.job_id = {schema}.compaction.job_id AND r.compacted_at IS NOT NULL
                AND r.status = 'succeeded');
