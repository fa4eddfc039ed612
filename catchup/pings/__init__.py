"""Observed jobs: the jobs a team's own crons run, which report each run by a ping in
healthchecks' wire format (a start, a success, a failure, an exit status, a log line). A ping
settles its period through the one claim path, so a ping and catchup's own claim for a period
never both win. ``attribution`` says which period a ping is for (pure: the database clock is
passed in); ``ingest`` writes it."""
