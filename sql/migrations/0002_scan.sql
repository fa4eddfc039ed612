-- What a scan has already verified: coverage rows say "every period of the job from first to last
-- (period starts, inclusive) has a row in runs", for the schedule named in scan_state.signature.
-- Rows are never removed by catchup, so this stays true until someone deletes rows (or rewrites
-- their keys): a trigger then drops the coverage around them. A scan reads the ledger's history
-- only where nothing is known yet; the states of rows that are not succeeded come from a small
-- partial index, whatever coverage says.
CREATE TABLE {schema}.scan_state (
    job_id      bigint PRIMARY KEY REFERENCES {schema}.jobs (id),
    signature   text NOT NULL,
    generation  bigint NOT NULL DEFAULT 0
);

CREATE TABLE {schema}.coverage (
    job_id  bigint NOT NULL REFERENCES {schema}.jobs (id),
    first   timestamptz NOT NULL,
    last    timestamptz NOT NULL,
    PRIMARY KEY (job_id, first),
    CHECK (last >= first)
);

-- generation changes whenever rows disappear, so a scan that read an older ledger cannot record
-- coverage over the hole; the scan_state row is created if missing for the same reason.
CREATE FUNCTION {schema}.rows_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.scan_state AS s (job_id, signature, generation)
    SELECT DISTINCT job_id, '', 1 FROM removed
    ON CONFLICT (job_id) DO UPDATE SET generation = s.generation + 1;
    DELETE FROM {schema}.coverage c
    USING removed g
    WHERE c.job_id = g.job_id AND c.first <= g.period_start AND c.last >= g.period_start;
    RETURN NULL;
END;
$$;

CREATE TRIGGER runs_deleted AFTER DELETE ON {schema}.runs
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.rows_removed();

-- catchup never rewrites a run's key; if a person does, the old key counts as removed.
CREATE FUNCTION {schema}.key_rewritten() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.scan_state AS s (job_id, signature, generation)
    VALUES (OLD.job_id, '', 1)
    ON CONFLICT (job_id) DO UPDATE SET generation = s.generation + 1;
    DELETE FROM {schema}.coverage c
    WHERE c.job_id = OLD.job_id AND c.first <= OLD.period_start AND c.last >= OLD.period_start;
    RETURN NULL;
END;
$$;

CREATE TRIGGER runs_rekeyed AFTER UPDATE ON {schema}.runs
    FOR EACH ROW
    WHEN (OLD.job_id IS DISTINCT FROM NEW.job_id
          OR OLD.period_start IS DISTINCT FROM NEW.period_start)
    EXECUTE FUNCTION {schema}.key_rewritten();

CREATE FUNCTION {schema}.runs_emptied() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {schema}.coverage;
    UPDATE {schema}.scan_state SET generation = generation + 1;
    RETURN NULL;
END;
$$;

CREATE TRIGGER runs_truncated AFTER TRUNCATE ON {schema}.runs
    FOR EACH STATEMENT EXECUTE FUNCTION {schema}.runs_emptied();

-- The few rows a scan classifies one by one, readable without touching the heap.
CREATE INDEX runs_unfinished ON {schema}.runs (job_id, period_start)
    INCLUDE (status, failures, lease_expires_at)
    WHERE status <> 'succeeded';
