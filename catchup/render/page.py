"""A keyed job's page of keys on the status page (``/keys/NAME``), as ``catchup keys`` lists
them: the first :data:`KEYS_SHOWN` (``/api/keys/NAME`` has every one), linked back to ``/``
and to the job's page. The other pages are :mod:`catchup.render.web` and ``jobpage``."""

from __future__ import annotations

from collections import Counter
from urllib.parse import quote

from ..results import JobScan, KeysReport
from ..vocabulary import PeriodState
from .text import iso_utc
from .web import Site, frame, render
from .webparts import job_path

# a keys page lists at most this many keys; /api/keys/NAME has every one
KEYS_SHOWN = 1_000


def keys_path(job: str, api: bool = False) -> str:
    """Where the status page serves a job's keys (``/keys/NAME``, or its JSON)."""
    return ("/api/keys/" if api else "/keys/") + quote(job, safe="")


def key_states(scan: JobScan | None) -> dict[str, str]:
    """Each key's gap periods in the scan's window by state (``2 missing, 1 failed``, else
    ``no gaps``); a key the scan has no range of had none (succeeded is what is left)."""
    by_key: dict[str, Counter[str]] = {}
    for r in () if scan is None else scan.key_ranges:
        by_key.setdefault(r.key, Counter())[r.state] += r.periods
    said = {}
    for key, counts in by_key.items():
        gaps = [f"{counts[s]:,} {s}" for s in PeriodState if s.is_gap and counts[s]]
        said[key] = ", ".join(gaps) or "no gaps"
    return said


def keys_page(report: KeysReport, site: Site, scan: JobScan | None = None) -> str:
    """``scan``: the job's in the newest scan, for each key's state (none: not said)."""
    api = keys_path(report.job, api=True)
    states = key_states(scan)
    gone = sum(1 for k in report.keys if k.gone_at is not None)
    context = frame(
        site, f"keys of {report.job}", api, [(report.job, job_path(report.job)), ("keys", None)]
    )
    context.update(
        job=report.job,
        expected=len(report.keys) - gone,
        gone=gone,
        paused=sum(1 for k in report.keys if k.paused_at is not None),
        total=len(report.keys),
        shown=min(len(report.keys), KEYS_SHOWN),
        api=api,
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
            for k in report.keys[:KEYS_SHOWN]
        ],
    )
    return render("keys.html.j2", context)
