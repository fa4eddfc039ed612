"""The excluded state in every renderer: its own glyph, colour and CSS class, a summary column
only when a job has such periods, a count in JSON (the last), Markdown and OpenMetrics, and
never a gap, a problem or a row of the gap listings."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console

from catchup.config.loading import make_job
from catchup.render import documents, metrics, periodpage, web
from catchup.render import json as render_json
from catchup.render.jobpage import job_page
from catchup.render.scan import calendars, scan_tables, summary_states
from catchup.render.text import GLYPH, LEGEND, STYLE
from catchup.results import Calendar, JobScan, Range, ScanReport
from catchup.vocabulary import GAP_STATES, PeriodState

T0 = datetime(2026, 12, 1, tzinfo=UTC)
DAY = timedelta(days=1)
HOLIDAYS = Range(PeriodState.excluded, T0 + 24 * DAY, T0 + 26 * DAY, 3)


def printed(render: Any, *args: Any) -> str:
    out = io.StringIO()
    render(Console(file=out, width=200, markup=False, highlight=False, emoji=False), *args)
    return out.getvalue()


def scan_of(job: str, ranges: list[Range], *, said: str = "bank-holidays") -> JobScan:
    """A daily job's December: 20 succeeded periods and ``ranges``, each excluded one said to
    be excluded by ``said``."""
    nightly = make_job(job, "daily", "2026-12-01", command=["true"])
    counts: dict[str, int] = dict.fromkeys(PeriodState, 0)
    counts[PeriodState.succeeded] = 20
    for r in ranges:
        counts[PeriodState(r.state)] += r.periods
    return JobScan(
        job=job,
        schedule="daily",
        timezone="UTC",
        daily_or_longer=True,
        paused=False,
        first=T0,
        until=T0 + 31 * DAY,
        expected=sum(counts.values()),
        counts=counts,
        ranges=tuple(ranges),
        last_success=T0 + 19 * DAY,
        excluded_by=tuple((r.first, said) for r in ranges if r.state == PeriodState.excluded),
        labeler=nightly.label,
    )


def report_of(*jobs: JobScan, grids: tuple[Calendar, ...] = ()) -> ScanReport:
    return ScanReport(T0 + 31 * DAY, T0, T0 + 31 * DAY, jobs, calendars=grids)


def december(job: str) -> Calendar:
    """The job's December as a calendar: 20 succeeded days, 3 excluded, the rest not due."""
    cells = ("succeeded",) * 20 + (None,) * 4 + ("excluded",) * 3 + (None,) * 4
    return Calendar(job, "day", (("2026-12", cells),), truncated=False)


def test_the_excluded_state_has_its_own_glyph_colour_and_place_in_the_legend() -> None:
    assert not PeriodState.excluded.is_gap and PeriodState.excluded not in GAP_STATES
    others = {state: glyph for state, glyph in GLYPH.items() if state != "excluded"}
    assert GLYPH["excluded"] not in others.values()
    # the page draws some states with glyphs of its own (blocked as ⊘): distinct there too
    page: dict[str | None, str] = web._env().globals["glyphs"]  # type: ignore[assignment]
    shown = [page[state] for state in LEGEND] + [page[None]]
    assert len(set(shown)) == len(shown) and page["excluded"] == GLYPH["excluded"]
    assert LEGEND.index("excluded") == LEGEND.index("waived") + 1
    assert STYLE["excluded"] == "dim"
    legend = printed(calendars, [december("nightly")])
    assert f"{GLYPH['excluded']} excluded" in legend.split("legend:")[1]
    row = legend.splitlines()[1]
    assert row.count(GLYPH["excluded"]) == 3 and row.count(GLYPH["succeeded"]) == 20


def test_the_summary_has_an_excluded_column_only_when_a_job_has_excluded_periods() -> None:
    plain = scan_of("plain", [])
    held = scan_of("billing", [HOLIDAYS])
    assert PeriodState.excluded not in summary_states([plain])
    states = summary_states([plain, held])
    assert states.index(PeriodState.excluded) == states.index(PeriodState.waived) + 1
    quiet = printed(scan_tables, report_of(plain))
    assert "excluded" not in quiet
    text = printed(scan_tables, report_of(plain, held))
    header = next(line for line in text.splitlines() if "expected" in line)
    assert [c.strip() for c in header.strip("┃").split("┃")][3:6] == [
        "succeeded",
        "waived",
        "excluded",
    ]
    row = next(line for line in text.splitlines() if "│ billing" in line)
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[2:6] == ["23", "20", "0", "3"]  # expected, succeeded, waived, excluded
    assert cells[-2] == "-"  # no oldest gap: excluded periods are not gaps
    # excluded ranges are not gaps: not listed, and a report of them says so
    assert "no gaps" in text and "gaps, oldest first" not in text


def test_excluded_ranges_are_never_listed_among_the_gaps() -> None:
    missing = Range(PeriodState.missing, T0 + 20 * DAY, T0 + 21 * DAY, 2)
    job = scan_of("billing", [missing, HOLIDAYS])
    assert job.gaps == (missing,) and job.excluder(HOLIDAYS) == "bank-holidays"
    text = printed(scan_tables, report_of(job))
    listed = text.split("gaps, oldest first")[1]
    assert "missing" in listed and "excluded" not in listed
    markdown = documents.scan_markdown(report_of(job))
    assert "| billing | missing |" in markdown and "| billing | excluded |" not in markdown
    (gap,) = json.loads(render_json.scan_json(report_of(job)))["jobs"][0]["gaps"]
    assert gap["status"] == "missing" and "excluded_by" not in gap


def test_json_counts_excluded_last_of_the_states() -> None:
    document = json.loads(render_json.scan_json(report_of(scan_of("billing", [HOLIDAYS]))))
    (job,) = document["jobs"]
    assert job["excluded"] == 3 and job["gaps"] == []
    keys = list(job)
    counted = keys[keys.index("succeeded") : keys.index("paused")]
    assert counted == list(render_json.JSON_STATES) and counted[-1] == "excluded"
    # the documented order is appended to, never reordered
    assert counted[:14] == [
        "succeeded",
        "waived",
        "running",
        "missing",
        "failed",
        "exhausted",
        "stale",
        "interrupted",
        "cancelled",
        "unverified",
        "untracked",
        "blocked",
        "outdated",
        "suspect",
    ]
    assert set(render_json.JSON_STATES) == {str(state) for state in PeriodState}


def test_openmetrics_has_a_family_of_excluded_periods() -> None:
    report = report_of(scan_of("billing", [HOLIDAYS]), scan_of("plain", []))
    text = documents.scan_openmetrics(report)
    said = "Periods nobody expects: excluded by the job's exclude or a recorded window."
    family = [line for line in text.splitlines() if "catchup_excluded_periods" in line]
    assert family == [
        "# TYPE catchup_excluded_periods gauge",
        f"# HELP catchup_excluded_periods {said}",
        'catchup_excluded_periods{job="billing"} 3',
        'catchup_excluded_periods{job="plain"} 0',
    ]
    assert text.endswith("# EOF\n")
    # /metrics of catchup serve carries the same family
    served = metrics.Served(report, up=True, duration=None, age=None)
    found = {f.name: f for f in metrics.families(served)}
    samples = {s.labels["job"]: s.value for s in found["catchup_excluded_periods"].samples}
    assert samples == {"billing": 3, "plain": 0}


def test_markdown_counts_excluded_periods_in_a_column_of_their_own() -> None:
    plain = documents.scan_markdown(report_of(scan_of("plain", [])))
    assert "excluded" not in plain
    text = documents.scan_markdown(report_of(scan_of("billing", [HOLIDAYS])))
    assert text.startswith("### catchup scan: no gaps\n")
    header = next(line for line in text.splitlines() if line.startswith("| job |"))
    row = next(line for line in text.splitlines() if line.startswith("| billing |"))
    by_column = dict(
        zip(
            [c.strip() for c in header.strip("|").split("|")],
            [c.strip() for c in row.strip("|").split("|")],
            strict=True,
        )
    )
    assert (by_column["excluded"], by_column["expected"], by_column["oldest gap"]) == (
        "3",
        "23",
        "-",
    )


def test_the_pages_show_excluded_periods_calmly_in_their_own_class() -> None:
    job = scan_of("billing", [HOLIDAYS])
    report = report_of(job, grids=(december("billing"),))
    site = web.Site(title="test", refresh=60)
    page = job_page(report, None, site, "billing")
    assert page is not None
    cells = re.findall(r'<td class="c st-excluded"[^>]*>', page)
    assert len(cells) == 3 and "2026-12-25: excluded" in cells[0]
    glyph = GLYPH["excluded"]
    assert (
        f'<span class="st st-excluded"><span class="glyph" aria-hidden="true">{glyph}</span>'
        in (page.split('class="legend"')[1])
    )
    assert '<span class="glyph" aria-hidden="true">✓</span> <bdi>billing</bdi>: no gaps' in page
    home = web.home(report, None, site)
    assert web.verdict(report).level == "ok" and "3 excluded" in home
    assert "state=excluded" not in home  # a filter is for trouble and what runs: not this
    assert periodpage._verdict("excluded").level == "ok"
    assert ".st-excluded" in web.stylesheet().decode()
