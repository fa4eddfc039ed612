-- Alerts on gap ranges: the ranges already told (so two replicas, or a restart, never tell one
-- twice), and an outbox of posts to deliver, retried with backoff until they are delivered.
CREATE TABLE IF NOT EXISTS {schema}.alert_ranges (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      bigint NOT NULL REFERENCES {schema}.jobs (id),
    state       text NOT NULL,
    first       timestamptz NOT NULL,
    last        timestamptz NOT NULL,
    periods     integer NOT NULL,
    opened_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    closed_at   timestamptz
);
CREATE INDEX IF NOT EXISTS alert_ranges_open
    ON {schema}.alert_ranges (job_id) WHERE closed_at IS NULL;

-- webhook is the webhook's name in catchup.toml, never its URL (which may hold a token).
CREATE TABLE IF NOT EXISTS {schema}.alert_outbox (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook       text NOT NULL,
    body          jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempts      integer NOT NULL DEFAULT 0,
    next_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    delivered_at  timestamptz,
    error         text
);
CREATE INDEX IF NOT EXISTS alert_outbox_pending
    ON {schema}.alert_outbox (next_at) WHERE delivered_at IS NULL;
