-- Per-key periods: a run is (job, key, period). An unkeyed job's key is '' (every row made
-- before this migration), so nothing an unkeyed job does changes: its claims, fences, overlap
-- guard and lock are the ones of 0007/0012 with key = ''.
--
-- On a large ledger the new primary key and history's unique constraint are built here, inside
-- the migration's transaction: runs and history are locked for writes while they build (about
-- a second per million rows on the machines CI runs on).
ALTER TABLE {schema}.runs ADD COLUMN IF NOT EXISTS key text NOT NULL DEFAULT '';
ALTER TABLE {schema}.history ADD COLUMN IF NOT EXISTS key text NOT NULL DEFAULT '';
-- a change by hand to one key's period (mark, reset); '' is the whole job or an unkeyed period
ALTER TABLE {schema}.events ADD COLUMN IF NOT EXISTS key text NOT NULL DEFAULT '';

-- (written to apply again over itself, as every migration here is)
ALTER TABLE {schema}.runs DROP CONSTRAINT IF EXISTS runs_pkey;
ALTER TABLE {schema}.runs ADD CONSTRAINT runs_pkey PRIMARY KEY (job_id, key, period_start);
ALTER TABLE {schema}.history DROP CONSTRAINT IF EXISTS history_job_id_period_start_attempt_key;
ALTER TABLE {schema}.history DROP CONSTRAINT IF EXISTS history_identity;
ALTER TABLE {schema}.history ADD CONSTRAINT history_identity
    UNIQUE (job_id, key, period_start, attempt);

-- The rows a scan classifies one by one (0002), by key too: a job's rows of one key in
-- period order, readable without touching the heap.
DROP INDEX IF EXISTS {schema}.runs_unfinished;
CREATE INDEX runs_unfinished ON {schema}.runs (job_id, key, period_start)
    INCLUDE (status, failures, interrupted, lease_expires_at)
    WHERE status <> 'succeeded';

-- The keys of a keyed job as its keys query (or list) gave them over time: expected from
-- expected_from (the query's second column, or the job's start for the keys of its first read,
-- or when first seen), no longer expected from gone_at (it was missing from a read) on.
CREATE TABLE IF NOT EXISTS {schema}.job_keys (
    job_id bigint NOT NULL,
    key text NOT NULL CHECK (key <> '' AND length(key) <= 200),
    expected_from timestamptz NOT NULL,
    first_seen timestamptz NOT NULL,
    last_seen timestamptz NOT NULL,
    gone_at timestamptz,
    paused_at timestamptz,
    -- the period starts of the key a scan found to have a row each (valid for the job's
    -- scan_state signature, and forgotten when a person removes a row of the key): later scans
    -- look for holes only outside them
    verified tstzmultirange,
    PRIMARY KEY (job_id, key)
);

-- A row of a key removed, moved or the table emptied by hand: what scans verified of that key
-- is forgotten, as coverage is for a job without keys (0002).
CREATE OR REPLACE FUNCTION {schema}.rows_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.scan_state AS s (job_id, signature, generation)
    SELECT DISTINCT job_id, '', 1 FROM removed
    ON CONFLICT (job_id) DO UPDATE SET generation = s.generation + 1;
    DELETE FROM {schema}.coverage c
    USING removed g
    WHERE c.job_id = g.job_id AND c.first <= g.period_start AND c.last >= g.period_start;
    UPDATE {schema}.job_keys k SET verified = NULL
    FROM (SELECT DISTINCT job_id, key FROM removed) g
    WHERE k.job_id = g.job_id AND k.key = g.key AND k.verified IS NOT NULL;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION {schema}.key_rewritten() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.scan_state AS s (job_id, signature, generation)
    VALUES (OLD.job_id, '', 1)
    ON CONFLICT (job_id) DO UPDATE SET generation = s.generation + 1;
    DELETE FROM {schema}.coverage c
    WHERE c.job_id = OLD.job_id AND c.first <= OLD.period_start AND c.last >= OLD.period_start;
    UPDATE {schema}.job_keys k SET verified = NULL
    WHERE k.job_id = OLD.job_id AND k.key = OLD.key;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION {schema}.runs_emptied() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {schema}.coverage;
    UPDATE {schema}.scan_state SET generation = generation + 1;
    UPDATE {schema}.job_keys SET verified = NULL;
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS runs_rekeyed ON {schema}.runs;
CREATE TRIGGER runs_rekeyed AFTER UPDATE ON {schema}.runs
    FOR EACH ROW
    WHEN (OLD.job_id IS DISTINCT FROM NEW.job_id OR OLD.period_start IS DISTINCT FROM NEW.period_start
          OR OLD.key IS DISTINCT FROM NEW.key)
    EXECUTE FUNCTION {schema}.key_rewritten();

DROP FUNCTION IF EXISTS {schema}.finish_then_claim(
    bigint, timestamptz, integer, text, text, boolean, interval, interval, integer, text, text,
    text, bigint, timestamptz, timestamptz, text, interval, integer, boolean, boolean, boolean);
DROP FUNCTION IF EXISTS {schema}.claim_period(
    text, bigint, timestamptz, timestamptz, text, interval, integer, boolean, boolean, boolean);
DROP FUNCTION IF EXISTS {schema}.finish_attempt(
    bigint, timestamptz, integer, text, text, boolean, interval, interval, integer, text, text);

-- The one claim, of (job, key, period). Overlap is forbidden per key (p_whole_job: across the
-- job's keys, overlap = "forbid-job"); the lock that serialises the claims it checks is the
-- job's for an unkeyed job or a whole-job guard, else the key's own, so 10,000 keys claim side
-- by side.
CREATE OR REPLACE FUNCTION {schema}.claim_period(
    p_lock_space text, p_job_id bigint, p_key text, p_period_start timestamptz,
    p_period_end timestamptz, p_owner text, p_lease interval, p_max_attempts integer,
    p_allow_overlap boolean, p_whole_job boolean, p_ignore_backoff boolean,
    p_retry_exhausted boolean)
RETURNS TABLE (id bigint, period_start timestamptz, period_end timestamptz, attempt integer,
               lease_expires_at timestamptz, checkpoint text)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
    IF NOT p_allow_overlap THEN
        -- Serialises claims of one job (or one key of it) until this transaction ends. The
        -- claim below is a statement of its own in a VOLATILE function, so its snapshot is
        -- taken after the lock and its overlap check sees every claim committed before.
        PERFORM pg_advisory_xact_lock(
            hashtext(CASE WHEN p_key = '' OR p_whole_job THEN p_lock_space
                          ELSE p_lock_space || '/' || p_key END),
            p_job_id::integer);
    END IF;
    RETURN QUERY
    WITH claimed AS (
        INSERT INTO {schema}.runs AS r
            (job_id, key, period_start, period_end, status, attempt, owner,
             claimed_at, heartbeat_at, lease_expires_at)
        SELECT p_job_id, p_key, p_period_start, p_period_end, 'running', 1, p_owner,
               clock_timestamp(), clock_timestamp(), clock_timestamp() + p_lease
        WHERE NOT EXISTS (
            SELECT 1 FROM {schema}.jobs j WHERE j.id = p_job_id AND j.paused_at IS NOT NULL)
        AND (p_key = '' OR NOT EXISTS (
            SELECT 1 FROM {schema}.job_keys k
            WHERE k.job_id = p_job_id AND k.key = p_key AND k.paused_at IS NOT NULL))
        AND (p_allow_overlap OR NOT EXISTS (
            SELECT 1 FROM {schema}.runs o
            WHERE o.job_id = p_job_id
              AND (p_whole_job OR o.key = p_key)
              AND o.status = 'running'
              AND o.lease_expires_at > clock_timestamp()
              AND (o.period_start <> p_period_start OR o.key <> p_key)))
        ON CONFLICT (job_id, key, period_start) DO UPDATE SET
            status = 'running',
            attempt = r.attempt + 1,
            failures = r.failures + (r.status = 'running')::integer,
            owner = excluded.owner,
            claimed_at = excluded.claimed_at,
            heartbeat_at = excluded.heartbeat_at,
            lease_expires_at = excluded.lease_expires_at,
            finished_at = NULL,
            retry_after = NULL,
            exit_code = NULL,
            error = NULL
        WHERE (r.status = 'failed'
               AND (r.failures < p_max_attempts OR p_retry_exhausted)
               AND (r.retry_after <= clock_timestamp() OR p_ignore_backoff))
           OR (r.status = 'running'
               AND r.lease_expires_at <= clock_timestamp()
               AND (r.failures + 1 < p_max_attempts OR p_retry_exhausted))
        RETURNING r.id, r.job_id, r.key, r.period_start, r.period_end, r.attempt, r.owner,
                  r.claimed_at, r.lease_expires_at, r.checkpoint
    ), lost AS (
        UPDATE {schema}.history h
        SET status = 'lost', finished_at = c.claimed_at,
            error = 'lease expired; taken over by attempt ' || c.attempt
        FROM claimed c
        WHERE h.job_id = c.job_id AND h.key = c.key AND h.period_start = c.period_start
          AND h.attempt = c.attempt - 1 AND h.status = 'running'
    ), opened AS (
        INSERT INTO {schema}.history (job_id, key, period_start, attempt, status, owner,
                                      started_at)
        SELECT job_id, key, period_start, attempt, 'running', owner, claimed_at FROM claimed
    )
    SELECT c.id, c.period_start, c.period_end, c.attempt, c.lease_expires_at, c.checkpoint
    FROM claimed c;
END
$$;

-- finish_attempt as in 0012, of (job, key, period), fenced by the attempt.
CREATE OR REPLACE FUNCTION {schema}.finish_attempt(
    p_job_id bigint, p_key text, p_period_start timestamptz, p_attempt integer, p_status text,
    p_history_status text, p_counts_as_failure boolean, p_backoff interval,
    p_backoff_cap interval, p_exit_code integer, p_error text, p_output_tail text)
RETURNS TABLE (finished_at timestamptz, failures integer, retry_after timestamptz)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH finished AS (
        UPDATE {schema}.runs
        SET status = p_status,
            finished_at = clock_timestamp(),
            lease_expires_at = NULL,
            failures = failures + p_counts_as_failure::integer,
            interrupted = p_status = 'failed' AND NOT p_counts_as_failure,
            retry_after = CASE
                WHEN p_status <> 'failed' THEN NULL
                WHEN NOT p_counts_as_failure THEN clock_timestamp()
                ELSE clock_timestamp()
                     + least(p_backoff * power(2, least(failures, 30))::float8,
                             greatest(p_backoff_cap, p_backoff))
            END,
            exit_code = p_exit_code,
            error = p_error,
            output_tail = p_output_tail
        WHERE job_id = p_job_id AND key = p_key AND period_start = p_period_start
          AND attempt = p_attempt AND status = 'running'
        RETURNING job_id, key, period_start, attempt, finished_at, failures, retry_after
    ), closed AS (
        UPDATE {schema}.history h
        SET status = p_history_status, finished_at = f.finished_at, exit_code = p_exit_code,
            error = p_error, output_tail = p_output_tail
        FROM finished f
        WHERE h.job_id = f.job_id AND h.key = f.key AND h.period_start = f.period_start
          AND h.attempt = f.attempt
    )
    SELECT f.finished_at, f.failures, f.retry_after FROM finished f;
END
$$;

-- finish_then_claim as in 0007, with each side's key.
CREATE OR REPLACE FUNCTION {schema}.finish_then_claim(
    p_job_id bigint, p_key text, p_period_start timestamptz, p_attempt integer, p_status text,
    p_history_status text, p_counts_as_failure boolean, p_backoff interval,
    p_backoff_cap interval, p_exit_code integer, p_error text, p_output_tail text,
    p_lock_space text, p_next_job_id bigint, p_next_key text, p_next_start timestamptz,
    p_next_end timestamptz, p_owner text, p_lease interval, p_max_attempts integer,
    p_allow_overlap boolean, p_whole_job boolean, p_ignore_backoff boolean,
    p_retry_exhausted boolean)
RETURNS TABLE (finished_at timestamptz, failures integer, retry_after timestamptz, id bigint,
               period_start timestamptz, period_end timestamptz, attempt integer,
               lease_expires_at timestamptz, checkpoint text)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    f record;
    c record;
BEGIN
    SELECT * INTO f FROM {schema}.finish_attempt(
        p_job_id, p_key, p_period_start, p_attempt, p_status, p_history_status,
        p_counts_as_failure, p_backoff, p_backoff_cap, p_exit_code, p_error, p_output_tail);
    IF NOT FOUND THEN
        RETURN;
    END IF;
    SELECT * INTO c FROM {schema}.claim_period(
        p_lock_space, p_next_job_id, p_next_key, p_next_start, p_next_end, p_owner, p_lease,
        p_max_attempts, p_allow_overlap, p_whole_job, p_ignore_backoff, p_retry_exhausted);
    RETURN QUERY SELECT f.finished_at, f.failures, f.retry_after, c.id, c.period_start,
                        c.period_end, c.attempt, c.lease_expires_at, c.checkpoint;
END
$$;

-- rename_job as in 0011, and an empty new_name's key history goes too.
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
        DELETE FROM {schema}.jobs j WHERE j.id = new_id;
    END IF;
    UPDATE {schema}.jobs SET name = new_name, retired_at = NULL WHERE id = old_id;
    INSERT INTO {schema}.events (job_id, action, previous, reason, actor)
    VALUES (old_id, 'rename', old_name, why_reason, by_actor);
    job_id := old_id;
END
$$;
