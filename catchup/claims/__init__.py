"""The claim path: one period claimed by an atomic ``INSERT … ON CONFLICT``, run under a
lease kept by a heartbeat, recorded with its attempt as fencing token, the next one handed over;
a keyed job's short periods claimed and recorded in batches; the writes that survive a broken
connection; why a claim found nothing; periods a failover left in doubt."""
