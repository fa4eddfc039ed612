-- Doctor probes and the embedded server's bootstrap statements.
-- {schema} is replaced by the quoted schema identifier through psycopg.sql; values are always
-- %(name)s parameters. Time comes from clock_timestamp() on the server, never from the host.
-- Statements of catchup/ledger/tools.py, one per "-- name:" header (names unique across files).

-- name: doctor_probe
-- What doctor needs from the server: its clock, the port it listens on, this backend's pid.
SELECT clock_timestamp() AS now, current_setting('port')::integer AS port,
       pg_backend_pid() AS pid;

-- name: zone_walls
-- What the server's time zone database says the wall clock shows at each instant, per zone
-- (doctor compares it with Python's tzdata).
SELECT z, t, t AT TIME ZONE z AS wall
FROM unnest(%(zones)s::text[]) AS z CROSS JOIN unnest(%(instants)s::timestamptz[]) AS t
ORDER BY z, t;

-- name: set_password
-- The embedded server's superuser password, for a server made before catchup set one (ALTER
-- ROLE takes no parameters: {password} is bound as a quoted literal by psycopg.sql).
ALTER ROLE postgres PASSWORD {password};

-- name: reload_conf
SELECT pg_reload_conf();

-- name: lock_project_databases
-- Serialises finding, moving and creating a project's database on the embedded server (a
-- session lock on the postgres database, released when the connection closes).
SELECT pg_advisory_lock(hashtext('catchup.project-database'));

-- name: database_exists
SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = %(name)s);

-- name: server_databases
-- Every database of the server a ledger could be in, by name.
SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY datname;

-- name: carries_project
-- Whether this database's ledger has a job that [project] name %(project)s defined.
SELECT EXISTS (SELECT 1 FROM {schema}.jobs WHERE project = %(project)s);

-- name: rename_database
-- A project's ledger moved to the database its [project] name names (refused by the server
-- while anyone is connected to it).
ALTER DATABASE {database} RENAME TO {renamed};

-- The demo's and the benchmarks' statements (never sent by a catchup command).

-- name: x" sections; {schema} is the quoted schema identifier).

-- name: plain_gaps
-- The reference the scan benchmark measures against: one generate_series LEFT JOIN the ledger
-- listing every period that is not succeeded, without ranges or shortcuts.
SELECT e.period_start, r.status
FROM generate_series(%(first)s::timestamptz, %(until)s::timestamptz - %(step)s::interval,
                     %(step)s::interval) AS e (period_start)
LEFT JOIN {schema}.periods r ON r.job_id = %(job_id)s AND r.period_start = e.period_start
WHERE r.status IS DISTINCT FROM 'succeeded'
ORDER BY e.period_start;

-- name: demo_fill
-- The demo's history: every period of a job (of each of its keys) succeeded, except those in
-- [gap_from, gap_to).
INSERT INTO {schema}.runs (job_id, key, period_start, period_end, status, attempt, owner,
                           claimed_at, finished_at, exit_code)
SELECT %(job_id)s, k, p, p + %(step)s::interval, 'succeeded', 1, 'demo-host:1',
       p + %(step)s::interval, p + %(step)s::interval + interval '42 seconds', 0
FROM generate_series(%(first)s::timestamptz, %(last)s::timestamptz, %(step)s::interval) AS p
CROSS JOIN unnest(%(keys)s::text[]) AS k
WHERE NOT (p >= %(gap_from)s AND p < %(gap_to)s);

-- name: demo_fail
-- The demo's failing night: one period failed once, with attempts left.
INSERT INTO {schema}.runs AS r (job_id, key, period_start, period_end, status, attempt,
                                failures, owner, finished_at, retry_after, exit_code, error)
VALUES (%(job_id)s, %(key)s, %(start)s, %(end)s, 'failed', 1, 1, 'demo-host:1', %(end)s, %(end)s,
        1, %(error)s)
ON CONFLICT (job_id, key, period_start) DO UPDATE
SET status = 'failed', failures = 1, retry_after = excluded.retry_after,
    exit_code = 1, error = excluded.error;

-- name: demo_evidence_table
-- What the demo's invoices job leaves behind: a row per day it sent invoices.
CREATE TABLE {schema}.invoices_sent (day date NOT NULL);

-- name: demo_evidence
-- Days with invoices sent: every day in [first, last], the old cron job's and catchup's alike.
INSERT INTO {schema}.invoices_sent
SELECT generate_series(%(first)s::date, %(last)s::date, interval '1 day')::date;

-- name: drop_schema
-- Only ever the demo's own throwaway schema.
DROP SCHEMA {schema} CASCADE;

-- name: standbys
-- The server's standbys: who may be synchronous, and who streams now (sync_state is NULL for a
-- role that may not read it).
SELECT current_setting('synchronous_standby_names') AS names,
       count(*) FILTER (WHERE r.sync_state IN ('sync', 'quorum')) AS synchronous,
       count(*) AS streaming,
       count(*) FILTER (WHERE r.sync_state IS NULL) AS unseen
FROM pg_stat_replication r;

-- name: role_privileges
-- What the ledger's role may do (doctor): what catchup needs (the schema, owned) and what it
-- only uses when it has it (pg_read_all_stats: the standbys' state; CREATE on the database: a
-- schema that is not there yet), and what it has beyond any need (superuser, CREATEDB).
SELECT current_user AS role,
       r.rolsuper AS superuser,
       r.rolcreatedb AS create_databases,
       pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE') AS create_schemas,
       n.oid IS NOT NULL AS schema_present,
       coalesce(n.nspowner = r.oid, false) AS owns_schema,
       r.rolsuper OR pg_catalog.pg_has_role('pg_read_all_stats', 'MEMBER') AS read_all_stats
FROM pg_catalog.pg_roles r
LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = %(schema)s
WHERE r.rolname = current_user;

-- name: timeline_durable
-- Whether the server's timeline is durable (sql/migrations/0021): true (declared by a session
-- with durable_claims), false (a claim on it did not wait for a synchronous standby), NULL
-- (neither yet, or not recorded).
SELECT t.durable FROM {schema}.timelines t WHERE t.timeline = {schema}.server_timeline();

-- name: commit_probe
-- A transaction id taken, so its commit writes a record (and, with durable_claims, waits for
-- the synchronous standby): what a claim's commit costs, measured by doctor.
SELECT pg_current_xact_id();
