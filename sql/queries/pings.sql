-- Observed jobs' pings (catchup/pings/): the attempt a /start ping claimed, for its finish.
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Time comes from clock_timestamp() on the server, never from the host.
-- Statements of catchup/ledger/pings.py, one per "-- name:" header (names unique across files).

-- name: open_ping
-- The running attempt a start ping of this job (and key) claimed: the one of its run id when
-- it gave one (owner 'ping <rid>'), else the newest claimed by any start ping of the job. Its
-- lease may have run out: a finish still lands while nobody else took the period over (the
-- finish is fenced by the attempt).
SELECT r.period_start, r.period_end, r.attempt
FROM {schema}.runs r
WHERE r.job_id = %(job_id)s AND r.key = %(key)s AND r.status = 'running'
  AND (r.owner = %(owner)s OR (%(owner)s = 'ping' AND r.owner LIKE 'ping%%'))
ORDER BY r.claimed_at DESC
LIMIT 1;
