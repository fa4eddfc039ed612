"""A keyed job's page of keys on the status page (``/keys/NAME``), as the ledger recorded
them: :data:`~catchup.config.bounds.KEYS_SHOWN` at a time in key order (``?after=KEY``: the
next page; ``/api/keys/NAME``: the same as JSON), linked back to ``/`` and to the job's page.
The other pages are :mod:`catchup.render.web` and ``jobpage``."""

from __future__ import annotations

from collections import Counter
from urllib.parse import quote

from ..results import JobScan, KeysReport
from ..vocabulary import PeriodState
from .pasted import command
from .text import iso_utc
from .web import Site, frame, render
from .webparts import job_path


def keys_path(job: str, api: bool = False, after: str | None = None) -> str:
    """Where the status page serves a job's keys (``/keys/NAME``, or its JSON): the first
    page, or with ``after`` the page of the keys after that one."""
    path = ("/api/keys/" if api else "/keys/") + quote(job, safe="")
    return path if after is None else f"{path}?after={quote(after, safe='')}"


def key_states(scan: JobScan | None, shown: set[str]) -> dict[str, str]:
    """Each key's of ``shown`` gap periods in the scan's window by state (``2 missing, 1
    failed``, else ``no gaps``); a key the scan has no range of had none (succeeded is what is
    left). Only the keys shown are counted: a page of a million keys' is a thousand's work."""
    by_key: dict[str, Counter[str]] = {}
    for r in () if scan is None else scan.key_ranges:
        if r.key in shown:
            by_key.setdefault(r.key, Counter())[r.state] += r.periods
    said = {}
    for key, counts in by_key.items():
        gaps = [f"{counts[s]:,} {s}" for s in PeriodState if s.is_gap and counts[s]]
        said[key] = ", ".join(gaps) or "no gaps"
    return said


def keys_page(report: KeysReport, site: Site, scan: JobScan | None = None) -> str:
    """``scan``: the job's in the newest scan, for each key's state (none: not said)."""
    first = report.keys[0].key if report.keys else ""
    after = report.after if report.after else None
    api = keys_path(report.job, api=True, after=after)
    states = key_states(scan, {k.key for k in report.keys})
    counts = report.counts
    title = f"keys of {report.job}" + (f" from {first}" if after and first else "")
    context = frame(site, title, api, [(report.job, job_path(report.job)), ("keys", None)])
    context.update(
        job=report.job,
        expected=counts.expected,
        gone=counts.gone,
        paused=counts.paused,
        total=counts.total,
        shown=len(report.keys),
        read_at=iso_utc(counts.read_at) if counts.read_at else "",
        first=first,
        later=after is not None,
        more=keys_path(report.job, after=report.next_after) if report.next_after else "",
        api=api,
        command=command("keys", report.job, "--json"),
        record=command("keys", report.job),
        start=keys_path(report.job),
        last=report.next_after or "",
        keys=[
            {
                "key": k.key,
                "expected_from": iso_utc(k.expected_from),
                "first_seen": iso_utc(k.first_seen) if k.first_seen else "",
                "last_seen": iso_utc(k.last_seen) if k.last_seen else "",
                "gone": iso_utc(k.gone_at) if k.gone_at else "",
                "paused": iso_utc(k.paused_at) if k.paused_at else "",
                "state": states.get(k.key, "no gaps" if scan is not None else ""),
            }
            for k in report.keys
        ],
    )
    return render("keys.html.j2", context)
