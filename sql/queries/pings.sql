-- Observed jobs' pings (catchup/pings/): the attempt a /start ping claimed, for its finish.
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Time comes from clock_timestamp() on the server, never from the host.
-- Statements of catchup/ledger/pings.py, one per "-- name:" header (names unique across files).

-- name: open_ping
-- The running attempt a start ping of this job (and key) claimed: the one of its run id when
-- it gave one (owner 'ping <rid>'), however late (its lease may have run out: a finish still
-- lands while nobody else took the period over, fenced by the attempt); else the newest one a
-- start without a run id claimed (owner 'ping'), while its lease holds.
SELECT r.period_start, r.period_end, r.attempt
FROM {schema}.runs r
WHERE r.job_id = %(job_id)s AND r.key = %(key)s AND r.status = 'running'
  AND r.owner = %(owner)s
  AND (%(owner)s <> 'ping' OR r.lease_expires_at > clock_timestamp())
ORDER BY r.claimed_at DESC
LIMIT 1;

-- name: ping_started
-- The period a start ping of run id %(owner)s ('ping <rid>') claimed, if any attempt of the
-- job (and key) was ever so owned: a finish of that run id whose start was taken over meanwhile
-- belongs to that period, never to another.
SELECT h.period_start
FROM {schema}.history h
WHERE h.job_id = %(job_id)s AND h.key = %(key)s AND h.owner = %(owner)s
ORDER BY h.started_at DESC
LIMIT 1;
