-- Alerts: the gap ranges told to webhooks, and the outbox of posts.
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Time comes from clock_timestamp() on the server, never from the host.
-- Statements of catchup/ledger/alerts.py, one per "-- name:" header (names unique across files).

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

-- name: alert_failure
-- What an alert of failed periods quotes: the newest failure in [first, last] of the job (of
-- one key, when key is not NULL): catchup's error and the end of the job's output (its last
-- 2,000 characters, where the job said why).
SELECT r.key, r.period_start, r.error, right(r.output_tail, 2000)
FROM {schema}.runs r
WHERE r.job_id = %(job_id)s
  AND r.status = 'failed'
  AND r.period_start BETWEEN %(first)s AND %(last)s
  AND (%(key)s::text IS NULL OR r.key = %(key)s)
ORDER BY r.finished_at DESC NULLS LAST
LIMIT 1;
