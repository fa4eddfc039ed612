"""The status page before any scan has succeeded (a ledger not migrated yet, a database
down): the verdict says why, and the jobs' table does not claim there are no jobs."""

from __future__ import annotations

from catchup.render import web


def test_the_page_before_a_scan_does_not_say_no_jobs_are_configured() -> None:
    site = web.Site("team", 60, failed="the ledger (schema billing) is at version 0 of 29")
    page = web.home(None, None, site)
    assert "No jobs configured" not in page
    assert "The jobs are listed once a scan has succeeded." in page
    assert "is at version 0 of 29" in page
