"""The status page's HTML: Jinja2 templates (``render/templates``, autoescaping on) over the
newest scan and what was read with it (:class:`~catchup.results.PageFacts`), and its one
stylesheet. ``/`` gives a verdict first (in the ``<title>`` too, so a tab shows trouble), the
scheduler's pulse, what runs now and a row per job; ``/jobs/NAME`` a job's gap ranges with the
command that runs each, its standing failures, a grid of its periods with numbered days or
hours, and its periods spelled out. Text from users and jobs is data: escaped by the
templates, its control characters and bidirectional overrides shown escaped (``safe``), and
set in ``<bdi>`` so a right-to-left name cannot reorder what is around it. No script."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import quote, urlencode

import jinja2
import markupsafe

from ..results import Calendar, JobScan, PageFacts, ScanReport
from ..vocabulary import GAP_STATES, PeriodState
from .limits import GAP_LIMIT
from .pulse import lateness_text, leader_text
from .scan import gaps_oldest_first
from .text import GLYPH, LEGEND, iso_utc, safe, span
from .webparts import counts, gap_row, job_path, plural, running_rows, strip, when

HERE = Path(__file__).parent
STRIP_CELLS = 24  # the recent periods on a job's row of /


@dataclass(frozen=True)
class Site:
    """What every page says of where it comes from: the deployment's name (never its
    database), how old the scan is, and whether the newest one failed."""

    title: str
    refresh: int
    scanned: datetime | None = None
    took: float | None = None
    failed: str | None = None
    # reload the page every ``refresh`` seconds (``?auto=1``, for a wall screen): off unless
    # asked, as a page that reloads itself loses a reader's place (WCAG 2.2.1)
    auto: bool = False
    # why the process runs on an older config than its file's (a reload refused)
    notice: str | None = None


@dataclass(frozen=True)
class Verdict:
    level: str  # ok, warn, bad: the colour, beside a glyph and the words
    glyph: str
    text: str


def _finalize(value: object) -> object:
    # newlines are only white space in HTML (and kept in a <pre>): every other control
    # character and bidirectional override shown escaped
    if isinstance(value, markupsafe.Markup):  # a macro's output: made of escaped parts
        return value
    return safe(value, lines=True) if isinstance(value, str) else value


@functools.cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    glyphs: dict[str | None, str] = dict(GLYPH.items())
    glyphs[None] = "·"
    glyphs["blocked"] = "⊘"  # the terminal's ⧖ is missing from common web fonts
    env.globals["glyphs"] = glyphs
    return env


@functools.cache
def stylesheet() -> bytes:
    return (HERE / "static" / "catchup.css").read_bytes()


def frame(
    site: Site,
    page_title: str,
    api: str,
    crumbs: list[tuple[str, str | None]],
    here: str | None = None,
) -> dict[str, object]:
    """What every page's frame shows; ``here``, the page's own address, for a page that can
    reload itself (``?auto=1``)."""
    auto = site.auto and here is not None
    toggle = None
    if here is not None:
        toggle = here if auto else here + ("&" if "?" in here else "?") + "auto=1"
    return {
        "title": site.title,
        "page_title": f"{page_title} · {site.title}",
        "refresh": site.refresh,
        "auto": auto,
        "toggle": toggle,
        "scanned": None if site.scanned is None else iso_utc(site.scanned),
        "took": site.took,
        "failed": site.failed,
        "notice": site.notice,
        "api": api,
        "crumbs": crumbs,
    }


def pulse_line(report: ScanReport | None) -> dict[str, object]:
    """The scheduler's pulse where it cannot be missed: a level, a glyph, words."""
    pulse = None if report is None else report.pulse
    if pulse is None:
        return {"level": "warn", "glyph": "?", "text": "not read yet", "warnings": []}
    others = [w for w in pulse.warnings if not w.startswith("no tick for")]
    if pulse.last_tick is None:
        # who leads is said before its first tick is recorded too: a page scanned when the
        # lead was taken (at once, for that) would not say it until the next refresh
        text = "no tick recorded yet (is something calling `catchup tick`?)"
        if pulse.leader is not None:
            text = f"no tick recorded yet; {leader_text(pulse)}"
        return {"level": "warn", "glyph": "?", "text": text, "warnings": others}
    ago = span(round((pulse.now - pulse.last_tick).total_seconds()))
    every = f", they came about every {span(round(pulse.interval))}" if pulse.interval else ""
    host = f" from {pulse.last_host}" if pulse.last_host else ""
    if pulse.stopped:
        text = f"no tick for {ago}{every}: the scheduler that calls `catchup tick` seems gone"
        return {"level": "bad", "glyph": "✖", "text": text, "warnings": others}
    text = f"last tick {ago} ago{host}{every}"
    if pulse.leader is not None:
        text += f"; {leader_text(pulse)}"
    if (late := lateness_text(pulse)) is not None:
        text += f"; {late}"
    level = "ok" if pulse.late is None else pulse.late.level
    glyph = {"ok": "✓", "warn": "?", "bad": "✖"}[level]  # periods start late: never a ✓
    return {"level": level, "glyph": glyph, "text": text, "warnings": others}


def verdict(report: ScanReport | None, failed: str | None = None) -> Verdict:
    """``3 gap ranges in 2 jobs · scheduler: no tick for 22m``, or that all is well."""
    if report is None:
        if failed:
            return Verdict("bad", "✖", "the scan fails")
        return Verdict("warn", "?", "no scan yet")
    ranges = sum(len(job.gaps) for job in report.jobs)
    troubled = sum(1 for job in report.jobs if job.gaps)
    said = []
    if ranges:
        said.append(f"{plural(ranges, 'gap range')} in {plural(troubled, 'job')}")
    pulse = report.pulse
    if pulse is not None and pulse.stopped and pulse.last_tick is not None:
        said.append(
            f"scheduler: no tick for {span(round((pulse.now - pulse.last_tick).total_seconds()))}"
        )
    if keys_failed := [job.job for job in report.jobs if job.keys_error]:
        # each goes on with the keys it read last, or not at all: a person must look
        said.append(f"keys query failed: {', '.join(keys_failed)}")
    if failed:
        said.append("the newest scan failed")
    if said:
        return Verdict("bad", "✖", " · ".join(said))
    if pulse is not None and pulse.last_tick is None and report.jobs:
        return Verdict("warn", "?", f"no gaps in {plural(len(report.jobs), 'job')} · no tick yet")
    return Verdict("ok", "✓", f"no gaps in {plural(len(report.jobs), 'job')}")


STATE_FILTERS = ("running", *sorted(GAP_STATES, key=LEGEND.index), "paused")


def _matches(job: JobScan, state: str | None, name: str | None) -> bool:
    if name and name.casefold() not in job.job.casefold():
        return False
    if state is None:
        return True
    if state == "paused":
        return job.paused
    return job.counts.get(PeriodState(state), 0) > 0


def _job_row(j: JobScan, facts: PageFacts, grid: Calendar | None) -> dict[str, object]:
    """A job's row in the home page's table."""
    due = facts.next_due.get(j.job)
    return {
        "name": j.job,
        "href": job_path(j.job),
        "paused": j.paused,
        "paused_keys": len(j.paused_keys),
        "gaps": plural(len(j.gaps), "gap range") if j.gaps else "",
        "schedule": j.schedule if j.timezone == "UTC" else f"{j.schedule} ({j.timezone})",
        "last_success": when(facts.jobs.get(j.job), j, j.last_success),
        "next_due": "-" if due is None else iso_utc(due),
        "counts": counts(j),
        "error": j.evidence_error,
        "keys_error": j.keys_error,
        "key_count": j.keys,
        "keys_href": "/keys/" + quote(j.job, safe=""),
        "strip": strip(grid),
        "strip_said": f"the recent periods of {safe(j.job)}",
    }


def home(
    report: ScanReport | None,
    facts: PageFacts | None,
    site: Site,
    *,
    state: str | None = None,
    name: str | None = None,
) -> str:
    """``/``, filtered by ``state`` (one of :data:`STATE_FILTERS`) and a part of a job's name."""
    said = verdict(report, site.failed)
    facts = facts or PageFacts(now=datetime.min)
    jobs = [] if report is None else [j for j in report.jobs if _matches(j, state, name)]
    grids = {} if report is None else {grid.job: grid for grid in report.calendars}
    rows = [_job_row(j, facts, grids.get(j.job)) for j in jobs]

    def link(**query: str | None) -> str:
        kept = {k: v for k, v in query.items() if v}
        return "/" + ("?" + urlencode(kept) if kept else "")

    all_jobs = () if report is None else report.jobs
    filters = [{"name": "all", "href": link(job=name), "current": state is None, "count": None}]
    for candidate in STATE_FILTERS:
        count = sum(1 for j in all_jobs if _matches(j, candidate, name))
        if count or candidate == state:
            filters.append(
                {
                    "name": candidate,
                    "href": link(state=candidate, job=name),
                    "current": candidate == state,
                    "count": count,
                }
            )
    gaps = [] if report is None else gaps_oldest_first(report, GAP_LIMIT)
    listed = [g for g in gaps if _matches(g[0], state, name)]
    total = (
        0 if report is None else sum(len(j.gaps) for j in report.jobs if _matches(j, state, name))
    )
    filtered = state is not None or bool(name)
    context = frame(site, said.text, "/api/scan", [], link(state=state, job=name))
    context.update(
        verdict=said,
        pulse=pulse_line(report),
        running=running_rows(facts.running, facts),
        running_total=facts.running_total,
        state_filters=filters,
        state_filter=state or "",
        job_filter=name or "",
        jobs=rows,
        jobs_caption=f"{plural(len(rows), 'job')}" + (" (filtered)" if filtered else ""),
        empty=_empty(report, filtered),
        gaps=[gap_row(job, gap, facts.jobs.get(job.job)) for job, gap in listed],
        gaps_more=max(0, total - len(listed)),
    )
    return render("home.html.j2", context)


def _empty(report: ScanReport | None, filtered: bool) -> str:
    """What the jobs' table says when it lists none: before a scan has succeeded it knows
    nothing of the jobs (the verdict above it says why), which is not "none configured"."""
    if report is None:
        return "The jobs are listed once a scan has succeeded."
    return "No job matches." if filtered else "No jobs configured."


def render(template: str, context: dict[str, object]) -> str:
    return _env().get_template(template).render(context)
