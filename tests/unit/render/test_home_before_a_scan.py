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


def test_a_keys_query_that_failed_is_said_as_itself_and_never_as_no_gaps() -> None:
    """A job whose keys query failed: the page says so as itself (not as its evidence query),
    on the job's row and its page, with on which keys it was scanned, and the job's page never
    says "no gaps" (what its keys would show is not known)."""
    from dataclasses import replace

    from test_renderers import T0, scan_result

    from catchup.render.jobpage import job_page
    from catchup.results import ScanReport

    said = "jobs.billing.keys: the keys query failed: relation &#34;tenants&#34; does not exist"
    site = web.Site("team", 60)
    for keys, how in ((3, "scanned on the keys it read last"), (0, "no keys read before")):
        job = replace(
            scan_result("billing", []),
            keys=keys,
            keys_error="jobs.billing.keys: the keys query failed: "
            'relation "tenants" does not exist',
        )
        report = ScanReport(T0, T0, T0, (job,))
        home = web.home(report, None, site)
        assert said in home and how in home and "its evidence query" not in home
        page = job_page(report, None, site, "billing")
        assert page is not None and said in page and how in page
        assert "billing: keys query failed" in page and "no gaps" not in page
