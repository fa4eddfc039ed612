-- (Written to be applied again over itself, as every migration is: IF NOT EXISTS.)
-- A later read of a keyed job's keys, or a later scan of them, writes nothing per key that did
-- not change (issue 54: a million keys per job):
--   jobs.keys_read_at  when the job's keys were last read: the last time a key still held was
--                      seen is this (job_keys.last_seen is written only when a key appears, comes
--                      back or goes);
--   scan_state.keys_horizon
--                      what scans verified of a key may end in an unbounded range, [lo, ...):
--                      it reaches this horizon, where the job's last scan stopped looking. A
--                      scan that finds every key's newest periods with a row moves the horizon
--                      (one row) instead of every key's ranges; only the keys with a hole there
--                      are written. Null: no key follows it.
ALTER TABLE {schema}.jobs ADD COLUMN IF NOT EXISTS keys_read_at timestamptz;
ALTER TABLE {schema}.scan_state ADD COLUMN IF NOT EXISTS keys_horizon timestamptz;
