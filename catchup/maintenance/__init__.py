"""Keeping the ledger healthy: ``compact`` (and its pure parts), and the doctor's
findings (the config, the role's privileges, the server and a failover)."""
