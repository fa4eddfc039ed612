"""Read-only answers about the ledger beyond the scan: the jobs overview, ``why`` a
period is in its state, ``explain`` a job's periods, and the gap ranges told to webhooks."""
