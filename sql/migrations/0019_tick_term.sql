-- Which ticks came from `catchup scheduler`: the term its leader held (NULL for `catchup tick`,
-- which a CronJob, a timer or cron calls). The pulse warns when plain ticks keep coming while a
-- scheduler leads (two schedulers: harmless to the ledger, but the mistake catchup exists to
-- end), and no longer counts a scheduler's failover, two leaders' ticks in one minute, as ticks
-- from every replica.
--
-- A nullable column with no default: a change to the catalog only, no rewrite of the table and
-- no lock held for longer than that. It can run again over a ledger that has it.

ALTER TABLE {schema}.ticks ADD COLUMN IF NOT EXISTS term bigint;
