-- A keyed job's keys: the user's keys query (read-only, bounded in time, as evidence is), the
-- key history the ledger keeps (job_keys, sql/migrations/0014), and the scan of (key, period).
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Many keys go as one text, a key a line (string_to_array: a key holds no
-- control character), a fraction of the memory an array of a million texts takes to send. Statements of catchup/ledger/keys.py (names unique across files).

-- name: keys_probe
-- The keys query's columns, without running it.
SELECT * FROM ({keys}) AS k LIMIT 0;

-- name: keys_read
-- The keys query's rows: the key as text, and from when it is expected (a date is that day's
-- local midnight in the job's zone, a timestamp without a zone a UTC time). At most
-- %(limit)s rows are read, so a query that returns too many is refused, not loaded.
SELECT k.key::text, {since} FROM ({keys}) AS k {names} LIMIT %(limit)s;

-- name: keys_diff
-- The keys query run once against the job's key history, in the read-only transaction the
-- keys query runs in, so a million keys that did not change never leave the server. First
-- its rows are compared as a whole with the keys held (key_digest: how many, and two sums of
-- their hashes, one with when each is expected if the query says it, under seeds drawn for
-- this read, so no set of keys can be made to look like another): alike, nothing changed, and
-- nothing more is done (hashing a million keys costs a fifth of joining them). A held key
-- whose date the query leaves NULL keeps the date it has (keys_since_or_held), so a dated
-- query with NULLs in it compares alike too.
-- Else its rows are counted by key, once, and that joined with the key history, once. Rows of
-- four kinds: 'count' (how many rows, at most %(limit)s), 'odd' (each key that is null, empty or
-- longer than 200 characters: Python's key_problem says why it cannot be a key; a changed key
-- with a character that is not printable ASCII Python finds in its block, KeysDiff.take: a
-- pattern matched here against each of a million keys took 0.4 to 0.9 s of a first read),
-- 'twice' (a key returned twice, if any) and 'block': the keys changed (new, back after being
-- gone, or expected from another date now: what record_keys writes) and gone (held, and no
-- longer returned), in rows of at most %(block)s keys each, one text
-- of a line a key ('+' changed, '-' gone) and the changed keys' dates: ten million keys come
-- to catchup as two hundred texts. The blocks come in key order as the ledger orders keys
-- ({order}: keys_diff_in_order), so a read is recorded a block at a time, each block's rows
-- locked in that order: the order every writer of key rows locks them in. A first read has
-- nothing to lock, but its keys go into the key index in order too, for one more sort (by the
-- ledger's collation): on the embedded server's C collation a million keys in blocks of keys
-- from all over the index took 6.4 s to record, 4.6 s in order, and the first scan 28.0 s,
-- 24.9 s. A key refused is said by reading the keys again, row by row (source_keys).
WITH q AS MATERIALIZED (
    -- compared byte for byte, as Python compares them (a column of a case-insensitive
    -- collation would have 'A' and 'a' one key, or be refused beside the ledger's)
    SELECT k.key::text COLLATE "C" AS key, {since} AS expected_from
    FROM (SELECT * FROM ({keys}) AS k {names} LIMIT %(limit)s) AS k
), held AS (
    SELECT EXISTS (SELECT 1 FROM {schema}.job_keys
                   WHERE job_id = %(job_id)s AND gone_at IS NULL) AS yes
), d AS MATERIALIZED (
    -- (with no key held, the rows are only counted: alike when there are none)
    SELECT r.digest[1] AS n,
           CASE WHEN (SELECT yes FROM held)
                THEN r.digest IS NOT DISTINCT FROM (
                    SELECT {digest} FROM {schema}.job_keys k
                    WHERE k.job_id = %(job_id)s AND k.gone_at IS NULL)
                ELSE r.digest[1] = 0 END AS same
    FROM (SELECT CASE WHEN (SELECT yes FROM held) THEN (SELECT {digest} FROM q AS k)
                      ELSE ARRAY[(SELECT count(*) FROM q)::numeric] END AS digest
          OFFSET 0) AS r  -- (computed once: pulled up, it was computed for each use of it)
), g AS MATERIALIZED (
    SELECT key, count(*) AS c, min(expected_from) AS since FROM q
    WHERE NOT (SELECT same FROM d)
    GROUP BY 1
), h AS (
    SELECT key, expected_from, gone_at FROM {schema}.job_keys
    WHERE job_id = %(job_id)s AND NOT (SELECT same FROM d)
)
SELECT 'count', d.n::bigint, d.same::text, NULL::timestamptz[] FROM d
UNION ALL
SELECT 'odd', NULL, g.key, NULL FROM g
WHERE g.key IS NULL OR g.key = '' OR length(g.key) > 200
UNION ALL
(SELECT 'twice', NULL, g.key, NULL FROM g WHERE g.c > 1 LIMIT 1)
UNION ALL
(SELECT 'block', count(*), string_agg(x.line, E'\n' ORDER BY x.key),
        array_agg(x.since ORDER BY x.key) FILTER (WHERE x.line LIKE '+%%')
 FROM (SELECT CASE WHEN g.c IS NULL THEN '-' ELSE '+' END || coalesce(g.key, h.key) AS line,
              coalesce(g.key, h.key) AS key, g.since,
              (row_number() OVER {order} - 1) / %(block)s AS b
       FROM {pairs}
       WHERE CASE WHEN g.c IS NULL THEN h.gone_at IS NULL
                  ELSE h.key IS NULL OR h.gone_at IS NOT NULL OR g.since <> h.expected_from END
      ) AS x
 GROUP BY x.b
 ORDER BY x.b);

-- name: keys_diff_first
-- keys_diff of a first read (the job holds no key row at all): every key it returns is new,
-- so its rows come in the same four kinds without a key history to compare them with. Its
-- rows are sorted once, in the ledger's order (keys_diff_in_order's: the blocks' and the key
-- index's), and numbered in it: a key returned twice lies beside itself there (a
-- deterministic collation orders apart only keys that differ byte for byte), and each block
-- is its numbers' (a million keys of a first read, counted by key in a hash, then sorted
-- for their numbers, then again by block: 1.5 s past the keys query; about half that now).
-- A read recorded meanwhile makes this one's record a KeysRaced, nothing written.
WITH q AS (
    -- compared byte for byte, as Python compares them (as keys_diff does)
    SELECT k.key::text COLLATE "C" AS key, {since} AS expected_from
    FROM (SELECT * FROM ({keys}) AS k {names} LIMIT %(limit)s) AS k
), s AS MATERIALIZED (
    SELECT q.key, q.expected_from, row_number() OVER w AS n,
           q.key = lag(q.key) OVER w AS twice
    FROM q
    WINDOW w AS (ORDER BY q.key COLLATE "default")
)
SELECT 'count', count(*), (count(*) = 0)::text, NULL::timestamptz[] FROM s
UNION ALL
(SELECT 'odd', NULL, s.key, NULL FROM s
 WHERE s.key IS NULL OR s.key = '' OR length(s.key) > 200
 LIMIT 1)  -- (each refused: one is enough, where a million NULLs would each be a row)
UNION ALL
(SELECT 'twice', NULL, s.key, NULL FROM s WHERE s.twice LIMIT 1)
UNION ALL
(SELECT 'block', count(*), string_agg('+' || s.key, E'\n' ORDER BY s.n),
        array_agg(s.expected_from ORDER BY s.n)
 FROM s
 WHERE s.key IS NOT NULL
 GROUP BY (s.n - 1) / %(block)s
 ORDER BY (s.n - 1) / %(block)s);

-- name: keys_diff_in_order
(ORDER BY coalesce(g.key, h.key) COLLATE "default")

-- name: keys_diff_pairs
-- Each key returned beside the key history's row of it, each held key beside what returned it.
(SELECT * FROM g WHERE g.key IS NOT NULL) AS g
FULL JOIN h ON h.key = g.key

-- name: key_digest
ARRAY[count(*)::numeric,
      coalesce(sum(hashtextextended(k.key COLLATE "C", %(seed_a)s)), 0),
      coalesce(sum(hashtextextended(k.key COLLATE "C", %(seed_b)s)
                   # CASE WHEN %(dated)s THEN timestamp_hash_extended(
                         k.expected_from AT TIME ZONE 'UTC', %(seed_a)s) ELSE 0 END), 0)]

-- name: keys_work_mem
-- For keys_diff, keys_to_scan, scan_keys or settle_complete_keys alone: their transaction's
-- (under a scan's snapshot, a savepoint: then until that transaction ends). A first scan's
-- settle_complete_keys of a million keys spilled its hashes and sorts to disk in 16 to 21
-- batches under PostgreSQL's 4MB: 29.7 s, 19.8 to 21.0 s with this.
SELECT set_config('work_mem', %(work_mem)s, true);

-- name: keys_by_index
-- For a read recorded a block at a time (record_key_changes), its transaction's: each block's
-- keys found in the key history by its index, not by hashing every key of the job (ten
-- million, two hundred times over), which the planner would do, not knowing how few keys a
-- block's text holds. (A first read looks none up, nor locks any: none is held. Where the
-- planner takes the key history to be empty, analyzed when it was, a lookup was planned as a
-- scan of the table for each key, reading again, key after key, every page the statement had
-- written so far: a first block of 50,000 keys took 9.4 s.)
SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true);

-- name: settle_sorted
-- For settle_complete_keys, its transaction's: a job's rows grouped by key as the primary key
-- orders them, not hashed (seven million rows of a million keys: 1.5 s, hashed 4.5 s), and
-- joined to the keys in that order, not hashed (a first scan's settle: 4.9 s, 3.6 s with the
-- changes of the same commit).
SELECT set_config('enable_hashagg', 'off', true), set_config('enable_hashjoin', 'off', true);

-- name: prejudge_settings
-- For prejudge_first_keys, its transaction's: the keys its query returns, in no order, joined
-- to their rows by hashing them; those rows counted in the primary key's order (as
-- settle_sorted counts them), in this backend alone (it runs beside the read that records
-- the keys: a parallel scan of the rows, then sorted, took twice as long).
SELECT set_config('enable_hashagg', 'off', true),
       set_config('max_parallel_workers_per_gather', '0', true);

-- name: keys_in_workers
-- For keys_to_scan, its transaction's (as keys_work_mem): the few keys of a million it finds are worth
-- finding in parallel workers (the planner takes a filter it cannot read for one that keeps
-- half the rows, and each row sent back from a worker for a cost).
SELECT set_config('parallel_tuple_cost', '0.001', true);

-- name: keys_since_or_held
coalesce({since}, (SELECT h.expected_from FROM {schema}.job_keys h
                   WHERE h.job_id = %(job_id)s AND h.key = k.key::text AND h.gone_at IS NULL))

-- name: keys_since_none
NULL::timestamptz

-- name: keys_since_date
(k.since::timestamp AT TIME ZONE %(zone)s)

-- name: keys_since_timestamp
(k.since AT TIME ZONE 'UTC')

-- name: keys_since_timestamptz
k.since

-- name: key_history
-- A job's keys as the ledger knows them, with when each was first and last seen (a key still
-- held was last seen when the job's keys were last read: jobs.keys_read_at); what scans
-- verified of each as two arrays, the ranges' lower and upper bounds (read in binary, twice as
-- fast as the multirange itself), an unbounded range reaching the job's keys_horizon
-- (migration 0027), and whether the key's ranges follow it (the columns: key_history_columns).
SELECT {columns}
FROM {schema}.job_keys k
JOIN {schema}.jobs j ON j.id = k.job_id
LEFT JOIN {schema}.scan_state s ON s.job_id = k.job_id
WHERE k.job_id = %(job_id)s
ORDER BY k.key;

-- name: key_page
-- A page of a job's keys as key_history gives them, in key order: the keys after %(after)s
-- (null: from the first), at most %(limit)s of them (null: all), found by the key index; a
-- million keys are read a page at a time (`catchup keys`, /keys/NAME).
SELECT {columns}
FROM {schema}.job_keys k
JOIN {schema}.jobs j ON j.id = k.job_id
LEFT JOIN {schema}.scan_state s ON s.job_id = k.job_id
WHERE k.job_id = %(job_id)s AND (%(after)s::text IS NULL OR k.key > %(after)s::text)
ORDER BY k.key
LIMIT %(limit)s;

-- name: key_counts
-- How many keys a job has recorded, how many of them are gone and how many of the others
-- paused, and when its keys were last read (null: never): what `catchup keys` says of them
-- all, counted here.
SELECT count(k.key), count(k.gone_at), count(k.paused_at) FILTER (WHERE k.gone_at IS NULL),
       (SELECT j.keys_read_at FROM {schema}.jobs j WHERE j.id = %(job_id)s)
FROM {schema}.job_keys k
WHERE k.job_id = %(job_id)s;

-- name: key_history_columns
k.key, k.expected_from, k.first_seen,
CASE WHEN k.gone_at IS NULL THEN greatest(k.last_seen, j.keys_read_at) ELSE k.last_seen END,
k.gone_at, k.paused_at,
CASE WHEN k.verified IS NOT NULL
     THEN ARRAY(SELECT lower(r) FROM unnest(k.verified) AS r
                WHERE coalesce(upper(r), s.keys_horizon) > lower(r)) END,
CASE WHEN k.verified IS NOT NULL
     THEN ARRAY(SELECT coalesce(upper(r), s.keys_horizon) FROM unnest(k.verified) AS r
                WHERE coalesce(upper(r), s.keys_horizon) > lower(r)) END,
coalesce(upper_inf(k.verified), false)

-- name: keys_to_scan
-- The keys a scan of a window must look at, with their history as key_history gives it; the
-- others, settled in the window, only counted (rows with a null key: how many keys, by how
-- many of the window's period ends are at or before when each is expected, width_bucket's
-- bucket; a key gone before the window counts in the last, the window's length; which of
-- them have a row that has not succeeded, the scan finds in its rows, not here: joining a
-- million keys to those rows cost a third of this statement). A key is settled when what scans
-- verified of it holds for these schedules (%(signature)s) and follows the job's horizon past
-- the window, holds every period start of the window it is expected in, and it is neither
-- paused nor gone in the window: a scan finds no hole of it and writes nothing of it
-- (catchup/scan/verified.py); its rows that have not succeeded, scan_keys reads from the
-- ledger (scan_rows_of_all). At a million keys that did not change, the key rows a scan
-- brings to Python are the few with something to look at. One statement: one snapshot for
-- both parts, each a pass over the key history that the server may share among workers
-- (no CTE read twice: a million rows written aside and read back cost 3x the passes);
-- key_settled says which keys are settled (a range cut when a key went, not at a period
-- start, is checked start by start), key_window the window and each key's bucket.
(SELECT NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz,
        NULL::timestamptz, NULL::timestamptz[], NULL::timestamptz[], NULL::boolean,
        CASE WHEN k.gone_at IS NOT NULL THEN p.n ELSE least(b.b, p.n) END::int, count(*)::bigint
 FROM {window}
 WHERE k.job_id = %(job_id)s AND {settled}
 GROUP BY 10)
UNION ALL
(SELECT {columns}, NULL::int, NULL::bigint
 FROM (SELECT k.* FROM {window}
       WHERE k.job_id = %(job_id)s AND NOT {settled}
       OFFSET 0) AS k  -- (sorted once found: not read in key order, a million keys, to find them)
 JOIN {schema}.jobs j ON j.id = k.job_id
 LEFT JOIN {schema}.scan_state s ON s.job_id = k.job_id
 ORDER BY k.key);

-- name: key_window
{schema}.job_keys k
CROSS JOIN (SELECT %(starts)b::timestamptz[] AS starts,
                   cardinality(%(starts)b::timestamptz[]) AS n,
                   EXISTS (SELECT 1 FROM {schema}.scan_state s
                           WHERE s.job_id = %(job_id)s AND s.signature = %(signature)s
                             AND s.keys_horizon >= %(until)s) AS settling) AS p
CROSS JOIN LATERAL (SELECT width_bucket(k.expected_from, %(ends)b::timestamptz[]) AS b) AS b

-- name: key_settled
coalesce(p.settling AND k.paused_at IS NULL AND (
    k.gone_at <= p.starts[1]
    OR (k.gone_at IS NULL AND upper_inf(k.verified)
        AND (b.b >= p.n
             OR k.verified @> tstzrange(p.starts[b.b + 1], p.starts[p.n], '[]')
             OR k.verified @> ALL (p.starts[b.b + 1:p.n])))
), false)

-- name: analyze_keys
-- After a read that added many keys: the planner's statistics of the key history.
ANALYZE {schema}.job_keys;

-- name: settle_complete_keys
-- What a scan of every key of a job would record of what it verified, for the many keys that
-- need nothing but their rows counted, in one statement (under the scan state's lock). The
-- horizon moves where a scan of them all would move it (catchup/scan/verified.py
-- next_horizon): to the window's end, or to its newest period's start when more than a tenth
-- of the keys expected there have no row there yet (a tick about to run it); never back (nor
-- from none, with no key). When it moves, each key held that has a row for every period it is
-- expected in between the old horizon (%(horizon)s; null: a first scan, from the window's
-- start, every key judged, gone or not) and the new one is complete: a complete key that does
-- not follow the horizon yet gets, added to what it verified, a range from the first of those
-- periods that follows it; the following range of a key that is not complete is cut at the
-- old horizon (it no longer follows: the scan that comes next reads it and records its
-- ranges); a complete key that follows is not written. On a first scan, a key of the first
-- read (presumed complete: it follows from when it is expected) is judged so too: cut when it
-- is not complete, or when no period it is expected in was looked at; replaced by the range a
-- scan would give it when it follows from elsewhere (a window that starts after the job's
-- start); not written otherwise: a million keys with their rows, none written.
-- The rows written are locked in key order first, as record_keys and record_verified lock
-- theirs: two of them at once never deadlock.
WITH {window}, k AS (
    -- the keys held in the window's newest period, each with the periods looked at: those
    -- after its bucket (the window's period ends at or before it is expected) and the horizon;
    -- with no horizon yet, every key (a key of the first read, presumed to follow, that went
    -- before the newest period is judged too: held says which count for where it moves)
    -- (constants, not p: a row of p joined to each of a million keys cost a tenth of this)
    SELECT k.key, k.gone_at, k.verified, coalesce(upper_inf(k.verified), false) AS follows,
           k.gone_at IS NULL OR k.gone_at > %(newest)s AS held,
           width_bucket(k.expected_from, %(ends)b::timestamptz[]) AS bucket,
           greatest(width_bucket(k.expected_from, %(ends)b::timestamptz[]),
                    (SELECT p.h FROM p)) AS b
    FROM {schema}.job_keys k
    WHERE k.job_id = %(job_id)s
      AND (k.gone_at IS NULL OR k.gone_at > %(newest)s OR %(horizon)s::timestamptz IS NULL)
), {judging}, locked AS MATERIALIZED (
    -- (found by the key index: a join read every key of the job, twice, for a few thousand)
    SELECT j.key FROM {schema}.job_keys j
    WHERE j.job_id = %(job_id)s AND j.key = ANY ((SELECT array_agg(t.key) FROM judged t)::text[])
    ORDER BY j.key
    FOR UPDATE OF j
), written AS (
    UPDATE {schema}.job_keys j
    SET verified = CASE WHEN t.presumed AND NOT (t.complete AND t.gone_at IS NULL)
                        THEN '{{}}'::tstzmultirange
                        WHEN t.complete
                        THEN CASE WHEN t.presumed THEN '{{}}'::tstzmultirange
                                  ELSE coalesce(j.verified, '{{}}'::tstzmultirange) END
                             + tstzmultirange(tstzrange(p.starts[t.b + 1], NULL))
                        ELSE j.verified * tstzmultirange(tstzrange(NULL, %(horizon)s)) END
    FROM judged t CROSS JOIN p
    WHERE j.job_id = %(job_id)s AND j.key = t.key
      -- every row locked first (in key order), once, before any is written (joined to the
      -- rows it locked, whose number the planner cannot know, a first settle of ten million
      -- keys compared each of the 199,878 rows it wrote with every row it locked: hours)
      AND (SELECT count(*) FROM locked) >= 0
    RETURNING 1
), horizon AS (
    -- (not from none when there is no key: a first read recorded meanwhile, its keys
    -- presumed, would follow a horizon no scan judged them for)
    UPDATE {schema}.scan_state s
    SET keys_horizon = greatest(s.keys_horizon, m.horizon)
    FROM moved m
    WHERE s.job_id = %(job_id)s
      -- (k read once: read twice, its million rows were written aside to be read again)
      AND (%(horizon)s::timestamptz IS NOT NULL
           OR EXISTS (SELECT 1 FROM {schema}.job_keys WHERE job_id = %(job_id)s))
)
SELECT count(*) FROM written;

-- name: settle_window
-- settle_complete_keys's and prejudge_first_keys's window (their first CTE).
p AS (
    SELECT %(starts)b::timestamptz[] AS starts, %(ends)b::timestamptz[] AS ends,
           cardinality(%(starts)b::timestamptz[]) AS n,
           -- how many of the window's periods start before the horizon: not looked at here
           (SELECT count(*) FROM unnest(%(starts)b::timestamptz[]) AS s
            WHERE s < %(horizon)s::timestamptz)::int AS h
)

-- name: settle_judging
-- settle_complete_keys's judgement of its keys (k), the CTEs after its window and keys:
-- prejudge_first_keys judges a first read's keys so, before they are recorded.
after AS (
    -- every key's rows at the window's period starts after the horizon, counted without the
    -- keys (a million keys joined to seven million rows cost three times this pass), in the
    -- primary key's order (settle_sorted: hashing them took three times as long again):
    -- exact for each key expected before them (its b is the horizon's h)
    -- (constants and one subquery, not p: a row of p joined to each of seven million rows
    -- doubled the pass)
    -- (how many, and whether the newest is among them: its newest row is the newest period's)
    -- (runs and compacted, the periods view's two tables, counted apart, each in its own
    -- index's key order, and each joined to the keys: merged into one order first, as the
    -- view gives them, seven million rows cost 0.4 s more)
    SELECT r.key, count(*) AS n, max(r.period_start) = %(newest)s AS newest
    FROM {schema}.runs r
    WHERE r.job_id = %(job_id)s AND r.period_start >= (SELECT p.starts[p.h + 1] FROM p)
      AND r.period_start < %(until)s AND r.period_start = ANY (%(starts)b::timestamptz[])
    GROUP BY r.key
), after_compacted AS (
    SELECT c.key, count(*) AS n, max(c.period_start) = %(newest)s AS newest
    FROM {schema}.compacted c
    WHERE c.job_id = %(job_id)s AND c.period_start >= (SELECT p.starts[p.h + 1] FROM p)
      AND c.period_start < %(until)s AND c.period_start = ANY (%(starts)b::timestamptz[])
    GROUP BY c.key
), kh AS (
    -- each key with its rows counted (in the periods after its b: before the newest, and in
    -- it); a key expected after the horizon's periods (few: new keys) counted from its own
    -- bucket by its own rows (a subquery run only for it)
    SELECT k.*,
           CASE WHEN k.b > p.h
                THEN (SELECT count(*) FROM {schema}.periods r
                      WHERE r.job_id = %(job_id)s AND r.key = k.key
                        AND r.period_start >= p.starts[k.b + 1] AND r.period_start < %(newest)s
                        AND r.period_start = ANY (p.starts))
                ELSE coalesce(a.n - a.newest::int, 0) + coalesce(c.n - c.newest::int, 0) END
               AS before,
           CASE WHEN k.b > p.h
                THEN k.b < p.n AND EXISTS (SELECT 1 FROM {schema}.periods r
                             WHERE r.job_id = %(job_id)s AND r.key = k.key
                               AND r.period_start = %(newest)s)
                ELSE coalesce(a.newest, false) OR coalesce(c.newest, false) END AS newest
    FROM k CROSS JOIN p
    LEFT JOIN after a ON a.key = k.key
    LEFT JOIN after_compacted c ON c.key = k.key
), moved AS (
    -- the new horizon, and how many of the window's periods (from the first) it vouches for
    SELECT CASE WHEN holed > expected * %(holed_share)s THEN p.starts[p.n] ELSE p.ends[p.n] END
               AS horizon,
           CASE WHEN holed > expected * %(holed_share)s THEN p.n - 1 ELSE p.n END AS m
    FROM (SELECT count(*) FILTER (WHERE k.held AND k.bucket < p.n) AS expected,
                 count(*) FILTER (WHERE k.held AND k.bucket < p.n AND NOT k.newest) AS holed
          FROM kh k CROSS JOIN p) AS c
    CROSS JOIN p
), judged AS (
    -- presumed: a key that follows with no horizon yet (the first read's, not judged); it
    -- is written unless it is complete and follows from where a scan would have it follow.
    -- A presumed key expected in none of the periods looked at (seen: false) is cut when its
    -- range starts before the new horizon (a first scan of the newest period alone vouches
    -- for nothing before it)
    SELECT * FROM (
        SELECT k.key, k.b, k.gone_at, k.follows, k.b < m.m AS seen,
               k.follows AND %(horizon)s::timestamptz IS NULL AS presumed,
               k.verified IS NOT DISTINCT FROM tstzmultirange(tstzrange(p.starts[k.b + 1], NULL))
                   AS as_settled,
               k.b < m.m
               AND k.before + CASE WHEN m.m = p.n AND k.newest THEN 1 ELSE 0 END = m.m - k.b
                   AS complete
        FROM kh k CROSS JOIN p CROSS JOIN moved m
        WHERE (k.b < m.m OR (k.follows AND %(horizon)s::timestamptz IS NULL
                             AND lower(k.verified) < m.horizon))
          AND m.horizon > coalesce(%(horizon)s::timestamptz, '-infinity')
    ) AS t
    WHERE CASE WHEN NOT t.seen THEN true
               WHEN t.complete AND t.gone_at IS NULL
               THEN NOT t.follows OR (t.presumed AND NOT t.as_settled)
               WHEN t.complete THEN t.presumed  -- gone: a scan would not have it follow
               ELSE t.follows END
)

-- name: prejudge_first_keys
-- A first read's keys judged as settle_complete_keys judges them on the first scan after it,
-- before they are recorded: on a connection of its own, beside the read that records them
-- (catchup/scan/prejudge.py), so a million keys' rows are counted while they are written,
-- not after. Each key as record_first_keys records it (expected from its date or the job's
-- start, presumed: following from then); with no horizon (%(horizon)s null). Rows: the
-- judged keys in key order (what settle_complete_keys would write of each: null, cut; else
-- the start its range follows from), at most %(most)s + 1 of them; then one row with what
-- applying them checks: the horizon it moves to, the keys' digest (key_digest, dates
-- included), how many keys, and the scan state it read (its signature and generation: one
-- snapshot with the rows it counted).
WITH q AS (
    SELECT k.key::text COLLATE "C" AS key, coalesce({since}, %(start)s::timestamptz) AS expected_from
    FROM (SELECT * FROM ({keys}) AS k {names} LIMIT %(limit)s) AS k
), {window}, k AS (
    SELECT q.key, q.expected_from, NULL::timestamptz AS gone_at,
           tstzmultirange(tstzrange(greatest(q.expected_from, %(start)s), NULL)) AS verified,
           true AS follows, true AS held,
           width_bucket(q.expected_from, %(ends)b::timestamptz[]) AS bucket,
           width_bucket(q.expected_from, %(ends)b::timestamptz[]) AS b
    FROM q
), {judging}
(SELECT 'judged', t.key, CASE WHEN t.complete THEN p.starts[t.b + 1] END, NULL::numeric[],
        NULL::text, NULL::bigint
 FROM judged t CROSS JOIN p
 ORDER BY t.key
 LIMIT %(most)s::bigint + 1)
UNION ALL
SELECT 'read', NULL, (SELECT m.horizon FROM moved m), d.digest, s.signature, s.generation
FROM (SELECT {digest} AS digest FROM kh AS k) AS d  -- (kh: k is read once, not written aside)
LEFT JOIN {schema}.scan_state s ON s.job_id = %(job_id)s;

-- name: settle_prejudged
-- What prejudge_first_keys judged of a first read's keys, written (under the scan state's
-- lock, as settle_complete_keys writes what it judges), and the horizon moved, when the keys
-- the job holds are those it judged (their digest, dates included; none gone), each as it
-- judged it (presumed: following from when it is expected, or the start it was given; a
-- ledger's start other than the config's, a schedule changed before the first read, is not
-- it; nor is a key whose ranges were forgotten, null): else nothing, and the first scan
-- settles them itself. The rows written are locked in key order first; one a read changed
-- meanwhile (found so once locked) is not written.
WITH held AS (
    SELECT {digest} = %(digest)s::numeric[] AND count(k.gone_at) = 0
           AND coalesce(bool_and(k.verified IS NOT DISTINCT FROM tstzmultirange(
                   tstzrange(greatest(k.expected_from, %(start)s), NULL))), false) AS same
    FROM {schema}.job_keys k
    WHERE k.job_id = %(job_id)s
), t AS (
    SELECT t.key, t.lo
    FROM unnest(string_to_array(%(keys)s::text, E'\n'), %(los)b::timestamptz[]) AS t (key, lo)
    WHERE (SELECT same FROM held)
), locked AS MATERIALIZED (
    SELECT j.key FROM {schema}.job_keys j
    WHERE j.job_id = %(job_id)s AND j.key = ANY (string_to_array(%(keys)s::text, E'\n'))
      AND (SELECT same FROM held)
    ORDER BY j.key
    FOR UPDATE OF j
), written AS (
    UPDATE {schema}.job_keys j
    SET verified = CASE WHEN t.lo IS NULL THEN '{{}}'::tstzmultirange
                        ELSE tstzmultirange(tstzrange(t.lo, NULL)) END
    FROM t
    WHERE j.job_id = %(job_id)s AND j.key = t.key AND j.gone_at IS NULL
      AND j.verified = tstzmultirange(tstzrange(greatest(j.expected_from, %(start)s), NULL))
      AND (SELECT count(*) FROM locked) >= 0  -- (every row locked first, in key order)
    RETURNING 1
), horizon AS (
    UPDATE {schema}.scan_state s
    SET keys_horizon = greatest(s.keys_horizon, %(horizon)s)
    WHERE s.job_id = %(job_id)s AND (SELECT same FROM held)
)
SELECT (SELECT same FROM held), (SELECT count(*) FROM written);

-- name: has_keys
SELECT EXISTS (SELECT 1 FROM {schema}.job_keys WHERE job_id = %(job_id)s);

-- name: key_horizon
-- Where the unbounded ranges of what scans verified of a job's keys end (null: no scan judged
-- them yet; a first read's keys follow it then, presumed complete, and that counts for nothing).
SELECT keys_horizon FROM {schema}.scan_state WHERE job_id = %(job_id)s;

-- name: lock_key_rows
-- A job's key rows (of %(keys)s, or all of them), locked in key order before they are updated:
-- record_keys and record_verified update many of them, each in its own order, and two ticks
-- doing one each would deadlock without it.
SELECT key FROM {schema}.job_keys
WHERE job_id = %(job_id)s AND (%(keys)s::text[] IS NULL OR key = ANY(%(keys)s::text[]))
ORDER BY key
FOR UPDATE;

-- name: lock_listed_keys
-- The key rows a read changed (keys_diff: a key a line, any order), locked in key order before
-- record_keys updates them; found by the key index, whatever their number (a join hashed every
-- key of the job for each block of a read recorded a block at a time).
SELECT k.key FROM {schema}.job_keys k
WHERE k.job_id = %(job_id)s AND k.key = ANY (string_to_array(%(listed)s::text, E'\n'))
ORDER BY k.key
FOR UPDATE OF k;

-- name: lock_changed_keys
-- The key rows one read of the keys changes (keys that came back, are expected from another
-- time, or are gone), locked in key order before record_keys updates them: record_verified
-- locks those it updates in the same order. Keys that did not change are neither locked nor
-- written.
WITH seen AS (
    SELECT * FROM unnest(string_to_array(%(keys)s::text, E'\n'),
                         coalesce(%(froms)b::timestamptz[], ARRAY[]::timestamptz[])) AS s (key, since)
)
SELECT k.key FROM {schema}.job_keys k
LEFT JOIN seen s ON s.key = k.key
WHERE k.job_id = %(job_id)s
  AND CASE WHEN s.key IS NULL THEN k.gone_at IS NULL
           ELSE k.gone_at IS NOT NULL OR s.since <> k.expected_from END
ORDER BY k.key
FOR UPDATE OF k;

-- name: record_keys
-- What one read of the keys saw, written only where it changed something: new keys are
-- recorded (expected from the read's date, else the job's start when the ledger had no key of
-- the job yet, else now); keys that come back are no longer gone (what scans verified of them
-- is cut at when they went, or forgotten when they are expected from earlier now); a date read
-- now moves when a key is expected from; keys the read did not return are gone from now on,
-- last seen at the job's read before. The job's keys_read_at is this read. Every time it writes
-- is the read's own (its statement's, or %(at)s: a read recorded in several statements, one
-- transaction, is recorded at its first's; whether it is the job's first read, and when the
-- keys were read before, are the first's too: %(first_read)s, %(before)s): the keys one read
-- finds share one first_seen and one
-- expected_from, which a million keys read then hold as one value each, not a million.
-- The keys of a job's first read, before any scan judged its keys (no horizon), are presumed
-- complete: each follows the horizon from when it is expected (the start of the periods a
-- first scan looks at), a range that counts for nothing until the scan that first moves the
-- horizon judges every key and cuts those with a period that has no row
-- (settle_complete_keys): the scans of a million keys that have their rows then write none
-- of them. Under the job's row lock (lock_job_row), so two reads at once record one history. {gone}:
-- which keys held are gone (gone_unseen: those not among the keys given, every key read;
-- gone_listed: those listed, when the keys given are only what a read changed, keys_diff).
WITH t AS (
    SELECT coalesce(%(at)s::timestamptz, statement_timestamp()) AS now
), b AS (
    -- when the job's keys were read before this read (a later block: its first block's answer)
    SELECT CASE WHEN %(first_read)s::boolean IS NULL
                THEN (SELECT j.keys_read_at FROM {schema}.jobs j WHERE j.id = %(job_id)s)
                ELSE %(before)s::timestamptz END AS before
), first_read AS (
    SELECT coalesce(%(first_read)s::boolean,
                    NOT EXISTS (SELECT 1 FROM {schema}.job_keys WHERE job_id = %(job_id)s)) AS yes,
           NOT EXISTS (SELECT 1 FROM {schema}.scan_state h
                       WHERE h.job_id = %(job_id)s AND h.keys_horizon IS NOT NULL) AS unjudged
), seen AS (
    SELECT * FROM unnest(string_to_array(%(keys)s::text, E'\n'),
                         coalesce(%(froms)b::timestamptz[], ARRAY[]::timestamptz[])) AS s (key, since)
), upserted AS (
    INSERT INTO {schema}.job_keys AS k (job_id, key, expected_from, first_seen, last_seen,
                                        verified)
    SELECT %(job_id)s, s.key, x.expected_from, t.now, t.now,
           CASE WHEN f.yes AND f.unjudged AND e.key IS NULL
                THEN tstzmultirange(tstzrange(greatest(x.expected_from, %(start)s), NULL)) END
    FROM seen s CROSS JOIN first_read f CROSS JOIN t
    LEFT JOIN {schema}.job_keys e ON e.job_id = %(job_id)s AND e.key = s.key
    CROSS JOIN LATERAL (
        SELECT coalesce(s.since, e.expected_from,
                        CASE WHEN f.yes THEN %(start)s::timestamptz ELSE t.now END)
                   AS expected_from) AS x
    WHERE e.key IS NULL OR e.gone_at IS NOT NULL OR s.since <> e.expected_from
    ON CONFLICT (job_id, key) DO UPDATE SET
        last_seen = excluded.last_seen,
        gone_at = NULL,
        expected_from = excluded.expected_from,
        -- expected from earlier now: what was verified says nothing of the periods before
        -- (those not expected while it was gone were never verified); back after being gone:
        -- an unbounded range reached the horizon, not the periods of its absence
        verified = CASE WHEN excluded.expected_from < k.expected_from THEN NULL
                        WHEN k.gone_at IS NOT NULL AND upper_inf(k.verified)
                        THEN k.verified * tstzmultirange(tstzrange(NULL, least(
                            coalesce((SELECT h.keys_horizon FROM {schema}.scan_state h
                                      WHERE h.job_id = k.job_id), '-infinity'),
                            k.gone_at)))
                        -- changed before any scan judged it: no longer presumed
                        WHEN upper_inf(k.verified)
                             AND (SELECT h.keys_horizon FROM {schema}.scan_state h
                                  WHERE h.job_id = k.job_id) IS NULL
                        THEN '{{}}'::tstzmultirange
                        ELSE k.verified END
    RETURNING k.key
), gone AS (
    UPDATE {schema}.job_keys k
    SET gone_at = (SELECT now FROM t),
        last_seen = greatest(k.last_seen, (SELECT before FROM b)),
        -- what it verified no longer follows the horizon: no scan looks at a key gone before
        -- the periods it looks at, and one that moves the horizon past when the key went
        -- would vouch for the periods between, never looked at (and none, before any scan)
        verified = CASE WHEN upper_inf(k.verified)
                        THEN k.verified * tstzmultirange(tstzrange(NULL, coalesce(
                            (SELECT h.keys_horizon FROM {schema}.scan_state h
                             WHERE h.job_id = k.job_id), '-infinity')))
                        ELSE k.verified END
    WHERE k.job_id = %(job_id)s AND k.gone_at IS NULL AND {gone}
    RETURNING k.key
), read AS (
    UPDATE {schema}.jobs SET keys_read_at = (SELECT now FROM t) WHERE id = %(job_id)s
)
SELECT (SELECT count(*) FROM upserted), (SELECT count(*) FROM gone),
       (SELECT yes FROM first_read), (SELECT now FROM t), (SELECT before FROM b);

-- name: record_first_keys
-- A block of a job's first read (record_keys, when the job has no key row at all, as checked
-- under the job's row lock the read holds: so no key of it can be there, and none is gone):
-- its keys inserted as record_keys inserts new ones, without looking any up (an insert that
-- checked each key first, ON CONFLICT, took 1.7 times as long: a million keys, 3.7 s, 2.2 s now).
WITH t AS (
    SELECT coalesce(%(at)s::timestamptz, statement_timestamp()) AS now  -- (the first block's)
), unjudged AS (
    SELECT NOT EXISTS (SELECT 1 FROM {schema}.scan_state h
                       WHERE h.job_id = %(job_id)s AND h.keys_horizon IS NOT NULL) AS yes
), inserted AS (
    INSERT INTO {schema}.job_keys (job_id, key, expected_from, first_seen, last_seen, verified)
    SELECT %(job_id)s, s.key, x.expected_from, t.now, t.now,
           CASE WHEN u.yes
                THEN tstzmultirange(tstzrange(greatest(x.expected_from, %(start)s), NULL)) END
    FROM unnest(string_to_array(%(keys)s::text, E'\n'),
                coalesce(%(froms)b::timestamptz[], ARRAY[]::timestamptz[])) AS s (key, since)
    CROSS JOIN t CROSS JOIN unjudged u
    CROSS JOIN LATERAL (SELECT coalesce(s.since, %(start)s::timestamptz) AS expected_from) AS x
    RETURNING 1
), read AS (
    UPDATE {schema}.jobs SET keys_read_at = (SELECT now FROM t) WHERE id = %(job_id)s
)
SELECT (SELECT count(*) FROM inserted), 0::bigint, true AS first_read, (SELECT now FROM t),
       %(before)s::timestamptz;  -- (as record_keys has it on a first read: none gone)

-- name: gone_unseen
NOT EXISTS (SELECT 1 FROM seen s WHERE s.key = k.key)

-- name: gone_listed
k.key = ANY(string_to_array(%(gone)s::text, E'\n'))

-- name: pause_key
UPDATE {schema}.job_keys SET paused_at = coalesce(paused_at, clock_timestamp())
WHERE job_id = %(job_id)s AND key = %(key)s
RETURNING paused_at;

-- name: key_paused
SELECT paused_at FROM {schema}.job_keys
WHERE job_id = %(job_id)s AND key = %(key)s AND paused_at IS NOT NULL;

-- name: resume_key
UPDATE {schema}.job_keys SET paused_at = NULL
WHERE job_id = %(job_id)s AND key = %(key)s AND paused_at IS NOT NULL
RETURNING key;

-- name: scan_keys
-- Each key's expected periods that have not succeeded, classified as a scan classifies a
-- period, collapsed into ranges of one key and one state (gaps and islands over the periods'
-- ordinal numbers). Two parts: the rows that are not succeeded (the small partial index
-- runs_unfinished; of the keys given, scan_rows_of_listed, or of every key the ledger holds
-- when the others were only counted, scan_rows_of_all), and the periods with no row at all
-- (the holes: scan_holes_merged or scan_holes_probed), looked for only in each key's stretches of ordinals [i0, i1) that
-- earlier scans did not verify (job_keys.verified; all of them the first time). Succeeded
-- periods are not returned.
WITH k AS (
    -- when each key is expected from and gone: an index, a number a line, into the few times
    -- all keys share
    SELECT k.key, (%(times)b::timestamptz[])[k.f] AS expected_from,
           (%(times)b::timestamptz[])[k.g] AS gone_at
    FROM unnest(string_to_array(%(keys)s::text, E'\n'),
                string_to_array(%(froms)s::text, E'\n')::int[],
                string_to_array(%(gones)s::text, E'\n')::int[]) AS k (key, f, g)
), p AS (
    SELECT * FROM unnest(%(starts)b::timestamptz[], %(ends)b::timestamptz[]) WITH ORDINALITY
         AS p (s, e, i)
), st AS (
    SELECT *
    FROM unnest(string_to_array(%(ukeys)s::text, E'\n'),
                string_to_array(%(i0s)s::text, E'\n')::int[],
                string_to_array(%(i1s)s::text, E'\n')::int[]) AS u (key, i0, i1)
), u AS (
    SELECT st.key, g.i FROM st CROSS JOIN LATERAL generate_series(st.i0, st.i1 - 1) AS g (i)
), j AS (
    SELECT k.key, p.i, p.s,
           {schema}.period_state(r.status, r.failures, r.interrupted,
                                 r.interrupted AND {schema}.ended_cancelled(r.job_id, r.key, r.period_start),
                                 r.lease_expires_at,
                                 %(now)s, %(max_attempts)s) AS state
    FROM {schema}.runs r
    {rows_of}
    JOIN p ON p.s = r.period_start
    WHERE r.job_id = %(job_id)s AND r.status <> 'succeeded'
      AND r.period_start >= %(first)s AND r.period_start < %(until)s
      AND p.e > k.expected_from AND (k.gone_at IS NULL OR p.s < k.gone_at)
    UNION ALL
    {holes}
)
SELECT key, state, min(s) AS first, max(s) AS last, count(*) AS periods
FROM (SELECT j.*, j.i - row_number() OVER (PARTITION BY j.key, j.state ORDER BY j.i) AS g
      FROM j) AS islands
GROUP BY key, state, g
ORDER BY first, key;

-- name: scan_rows_of_listed
JOIN k ON k.key = r.key

-- name: scan_rows_of_all
JOIN {schema}.job_keys k ON k.job_id = r.job_id AND k.key = r.key

-- name: scan_holes_merged
-- The holes when many periods are unverified (a first scan): one pass over the job's rows in
-- key order against the stretches' periods, sorted (a merge anti-join).
SELECT u.key, u.i, u.s, 'missing'
    FROM (SELECT u.key, u.i, (%(starts)b::timestamptz[])[u.i] AS s FROM u) AS u
    WHERE NOT EXISTS (
        SELECT 1 FROM {schema}.periods r
        WHERE r.job_id = %(job_id)s AND r.key = u.key AND r.period_start = u.s)

-- name: scan_holes_probed
-- The holes when few periods are unverified (a later scan: the holes found before, and the
-- newest periods): one index read per stretch, of the key's rows between its first and last
-- period start, set against the stretch's periods (a join per stretch: linear in its length),
-- forced by LATERAL ... OFFSET 0, where the merge would read every row of the job (the
-- planner cannot tell how many periods the stretches hold, and guesses a thousand each). The
-- starts are read from the array by ordinal.
SELECT st.key, m.i, (%(starts)b::timestamptz[])[m.i], 'missing'
    FROM st
    CROSS JOIN LATERAL (
        SELECT g.i FROM generate_series(st.i0, st.i1 - 1) AS g (i)
        LEFT JOIN (SELECT r.period_start FROM {schema}.periods r
                   WHERE r.job_id = %(job_id)s AND r.key = st.key
                     AND r.period_start >= (%(starts)b::timestamptz[])[st.i0]
                     AND r.period_start <= (%(starts)b::timestamptz[])[st.i1 - 1]) AS h
               ON h.period_start = (%(starts)b::timestamptz[])[g.i]
        WHERE h.period_start IS NULL
        OFFSET 0) AS m

-- name: record_verified
-- What scans verified of each key (its ranges of period starts that have a row each; a null
-- upper bound: up to the job's keys_horizon), after lock_scan_state found no row removed since
-- this scan's snapshot (the job's generation) and the schedules it scanned (its signature).
-- A key is written only as the scan read it (expected from the same time, gone or not the
-- same): one that came back, went or moved meanwhile (a read of the keys, recorded under the
-- job's row lock) keeps what that read made of it.
UPDATE {schema}.job_keys k SET verified = v.ranges
FROM (
    SELECT key, min(since) AS since, min(gone) AS gone, range_agg(tstzrange(lo, hi)) AS ranges
    FROM unnest(%(keys)b::text[], %(los)b::timestamptz[], %(his)b::timestamptz[],
                %(froms)b::timestamptz[], %(gones)b::timestamptz[])
         AS v (key, lo, hi, since, gone)
    GROUP BY key
) v
WHERE k.job_id = %(job_id)s AND k.key = v.key
  AND k.expected_from = v.since AND k.gone_at IS NOT DISTINCT FROM v.gone;

-- name: lock_key_horizon
SELECT keys_horizon FROM {schema}.scan_state WHERE job_id = %(job_id)s FOR UPDATE;

-- name: move_key_horizon
UPDATE {schema}.scan_state SET keys_horizon = %(horizon)s WHERE job_id = %(job_id)s;

-- name: sign_scan_state
-- The scan state a removal of rows made (rows_removed, sql/migrations/0014: no schedules, no
-- horizon) takes the job's schedules: no scan recorded a range under none (each does under
-- the schedules it scanned, this first), so there is nothing to forget (forget_verified), and
-- a first read's keys stay presumed, to be judged by the scan that first moves the horizon.
UPDATE {schema}.scan_state SET signature = %(signature)s
WHERE job_id = %(job_id)s AND signature = '' AND keys_horizon IS NULL;

-- name: forget_verified
-- The job's schedules changed: what scans verified under the old ones says nothing now.
WITH forgotten AS (
    UPDATE {schema}.job_keys SET verified = NULL
    WHERE job_id = %(job_id)s AND verified IS NOT NULL
)
UPDATE {schema}.scan_state SET signature = %(signature)s, keys_horizon = NULL
WHERE job_id = %(job_id)s;
