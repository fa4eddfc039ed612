-- Observed jobs (catchup/pings/): a job's own cron reports each run by a ping, which settles
-- its period through the claim path. A ping that settles nothing (its period was settled
-- already, or is running under another claim) and a log ping are kept in the audit trail as
-- 'ping' events, beside the changes people make: every ping is on record.
ALTER TABLE {schema}.events DROP CONSTRAINT IF EXISTS events_action_check;
ALTER TABLE {schema}.events ADD CONSTRAINT events_action_check
    CHECK (action IN ('done', 'skip', 'reset', 'pause', 'resume', 'schedule', 'start', 'adopt',
                      'rename', 'retire', 'cancel', 'ping')) NOT VALID;
