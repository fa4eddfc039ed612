"""The fixtures, as plugins by topic (the psycopg way): ``fix_db`` (the test database, a schema
per test, servers of a test's own), ``fix_processes`` (children reaped, failures printed at
once, bounded waits), ``fix_project`` (a project folder and catchup run in it), ``fix_proxy``
(PgBouncer, a connection-cutting proxy), ``fix_replica`` (a primary and its streaming standby),
``fix_team`` (a team's database: another zone and date style, a role that owns only its schema).
Import helpers from those modules."""

from __future__ import annotations

pytest_plugins = ["fix_db", "fix_processes", "fix_project", "fix_proxy", "fix_replica", "fix_team"]
