-- The ledger itself: the clock, migrations, jobs and their schedules and definitions.
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Time comes from clock_timestamp() on the server, never from the host.
-- Statements of catchup/ledger/base.py, one per "-- name:" header (names unique across files).

-- name: server_now
-- The database clock: the one clock every due-time decision uses.
SELECT clock_timestamp() AS now;

-- name: only_reads
-- From now on this connection's transactions may not write (`catchup plan`): what reads
-- promise nothing is written is held to it by the server.
SET default_transaction_read_only = on;

-- name: schema_version
SELECT coalesce(max(version), 0) AS version FROM {schema}.schema_version;

-- name: schema_exists
-- Asked before the schema is created: CREATE SCHEMA IF NOT EXISTS needs CREATE on the database
-- even when the schema is there, and a role that owns only its schema (a DBA made it) has none.
SELECT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = %(schema)s) AS present;

-- name: create_schema
CREATE SCHEMA {schema};

-- name: create_schema_version
CREATE TABLE IF NOT EXISTS {schema}.schema_version (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- name: record_migration
INSERT INTO {schema}.schema_version (version, name) VALUES (%(version)s, %(name)s);

-- name: unbounded_here
-- The waits of this transaction bounded by nothing the role carries (as settle_session says for
-- the session): through a transaction-mode pooler, settle_session's settings may sit on another
-- of its server connections, and the role's lock_timeout would cancel a migration waiting its
-- turn behind another process's. Local to the transaction, so it holds through any pooler.
SELECT pg_catalog.set_config('lock_timeout', '0', true),
       pg_catalog.set_config('statement_timeout', '0', true),
       pg_catalog.set_config('idle_in_transaction_session_timeout', '0', true);

-- name: lock_migrations
-- Transaction-scoped, so it also works through a transaction-mode pooler.
SELECT pg_advisory_xact_lock(hashtext('catchup.migrate'), hashtext(%(schema)s));

-- name: register_jobs
-- New names get a row; a configured job is not retired, whatever an earlier command said.
WITH unretired AS (
    UPDATE {schema}.jobs SET retired_at = NULL
    WHERE name = ANY(%(names)s::text[]) AND retired_at IS NOT NULL
)
INSERT INTO {schema}.jobs (name)
SELECT unnest(%(names)s::text[])
ON CONFLICT (name) DO NOTHING;

-- name: job_ids
SELECT id, name, paused_at, project, definition, retired_at
FROM {schema}.jobs WHERE name = ANY(%(names)s::text[]);

-- name: record_definition
-- The project that defines a job, and how: taken only when no other project holds it (a row
-- registered before 0012 holds none). No row back: another project holds it.
UPDATE {schema}.jobs
SET project = %(project)s, definition = %(definition)s
WHERE id = %(job_id)s AND (project IS NULL OR project = %(project)s)
RETURNING id;

-- name: job_schedules
-- Every recorded schedule of the jobs, oldest first, with the start each was last seen with.
SELECT j.id, j.start, s.since, s.schedule, s.timezone
FROM {schema}.jobs j
LEFT JOIN {schema}.schedules s ON s.job_id = j.id
WHERE j.id = ANY(%(job_ids)s::bigint[])
ORDER BY j.id, s.since;

-- name: lock_job_row
-- Serialises recording a job's schedule change across replicas (a row lock: pooler-safe).
SELECT id FROM {schema}.jobs WHERE id = %(job_id)s FOR UPDATE;

-- name: drop_schedules
-- Changes that have not taken effect yet (since after %(after)s) are replaced by the new one.
DELETE FROM {schema}.schedules WHERE job_id = %(job_id)s AND since > %(after)s;

-- name: add_schedule
INSERT INTO {schema}.schedules (job_id, since, schedule, timezone, recorded_by)
VALUES (%(job_id)s, %(since)s, %(schedule)s, %(timezone)s, %(actor)s);

-- name: set_job_start
UPDATE {schema}.jobs SET start = %(start)s WHERE id = %(job_id)s;

-- name: record_change
-- A schedule or start change, in the job's audit trail: period_start is when it takes effect.
INSERT INTO {schema}.events (job_id, period_start, action, previous, reason, actor)
VALUES (%(job_id)s, %(since)s, %(action)s, %(previous)s, %(now_is)s, %(actor)s);

-- name: ledger_holds_jobs
-- Whether this schema already keeps a ledger for any of these jobs (a ledger made before
-- projects got databases of their own on the embedded server).
SELECT count(*) > 0 FROM {schema}.jobs WHERE name = ANY(%(names)s::text[]);

-- name: create_database
CREATE DATABASE {database};

-- name: settle_session
-- What catchup's statements and its driver assume, whatever the server, database or role sets
-- (catchup.db.connect, first): UTC, so every timestamptz leaves the ledger in UTC and interval
-- arithmetic on one (a day added, generate_series over periods) never follows a zone's DST;
-- ISO dates and postgres intervals, the forms the driver reads. A transaction-mode PgBouncer
-- keeps these three per client (it tracks them and sets them on the server it lends). And no
-- limit a role may carry for people's sessions: catchup bounds its own waits (leases, the
-- connect's retry, the user's keys and evidence queries), a scan of years of periods may take
-- longer than a person's statement should, and its transactions are read committed by design.
SELECT pg_catalog.set_config('TimeZone', 'UTC', false),
       pg_catalog.set_config('DateStyle', 'ISO, MDY', false),
       pg_catalog.set_config('IntervalStyle', 'postgres', false),
       pg_catalog.set_config('statement_timeout', '0', false),
       pg_catalog.set_config('lock_timeout', '0', false),
       pg_catalog.set_config('idle_in_transaction_session_timeout', '0', false),
       pg_catalog.set_config('default_transaction_isolation', 'read committed', false);

-- name: server_role
-- Whether the server takes writes (catchup.db.connect, before anything else is sent): not in
-- recovery (a standby), not read-only by default (a primary fenced by its failover manager).
SELECT pg_is_in_recovery() AS recovery,
       current_setting('default_transaction_read_only')::boolean AS read_only;

-- name: declare_durable
-- [database] durable_claims: this session's claims wait for a synchronous standby, so a
-- failover from the server's timeline loses none and opens no suspect window
-- (sql/migrations/0021). True: declared now.
SELECT {schema}.declare_durable();

-- name: note_timeline
-- A session's start: the server's timeline recorded if the ledger has not seen it yet
-- (sql/migrations/0021), and whether this statement did (a new timeline: a standby promoted,
-- a backup restored), beside the failover it may have lost claims in (failover false: the
-- timeline before it was durable, or there was none).
WITH known AS (SELECT max(timeline) AS newest FROM {schema}.timelines)
SELECT w.timeline, w.seen_at, w.replayed_until, w.failover,
       known.newest IS NOT NULL AND w.timeline > known.newest AS moved
FROM known, {schema}.failover_window(true) w;

-- name: durable_commit
-- [database] durable_claims: this transaction (a claim, a finish) commits only once the
-- synchronous standby has applied it, so a standby promoted after a crash of the primary has
-- every claim a runner was told it holds. Local to the transaction. (A claim's wait is
-- bounded by its lease: catchup cancels it, the server commits locally and warns, and the
-- claim is not used; statement_timeout cannot: the server turns it off before the commit.)
SET LOCAL synchronous_commit = 'remote_apply';
