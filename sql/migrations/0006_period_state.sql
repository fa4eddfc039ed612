-- period_state() was added to 0005 after 0005 had first been applied (a mistake: migrations are
-- immutable once shipped, tests/unit/test_migrations.py now holds their checksums), so a ledger
-- migrated in between has no such function and every scan statement fails there. Define it
-- again, identical, so every ledger reaches the same schema.
CREATE OR REPLACE FUNCTION {schema}.period_state(status text, failures integer,
                                                 lease_expires_at timestamptz,
                                                 now timestamptz, max_attempts integer)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN status IS NULL THEN 'missing'
        WHEN status = 'succeeded' THEN 'succeeded'
        WHEN status = 'waived' THEN 'waived'
        WHEN status = 'running' AND lease_expires_at > now THEN 'running'
        WHEN status = 'running' THEN 'stale'
        WHEN failures >= max_attempts THEN 'exhausted'
        ELSE 'failed'
    END
$$;
