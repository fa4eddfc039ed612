-- Windows recorded afterwards (catchup exclude): spans of a job's periods nobody expected.
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Time comes from clock_timestamp() on the server, never from the host.
-- Statements of catchup/ledger/exclusions.py, one per "-- name:" header (names unique across files).

-- name: record_exclusion
-- No row back when the same live window is recorded already (a command run twice, or two at
-- once: the unique index of live windows, sql/migrations/0026, decides).
INSERT INTO {schema}.exclusions (job_id, key, lo, hi, reason, actor)
VALUES (%(job_id)s, %(key)s, %(lo)s, %(hi)s, %(reason)s, %(actor)s)
ON CONFLICT (job_id, key, lo, hi) WHERE undone_at IS NULL DO NOTHING
RETURNING id;

-- name: undo_exclusions
-- The live windows of a job (of one key, or the job's own when key is null) that lie within
-- [lo, hi): undone, the rows kept with who undid them and why.
UPDATE {schema}.exclusions
SET undone_at = clock_timestamp(), undone_by = %(actor)s, undo_reason = %(reason)s
WHERE job_id = %(job_id)s AND undone_at IS NULL AND key IS NOT DISTINCT FROM %(key)s
  AND lo >= %(lo)s AND hi <= %(hi)s
RETURNING lo, hi, reason, actor, at;

-- name: live_exclusions
-- The live windows that meet each job's span [lo, hi), every key's, oldest first.
SELECT x.job_id, x.key, x.lo, x.hi, x.reason, x.actor, x.at
FROM unnest(%(job_ids)s::bigint[], %(los)s::timestamptz[], %(his)s::timestamptz[])
     AS w (job_id, lo, hi)
JOIN {schema}.exclusions x
  ON x.job_id = w.job_id AND x.undone_at IS NULL AND x.lo < w.hi AND x.hi > w.lo
ORDER BY x.job_id, x.lo, x.id;

-- name: exclusion_at
-- The live window a period of a job (of key) starting at %(start)s falls in, the oldest.
SELECT job_id, key, lo, hi, reason, actor, at
FROM {schema}.exclusions
WHERE job_id = %(job_id)s AND undone_at IS NULL AND (key IS NULL OR key = %(key)s)
  AND lo <= %(start)s AND hi > %(start)s
ORDER BY lo, id
LIMIT 1;

-- name: excluded_among
-- Which of these periods (job, key, start; numbered from 1) a live window excludes and that
-- have no outcome that stands (running, succeeded or waived: a period a claim would wait for,
-- or find done, whatever a window says).
SELECT n.i
FROM unnest(%(job_ids)s::bigint[], %(keys)s::text[], %(starts)s::timestamptz[])
     WITH ORDINALITY AS n (job_id, key, start, i)
WHERE EXISTS (
    SELECT 1 FROM {schema}.exclusions x
    WHERE x.job_id = n.job_id AND x.undone_at IS NULL AND (x.key IS NULL OR x.key = n.key)
      AND x.lo <= n.start AND x.hi > n.start
)
  AND NOT EXISTS (
    SELECT 1 FROM {schema}.periods r
    WHERE r.job_id = n.job_id AND r.key = n.key AND r.period_start = n.start
      AND r.status IN ('running', 'succeeded', 'waived')
)
ORDER BY n.i;
