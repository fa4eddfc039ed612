-- Evidence queries: the user's SELECT as a bounded subquery, checked against the runs.
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Time comes from clock_timestamp() on the server, never from the host.
-- Statements of catchup/ledger/evidence.py, one per "-- name:" header (names unique across files).

-- name: evidence_begin
-- A job's evidence query runs read-only, bounded in time, in a transaction of its own.
SET TRANSACTION READ ONLY;

-- name: evidence_timeout
-- Set again before each of the user's statements: one that changed it cannot unbound the next.
SELECT set_config('statement_timeout', %(timeout)s, true);

-- name: evidence_discard
-- After a keys or evidence query on the ledger's own connection (its transaction rolled back
-- already): whatever session state the user's SQL left (advisory locks, cursors held, settings,
-- prepared statements) is gone before the claim path uses the connection again.
DISCARD ALL;

-- name: evidence_probe
-- The evidence query's columns, without running it.
SELECT * FROM ({evidence}) AS e LIMIT 0;

-- name: evidence_date
-- A date of evidence is that day's local midnight in the job's zone.
(e.v::timestamp AT TIME ZONE %(zone)s)

-- name: evidence_timestamp
-- A timestamp without a zone is a UTC time, like every time in the ledger.
(e.v AT TIME ZONE 'UTC')

-- name: evidence_timestamptz
e.v

-- name: evidence_source
-- The evidence query as a subquery, bounded in its column's own type (so an index on it is
-- used), its values as instants. {elo} and {ehi}: the bounds, parameters or a range's columns.
SELECT {value} AS v FROM ({evidence}) AS e(v) WHERE e.v >= {elo} AND e.v < {ehi}

-- name: evidence_ranged
-- The evidence in each of several ranges [lo, hi) of period starts (elo, ehi: the same
-- ranges, wide enough, in the column's own type).
SELECT s.v
FROM unnest(%(los)s::timestamptz[], %(his)s::timestamptz[], %(elos)s, %(ehis)s)
     AS x (lo, hi, elo, ehi)
CROSS JOIN LATERAL ({source}) AS s
WHERE s.v >= x.lo AND s.v < x.hi

-- name: evidence_values
-- The evidence query's values, run on the job's evidence_dsn, to be checked on the ledger.
SELECT DISTINCT v FROM ({ranged}) AS s ORDER BY v;

-- name: evidence_listed
SELECT unnest(%(values)s::timestamptz[]) AS v

-- name: evidence_check
-- A job's ledger rows in the ranges [lo, hi) (period starts; they do not overlap) walked in
-- time order with the evidence values in them, one sort and running aggregates only: a value
-- no row's [period_start, period_end) holds is untracked (its period is found by the
-- schedule, in Python); a value inside a row verifies that row; a succeeded row that no value
-- verifies is unverified.
WITH ranges AS (
    SELECT * FROM unnest(%(los)s::timestamptz[], %(his)s::timestamptz[]) AS x (lo, hi)
), ev AS ({source}),
marks AS (
    SELECT r.period_start AS t, 0 AS kind, r.period_end AS e
    FROM ranges x
    JOIN {schema}.periods r
      ON r.job_id = %(job_id)s AND r.key = '' AND r.period_start >= x.lo
     AND r.period_start < x.hi
    UNION ALL
    SELECT v, 1, NULL FROM ev
), walked AS (
    -- rows do not overlap, so the latest row started so far holds t when it ends after t
    SELECT t, kind,
           max(e) OVER w AS held_until,
           max(t) FILTER (WHERE kind = 0) OVER w AS row_start
    FROM marks
    WINDOW w AS (ORDER BY t, kind ROWS UNBOUNDED PRECEDING)
), verified AS (
    SELECT DISTINCT row_start FROM walked WHERE kind = 1 AND held_until > t
)
SELECT 'untracked', t FROM walked
WHERE kind = 1 AND (held_until IS NULL OR held_until <= t)
UNION ALL
SELECT 'unverified', r.period_start
FROM ranges x
JOIN {schema}.periods r
  ON r.job_id = %(job_id)s AND r.key = '' AND r.period_start >= x.lo AND r.period_start < x.hi
WHERE r.status = 'succeeded'
  AND NOT EXISTS (SELECT 1 FROM verified v WHERE v.row_start = r.period_start)
ORDER BY 2;

-- name: evidence_states
-- What earlier scans verified of these jobs' evidence.
SELECT job_id, signature, verified_until, verified_at
FROM {schema}.evidence_state WHERE job_id = ANY(%(job_ids)s::bigint[]);

-- name: evidence_changed
-- A job's rows in [lo, hi) that changed since its evidence was verified (or are running).
SELECT period_start, period_end FROM {schema}.runs
WHERE job_id = %(job_id)s AND key = '' AND period_start >= %(lo)s AND period_start < %(hi)s
  AND (finished_at IS NULL OR finished_at > %(verified_at)s)
ORDER BY period_start;

-- name: record_evidence_state
INSERT INTO {schema}.evidence_state (job_id, signature, verified_until, verified_at)
VALUES (%(job_id)s, %(signature)s, %(verified_until)s, %(verified_at)s)
ON CONFLICT (job_id) DO UPDATE
SET signature = excluded.signature, verified_until = excluded.verified_until,
    verified_at = excluded.verified_at;

-- name: evidence_present
-- Whether the evidence shows output for one period [lo, hi): before a claim (an untracked
-- period is never run) and after a run with verify = true.
SELECT EXISTS (SELECT 1 FROM ({source}) AS s WHERE s.v >= %(lo)s AND s.v < %(hi)s);

-- name: evidence_source_keys
-- A keyed job's evidence query (the key, then a date or timestamp) as a subquery, bounded in
-- its second column's own type, its keys as text and its values as instants.
SELECT e.k::text AS k, {value} AS v FROM ({evidence}) AS e(k, v)
WHERE e.v >= {elo} AND e.v < {ehi}

-- name: evidence_present_key
-- Whether a keyed job's evidence shows output for one key's period [lo, hi).
SELECT EXISTS (
    SELECT 1 FROM ({source}) AS s WHERE s.k = %(key)s AND s.v >= %(lo)s AND s.v < %(hi)s);

-- name: evidence_window
-- A keyed job's evidence in [lo, hi): (k, v) pairs.
SELECT s.k, s.v FROM ({source}) AS s WHERE s.v >= %(lo)s AND s.v < %(hi)s

-- name: evidence_pairs
-- A keyed job's evidence pairs, run on its evidence_dsn, to be checked on the ledger.
SELECT DISTINCT k, v FROM ({window}) AS w ORDER BY k, v;

-- name: evidence_listed_keys
SELECT unnest(%(ks)s::text[]) AS k, unnest(%(vs)s::timestamptz[]) AS v

-- name: evidence_check_keys
-- evidence_check for a keyed job, key by key over one window [lo, hi) of period starts: a
-- value no row of its key holds is untracked; a succeeded row no value of its key verifies is
-- unverified. Only the keys asked for (those expected) are looked at.
WITH ev AS ({source}),
marks AS (
    SELECT r.key AS k, r.period_start AS t, 0 AS kind, r.period_end AS e
    FROM {schema}.periods r
    WHERE r.job_id = %(job_id)s AND r.key = ANY(%(keys)s::text[])
      AND r.period_start >= %(lo)s AND r.period_start < %(hi)s
    UNION ALL
    SELECT ev.k, ev.v, 1, NULL FROM ev WHERE ev.k = ANY(%(keys)s::text[])
), walked AS (
    -- a key's rows do not overlap: the latest row of the key so far holds t when it ends after t
    SELECT k, t, kind,
           max(e) OVER w AS held_until,
           max(t) FILTER (WHERE kind = 0) OVER w AS row_start
    FROM marks
    WINDOW w AS (PARTITION BY k ORDER BY t, kind ROWS UNBOUNDED PRECEDING)
), verified AS (
    SELECT DISTINCT k, row_start FROM walked WHERE kind = 1 AND held_until > t
)
SELECT 'untracked', k, t FROM walked
WHERE kind = 1 AND (held_until IS NULL OR held_until <= t)
UNION ALL
SELECT 'unverified', r.key, r.period_start
FROM {schema}.periods r
WHERE r.job_id = %(job_id)s AND r.key = ANY(%(keys)s::text[])
  AND r.period_start >= %(lo)s AND r.period_start < %(hi)s AND r.status = 'succeeded'
  AND NOT EXISTS (
      SELECT 1 FROM verified v WHERE v.k = r.key AND v.row_start = r.period_start)
ORDER BY 2, 3;
