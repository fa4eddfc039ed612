-- The ledger knows its server's timeline (issue 30). PostgreSQL starts a new timeline when a
-- standby is promoted (a failover, a switchover) or a backup is restored to a point in time.
-- With asynchronous replication the new primary may lack the old one's last commits: claims
-- whose jobs ran, finishes of jobs that are done. Nothing on the new primary can name those
-- periods, so after a failover from a timeline whose claims were not durable (timelines.durable
-- below), every period of the old timeline that the new one does not show settled is
-- **suspect** until it is decided:
--   - its row is absent, or running and not renewed since the failover was seen, or failed
--     and not written since; and
--   - it ended at or before that moment (a claim on the old timeline was of a due period).
-- A suspect period is not claimed (claim_period, claim_periods below). It is decided by its
-- job's evidence where it has one (its output exists: adopted; it does not: lost) or by a
-- person (catchup mark, reset, adopt), each through decide_suspects(), which writes its row on
-- the new timeline (so it is no longer suspect) and uses up the attempt number the old timeline
-- may have handed out: a runner of the old timeline that comes back holds an attempt that no
-- longer matches, and is fenced off.
--
-- A runner whose claim was lost and that is still running re-creates its row at its next
-- heartbeat or finish (claims.sql: recreate): only when the row is absent and its claim was
-- made before the new timeline was seen.
--
-- The timeline is read from the name of the current WAL file (its first 8 hex digits): right
-- after a promotion, unlike pg_control_checkpoint(), which waits for the next checkpoint.
-- replayed_until is pg_last_xact_replay_timestamp() when the timeline was first seen: the
-- commit time of the newest transaction the new primary has from the old one (NULL when the
-- server was restarted since its promotion): the failover window is (replayed_until, seen_at].

CREATE TABLE IF NOT EXISTS {schema}.timelines (
    timeline integer PRIMARY KEY CHECK (timeline > 0),
    seen_at timestamptz NOT NULL,          -- the first write of the ledger on it
    replayed_until timestamptz,            -- the newest commit it has from the timeline before
    failover boolean NOT NULL,             -- false: the first timeline the ledger knew
    -- true: every claim on it waits for a synchronous standby, so a standby promoted has them
    -- all and a failover from it opens no suspect window: declared by a session with
    -- durable_claims (declare_durable). false: a claim on it did not wait (note_claim), for
    -- good (a later declaration does not undo it). NULL: neither yet. Not true: a failover
    -- from it may have lost claims.
    durable boolean
);

CREATE OR REPLACE FUNCTION {schema}.server_timeline() RETURNS integer
LANGUAGE sql VOLATILE
AS $$
    SELECT CASE WHEN NOT pg_is_in_recovery() THEN
        ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::integer
    END
$$;

INSERT INTO {schema}.timelines (timeline, seen_at, replayed_until, failover)
SELECT {schema}.server_timeline(), clock_timestamp(), NULL, false
WHERE NOT pg_is_in_recovery()
ON CONFLICT (timeline) DO NOTHING;

-- The newest failover that may have lost claims: the ledger moved to a new timeline from one
-- whose claims were not durable (failover true; timeline, seen_at and replayed_until are the
-- new timeline's). None (failover false): the server's timeline. With p_note, a timeline the
-- ledger has not seen yet is recorded first (unless another session recorded it: then that
-- one's record stands); without, it is reported as if recorded now.
CREATE OR REPLACE FUNCTION {schema}.failover_window(
    p_note boolean, OUT timeline integer, OUT seen_at timestamptz,
    OUT replayed_until timestamptz, OUT failover boolean)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    t integer := {schema}.server_timeline();
    newest integer;
    durable boolean;
BEGIN
    SELECT max(l.timeline) INTO newest FROM {schema}.timelines l;
    IF t > newest OR (newest IS NULL AND t IS NOT NULL) THEN
        IF p_note THEN
            INSERT INTO {schema}.timelines (timeline, seen_at, replayed_until, failover)
            VALUES (t, clock_timestamp(), pg_last_xact_replay_timestamp(), newest IS NOT NULL)
            ON CONFLICT (timeline) DO NOTHING;
        ELSE
            SELECT coalesce(l.durable, false) INTO durable
            FROM {schema}.timelines l WHERE l.timeline = newest;
            IF NOT durable THEN
                timeline := t;
                seen_at := clock_timestamp();
                replayed_until := pg_last_xact_replay_timestamp();
                failover := true;
                RETURN;
            END IF;
        END IF;
    END IF;
    SELECT l.timeline, l.seen_at, l.replayed_until, true
    INTO timeline, seen_at, replayed_until, failover
    FROM {schema}.timelines l
    WHERE l.failover
      AND (SELECT p.durable IS NOT TRUE FROM {schema}.timelines p
           WHERE p.timeline < l.timeline ORDER BY p.timeline DESC LIMIT 1)
    ORDER BY l.timeline DESC LIMIT 1;
    IF NOT FOUND THEN
        timeline := coalesce(t, newest);
        failover := false;
    END IF;
END
$$;

-- A session with durable_claims declares the server's timeline durable (recorded first if
-- new), unless a claim on it did not wait. Its own commit need not wait: lost in a failover,
-- the timeline is not taken for durable, which errs on the safe side. True: declared now.
CREATE OR REPLACE FUNCTION {schema}.declare_durable() RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    PERFORM {schema}.failover_window(true);
    UPDATE {schema}.timelines SET durable = true
    WHERE timeline = {schema}.server_timeline() AND durable IS NULL;
    RETURN FOUND;
END
$$;

-- A claim in this transaction whose commit will not wait for a synchronous standby makes its
-- timeline not durable, for good (a failover from it may lose claims). A commit waits when
-- catchup asked it to (durable_claims: synchronous_commit = remote_apply, trusted even while
-- the server has no synchronous standby, which doctor refuses) or when the server's commits
-- wait for its synchronous standbys. (PL/pgSQL: sql/schema.sql creates functions before
-- tables, and a SQL function's body is checked against the tables it names.)
CREATE OR REPLACE FUNCTION {schema}.note_claim() RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    UPDATE {schema}.timelines SET durable = false
    WHERE timeline = {schema}.server_timeline() AND durable IS DISTINCT FROM false
      AND NOT (current_setting('synchronous_commit') = 'remote_apply'
               OR (current_setting('synchronous_commit') IN ('on', 'remote_write')
                   AND current_setting('synchronous_standby_names') <> ''));
END
$$;

-- Whether a period (its end and its row's status, heartbeat and finish; NULLs: no row) is
-- suspect after a failover seen at p_seen (NULL: no failover).
CREATE OR REPLACE FUNCTION {schema}.is_suspect(
    p_seen timestamptz, p_period_end timestamptz, p_status text, p_heartbeat_at timestamptz,
    p_finished_at timestamptz)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(p_seen IS NOT NULL AND p_period_end <= p_seen
                    AND (p_status IS NULL
                         OR (p_status = 'running' AND p_heartbeat_at < p_seen)
                         OR (p_status = 'failed' AND p_finished_at < p_seen)), false)
$$;

-- claim_period as in 0014, and a suspect period is not claimed.
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
DECLARE
    seen timestamptz;
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
    SELECT CASE WHEN w.failover THEN w.seen_at END INTO seen FROM {schema}.failover_window(true) w;
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
        AND NOT ({schema}.is_suspect(seen, p_period_end, NULL, NULL, NULL)
                 AND NOT EXISTS (SELECT 1 FROM {schema}.runs x
                                 WHERE x.job_id = p_job_id AND x.key = p_key
                                   AND x.period_start = p_period_start))
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
        WHERE ((r.status = 'failed'
                AND (r.failures < p_max_attempts OR p_retry_exhausted)
                AND (r.retry_after <= clock_timestamp() OR p_ignore_backoff))
            OR (r.status = 'running'
                AND r.lease_expires_at <= clock_timestamp()
                AND (r.failures + 1 < p_max_attempts OR p_retry_exhausted)))
          AND NOT {schema}.is_suspect(seen, r.period_end, r.status, r.heartbeat_at,
                                      r.finished_at)
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
    IF FOUND THEN
        -- last: the timeline's row is the last lock a claim's transaction takes (no cycle
        -- with a finish-then-claim that holds a row this claim waits for)
        PERFORM {schema}.note_claim();
    END IF;
END
$$;

-- Suspect periods of one job and key decided: 'lost' (nothing of the old timeline's attempt
-- exists: the period is runnable at once, as its next attempt), 'adopted' (its output exists:
-- succeeded) or 'waived'. Each gets its row on the new timeline with the attempt number the
-- old timeline may have used (the row's, plus one), and that attempt's history says what was
-- decided. Periods that are not suspect (any more) are left alone and not returned.
CREATE OR REPLACE FUNCTION {schema}.decide_suspects(
    p_job_id bigint, p_key text, p_starts timestamptz[], p_ends timestamptz[],
    p_decision text, p_note text)
RETURNS TABLE (period_start timestamptz, attempt integer)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    seen timestamptz;
BEGIN
    IF p_decision NOT IN ('lost', 'adopted', 'waived') THEN
        RAISE EXCEPTION 'decide_suspects: % is not a decision', p_decision;
    END IF;
    SELECT CASE WHEN w.failover THEN w.seen_at END INTO seen FROM {schema}.failover_window(true) w;
    RETURN QUERY
    WITH decided AS (
        INSERT INTO {schema}.runs AS r
            (job_id, key, period_start, period_end, status, attempt, interrupted,
             finished_at, retry_after, error)
        SELECT p_job_id, p_key, u.s, u.f,
               CASE p_decision WHEN 'lost' THEN 'failed' WHEN 'adopted' THEN 'succeeded'
                               ELSE 'waived' END,
               1, p_decision = 'lost', clock_timestamp(), clock_timestamp(), p_note
        FROM unnest(p_starts, p_ends) AS u (s, f)
        WHERE {schema}.is_suspect(seen, u.f, NULL, NULL, NULL)
        ON CONFLICT (job_id, key, period_start) DO UPDATE SET
            status = excluded.status,
            attempt = r.attempt + 1,
            interrupted = excluded.interrupted,
            owner = NULL,
            lease_expires_at = NULL,
            finished_at = excluded.finished_at,
            retry_after = excluded.retry_after,
            exit_code = NULL,
            error = excluded.error
        WHERE {schema}.is_suspect(seen, r.period_end, r.status, r.heartbeat_at, r.finished_at)
        RETURNING r.job_id, r.key, r.period_start, r.attempt, r.finished_at
    ), closed AS (
        UPDATE {schema}.history h
        SET status = 'lost', finished_at = d.finished_at,
            error = 'the failover to timeline ' || {schema}.server_timeline()
                    || ' lost what came after; ' || p_note
        FROM decided d
        WHERE h.job_id = d.job_id AND h.key = d.key AND h.period_start = d.period_start
          AND h.attempt = d.attempt - 1 AND h.status = 'running'
    ), told AS (
        INSERT INTO {schema}.history (job_id, key, period_start, attempt, status, started_at,
                                      finished_at, error)
        SELECT d.job_id, d.key, d.period_start, d.attempt,
               CASE p_decision WHEN 'adopted' THEN 'succeeded' ELSE 'lost' END,
               seen, d.finished_at, p_note
        FROM decided d
        ON CONFLICT (job_id, key, period_start, attempt) DO NOTHING
    )
    SELECT d.period_start, d.attempt FROM decided d ORDER BY d.period_start;
END
$$;
