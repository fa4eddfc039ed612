"""A keyed job's page of keys on the status page (``/keys/NAME``), as ``catchup keys`` lists
them: the first :data:`KEYS_SHOWN` (``/api/keys/NAME`` has every one), linked back to ``/``
and to the job's page. The other pages are :mod:`catchup.render.web` and ``jobpage``."""

from __future__ import annotations

from urllib.parse import quote

from ..results import KeysReport
from .text import iso_utc
from .web import Site, frame, render
from .webparts import job_path

# a keys page lists at most this many keys; /api/keys/NAME has every one
KEYS_SHOWN = 1_000


def keys_path(job: str, api: bool = False) -> str:
    """Where the status page serves a job's keys (``/keys/NAME``, or its JSON)."""
    return ("/api/keys/" if api else "/keys/") + quote(job, safe="")


def keys_page(report: KeysReport, site: Site) -> str:
    api = keys_path(report.job, api=True)
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
            }
            for k in report.keys[:KEYS_SHOWN]
        ],
    )
    return render("keys.html.j2", context)
