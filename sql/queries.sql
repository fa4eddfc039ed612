-- Every statement catchup sends, one per "-- name:" header. {schema} is replaced by the quoted
-- schema identifier through psycopg.sql; values are always %(name)s parameters.
-- Time comes from clock_timestamp() on the server: never from the host running catchup.

-- name: server_now
-- The database clock: the one clock every due-time decision uses.
SELECT clock_timestamp() AS now;

-- name: schema_version
SELECT coalesce(max(version), 0) AS version FROM {schema}.schema_version;

-- name: create_schema
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.schema_version (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- name: record_migration
INSERT INTO {schema}.schema_version (version, name) VALUES (%(version)s, %(name)s);

-- name: lock_migrations
-- Transaction-scoped, so it also works through a transaction-mode pooler.
SELECT pg_advisory_xact_lock(hashtext('catchup.migrate'), hashtext(%(schema)s));

-- name: register_jobs
-- New names get a row; a configured job is not retired, whatever an earlier command said.
WITH unretired AS (
    UPDATE {schema}.jobs SET retired_at = NULL
    WHERE name = ANY(%(names)s::text[]) AND retired_at IS NOT NULL
)
INSERT INTO {schema}.jobs (name)
SELECT unnest(%(names)s::text[])
ON CONFLICT (name) DO NOTHING;

-- name: job_ids
SELECT id, name, paused_at, project, definition
FROM {schema}.jobs WHERE name = ANY(%(names)s::text[]);

-- name: record_definition
-- The project that defines a job, and how: taken only when no other project holds it (a row
-- registered before 0012 holds none). No row back: another project holds it.
UPDATE {schema}.jobs
SET project = %(project)s, definition = %(definition)s
WHERE id = %(job_id)s AND (project IS NULL OR project = %(project)s)
RETURNING id;

-- name: claim
-- The one claim path, one round trip: {schema}.claim_period() (sql/migrations/0007) takes the
-- job's lock when overlap is forbidden, then claims; see its comments for the rules.
-- lock_space is the schema's name: the lock is per ledger and per job.
SELECT * FROM {schema}.claim_period(
    %(schema)s, %(job_id)s::bigint, %(period_start)s, %(period_end)s, %(owner)s,
    %(lease)s::interval, %(max_attempts)s::integer, %(allow_overlap)s, %(ignore_backoff)s,
    %(retry_exhausted)s);

-- name: heartbeat
-- Extends the lease only while this attempt still holds it: a lease that has run out is gone,
-- even if nobody has taken the period over yet.
UPDATE {schema}.runs
SET heartbeat_at = clock_timestamp(), lease_expires_at = clock_timestamp() + %(lease)s
WHERE job_id = %(job_id)s AND period_start = %(period_start)s AND attempt = %(attempt)s
  AND status = 'running' AND lease_expires_at > clock_timestamp()
RETURNING lease_expires_at;

-- name: finish
-- Fenced by the attempt: {schema}.finish_attempt() (sql/migrations/0007) writes nothing for a
-- runner whose period was taken over, and a finish sent twice is applied once.
SELECT * FROM {schema}.finish_attempt(
    %(job_id)s::bigint, %(period_start)s, %(attempt)s::integer, %(status)s::text,
    %(history_status)s::text, %(counts_as_failure)s, %(backoff)s::interval,
    %(backoff_cap)s::interval, %(exit_code)s::integer, %(error)s::text, %(output_tail)s::text);

-- name: finish_then_claim
-- One period's finish and the next period's claim in one transaction:
-- {schema}.finish_then_claim() (sql/migrations/0007). No row: the finish was fenced off and
-- nothing was claimed; a row whose id is null: finished, and the next period not claimable.
SELECT * FROM {schema}.finish_then_claim(
    %(job_id)s::bigint, %(period_start)s, %(attempt)s::integer, %(status)s::text,
    %(history_status)s::text, %(counts_as_failure)s, %(backoff)s::interval,
    %(backoff_cap)s::interval, %(exit_code)s::integer, %(error)s::text, %(output_tail)s::text,
    %(schema)s, %(next_job_id)s::bigint, %(next_start)s, %(next_end)s, %(owner)s,
    %(lease)s::interval, %(max_attempts)s::integer, %(allow_overlap)s, %(ignore_backoff)s,
    %(retry_exhausted)s);

-- name: lose
-- A runner that lost its lease says so in the history of its own attempt, if still open.
UPDATE {schema}.history
SET status = 'lost', finished_at = clock_timestamp(), error = %(error)s
WHERE job_id = %(job_id)s AND period_start = %(period_start)s AND attempt = %(attempt)s
  AND status = 'running';

-- name: run_row
-- One period's row, read back after a claim found nothing to do or a commit's outcome was lost.
SELECT r.period_start, r.period_end, r.status, r.attempt, r.failures, r.owner,
       r.lease_expires_at, r.finished_at, r.retry_after, r.exit_code, r.error,
       r.lease_expires_at > clock_timestamp() AS lease_live,
       clock_timestamp() AS now
FROM {schema}.runs r
WHERE r.job_id = %(job_id)s AND r.period_start = %(period_start)s;

-- name: running_other
-- The live run that blocks a job whose overlap is forbidden.
SELECT period_start, owner, lease_expires_at
FROM {schema}.runs
WHERE job_id = %(job_id)s AND status = 'running' AND lease_expires_at > clock_timestamp()
  AND period_start <> %(period_start)s
ORDER BY period_start
LIMIT 1;

-- name: save_checkpoint
UPDATE {schema}.runs SET checkpoint = %(checkpoint)s
WHERE id = %(run_id)s AND attempt = %(attempt)s AND status = 'running'
RETURNING id;

-- name: history
-- total: how many attempts match in all, so a report cut at the limit can say so
SELECT h.period_start, h.attempt, h.status, h.owner, h.started_at, h.finished_at,
       h.exit_code, h.error, h.output_tail, count(*) OVER () AS total
FROM {schema}.history h
WHERE h.job_id = %(job_id)s
  AND (%(period_start)s::timestamptz IS NULL OR h.period_start = %(period_start)s)
ORDER BY h.period_start DESC, h.attempt DESC
LIMIT %(limit)s;

-- name: scan_snapshot
-- A scan reads coverage and the rows it vouches for from one snapshot, and writes nothing.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;

-- name: scan_settings
-- Periods are UTC intervals: calendar arithmetic in this transaction is done in UTC whatever the
-- server's default, and the gaps-and-islands sorts stay in memory.
SET LOCAL TimeZone = 'UTC';
SET LOCAL work_mem = '64MB';

-- name: scan_state
SELECT job_id, signature, generation FROM {schema}.scan_state
WHERE job_id = ANY(%(job_ids)s::bigint[]);

-- name: coverage
SELECT c.job_id, c.first, c.last
FROM unnest(%(job_ids)s::bigint[], %(firsts)s::timestamptz[], %(untils)s::timestamptz[])
     AS w (job_id, first, until)
JOIN {schema}.coverage c ON c.job_id = w.job_id AND c.last >= w.first AND c.first < w.until
ORDER BY c.job_id, c.first;

-- name: open_scan_state
INSERT INTO {schema}.scan_state (job_id, signature) VALUES (%(job_id)s, %(signature)s)
ON CONFLICT (job_id) DO NOTHING
RETURNING generation;

-- name: lock_scan_state
SELECT signature, generation FROM {schema}.scan_state WHERE job_id = %(job_id)s FOR UPDATE;

-- name: reset_coverage
-- The schedule or start changed: what was verified under the old one says nothing now.
WITH gone AS (DELETE FROM {schema}.coverage WHERE job_id = %(job_id)s)
UPDATE {schema}.scan_state SET signature = %(signature)s WHERE job_id = %(job_id)s;

-- name: replace_coverage
-- The window [first, until) was verified: its coverage is replaced by what the scan found.
WITH gone AS (
    DELETE FROM {schema}.coverage
    WHERE job_id = %(job_id)s AND first >= %(first)s AND last < %(until)s
)
INSERT INTO {schema}.coverage (job_id, first, last)
SELECT %(job_id)s, f, l FROM unnest(%(firsts)b::timestamptz[], %(lasts)b::timestamptz[]) AS u (f, l)
ON CONFLICT (job_id, first) DO UPDATE SET last = greatest({schema}.coverage.last, excluded.last);

-- name: scan_unfinished
-- For each job's window, every period that has a row but is not succeeded, collapsed into runs
-- of consecutive periods in the same state (gaps and islands). Reads only the partial index.
WITH w AS (
    SELECT *
    FROM unnest(%(job_ids)s::bigint[], %(firsts)s::timestamptz[], %(untils)s::timestamptz[],
                %(steps)s::interval[], %(max_attempts)s::integer[])
         AS w (job_id, first, until, step, max_attempts)
), classified AS (
    SELECT w.job_id, w.step, r.period_start,
           {schema}.period_state(r.status, r.failures, r.interrupted,
                                  r.lease_expires_at, %(now)s, w.max_attempts) AS state
    FROM w
    JOIN {schema}.runs r
      ON r.job_id = w.job_id AND r.status <> 'succeeded'
     AND r.period_start >= w.first AND r.period_start < w.until
), grouped AS (
    -- consecutive periods of one state share period_start - n * step
    SELECT job_id, period_start, state,
           period_start - row_number() OVER (PARTITION BY job_id, state ORDER BY period_start)
                          * step AS island
    FROM classified
)
SELECT job_id, state, min(period_start) AS first, max(period_start) AS last,
       count(*) AS periods
FROM grouped
GROUP BY job_id, state, island
ORDER BY job_id, first;

-- name: scan_missing
-- (The big arrays travel in binary (the b placeholders): cheaper to send than their text.)
-- The holes between the rows that exist, inside each range [lo, hi) of a job that no scan has
-- verified yet: runs of missing periods. Reads the primary key only (index-only once vacuumed).
-- last is the range's last period start (hi may be cut short by a schedule change).
SELECT u.job_id, h.first, h.last
FROM unnest(%(job_ids)b::bigint[], %(los)b::timestamptz[], %(his)b::timestamptz[],
            %(steps)s::interval[], %(lasts)b::timestamptz[]) AS u (job_id, lo, hi, step, last)
CROSS JOIN LATERAL (
    -- before each row whose predecessor (or the range's start) is not the period before it
    SELECT coalesce(p.previous + u.step, u.lo) AS first, p.period_start - u.step AS last
    FROM (
        SELECT r.period_start, lag(r.period_start) OVER (ORDER BY r.period_start) AS previous
        FROM {schema}.runs r
        WHERE r.job_id = u.job_id AND r.period_start >= u.lo AND r.period_start < u.hi
    ) p
    WHERE p.period_start > coalesce(p.previous + u.step, u.lo)
    UNION ALL
    -- after the range's last row, or the whole range when it has none
    SELECT coalesce(m.last_row + u.step, u.lo), u.last
    FROM (
        SELECT max(r.period_start) AS last_row
        FROM {schema}.runs r
        WHERE r.job_id = u.job_id AND r.period_start >= u.lo AND r.period_start < u.hi
    ) m
    WHERE coalesce(m.last_row + u.step, u.lo) <= u.last
) h
ORDER BY u.job_id, h.first;

-- name: scan_full
-- The plain detector: every expected period from generate_series, left-joined to the ledger,
-- classified, and collapsed into runs of one state. Reads the whole window.
WITH classified AS (
    SELECT e.period_start,
           {schema}.period_state(r.status, r.failures, r.interrupted,
                                  r.lease_expires_at, %(now)s, %(max_attempts)s) AS state
    FROM generate_series(%(first)s::timestamptz, %(last)s::timestamptz,
                         %(step)s::interval) AS e (period_start)
    LEFT JOIN {schema}.runs r ON r.job_id = %(job_id)s AND r.period_start = e.period_start
), grouped AS (
    SELECT period_start, state,
           period_start - row_number() OVER (PARTITION BY state ORDER BY period_start)
                          * %(step)s::interval AS island
    FROM classified
)
SELECT %(job_id)s::bigint AS job_id, state, min(period_start) AS first,
       max(period_start) AS last, count(*) AS periods
FROM grouped
GROUP BY state, island
ORDER BY first;

-- name: last_success
SELECT w.job_id,
       (SELECT r.period_start FROM {schema}.runs r
        WHERE r.job_id = w.job_id AND r.status = 'succeeded'
        ORDER BY r.period_start DESC
        LIMIT 1) AS last_success
FROM unnest(%(job_ids)s::bigint[]) AS w (job_id);

-- name: record_tick
-- Records this tick and returns the previous one's time (NULL on the first tick).
WITH previous AS (
    SELECT max(at) AS at FROM {schema}.ticks
), recorded AS (
    INSERT INTO {schema}.ticks (host) VALUES (%(host)s)
)
SELECT at FROM previous;

-- name: lock_periods
-- The rows a mark or reset is about to change, locked until it commits.
SELECT period_start, status, attempt, failures,
       status = 'running' AND lease_expires_at > clock_timestamp() AS live
FROM {schema}.runs
WHERE job_id = %(job_id)s AND period_start = ANY(%(starts)s::timestamptz[])
ORDER BY period_start
FOR UPDATE;

-- name: mark_periods
-- Waive periods (done out of band, or skipped on purpose). A period that started running
-- meanwhile is left alone and not returned, so the caller can refuse the whole change.
INSERT INTO {schema}.runs AS r (job_id, period_start, period_end, status, attempt, finished_at,
                                error)
SELECT %(job_id)s, s, e, 'waived', 0, clock_timestamp(), %(note)s
FROM unnest(%(starts)s::timestamptz[], %(ends)s::timestamptz[]) AS u (s, e)
ON CONFLICT (job_id, period_start) DO UPDATE SET
    status = 'waived', finished_at = clock_timestamp(), lease_expires_at = NULL,
    retry_after = NULL, error = excluded.error
WHERE r.status <> 'running'
RETURNING period_start;

-- name: reset_periods
-- Make finished periods runnable again: failed with no failures counted, due for a retry now.
-- The attempt number stays, so the next attempt is still a new fencing token.
UPDATE {schema}.runs
SET status = 'failed', failures = 0, interrupted = false, retry_after = clock_timestamp(),
    lease_expires_at = NULL, error = %(note)s
WHERE job_id = %(job_id)s AND period_start = ANY(%(starts)s::timestamptz[])
  AND status IN ('succeeded', 'waived', 'failed')
RETURNING period_start;

-- name: record_events
INSERT INTO {schema}.events (job_id, period_start, action, previous, reason, actor)
SELECT %(job_id)s, s, %(action)s, p, %(reason)s, %(actor)s
FROM unnest(%(starts)s::timestamptz[], %(previous)s::text[]) AS u (s, p);

-- name: pause_job
UPDATE {schema}.jobs SET paused_at = coalesce(paused_at, clock_timestamp())
WHERE id = %(job_id)s
RETURNING paused_at;

-- name: resume_job
-- Returns a row only when the job was paused.
UPDATE {schema}.jobs SET paused_at = NULL WHERE id = %(job_id)s AND paused_at IS NOT NULL
RETURNING id;

-- name: events
SELECT e.period_start, e.action, e.previous, e.reason, e.actor, e.at, count(*) OVER () AS total
FROM {schema}.events e
WHERE e.job_id = %(job_id)s
  AND (%(period_start)s::timestamptz IS NULL OR e.period_start = %(period_start)s
       OR e.period_start IS NULL)
ORDER BY e.at DESC
LIMIT %(limit)s;

-- name: recent_ticks
-- The scheduler's pulse: the latest ticks, newest first.
SELECT host, at FROM {schema}.ticks ORDER BY at DESC LIMIT %(limit)s;

-- name: crowded_minutes
-- Minutes of the last day in which ticks came from more than one host.
SELECT date_trunc('minute', at) AS minute, array_agg(DISTINCT host ORDER BY host) AS hosts
FROM {schema}.ticks
WHERE at > clock_timestamp() - interval '1 day'
GROUP BY 1
HAVING count(DISTINCT host) > 1
ORDER BY 1 DESC
LIMIT 5;

-- name: doctor_probe
-- What doctor needs from the server: its clock, the port it listens on, this backend's pid.
SELECT clock_timestamp() AS now, current_setting('port')::integer AS port,
       pg_backend_pid() AS pid;

-- name: reclaim
-- After a lost connection: the claim this owner made, if its commit went through after all.
SELECT id, period_start, period_end, attempt, lease_expires_at, checkpoint
FROM {schema}.runs
WHERE job_id = %(job_id)s AND period_start = %(period_start)s AND status = 'running'
  AND owner = %(owner)s AND lease_expires_at > clock_timestamp();

-- name: job_schedules
-- Every recorded schedule of the jobs, oldest first, with the start each was last seen with.
SELECT j.id, j.start, s.since, s.schedule, s.timezone
FROM {schema}.jobs j
LEFT JOIN {schema}.schedules s ON s.job_id = j.id
WHERE j.id = ANY(%(job_ids)s::bigint[])
ORDER BY j.id, s.since;

-- name: lock_job_row
-- Serialises recording a job's schedule change across replicas (a row lock: pooler-safe).
SELECT id FROM {schema}.jobs WHERE id = %(job_id)s FOR UPDATE;

-- name: drop_schedules
-- Changes that have not taken effect yet (since after %(after)s) are replaced by the new one.
DELETE FROM {schema}.schedules WHERE job_id = %(job_id)s AND since > %(after)s;

-- name: add_schedule
INSERT INTO {schema}.schedules (job_id, since, schedule, timezone, recorded_by)
VALUES (%(job_id)s, %(since)s, %(schedule)s, %(timezone)s, %(actor)s);

-- name: set_job_start
UPDATE {schema}.jobs SET start = %(start)s WHERE id = %(job_id)s;

-- name: record_change
-- A schedule or start change, in the job's audit trail: period_start is when it takes effect.
INSERT INTO {schema}.events (job_id, period_start, action, previous, reason, actor)
VALUES (%(job_id)s, %(since)s, %(action)s, %(previous)s, %(now_is)s, %(actor)s);

-- name: local_series
-- The SQL generator of a wall-clock schedule's boundaries (tests compare it with Python's).
SELECT period_start FROM {schema}.local_series(%(origin)s::timestamp, %(step)s::interval,
                                               %(k0)s, %(n)s, %(tz)s)
ORDER BY k;

-- name: scan_unfinished_rows
-- For windows of wall-clock schedules: every period with a row that is not succeeded, one by
-- one (grouped into runs in Python, which knows the schedule). Reads only the partial index.
SELECT w.job_id,
       {schema}.period_state(r.status, r.failures, r.interrupted,
                                  r.lease_expires_at, %(now)s, w.max_attempts) AS state,
       r.period_start
FROM unnest(%(job_ids)s::bigint[], %(firsts)s::timestamptz[], %(untils)s::timestamptz[],
            %(max_attempts)s::integer[]) AS w (job_id, first, until, max_attempts)
JOIN {schema}.runs r
  ON r.job_id = w.job_id AND r.status <> 'succeeded'
 AND r.period_start >= w.first AND r.period_start < w.until
ORDER BY w.job_id, r.period_start;

-- name: scan_listed_missing
-- For wall-clock schedules: which of the listed period starts (numbered consecutively within
-- each piece) have no row, as runs of consecutive periods. Reads the primary key only.
WITH listed AS (
    SELECT * FROM unnest(%(job_ids)b::bigint[], %(pieces)b::integer[], %(starts)b::timestamptz[])
        WITH ORDINALITY AS e (job_id, piece, period_start, i)
), missing AS (
    SELECT l.*, l.i - row_number() OVER (PARTITION BY l.job_id, l.piece ORDER BY l.i) AS island
    FROM listed l
    WHERE NOT EXISTS (SELECT 1 FROM {schema}.runs r
                      WHERE r.job_id = l.job_id AND r.period_start = l.period_start)
)
SELECT job_id, min(period_start) AS first, max(period_start) AS last, count(*) AS periods
FROM missing
GROUP BY job_id, piece, island
ORDER BY job_id, first;

-- name: scan_full_calendar
-- The plain detector for a wall-clock calendar schedule: its periods generated in SQL by
-- local_series, left-joined to the ledger, classified, collapsed into runs of one state.
WITH classified AS (
    SELECT e.k, e.period_start,
           {schema}.period_state(r.status, r.failures, r.interrupted,
                                  r.lease_expires_at, %(now)s, %(max_attempts)s) AS state
    FROM {schema}.local_series(%(origin)s::timestamp, %(step)s::interval, %(k0)s, %(n)s,
                               %(tz)s) AS e
    LEFT JOIN {schema}.runs r ON r.job_id = %(job_id)s AND r.period_start = e.period_start
)
SELECT %(job_id)s::bigint AS job_id, state, min(period_start) AS first,
       max(period_start) AS last, count(*) AS periods
FROM (SELECT *, k - row_number() OVER (PARTITION BY state ORDER BY k) AS island
      FROM classified) g
GROUP BY state, island
ORDER BY first;

-- name: scan_full_listed
-- The plain detector for cron and RRULE schedules: the period starts listed by Python.
WITH classified AS (
    SELECT e.i, e.period_start,
           {schema}.period_state(r.status, r.failures, r.interrupted,
                                  r.lease_expires_at, %(now)s, %(max_attempts)s) AS state
    FROM unnest(%(starts)b::timestamptz[]) WITH ORDINALITY AS e (period_start, i)
    LEFT JOIN {schema}.runs r ON r.job_id = %(job_id)s AND r.period_start = e.period_start
)
SELECT %(job_id)s::bigint AS job_id, state, min(period_start) AS first,
       max(period_start) AS last, count(*) AS periods
FROM (SELECT *, i - row_number() OVER (PARTITION BY state ORDER BY i) AS island
      FROM classified) g
GROUP BY state, island
ORDER BY first;

-- name: zone_walls
-- What the server's time zone database says the wall clock shows at each instant, per zone
-- (doctor compares it with Python's tzdata).
SELECT z, t, t AT TIME ZONE z AS wall
FROM unnest(%(zones)s::text[]) AS z CROSS JOIN unnest(%(instants)s::timestamptz[]) AS t
ORDER BY z, t;

-- name: ledger_holds_jobs
-- Whether this schema already keeps a ledger for any of these jobs (a ledger made before
-- projects got databases of their own on the embedded server).
SELECT count(*) > 0 FROM {schema}.jobs WHERE name = ANY(%(names)s::text[]);

-- name: create_database
CREATE DATABASE {database};

-- name: set_password
-- The embedded server's superuser password, for a server made before catchup set one (ALTER
-- ROLE takes no parameters: {password} is bound as a quoted literal by psycopg.sql).
ALTER ROLE postgres PASSWORD {password};

-- name: reload_conf
SELECT pg_reload_conf();

-- name: evidence_begin
-- A job's evidence query runs read-only, bounded in time, in a transaction of its own.
SET TRANSACTION READ ONLY;

-- name: evidence_timeout
SELECT set_config('statement_timeout', %(timeout)s, true);

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
    JOIN {schema}.runs r
      ON r.job_id = %(job_id)s AND r.period_start >= x.lo AND r.period_start < x.hi
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
JOIN {schema}.runs r
  ON r.job_id = %(job_id)s AND r.period_start >= x.lo AND r.period_start < x.hi
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
WHERE job_id = %(job_id)s AND period_start >= %(lo)s AND period_start < %(hi)s
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

-- name: lock_alerts
-- One replica at a time compares the gap ranges with those already told (job ids are
-- positive, so this key never meets a job's lock).
SELECT pg_advisory_xact_lock(hashtext(%(schema)s), -1);

-- name: open_alert_ranges
SELECT id, job_id, state, first, last, periods
FROM {schema}.alert_ranges WHERE closed_at IS NULL ORDER BY job_id, first;

-- name: add_alert_range
INSERT INTO {schema}.alert_ranges (job_id, state, first, last, periods)
VALUES (%(job_id)s, %(state)s, %(first)s, %(last)s, %(periods)s);

-- name: update_alert_range
UPDATE {schema}.alert_ranges
SET state = %(state)s, first = %(first)s, last = %(last)s, periods = %(periods)s
WHERE id = %(id)s;

-- name: close_alert_range
UPDATE {schema}.alert_ranges SET closed_at = clock_timestamp() WHERE id = %(id)s;

-- name: enqueue_alert
INSERT INTO {schema}.alert_outbox (webhook, body) VALUES (%(webhook)s, %(body)s);

-- name: alerts_sent_lately
-- Posts delivered in the last minute, per webhook: the rate limit.
SELECT webhook, count(*) FROM {schema}.alert_outbox
WHERE delivered_at > clock_timestamp() - interval '1 minute'
GROUP BY webhook;

-- name: take_alert
-- The oldest post due for a webhook, leased for a minute while it is sent (another replica
-- skips it); its attempt counted now, so a crash mid-send still backs off.
UPDATE {schema}.alert_outbox
SET attempts = attempts + 1, next_at = clock_timestamp() + interval '1 minute'
WHERE id = (
    SELECT id FROM {schema}.alert_outbox
    WHERE webhook = %(webhook)s AND delivered_at IS NULL AND next_at <= clock_timestamp()
    ORDER BY id LIMIT 1
    FOR UPDATE SKIP LOCKED)
RETURNING id, body, attempts;

-- name: alert_delivered
UPDATE {schema}.alert_outbox SET delivered_at = clock_timestamp(), error = NULL
WHERE id = %(id)s;

-- name: alert_failed
-- Backoff: 10 s, doubling per attempt, at most an hour.
UPDATE {schema}.alert_outbox
SET error = %(error)s,
    next_at = clock_timestamp() + least(interval '10 seconds' * power(2, attempts - 1),
                                        interval '1 hour')
WHERE id = %(id)s;

-- name: rename_job
-- A job's new name, its id and every row keyed by it kept (sql/migrations/0011): NULL job_id
-- and the reason when it cannot be.
SELECT job_id, why FROM {schema}.rename_job(%(old)s, %(new)s, %(reason)s, %(actor)s);

-- name: retire_job
-- Returns the job's id when the ledger has it; retired_at is kept if it was retired already.
UPDATE {schema}.jobs SET retired_at = coalesce(retired_at, clock_timestamp())
WHERE name = %(name)s
RETURNING id;

-- name: unconfigured_jobs
-- Jobs the ledger has that a config does not name (and nobody retired): a rename the config
-- did not say, or a job removed by mistake. With each one's newest succeeded period and the
-- schedule it had last.
SELECT j.name,
       (SELECT r.period_start FROM {schema}.runs r
        WHERE r.job_id = j.id AND r.status = 'succeeded'
        ORDER BY r.period_start DESC LIMIT 1) AS last_success,
       s.schedule, s.timezone
FROM {schema}.jobs j
LEFT JOIN LATERAL (
    SELECT schedule, timezone FROM {schema}.schedules
    WHERE job_id = j.id ORDER BY since DESC LIMIT 1
) s ON true
WHERE j.retired_at IS NULL AND NOT (j.name = ANY(%(names)s::text[]))
ORDER BY j.name;

-- name: names_without_runs
-- Which of these names the ledger has no run for (new to it, or registered and never run).
SELECT n FROM unnest(%(names)s::text[]) AS n
WHERE NOT EXISTS (
    SELECT 1 FROM {schema}.jobs j JOIN {schema}.runs r ON r.job_id = j.id WHERE j.name = n
);
