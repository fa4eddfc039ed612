-- Every `catchup tick`: which host called it and when (database clock). The `none` catch-up
-- policy runs only periods that became due since the previous tick.
CREATE TABLE {schema}.ticks (
    id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    host  text NOT NULL,
    at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ticks_at ON {schema}.ticks (at);
