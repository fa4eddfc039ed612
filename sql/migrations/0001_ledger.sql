-- The ledger: one row per (job, period) in runs, one row per attempt in history.
-- {schema} is replaced by the quoted schema identifier (psycopg.sql), never by a value.

CREATE TABLE {schema}.jobs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    paused_at   timestamptz
);

-- A period is the half-open UTC interval [period_start, period_end), keyed by its start.
-- attempt is the fencing token: every write of a run names the attempt it believes it owns.
-- failures counts attempts that failed, timed out or lost their lease (an interrupted
-- attempt does not count), and decides when a period is exhausted.
CREATE TABLE {schema}.runs (
    id               bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    job_id           bigint NOT NULL REFERENCES {schema}.jobs (id),
    period_start     timestamptz NOT NULL,
    period_end       timestamptz NOT NULL,
    status           text NOT NULL
                     CHECK (status IN ('running', 'succeeded', 'failed', 'waived')),
    attempt          integer NOT NULL CHECK (attempt >= 1),
    failures         integer NOT NULL DEFAULT 0,
    owner            text,
    claimed_at       timestamptz,
    heartbeat_at     timestamptz,
    lease_expires_at timestamptz,
    finished_at      timestamptz,
    retry_after      timestamptz,
    exit_code        integer,
    error            text,
    output_tail      text,
    checkpoint       text,
    PRIMARY KEY (job_id, period_start),
    CHECK (period_end > period_start)
);

-- The overlap guard and the stale-lease check look only at running rows.
CREATE INDEX runs_running ON {schema}.runs (job_id, lease_expires_at) WHERE status = 'running';

-- Every attempt of every period, kept after the run row has moved on.
CREATE TABLE {schema}.history (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id        bigint NOT NULL REFERENCES {schema}.jobs (id),
    period_start  timestamptz NOT NULL,
    attempt       integer NOT NULL,
    status        text NOT NULL
                  CHECK (status IN ('running', 'succeeded', 'failed', 'lost', 'interrupted')),
    owner         text,
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz,
    exit_code     integer,
    error         text,
    output_tail   text,
    UNIQUE (job_id, period_start, attempt)
);
