-- The rows that succeeded at a later attempt (run again after a reset or a failure): the only
-- upstream periods that can make a downstream one `outdated` (after). Every scan of a job that
-- waits for others looks for them over years of its upstream's periods; they are rare, so their
-- own index is small and the look costs next to nothing however long the ledger is.
CREATE INDEX IF NOT EXISTS runs_reruns ON {schema}.runs (job_id, period_start)
    INCLUDE (period_end, finished_at)
    WHERE status = 'succeeded' AND attempt > 1;
