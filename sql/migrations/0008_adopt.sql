-- `catchup adopt` records periods whose output exists but that the ledger never saw (the
-- evidence's untracked periods) as waived, with the reason, in the audit trail.
ALTER TABLE {schema}.events DROP CONSTRAINT events_action_check;
ALTER TABLE {schema}.events ADD CONSTRAINT events_action_check
    CHECK (action IN ('done', 'skip', 'reset', 'pause', 'resume', 'schedule', 'start', 'adopt'));
