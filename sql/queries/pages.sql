-- What the status page and `catchup ps` read beside the scan: the periods running now and
-- the failures that still stand.
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Time comes from clock_timestamp() on the server, never from the host.
-- Statements of catchup/ledger/pages.py, one per "-- name:" header (names unique across files).

-- name: running_periods
-- Every period running now, on any host, oldest claim first (the runs_running index). A lease
-- already past is a runner that is gone: the next claim of that period reclaims it.
-- cancelling: somebody asked that attempt to stop (catchup cancel).
SELECT j.name AS job, r.key, r.period_start, r.period_end, r.attempt, r.owner,
       r.claimed_at, r.heartbeat_at, r.lease_expires_at, clock_timestamp() AS now,
       count(*) OVER () AS total, c.attempt IS NOT NULL AS cancelling
FROM {schema}.runs r
JOIN {schema}.jobs j ON j.id = r.job_id
LEFT JOIN {schema}.cancels c
  ON c.job_id = r.job_id AND c.key = r.key AND c.period_start = r.period_start
 AND c.attempt = r.attempt
WHERE r.status = 'running'
ORDER BY r.claimed_at, j.name, r.key, r.period_start
LIMIT %(limit)s;

-- name: standing_failures
-- Per job, its newest failed periods (at most per_job, newest finish first) with what the
-- last attempt said: the error, the exit code, the end of its output tail (its last
-- tail_chars characters). Failed runs are few and in the runs_unfinished index. A period whose
-- last attempt was interrupted or cancelled counted no failure: it is not one of them.
SELECT j.name AS job, f.key, f.period_start, f.attempt, f.failures, f.owner, f.claimed_at,
       f.finished_at, f.exit_code, f.error, f.output_tail, f.retry_after, f.tail_cut
FROM {schema}.jobs j
CROSS JOIN LATERAL (
    SELECT r.key, r.period_start, r.attempt, r.failures, r.owner, r.claimed_at,
           r.finished_at, r.exit_code, r.error, right(r.output_tail, %(tail_chars)s) AS output_tail,
           coalesce(length(r.output_tail) > %(tail_chars)s, false) AS tail_cut, r.retry_after
    FROM {schema}.runs r
    WHERE r.job_id = j.id AND r.status = 'failed' AND NOT r.interrupted
    ORDER BY r.finished_at DESC NULLS LAST, r.key, r.period_start DESC
    LIMIT %(per_job)s
) f
WHERE j.name = ANY(%(names)s)
ORDER BY j.name, f.finished_at DESC NULLS LAST, f.key, f.period_start DESC;
