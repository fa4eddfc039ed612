"""Which PostgreSQL holds the ledger, and the embedded one: the DSN (whose repr has no
password), connecting and keeping the schema current, and the embedded server (its data folder,
its system user and processes, its start lock, the database a project's ledger is in)."""
