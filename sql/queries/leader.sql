-- The scheduler's leader: one lease row on the database clock, with a term that fences a
-- leader whose lease ran out (sql/migrations/0018). {schema} is replaced by the quoted schema.

-- name: lead
-- Take the lead, or keep it: a row comes back when this holder leads after the statement, with
-- its term. A holder renews only the term it holds, and only while that term's lease is live; a
-- lease that ran out (or was handed back) is taken by whoever asks first, as the next term. Two
-- standbys asking at once: the row lock orders them, the second finds the lease live and gets no
-- row. The lead's own lease is measured on the database clock, never the host's. With it, the
-- leader's lanes: each one's workers and how many are busy (0024).
INSERT INTO {schema}.leader AS l (name, holder, term, since, expires_at, renewed_at, lanes)
VALUES (%(name)s, %(holder)s, 1, clock_timestamp(), clock_timestamp() + %(lease)s,
        clock_timestamp(), %(lanes)s)
ON CONFLICT (name) DO UPDATE
SET term = CASE WHEN l.holder = EXCLUDED.holder AND l.term = %(term)s
                     AND l.expires_at > clock_timestamp()
                THEN l.term ELSE l.term + 1 END,
    since = CASE WHEN l.holder = EXCLUDED.holder AND l.term = %(term)s
                      AND l.expires_at > clock_timestamp()
                 THEN l.since ELSE clock_timestamp() END,
    holder = EXCLUDED.holder,
    expires_at = EXCLUDED.expires_at,
    renewed_at = EXCLUDED.renewed_at,
    lanes = EXCLUDED.lanes
WHERE (l.holder = EXCLUDED.holder AND l.term = %(term)s AND l.expires_at > clock_timestamp())
   OR l.expires_at <= clock_timestamp()
RETURNING l.term, l.since, l.expires_at, clock_timestamp() AS now;

-- name: resign
-- Hand the lease back (a stop, a rolling deploy): the next standby to ask leads at once. Only
-- the term this holder holds; a term already taken over is left alone.
UPDATE {schema}.leader
SET expires_at = clock_timestamp()
WHERE name = %(name)s AND holder = %(holder)s AND term = %(term)s
  AND expires_at > clock_timestamp();

-- name: leader_now
-- Who leads (for jobs, scan, the page, /metrics): the row, and whether its lease is live.
SELECT holder, term, since, expires_at, renewed_at,
       expires_at > clock_timestamp() AS live, clock_timestamp() AS now, lanes
FROM {schema}.leader
WHERE name = %(name)s;

-- name: next_retry
-- When, after now, the soonest backoff of a failed period of these jobs ends, or the lease of a
-- period another process runs does (a leader killed mid-period: its period is taken over once
-- its lease runs out): the leader wakes for it as for a period falling due, never leaving a
-- retry or a takeover to the next due moment. The leader's own periods renew their leases.
SELECT min(m.at) AS at
FROM (
    SELECT r.retry_after AS at
    FROM {schema}.runs r
    WHERE r.job_id = ANY(%(job_ids)s::bigint[]) AND r.status = 'failed'
      AND r.retry_after > clock_timestamp()
    UNION ALL
    SELECT r.lease_expires_at
    FROM {schema}.runs r
    WHERE r.job_id = ANY(%(job_ids)s::bigint[]) AND r.status = 'running'
      AND r.lease_expires_at > clock_timestamp() AND r.owner <> %(owner)s
) m;
