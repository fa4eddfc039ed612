-- Compaction (sql/migrations/0016): a settled period's detail dropped, its fact kept; and what
-- the doctor and /metrics say of the ledger's size.
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Time comes from clock_timestamp() on the server, never from the host.
-- Statements of catchup/ledger/compaction.py, one per "-- name:" header (names unique across files).

-- name: compaction_turn
-- One compactor per job at a time, across hosts: false when another holds the job now. Held
-- until the batch's transaction ends; claims take other locks and never wait on it.
SELECT pg_try_advisory_xact_lock(hashtext('catchup compaction ' || %(schema)s),
                                 %(job_id)s::integer);

-- name: compaction_lock
-- The job's compaction lock (sql/migrations/0020), exclusive until the batch's transaction
-- ends: a claim or a mark of the job waits for the batch (at most one batch's time) and then
-- finds its periods moved to compacted, never between the move's delete and its commit.
SELECT pg_advisory_xact_lock(hashtext('catchup compacted ' || %(schema)s),
                             %(job_id)s::integer);

-- name: compact_batch
-- One batch of one job, in its caller's transaction (which holds the job's turn and its
-- compaction lock): the next runs (at most limit) finished before the cutoff, from the job's
-- cursor on in the order of the runs_finished index. Those settled and not compacted yet lose
-- their attempts' history rows; a succeeded one moves to compacted (its fact: first claim,
-- finish, attempt, failures, the day), a waived one (or one of over 32,767 attempts) stays
-- in runs without its bulky columns and keeps its waiver's note (its error). A succeeded row that 0016 compacted inside runs
-- moves too, not counted again. A failed or running run is only passed over: it settles later
-- with a new finished_at, beyond the cursor. The rows are locked FOR UPDATE, so a mark or
-- reset that meanwhile changed one is seen (and the row skipped when it is no longer settled
-- or no longer old). The cursor moves to the last run looked at, or to the cutoff when none
-- are left before it, and never back.
WITH cursor AS (
    SELECT coalesce(max(c.through_at), '-infinity'::timestamptz) AS at,
           coalesce(max(c.through_id), 0) AS id
    FROM {schema}.compaction c
    WHERE c.job_id = %(job_id)s
), scanned AS (
    SELECT r.id, r.finished_at
    FROM {schema}.runs r, cursor c
    WHERE r.job_id = %(job_id)s
      AND r.finished_at >= c.at AND (r.finished_at, r.id) > (c.at, c.id)
      AND r.finished_at < %(before)s
    ORDER BY r.finished_at, r.id
    LIMIT %(limit)s
), chosen AS (
    SELECT r.id, r.key, r.period_start, r.status, r.compacted_at,
           -- what compacted's columns hold: a whole number of seconds in an integer, and
           -- attempt and failures in smallints; a period that does not fit stays in runs
           r.attempt <= 32767 AND r.failures <= 32767
           AND extract(epoch FROM r.period_end - r.period_start) BETWEEN 1 AND 2147483647
           AND date_trunc('second', r.period_end - r.period_start)
               = r.period_end - r.period_start AS fits
    FROM {schema}.runs r JOIN scanned s ON s.id = r.id
    WHERE r.status IN ('succeeded', 'waived')
      AND (r.compacted_at IS NULL OR r.status = 'succeeded')
      AND r.finished_at < %(before)s
    FOR UPDATE OF r
), dropped AS (
    DELETE FROM {schema}.history h
    USING chosen c
    WHERE h.job_id = %(job_id)s AND h.key = c.key AND h.period_start = c.period_start
    RETURNING h.key, h.period_start, h.started_at
), firsts AS (
    SELECT d.key, d.period_start, min(d.started_at) AS first
    FROM dropped d
    GROUP BY d.key, d.period_start
), moved AS (
    DELETE FROM {schema}.runs r
    USING chosen c
    WHERE r.id = c.id AND c.status = 'succeeded' AND c.fits
    RETURNING r.job_id, r.key, r.period_start, r.period_end, r.claimed_at, r.finished_at,
              r.attempt, r.failures, r.compacted_at
), facts AS (
    INSERT INTO {schema}.compacted (job_id, compacted_on, period_start, period_seconds,
                                    claimed_at, finished_at, attempt, failures, key)
    SELECT m.job_id, (coalesce(m.compacted_at, clock_timestamp()) AT TIME ZONE 'UTC')::date,
           m.period_start, extract(epoch FROM m.period_end - m.period_start)::integer,
           coalesce(f.first, m.claimed_at), m.finished_at, m.attempt, m.failures, m.key
    FROM moved m
    LEFT JOIN firsts f ON f.key = m.key AND f.period_start = m.period_start
    ORDER BY m.key, m.period_start
    RETURNING 1
), waived AS (
    UPDATE {schema}.runs r
    SET compacted_at = clock_timestamp(),
        claimed_at = coalesce(f.first, r.claimed_at),
        owner = NULL, heartbeat_at = NULL, exit_code = NULL, output_tail = NULL,
        checkpoint = NULL
    FROM chosen c
    LEFT JOIN firsts f ON f.key = c.key AND f.period_start = c.period_start
    WHERE r.id = c.id AND c.compacted_at IS NULL
      AND (c.status = 'waived' OR NOT c.fits)
    RETURNING r.id
), looked AS (
    SELECT count(*) AS n,
           (array_agg(s.finished_at ORDER BY s.finished_at DESC, s.id DESC))[1] AS last_at,
           (array_agg(s.id ORDER BY s.finished_at DESC, s.id DESC))[1] AS last_id
    FROM scanned s
), done AS (
    SELECT (SELECT count(*) FROM moved WHERE compacted_at IS NULL)
           + (SELECT count(*) FROM waived) AS periods,
           (SELECT count(*) FROM dropped) AS attempts,
           (SELECT count(*) FROM facts) AS facts
), moved_on AS (
    INSERT INTO {schema}.compaction AS m (job_id, through_at, through_id, periods, attempts)
    SELECT %(job_id)s,
           CASE WHEN l.n < %(limit)s THEN %(before)s ELSE l.last_at END,
           CASE WHEN l.n < %(limit)s THEN 0 ELSE l.last_id END,
           d.periods, d.attempts
    FROM looked l, done d
    ON CONFLICT (job_id) DO UPDATE SET
        through_at = CASE WHEN (excluded.through_at, excluded.through_id)
                               > (m.through_at, m.through_id)
                          THEN excluded.through_at ELSE m.through_at END,
        through_id = CASE WHEN (excluded.through_at, excluded.through_id)
                               > (m.through_at, m.through_id)
                          THEN excluded.through_id ELSE m.through_id END,
        periods = m.periods + excluded.periods,
        attempts = m.attempts + excluded.attempts,
        at = clock_timestamp()
    RETURNING m.through_at
)
SELECT d.periods, d.attempts, l.n AS looked, (SELECT through_at FROM moved_on) AS through
FROM looked l, done d;

-- name: compaction_plan
-- What a compaction before the cutoff would drop of one job, changing nothing (--dry-run):
-- the settled runs not compacted yet, their attempts and the bytes of their detail.
WITH cursor AS (
    SELECT coalesce(max(c.through_at), '-infinity'::timestamptz) AS at,
           coalesce(max(c.through_id), 0) AS id
    FROM {schema}.compaction c
    WHERE c.job_id = %(job_id)s
), candidates AS (
    SELECT r.key, r.period_start,
           coalesce(pg_column_size(r.output_tail), 0) + coalesce(pg_column_size(r.checkpoint), 0)
           + coalesce(pg_column_size(r.owner), 0) AS bytes
    FROM {schema}.runs r, cursor c
    WHERE r.job_id = %(job_id)s
      AND r.finished_at >= c.at AND (r.finished_at, r.id) > (c.at, c.id)
      AND r.finished_at < %(before)s
      AND r.status IN ('succeeded', 'waived') AND r.compacted_at IS NULL
), attempts AS (
    SELECT count(*) AS n, coalesce(sum(pg_column_size(h.*)), 0) AS bytes
    FROM {schema}.history h
    JOIN candidates c ON c.key = h.key AND c.period_start = h.period_start
    WHERE h.job_id = %(job_id)s
)
SELECT (SELECT count(*) FROM candidates) AS periods, a.n AS attempts,
       a.bytes + (SELECT coalesce(sum(c.bytes), 0) FROM candidates c) AS bytes
FROM attempts a;

-- name: compaction_behind
-- The oldest settled run of one job finished before the cutoff and not compacted yet (NULL:
-- none), read from the job's cursor on; and what the job's compaction has done so far.
WITH cursor AS (
    SELECT coalesce(max(c.through_at), '-infinity'::timestamptz) AS at,
           coalesce(max(c.through_id), 0) AS id,
           coalesce(max(c.periods), 0) AS periods, max(c.at) AS at_last
    FROM {schema}.compaction c
    WHERE c.job_id = %(job_id)s
)
SELECT (SELECT r.finished_at
        FROM {schema}.runs r
        WHERE r.job_id = %(job_id)s
          AND r.finished_at >= c.at AND (r.finished_at, r.id) > (c.at, c.id)
          AND r.finished_at < %(before)s
          AND r.status IN ('succeeded', 'waived') AND r.compacted_at IS NULL
        ORDER BY r.finished_at, r.id
        LIMIT 1) AS oldest,
       c.periods, c.at_last AS compacted_at
FROM cursor c;

-- name: compacted_run
-- One period's compact record, when its detail was compacted (for history and why).
SELECT r.period_start, r.key, r.status, r.attempt, r.failures, r.claimed_at, r.finished_at,
       r.compacted_at, r.error
FROM {schema}.periods r
WHERE r.job_id = %(job_id)s AND r.key = %(key)s AND r.period_start = %(period_start)s
  AND r.compacted_at IS NOT NULL;

-- name: compaction_totals
-- How many of one job's periods were compacted, and when last (NULL: never).
SELECT coalesce(max(c.periods), 0) AS periods, max(c.at) AS at
FROM {schema}.compaction c
WHERE c.job_id = %(job_id)s AND c.periods > 0;

-- name: ledger_tables
-- Each of the ledger's tables: its rows (the live rows the statistics system counts as rows
-- are written and deleted; the planner's estimate when it has none, after a crash or a reset
-- of the statistics) and its bytes with indexes and TOAST.
SELECT c.relname AS name,
       CASE WHEN pg_stat_get_live_tuples(c.oid) > 0 OR c.reltuples <= 0
            THEN pg_stat_get_live_tuples(c.oid) ELSE c.reltuples::bigint END AS rows,
       pg_total_relation_size(c.oid) AS bytes
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p')
ORDER BY c.relname;

-- name: oldest_detail
-- The start of the oldest attempt the history keeps (ids grow with time): NULL when none.
SELECT h.started_at FROM {schema}.history h ORDER BY h.id LIMIT 1;
