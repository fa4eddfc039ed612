-- The whole ledger schema as the migrations leave it, in one file to read (generated with
-- pg_dump from a freshly migrated schema; {schema} stands for the ledger's schema). catchup never
-- runs this file: sql/migrations/ are the truth, and tests/integration/test_schema.py fails when
-- this file and a freshly migrated schema differ. After a new migration, regenerate it:
--   uv run python tests/schema_dump.py > sql/schema.sql

-- schema {schema}

CREATE SCHEMA {schema};

-- function claim_period(text, bigint, text, timestamp with time zone, timestamp with time zone, text, interval, integer, boolean, boolean, boolean, boolean)

CREATE FUNCTION {schema}.claim_period(p_lock_space text, p_job_id bigint, p_key text, p_period_start timestamp with time zone, p_period_end timestamp with time zone, p_owner text, p_lease interval, p_max_attempts integer, p_allow_overlap boolean, p_whole_job boolean, p_ignore_backoff boolean, p_retry_exhausted boolean) RETURNS TABLE(id bigint, period_start timestamp with time zone, period_end timestamp with time zone, attempt integer, lease_expires_at timestamp with time zone, checkpoint text)
    LANGUAGE plpgsql
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
        SELECT p_job_id, p_key, p_period_start, p_period_end, 'running',
               -- the attempt after any its history has (a row a person deleted: 1 otherwise)
               1 + coalesce((SELECT max(h.attempt) FROM {schema}.history h
                             WHERE h.job_id = p_job_id AND h.key = p_key
                               AND h.period_start = p_period_start), 0),
               p_owner, clock_timestamp(), clock_timestamp(), clock_timestamp() + p_lease
        WHERE NOT EXISTS (
            SELECT 1 FROM {schema}.jobs j WHERE j.id = p_job_id AND j.paused_at IS NOT NULL)
        AND (p_key = '' OR NOT EXISTS (
            SELECT 1 FROM {schema}.job_keys k
            WHERE k.job_id = p_job_id AND k.key = p_key AND k.paused_at IS NOT NULL))
        AND (p_allow_overlap OR p_whole_job OR NOT EXISTS (
            -- another period of this key runs (the index runs_running_key)
            SELECT 1 FROM {schema}.runs o
            WHERE o.job_id = p_job_id AND o.key = p_key
              AND o.status = 'running'
              AND o.lease_expires_at > clock_timestamp()
              AND o.period_start <> p_period_start))
        AND (p_allow_overlap OR NOT p_whole_job OR NOT EXISTS (
            -- overlap = "forbid-job": another period of any of the job's keys runs
            SELECT 1 FROM {schema}.runs o
            WHERE o.job_id = p_job_id
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

-- function claim_periods(text, bigint, text[], timestamp with time zone[], timestamp with time zone[], text, interval, integer, boolean, boolean, boolean, boolean)

CREATE FUNCTION {schema}.claim_periods(p_lock_space text, p_job_id bigint, p_keys text[], p_starts timestamp with time zone[], p_ends timestamp with time zone[], p_owner text, p_lease interval, p_max_attempts integer, p_allow_overlap boolean, p_whole_job boolean, p_ignore_backoff boolean, p_retry_exhausted boolean) RETURNS TABLE(ord integer, id bigint, period_start timestamp with time zone, period_end timestamp with time zone, attempt integer, lease_expires_at timestamp with time zone, checkpoint text)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    lock_key integer;
    seen timestamptz;
BEGIN
    IF NOT p_allow_overlap THEN
        -- as in 0015: the locks in their own order, the claim a statement of its own
        FOR lock_key IN
            SELECT DISTINCT hashtext(CASE WHEN u.k = '' OR p_whole_job THEN p_lock_space
                                          ELSE p_lock_space || '/' || u.k END)
            FROM unnest(p_keys) AS u (k)
            ORDER BY 1
        LOOP
            PERFORM pg_advisory_xact_lock(lock_key, p_job_id::integer);
        END LOOP;
    END IF;
    SELECT CASE WHEN w.failover THEN w.seen_at END INTO seen FROM {schema}.failover_window(true) w;
    RETURN QUERY
    WITH wanted AS (
        SELECT DISTINCT ON (CASE WHEN p_whole_job AND NOT p_allow_overlap THEN '' ELSE u.k END,
                            CASE WHEN p_allow_overlap THEN u.s END)
               u.n::integer AS n, u.k, u.s, u.f
        FROM unnest(p_keys, p_starts, p_ends) WITH ORDINALITY AS u (k, s, f, n)
        ORDER BY CASE WHEN p_whole_job AND NOT p_allow_overlap THEN '' ELSE u.k END,
                 CASE WHEN p_allow_overlap THEN u.s END, u.s
    ), claimed AS (
        INSERT INTO {schema}.runs AS r
            (job_id, key, period_start, period_end, status, attempt, owner,
             claimed_at, heartbeat_at, lease_expires_at)
        SELECT p_job_id, w.k, w.s, w.f, 'running',
               -- the attempt after any its history has (a row a person deleted: 1 otherwise)
               1 + coalesce((SELECT max(h.attempt) FROM {schema}.history h
                             WHERE h.job_id = p_job_id AND h.key = w.k
                               AND h.period_start = w.s), 0),
               p_owner, clock_timestamp(), clock_timestamp(), clock_timestamp() + p_lease
        FROM wanted w
        WHERE NOT EXISTS (
            SELECT 1 FROM {schema}.jobs j WHERE j.id = p_job_id AND j.paused_at IS NOT NULL)
        AND (w.k = '' OR NOT EXISTS (
            SELECT 1 FROM {schema}.job_keys k
            WHERE k.job_id = p_job_id AND k.key = w.k AND k.paused_at IS NOT NULL))
        AND (p_allow_overlap OR p_whole_job OR NOT EXISTS (
            -- another period of this key runs (the index runs_running_key)
            SELECT 1 FROM {schema}.runs o
            WHERE o.job_id = p_job_id AND o.key = w.k
              AND o.status = 'running'
              AND o.lease_expires_at > clock_timestamp()
              AND o.period_start <> w.s))
        AND (p_allow_overlap OR NOT p_whole_job OR NOT EXISTS (
            -- overlap = "forbid-job": another period of any of the job's keys runs
            SELECT 1 FROM {schema}.runs o
            WHERE o.job_id = p_job_id
              AND o.status = 'running'
              AND o.lease_expires_at > clock_timestamp()
              AND (o.period_start <> w.s OR o.key <> w.k)))
        AND NOT ({schema}.is_suspect(seen, w.f, NULL, NULL, NULL)
                 AND NOT EXISTS (SELECT 1 FROM {schema}.runs x
                                 WHERE x.job_id = p_job_id AND x.key = w.k
                                   AND x.period_start = w.s))
        ORDER BY w.k, w.s
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
        SELECT c.job_id, c.key, c.period_start, c.attempt, 'running', c.owner, c.claimed_at
        FROM claimed c
    )
    SELECT w.n, c.id, c.period_start, c.period_end, c.attempt, c.lease_expires_at,
           c.checkpoint
    FROM claimed c JOIN wanted w ON w.k = c.key AND w.s = c.period_start
    ORDER BY w.n;
    IF FOUND THEN
        -- last: the timeline's row is the last lock a claim's transaction takes (no cycle
        -- with a finish-then-claim that holds a row this claim waits for)
        PERFORM {schema}.note_claim();
    END IF;
END
$$;

-- function decide_suspects(bigint, text, timestamp with time zone[], timestamp with time zone[], text, text)

CREATE FUNCTION {schema}.decide_suspects(p_job_id bigint, p_key text, p_starts timestamp with time zone[], p_ends timestamp with time zone[], p_decision text, p_note text) RETURNS TABLE(period_start timestamp with time zone, attempt integer)
    LANGUAGE plpgsql
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

-- function declare_durable()

CREATE FUNCTION {schema}.declare_durable() RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM {schema}.failover_window(true);
    UPDATE {schema}.timelines SET durable = true
    WHERE timeline = {schema}.server_timeline() AND durable IS NULL;
    RETURN FOUND;
END
$$;

-- function ended_cancelled(bigint, text, timestamp with time zone)

CREATE FUNCTION {schema}.ended_cancelled(p_job_id bigint, p_key text, p_period_start timestamp with time zone) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT coalesce((SELECT h.status = 'cancelled' FROM {schema}.history h
                     WHERE h.job_id = p_job_id AND h.key = p_key
                       AND h.period_start = p_period_start
                     ORDER BY h.attempt DESC LIMIT 1), false)
$$;

-- function failover_window(boolean)

CREATE FUNCTION {schema}.failover_window(p_note boolean, OUT timeline integer, OUT seen_at timestamp with time zone, OUT replayed_until timestamp with time zone, OUT failover boolean) RETURNS record
    LANGUAGE plpgsql
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

-- function finish_attempt(bigint, text, timestamp with time zone, integer, text, text, boolean, interval, interval, integer, text, text)

CREATE FUNCTION {schema}.finish_attempt(p_job_id bigint, p_key text, p_period_start timestamp with time zone, p_attempt integer, p_status text, p_history_status text, p_counts_as_failure boolean, p_backoff interval, p_backoff_cap interval, p_exit_code integer, p_error text, p_output_tail text) RETURNS TABLE(finished_at timestamp with time zone, failures integer, retry_after timestamp with time zone)
    LANGUAGE plpgsql
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

-- function finish_periods(bigint, text[], timestamp with time zone[], integer[], text[], text[], boolean[], interval, interval, integer[], text[], text[])

CREATE FUNCTION {schema}.finish_periods(p_job_id bigint, p_keys text[], p_starts timestamp with time zone[], p_attempts integer[], p_statuses text[], p_history_statuses text[], p_counts_as_failure boolean[], p_backoff interval, p_backoff_cap interval, p_exit_codes integer[], p_errors text[], p_output_tails text[]) RETURNS TABLE(ord integer, finished_at timestamp with time zone, failures integer, retry_after timestamp with time zone)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH given AS (
        SELECT DISTINCT ON (u.k, u.s) u.n::integer AS n, u.k, u.s, u.a, u.st, u.hs, u.cf,
               u.x, u.er, u.t
        FROM unnest(p_keys, p_starts, p_attempts, p_statuses, p_history_statuses,
                    p_counts_as_failure, p_exit_codes, p_errors, p_output_tails)
             WITH ORDINALITY AS u (k, s, a, st, hs, cf, x, er, t, n)
        ORDER BY u.k, u.s, u.n
    ), finished AS (
        UPDATE {schema}.runs r
        SET status = g.st,
            finished_at = clock_timestamp(),
            lease_expires_at = NULL,
            failures = r.failures + g.cf::integer,
            interrupted = g.st = 'failed' AND NOT g.cf,
            retry_after = CASE
                WHEN g.st <> 'failed' THEN NULL
                WHEN NOT g.cf THEN clock_timestamp()
                ELSE clock_timestamp()
                     + least(p_backoff * power(2, least(r.failures, 30))::float8,
                             greatest(p_backoff_cap, p_backoff))
            END,
            exit_code = g.x,
            error = g.er,
            output_tail = g.t
        FROM given g
        WHERE r.job_id = p_job_id AND r.key = g.k AND r.period_start = g.s
          AND r.attempt = g.a AND r.status = 'running'
        RETURNING g.n, r.job_id, r.key, r.period_start, r.attempt, r.finished_at, r.failures,
                  r.retry_after, g.hs, g.x, g.er, g.t
    ), closed AS (
        UPDATE {schema}.history h
        SET status = f.hs, finished_at = f.finished_at, exit_code = f.x, error = f.er,
            output_tail = f.t
        FROM finished f
        WHERE h.job_id = f.job_id AND h.key = f.key AND h.period_start = f.period_start
          AND h.attempt = f.attempt
    )
    SELECT f.n, f.finished_at, f.failures, f.retry_after FROM finished f ORDER BY f.n;
END
$$;

-- function finish_then_claim(bigint, text, timestamp with time zone, integer, text, text, boolean, interval, interval, integer, text, text, text, bigint, text, timestamp with time zone, timestamp with time zone, text, interval, integer, boolean, boolean, boolean, boolean)

CREATE FUNCTION {schema}.finish_then_claim(p_job_id bigint, p_key text, p_period_start timestamp with time zone, p_attempt integer, p_status text, p_history_status text, p_counts_as_failure boolean, p_backoff interval, p_backoff_cap interval, p_exit_code integer, p_error text, p_output_tail text, p_lock_space text, p_next_job_id bigint, p_next_key text, p_next_start timestamp with time zone, p_next_end timestamp with time zone, p_owner text, p_lease interval, p_max_attempts integer, p_allow_overlap boolean, p_whole_job boolean, p_ignore_backoff boolean, p_retry_exhausted boolean) RETURNS TABLE(finished_at timestamp with time zone, failures integer, retry_after timestamp with time zone, id bigint, period_start timestamp with time zone, period_end timestamp with time zone, attempt integer, lease_expires_at timestamp with time zone, checkpoint text)
    LANGUAGE plpgsql
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

-- function is_suspect(timestamp with time zone, timestamp with time zone, text, timestamp with time zone, timestamp with time zone)

CREATE FUNCTION {schema}.is_suspect(p_seen timestamp with time zone, p_period_end timestamp with time zone, p_status text, p_heartbeat_at timestamp with time zone, p_finished_at timestamp with time zone) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT coalesce(p_seen IS NOT NULL AND p_period_end <= p_seen
                    AND (p_status IS NULL
                         OR (p_status = 'running' AND p_heartbeat_at < p_seen)
                         OR (p_status = 'failed' AND p_finished_at < p_seen)), false)
$$;

-- function key_rewritten()

CREATE FUNCTION {schema}.key_rewritten() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

-- function local_series(timestamp without time zone, interval, bigint, bigint, text)

CREATE FUNCTION {schema}.local_series(origin timestamp without time zone, step interval, k0 bigint, n bigint, tz text) RETURNS TABLE(k bigint, period_start timestamp with time zone)
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT i, (origin + step * (k0 + i)) AT TIME ZONE tz FROM generate_series(0, n - 1) AS i
$$;

-- function note_claim()

CREATE FUNCTION {schema}.note_claim() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE {schema}.timelines SET durable = false
    WHERE timeline = {schema}.server_timeline() AND durable IS DISTINCT FROM false
      AND NOT (current_setting('synchronous_commit') = 'remote_apply'
               OR (current_setting('synchronous_commit') IN ('on', 'remote_write')
                   AND current_setting('synchronous_standby_names') <> ''));
END
$$;

-- function period_state(text, integer, timestamp with time zone, timestamp with time zone, integer)

CREATE FUNCTION {schema}.period_state(status text, failures integer, lease_expires_at timestamp with time zone, now timestamp with time zone, max_attempts integer) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE
        WHEN status IS NULL THEN 'missing'
        WHEN status = 'succeeded' THEN 'succeeded'
        WHEN status = 'waived' THEN 'waived'
        WHEN status = 'running' AND lease_expires_at > now THEN 'running'
        WHEN status = 'running' THEN 'stale'
        WHEN failures >= max_attempts THEN 'exhausted'
        ELSE 'failed'
    END
$$;

-- function period_state(text, integer, boolean, timestamp with time zone, timestamp with time zone, integer)

CREATE FUNCTION {schema}.period_state(status text, failures integer, interrupted boolean, lease_expires_at timestamp with time zone, now timestamp with time zone, max_attempts integer) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE
        WHEN status IS NULL THEN 'missing'
        WHEN status = 'succeeded' THEN 'succeeded'
        WHEN status = 'waived' THEN 'waived'
        WHEN status = 'running' AND lease_expires_at > now THEN 'running'
        WHEN status = 'running' THEN 'stale'
        WHEN failures >= max_attempts THEN 'exhausted'
        WHEN interrupted THEN 'interrupted'
        ELSE 'failed'
    END
$$;

-- function period_state(text, integer, boolean, boolean, timestamp with time zone, timestamp with time zone, integer)

CREATE FUNCTION {schema}.period_state(status text, failures integer, interrupted boolean, cancelled boolean, lease_expires_at timestamp with time zone, now timestamp with time zone, max_attempts integer) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT CASE
        WHEN status IS NULL THEN 'missing'
        WHEN status = 'succeeded' THEN 'succeeded'
        WHEN status = 'waived' THEN 'waived'
        WHEN status = 'running' AND lease_expires_at > now THEN 'running'
        WHEN status = 'running' THEN 'stale'
        WHEN failures >= max_attempts THEN 'exhausted'
        WHEN interrupted AND cancelled THEN 'cancelled'
        WHEN interrupted THEN 'interrupted'
        ELSE 'failed'
    END
$$;

-- function rename_job(text, text, text, text)

CREATE FUNCTION {schema}.rename_job(old_name text, new_name text, why_reason text, by_actor text, OUT job_id bigint, OUT why text) RETURNS record
    LANGUAGE plpgsql
    AS $$
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

-- function revive_periods(text, bigint, text, timestamp with time zone[])

CREATE FUNCTION {schema}.revive_periods(p_lock_space text, p_job_id bigint, p_key text, p_starts timestamp with time zone[]) RETURNS integer
    LANGUAGE plpgsql
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

-- function rows_removed()

CREATE FUNCTION {schema}.rows_removed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

-- function run_written()

CREATE FUNCTION {schema}.run_written() RETURNS trigger
    LANGUAGE plpgsql
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

-- function runs_emptied()

CREATE FUNCTION {schema}.runs_emptied() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM {schema}.coverage;
    UPDATE {schema}.scan_state SET generation = generation + 1;
    UPDATE {schema}.job_keys SET verified = NULL;
    RETURN NULL;
END;
$$;

-- function server_timeline()

CREATE FUNCTION {schema}.server_timeline() RETURNS integer
    LANGUAGE sql
    AS $$
    SELECT CASE WHEN NOT pg_is_in_recovery() THEN
        ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::integer
    END
$$;

-- table alert_outbox

CREATE TABLE {schema}.alert_outbox (
    id bigint NOT NULL,
    webhook text NOT NULL,
    body jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    next_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    delivered_at timestamp with time zone,
    error text
);

-- sequence alert_outbox_id_seq

ALTER TABLE {schema}.alert_outbox ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME {schema}.alert_outbox_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- table alert_ranges

CREATE TABLE {schema}.alert_ranges (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    state text NOT NULL,
    first timestamp with time zone NOT NULL,
    last timestamp with time zone NOT NULL,
    periods integer NOT NULL,
    opened_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    closed_at timestamp with time zone
);

-- sequence alert_ranges_id_seq

ALTER TABLE {schema}.alert_ranges ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME {schema}.alert_ranges_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- table cancels

CREATE TABLE {schema}.cancels (
    job_id bigint NOT NULL,
    key text DEFAULT ''::text NOT NULL,
    period_start timestamp with time zone NOT NULL,
    attempt integer NOT NULL,
    reason text NOT NULL,
    actor text NOT NULL,
    requested_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);

-- table compacted

CREATE TABLE {schema}.compacted (
    job_id bigint NOT NULL,
    period_start timestamp with time zone NOT NULL,
    claimed_at timestamp with time zone,
    finished_at timestamp with time zone NOT NULL,
    period_seconds integer NOT NULL,
    compacted_on date NOT NULL,
    attempt smallint NOT NULL,
    failures smallint NOT NULL,
    key text NOT NULL,
    CONSTRAINT compacted_attempt_check CHECK ((attempt >= 0)),
    CONSTRAINT compacted_period_seconds_check CHECK ((period_seconds > 0))
);

-- table compaction

CREATE TABLE {schema}.compaction (
    job_id bigint NOT NULL,
    through_at timestamp with time zone NOT NULL,
    through_id bigint NOT NULL,
    periods bigint DEFAULT 0 NOT NULL,
    attempts bigint DEFAULT 0 NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);

-- table coverage

CREATE TABLE {schema}.coverage (
    job_id bigint NOT NULL,
    first timestamp with time zone NOT NULL,
    last timestamp with time zone NOT NULL,
    CONSTRAINT coverage_check CHECK ((last >= first))
);

-- table events

CREATE TABLE {schema}.events (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    period_start timestamp with time zone,
    action text NOT NULL,
    previous text,
    reason text,
    actor text NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    key text DEFAULT ''::text NOT NULL
);

-- sequence events_id_seq

ALTER TABLE {schema}.events ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME {schema}.events_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- table evidence_state

CREATE TABLE {schema}.evidence_state (
    job_id bigint NOT NULL,
    signature text NOT NULL,
    verified_until timestamp with time zone NOT NULL,
    verified_at timestamp with time zone NOT NULL
);

-- table exclusions

CREATE TABLE {schema}.exclusions (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    key text,
    lo timestamp with time zone NOT NULL,
    hi timestamp with time zone NOT NULL,
    reason text NOT NULL,
    actor text NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    undone_at timestamp with time zone,
    undone_by text,
    undo_reason text,
    CONSTRAINT exclusions_check CHECK ((hi > lo))
);

-- sequence exclusions_id_seq

ALTER TABLE {schema}.exclusions ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME {schema}.exclusions_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- table history

CREATE TABLE {schema}.history (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    period_start timestamp with time zone NOT NULL,
    attempt integer NOT NULL,
    status text NOT NULL,
    owner text,
    started_at timestamp with time zone NOT NULL,
    finished_at timestamp with time zone,
    exit_code integer,
    error text,
    output_tail text,
    key text DEFAULT ''::text NOT NULL
);

-- sequence history_id_seq

ALTER TABLE {schema}.history ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME {schema}.history_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- table job_keys

CREATE TABLE {schema}.job_keys (
    job_id bigint NOT NULL,
    key text NOT NULL,
    expected_from timestamp with time zone NOT NULL,
    first_seen timestamp with time zone NOT NULL,
    last_seen timestamp with time zone NOT NULL,
    gone_at timestamp with time zone,
    paused_at timestamp with time zone,
    verified tstzmultirange,
    CONSTRAINT job_keys_key_check CHECK (((key <> ''::text) AND (length(key) <= 200)))
);

-- table jobs

CREATE TABLE {schema}.jobs (
    id bigint NOT NULL,
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    paused_at timestamp with time zone,
    start timestamp with time zone,
    retired_at timestamp with time zone,
    project text,
    definition jsonb,
    keys_read_at timestamp with time zone
);

-- sequence jobs_id_seq

ALTER TABLE {schema}.jobs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME {schema}.jobs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- table leader

CREATE TABLE {schema}.leader (
    name text NOT NULL,
    holder text NOT NULL,
    term bigint NOT NULL,
    since timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    renewed_at timestamp with time zone NOT NULL,
    lanes jsonb,
    CONSTRAINT leader_term_check CHECK ((term > 0))
);

-- table runs

CREATE TABLE {schema}.runs (
    id bigint NOT NULL,
    job_id bigint NOT NULL,
    period_start timestamp with time zone NOT NULL,
    period_end timestamp with time zone NOT NULL,
    status text NOT NULL,
    attempt integer NOT NULL,
    failures integer DEFAULT 0 NOT NULL,
    owner text,
    claimed_at timestamp with time zone,
    heartbeat_at timestamp with time zone,
    lease_expires_at timestamp with time zone,
    finished_at timestamp with time zone,
    retry_after timestamp with time zone,
    exit_code integer,
    error text,
    output_tail text,
    checkpoint text,
    interrupted boolean DEFAULT false NOT NULL,
    key text DEFAULT ''::text NOT NULL,
    compacted_at timestamp with time zone,
    CONSTRAINT runs_attempt_check CHECK ((attempt >= 0)),
    CONSTRAINT runs_check CHECK ((period_end > period_start)),
    CONSTRAINT runs_status_check CHECK ((status = ANY (ARRAY['running'::text, 'succeeded'::text, 'failed'::text, 'waived'::text])))
);

-- view periods

CREATE VIEW {schema}.periods AS
 SELECT r.id,
    r.job_id,
    r.key,
    r.period_start,
    r.period_end,
    r.status,
    r.attempt,
    r.failures,
    r.owner,
    r.claimed_at,
    r.heartbeat_at,
    r.lease_expires_at,
    r.finished_at,
    r.retry_after,
    r.exit_code,
    r.error,
    r.output_tail,
    r.checkpoint,
    r.interrupted,
    r.compacted_at
   FROM {schema}.runs r
UNION ALL
 SELECT NULL::bigint AS id,
    c.job_id,
    c.key,
    c.period_start,
    (c.period_start + ((c.period_seconds)::double precision * '00:00:01'::interval)) AS period_end,
    'succeeded'::text AS status,
    (c.attempt)::integer AS attempt,
    (c.failures)::integer AS failures,
    NULL::text AS owner,
    c.claimed_at,
    NULL::timestamp with time zone AS heartbeat_at,
    NULL::timestamp with time zone AS lease_expires_at,
    c.finished_at,
    NULL::timestamp with time zone AS retry_after,
    NULL::integer AS exit_code,
    NULL::text AS error,
    NULL::text AS output_tail,
    NULL::text AS checkpoint,
    false AS interrupted,
    ((c.compacted_on)::timestamp without time zone AT TIME ZONE 'UTC'::text) AS compacted_at
   FROM {schema}.compacted c;

-- sequence runs_id_seq

ALTER TABLE {schema}.runs ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME {schema}.runs_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- table scan_state

CREATE TABLE {schema}.scan_state (
    job_id bigint NOT NULL,
    signature text NOT NULL,
    generation bigint DEFAULT 0 NOT NULL,
    keys_horizon timestamp with time zone
);

-- table schedules

CREATE TABLE {schema}.schedules (
    job_id bigint NOT NULL,
    since timestamp with time zone NOT NULL,
    schedule text NOT NULL,
    timezone text NOT NULL,
    recorded_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    recorded_by text NOT NULL
);

-- table schema_version

CREATE TABLE {schema}.schema_version (
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL
);

-- table ticks

CREATE TABLE {schema}.ticks (
    id bigint NOT NULL,
    host text NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    term bigint
);

-- sequence ticks_id_seq

ALTER TABLE {schema}.ticks ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME {schema}.ticks_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

-- table timelines

CREATE TABLE {schema}.timelines (
    timeline integer NOT NULL,
    seen_at timestamp with time zone NOT NULL,
    replayed_until timestamp with time zone,
    failover boolean NOT NULL,
    durable boolean,
    CONSTRAINT timelines_timeline_check CHECK ((timeline > 0))
);

-- constraint alert_outbox alert_outbox_pkey

ALTER TABLE ONLY {schema}.alert_outbox
    ADD CONSTRAINT alert_outbox_pkey PRIMARY KEY (id);

-- constraint alert_ranges alert_ranges_pkey

ALTER TABLE ONLY {schema}.alert_ranges
    ADD CONSTRAINT alert_ranges_pkey PRIMARY KEY (id);

-- constraint cancels cancels_pkey

ALTER TABLE ONLY {schema}.cancels
    ADD CONSTRAINT cancels_pkey PRIMARY KEY (job_id, key, period_start, attempt);

-- constraint compacted compacted_pkey

ALTER TABLE ONLY {schema}.compacted
    ADD CONSTRAINT compacted_pkey PRIMARY KEY (job_id, key, period_start) WITH (fillfactor='100');

-- constraint compaction compaction_pkey

ALTER TABLE ONLY {schema}.compaction
    ADD CONSTRAINT compaction_pkey PRIMARY KEY (job_id);

-- constraint coverage coverage_pkey

ALTER TABLE ONLY {schema}.coverage
    ADD CONSTRAINT coverage_pkey PRIMARY KEY (job_id, first);

-- check constraint events events_action_check

ALTER TABLE {schema}.events
    ADD CONSTRAINT events_action_check CHECK ((action = ANY (ARRAY['done'::text, 'skip'::text, 'reset'::text, 'pause'::text, 'resume'::text, 'schedule'::text, 'start'::text, 'adopt'::text, 'rename'::text, 'retire'::text, 'cancel'::text, 'ping'::text, 'exclude'::text, 'include'::text]))) NOT VALID;

-- constraint events events_pkey

ALTER TABLE ONLY {schema}.events
    ADD CONSTRAINT events_pkey PRIMARY KEY (id);

-- constraint evidence_state evidence_state_pkey

ALTER TABLE ONLY {schema}.evidence_state
    ADD CONSTRAINT evidence_state_pkey PRIMARY KEY (job_id);

-- constraint exclusions exclusions_pkey

ALTER TABLE ONLY {schema}.exclusions
    ADD CONSTRAINT exclusions_pkey PRIMARY KEY (id);

-- constraint history history_identity

ALTER TABLE ONLY {schema}.history
    ADD CONSTRAINT history_identity UNIQUE (job_id, key, period_start, attempt);

-- constraint history history_pkey

ALTER TABLE ONLY {schema}.history
    ADD CONSTRAINT history_pkey PRIMARY KEY (id);

-- check constraint history history_status_check

ALTER TABLE {schema}.history
    ADD CONSTRAINT history_status_check CHECK ((status = ANY (ARRAY['running'::text, 'succeeded'::text, 'failed'::text, 'lost'::text, 'interrupted'::text, 'cancelled'::text]))) NOT VALID;

-- constraint job_keys job_keys_pkey

ALTER TABLE ONLY {schema}.job_keys
    ADD CONSTRAINT job_keys_pkey PRIMARY KEY (job_id, key);

-- constraint jobs jobs_name_key

ALTER TABLE ONLY {schema}.jobs
    ADD CONSTRAINT jobs_name_key UNIQUE (name);

-- constraint jobs jobs_pkey

ALTER TABLE ONLY {schema}.jobs
    ADD CONSTRAINT jobs_pkey PRIMARY KEY (id);

-- constraint leader leader_pkey

ALTER TABLE ONLY {schema}.leader
    ADD CONSTRAINT leader_pkey PRIMARY KEY (name);

-- check constraint runs runs_compacted_settled

ALTER TABLE {schema}.runs
    ADD CONSTRAINT runs_compacted_settled CHECK (((compacted_at IS NULL) OR (status = ANY (ARRAY['succeeded'::text, 'waived'::text])))) NOT VALID;

-- constraint runs runs_id_key

ALTER TABLE ONLY {schema}.runs
    ADD CONSTRAINT runs_id_key UNIQUE (id);

-- constraint runs runs_pkey

ALTER TABLE ONLY {schema}.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (job_id, key, period_start);

-- constraint scan_state scan_state_pkey

ALTER TABLE ONLY {schema}.scan_state
    ADD CONSTRAINT scan_state_pkey PRIMARY KEY (job_id);

-- constraint schedules schedules_pkey

ALTER TABLE ONLY {schema}.schedules
    ADD CONSTRAINT schedules_pkey PRIMARY KEY (job_id, since);

-- constraint schema_version schema_version_pkey

ALTER TABLE ONLY {schema}.schema_version
    ADD CONSTRAINT schema_version_pkey PRIMARY KEY (version);

-- constraint ticks ticks_pkey

ALTER TABLE ONLY {schema}.ticks
    ADD CONSTRAINT ticks_pkey PRIMARY KEY (id);

-- constraint timelines timelines_pkey

ALTER TABLE ONLY {schema}.timelines
    ADD CONSTRAINT timelines_pkey PRIMARY KEY (timeline);

-- index alert_outbox_pending

CREATE INDEX alert_outbox_pending ON {schema}.alert_outbox USING btree (next_at) WHERE (delivered_at IS NULL);

-- index alert_ranges_open

CREATE INDEX alert_ranges_open ON {schema}.alert_ranges USING btree (job_id) WHERE (closed_at IS NULL);

-- index compacted_reruns

CREATE INDEX compacted_reruns ON {schema}.compacted USING btree (job_id, period_start) INCLUDE (period_seconds, finished_at) WHERE (attempt > 1);

-- index events_job

CREATE INDEX events_job ON {schema}.events USING btree (job_id, at);

-- index exclusions_live

CREATE INDEX exclusions_live ON {schema}.exclusions USING btree (job_id, lo) WHERE (undone_at IS NULL);

-- index exclusions_one_live

CREATE UNIQUE INDEX exclusions_one_live ON {schema}.exclusions USING btree (job_id, key, lo, hi) NULLS NOT DISTINCT WHERE (undone_at IS NULL);

-- index runs_finished

CREATE INDEX runs_finished ON {schema}.runs USING btree (job_id, finished_at);

-- index runs_reruns

CREATE INDEX runs_reruns ON {schema}.runs USING btree (job_id, period_start) INCLUDE (period_end, finished_at) WHERE ((status = 'succeeded'::text) AND (attempt > 1));

-- index runs_running

CREATE INDEX runs_running ON {schema}.runs USING btree (job_id, lease_expires_at) WHERE (status = 'running'::text);

-- index runs_running_key

CREATE INDEX runs_running_key ON {schema}.runs USING btree (job_id, key, lease_expires_at) WHERE (status = 'running'::text);

-- index runs_unfinished

CREATE INDEX runs_unfinished ON {schema}.runs USING btree (job_id, key, period_start) INCLUDE (status, failures, interrupted, lease_expires_at) WHERE (status <> 'succeeded'::text);

-- index ticks_at

CREATE INDEX ticks_at ON {schema}.ticks USING btree (at);

-- trigger compacted compacted_deleted

CREATE TRIGGER compacted_deleted AFTER DELETE ON {schema}.compacted REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION {schema}.rows_removed();

-- trigger runs runs_deleted

CREATE TRIGGER runs_deleted AFTER DELETE ON {schema}.runs REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION {schema}.rows_removed();

-- trigger runs runs_rekeyed

CREATE TRIGGER runs_rekeyed AFTER UPDATE ON {schema}.runs FOR EACH ROW WHEN (((old.job_id IS DISTINCT FROM new.job_id) OR (old.period_start IS DISTINCT FROM new.period_start) OR (old.key IS DISTINCT FROM new.key))) EXECUTE FUNCTION {schema}.key_rewritten();

-- trigger runs runs_truncated

CREATE TRIGGER runs_truncated AFTER TRUNCATE ON {schema}.runs FOR EACH STATEMENT EXECUTE FUNCTION {schema}.runs_emptied();

-- trigger runs runs_written

CREATE TRIGGER runs_written BEFORE INSERT ON {schema}.runs FOR EACH ROW EXECUTE FUNCTION {schema}.run_written();

-- fk constraint alert_ranges alert_ranges_job_id_fkey

ALTER TABLE ONLY {schema}.alert_ranges
    ADD CONSTRAINT alert_ranges_job_id_fkey FOREIGN KEY (job_id) REFERENCES {schema}.jobs(id);

-- fk constraint cancels cancels_job_id_fkey

ALTER TABLE ONLY {schema}.cancels
    ADD CONSTRAINT cancels_job_id_fkey FOREIGN KEY (job_id) REFERENCES {schema}.jobs(id);

-- fk constraint compacted compacted_job_id_fkey

ALTER TABLE ONLY {schema}.compacted
    ADD CONSTRAINT compacted_job_id_fkey FOREIGN KEY (job_id) REFERENCES {schema}.jobs(id);

-- fk constraint compaction compaction_job_id_fkey

ALTER TABLE ONLY {schema}.compaction
    ADD CONSTRAINT compaction_job_id_fkey FOREIGN KEY (job_id) REFERENCES {schema}.jobs(id);

-- fk constraint coverage coverage_job_id_fkey

ALTER TABLE ONLY {schema}.coverage
    ADD CONSTRAINT coverage_job_id_fkey FOREIGN KEY (job_id) REFERENCES {schema}.jobs(id);

-- fk constraint events events_job_id_fkey

ALTER TABLE ONLY {schema}.events
    ADD CONSTRAINT events_job_id_fkey FOREIGN KEY (job_id) REFERENCES {schema}.jobs(id);

-- fk constraint evidence_state evidence_state_job_id_fkey

ALTER TABLE ONLY {schema}.evidence_state
    ADD CONSTRAINT evidence_state_job_id_fkey FOREIGN KEY (job_id) REFERENCES {schema}.jobs(id);

-- fk constraint exclusions exclusions_job_id_fkey

ALTER TABLE ONLY {schema}.exclusions
    ADD CONSTRAINT exclusions_job_id_fkey FOREIGN KEY (job_id) REFERENCES {schema}.jobs(id);

-- fk constraint history history_job_id_fkey

ALTER TABLE ONLY {schema}.history
    ADD CONSTRAINT history_job_id_fkey FOREIGN KEY (job_id) REFERENCES {schema}.jobs(id);

-- fk constraint runs runs_job_id_fkey

ALTER TABLE ONLY {schema}.runs
    ADD CONSTRAINT runs_job_id_fkey FOREIGN KEY (job_id) REFERENCES {schema}.jobs(id);

-- fk constraint scan_state scan_state_job_id_fkey

ALTER TABLE ONLY {schema}.scan_state
    ADD CONSTRAINT scan_state_job_id_fkey FOREIGN KEY (job_id) REFERENCES {schema}.jobs(id);

-- fk constraint schedules schedules_job_id_fkey

ALTER TABLE ONLY {schema}.schedules
    ADD CONSTRAINT schedules_job_id_fkey FOREIGN KEY (job_id) REFERENCES {schema}.jobs(id);
