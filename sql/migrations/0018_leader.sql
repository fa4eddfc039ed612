-- `catchup scheduler`, run on every replica: one of them leads, through this row. The leader
-- holds a lease on the database clock (expires_at) and a term number that grows each time the
-- lead changes hands: a leader that was paused or cut off past its lease has lost its term, and
-- never starts a tick under it again (it renews with its term, and a renewal of a term that
-- ended finds no row). A leader that stops hands the lease back (expires_at now), so a standby
-- takes over at once. `name` is the scheduler's scope: one row, 'scheduler', today.
--
-- A new table; like 0012, 0014, 0016 and 0017 it can run again over a ledger that has it.

CREATE TABLE IF NOT EXISTS {schema}.leader (
    name text PRIMARY KEY,
    holder text NOT NULL,
    term bigint NOT NULL CHECK (term > 0),
    since timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    renewed_at timestamptz NOT NULL
);
