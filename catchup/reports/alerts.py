"""Alerts on gap ranges (``[alerts]``): when a scan (``catchup serve``, ``scan --notify``) finds
a gap range that is new or has grown, or one told before has closed, one post per webhook
says so. What was told is kept in the ledger, compared under a lock, so two replicas never
tell it twice; posts go through an outbox, retried with backoff until delivered, at most
``max_per_minute`` a minute per webhook. A webhook's URL may hold a token: it is never
printed, logged or stored (the ledger and every message name the webhook)."""

from __future__ import annotations

import heapq
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal
from urllib.parse import quote

from ..config.job import Alerts, Webhook
from ..ledger import Ledger
from ..ledger.alerts import AlertRange
from ..render.text import safe
from ..render.webparts import period_link
from ..results import JobScan, Range, ScanReport
from ..schedule import iso_utc

POST_TIMEOUT = 10.0
SLACK_LINES = 20
ALERT_KEYS = 3  # the keys an alert names, before saying how many there are
SAID_CHARS = 200  # of the failure an alert quotes
# catchup's own words for how a command ended: the job's last line says more
ENDED = ("exited with ", "killed by ")


@dataclass(frozen=True)
class GapEvent:
    """A gap range that opened, grew, or closed."""

    event: Literal["opened", "grown", "closed"]
    job: str
    state: str
    first: datetime
    last: datetime
    periods: int
    first_label: str
    last_label: str
    keys: int = 0  # a job with keys: how many keys the range holds
    named: tuple[str, ...] = ()  # the first of them (ALERT_KEYS, in key order)
    expected: int = 0  # how many keys the job expects in the scan's window
    said: str = ""  # failed: why the newest failure failed, in one line
    page: tuple[datetime, str] | None = None  # the period (and key) the alert links to

    def as_json(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "job": self.job,
            **({"keys": self.keys} if self.keys else {}),
            **({"first_keys": list(self.named)} if self.keys else {}),
            **({"keys_expected": self.expected} if self.keys else {}),
            "status": self.state,
            "first": iso_utc(self.first),
            "last": iso_utc(self.last),
            "first_label": self.first_label,
            "last_label": self.last_label,
            "periods": self.periods,
            **({"error": self.said} if self.said else {}),
        }

    def sentence(self) -> str:
        """``billing: new gap: globex failed 2026-12-02 (exited with 1: payment provider said
        502 for globex) · 1 of 3,000 keys · 1 period(s)``; keys and errors escaped."""
        span = self.first_label
        if self.last != self.first:
            span += f" .. {self.last_label}"
        what = {"opened": "new gap", "grown": "gap grew", "closed": "gap closed"}[self.event]
        said = f" ({safe(self.said)})" if self.said else ""
        if not self.keys:
            return f"{self.job}: {what}: {self.periods} {self.state} period(s), {span}{said}"
        names = ", ".join(safe(k) for k in self.named) + (
            ", …" if self.keys > len(self.named) else ""
        )
        of = f" of {self.expected:,}" if self.expected else ""
        return (
            f"{self.job}: {what}: {names} {self.state} {span}{said}"
            f" · {self.keys:,}{of} key(s) · {self.periods:,} period(s)"
        )


Action = tuple[str, tuple[Any, ...]]


def diff(
    told: Sequence[AlertRange], current: dict[int, list[Range]], jobs: dict[int, JobScan]
) -> tuple[list[Action], list[GapEvent]]:
    """What to change in the told ranges, and what to tell: a current range that meets no told
    one of its state opened; a told one that meets none of its state closed; one whose current
    ranges reach further, or hold more periods, grew. A range that only shrank (being replayed)
    is updated quietly. Ranges meet by job and state: a missing period that failed is a failed
    range opened (with why), and a keyed job's ranges of two states over the same days are two."""
    actions: list[Action] = []
    events: list[GapEvent] = []
    taken: set[tuple[int, int]] = set()
    for range_id, job_id, state, first, last, periods in told:
        job = jobs.get(job_id)
        if job is None:
            continue  # not in this scan (another config's job, or not scanned): left alone
        mine = [
            (n, range_)
            for n, range_ in enumerate(current.get(job_id, []))
            if (job_id, n) not in taken
            and range_.state == state
            and range_.first <= last
            and range_.last >= first
        ]
        if not mine:
            actions.append(("close", (range_id,)))
            events.append(_event("closed", job, state, first, last, periods))
            continue
        taken.update((job_id, n) for n, _ in mine)
        lo = min(range_.first for _, range_ in mine)
        hi = max(range_.last for _, range_ in mine)
        count = sum(range_.periods for _, range_ in mine)
        if lo < first or hi > last or count > periods:
            events.append(_event("grown", job, state, lo, hi, count))
        if (lo, hi, count) != (first, last, periods):
            actions.append(("update", (range_id, state, lo, hi, count)))
    for job_id, ranges in current.items():
        for n, range_ in enumerate(ranges):
            if (job_id, n) not in taken:
                job = jobs[job_id]
                actions.append(
                    ("add", (job_id, range_.state, range_.first, range_.last, range_.periods))
                )
                events.append(
                    _event("opened", job, range_.state, range_.first, range_.last, range_.periods)
                )
    return actions, events


def _event(
    kind: Literal["opened", "grown", "closed"],
    job: JobScan,
    state: str,
    first: datetime,
    last: datetime,
    periods: int,
) -> GapEvent:
    return GapEvent(kind, job.job, state, first, last, periods, job.label(first), job.label(last))


def per_state(job: JobScan) -> list[Range]:
    """The ranges alerts tell of a job: its gaps; of a job with keys (whose ranges group its
    keys by span), one range per state from its first gap to its last, so 10,000 tenants
    missing a night are one event that says how many keys, not one per span or per key."""
    if not _keyed(job):
        return list(job.gaps)
    states: dict[str, list[Range]] = {}
    for gap in job.gaps:
        states.setdefault(gap.state, []).append(gap)
    merged = [
        Range(
            state,
            min(g.first for g in held),
            max(g.last for g in held),
            sum(g.periods for g in held),
        )
        for state, held in states.items()
    ]
    return sorted(merged, key=lambda r: r.first)


def _keyed(job: JobScan) -> bool:
    return bool(job.keys or job.range_keys)


def _with_keys(event: GapEvent, report: ScanReport) -> GapEvent:
    """``event`` saying how many keys hold its state now, and the first of them, of how many
    the job expects, for a job with keys."""
    job = next((j for j in report.jobs if j.job == event.job), None)
    if job is None or event.event == "closed" or not _keyed(job):
        return event
    keys = {k for gap in job.gaps if gap.state == event.state for k in job.keys_in(gap) or ()}
    named = tuple(heapq.nsmallest(ALERT_KEYS, keys))
    return replace(event, keys=len(keys), named=named, expected=job.keys)


def _with_failure(event: GapEvent, ledger: Ledger, job_id: int) -> GapEvent:
    """``event`` quoting why its newest failure failed (of its first key named), and linking
    to that period's page; any other event as it is."""
    if event.event == "closed" or event.state not in ("failed", "exhausted"):
        return event
    key = event.named[0] if event.named else None
    found = ledger.alert_failure(job_id, event.first, event.last, key)
    if found is None:
        return replace(event, page=(event.first, key or ""))
    key_found, start, error, tail = found
    return replace(event, said=said(error, tail), page=(start, key_found))


def said(error: str | None, tail: str | None) -> str:
    """A failure in one line: catchup's error (its first line), and when that only says how
    the command ended, the last line the job printed (``exited with 1: provider said 502``)."""
    first = (error or "").strip().split("\n", 1)[0]
    last = next((ln.strip() for ln in reversed((tail or "").splitlines()) if ln.strip()), "")
    if last and (not first or first.startswith(ENDED)):
        first = f"{first}: {last}" if first else last
    return first if len(first) <= SAID_CHARS else first[: SAID_CHARS - 1] + "…"


def body(
    webhook: Webhook,
    events: Sequence[GapEvent],
    deployment: str = "catchup",
    public_url: str | None = None,
) -> dict[str, Any]:
    """A post: the generic JSON (every event), or Slack's ``text`` (a line per event), named
    by the deployment (``[serve] title``); each event links to its job's page on the status
    page when ``[serve] public_url`` says where that is."""

    def page(job: str) -> str | None:
        return None if public_url is None else public_url + "/jobs/" + quote(job, safe="")

    def period_page(event: GapEvent) -> str | None:
        if public_url is None or event.page is None:
            return None
        return public_url + period_link(event.job, *event.page)

    if webhook.format == "slack":
        lines = []
        for event in events[:SLACK_LINES]:
            link, at = page(event.job), period_page(event)
            line = slack_escaped(event.sentence())
            line += "" if at is None else f" <{at}|the period>"
            lines.append(line + ("" if link is None else f" <{link}|its page>"))
        if len(events) > SLACK_LINES:
            lines.append(f"… and {len(events) - SLACK_LINES} more (catchup scan)")
        return {"text": f"catchup ({deployment}):\n" + "\n".join(lines)}
    told = []
    for event in events:
        links = {"url": page(event.job), "period_url": period_page(event)}
        told.append({**event.as_json(), **{k: v for k, v in links.items() if v is not None}})
    return {"source": "catchup", "deployment": deployment, "events": told}


def slack_escaped(text: str) -> str:
    """``text`` as Slack's mrkdwn reads it literally: ``&``, ``<`` and ``>`` escaped, so a key
    named ``<!channel>`` pings nobody and no key becomes a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def record(
    ledger: Ledger,
    alerts: Alerts,
    report: ScanReport,
    ids: dict[str, int],
    deployment: str = "catchup",
    public_url: str | None = None,
) -> int:
    """Compare ``report``'s gap ranges with those told, under the ledger's lock, and enqueue
    one post per webhook for what changed; the number of events."""
    jobs = {ids[job.job]: job for job in report.jobs if ids.get(job.job, -1) > 0}
    current = {job_id: per_state(job) for job_id, job in jobs.items()}
    with ledger.transaction():
        ledger.lock_alerts()
        actions, events = diff(ledger.open_alert_ranges(), current, jobs)
        events = [
            _with_failure(_with_keys(event, report), ledger, ids[event.job]) for event in events
        ]
        for kind, args in actions:
            if kind == "add":
                ledger.add_alert_range(*args)
            elif kind == "update":
                ledger.update_alert_range(*args)
            else:
                ledger.close_alert_range(*args)
        if events:
            for webhook in alerts.webhooks:
                ledger.enqueue_alert(webhook.name, body(webhook, events, deployment, public_url))
    return len(events)


def deliver(ledger: Ledger, alerts: Alerts) -> list[str]:
    """Post what is due, within each webhook's rate; what failed, a line each (no URL)."""
    problems = []
    sent = ledger.alerts_sent_lately()
    for webhook in alerts.webhooks:
        for _ in range(max(0, alerts.max_per_minute - sent.get(webhook.name, 0))):
            taken = ledger.take_alert(webhook.name)
            if taken is None:
                break
            alert_id, payload, attempt = taken
            error = post(webhook, payload)
            if error is None:
                ledger.alert_delivered(alert_id)
            else:
                ledger.alert_failed(alert_id, error)
                problems.append(f"webhook {webhook.describe()}: attempt {attempt}: {error}")
                break  # the next round tries again, after the backoff
    return problems


def post(webhook: Webhook, payload: dict[str, Any]) -> str | None:
    """POST ``payload`` as JSON; None when the receiver took it, else why not (no URL)."""
    try:
        request = urllib.request.Request(
            webhook.url,
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json", "User-Agent": "catchup"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=POST_TIMEOUT) as answer:
            answer.read()
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"
    except urllib.error.URLError as exc:
        reason = exc.reason
        return getattr(reason, "strerror", None) or type(reason).__name__
    except (TimeoutError, OSError) as exc:
        return exc.strerror or type(exc).__name__
    except Exception as exc:
        # anything else (http.client's InvalidURL quotes the path, token and all) is a failed
        # post, retried after the backoff: its type only, never its text
        return f"the post failed ({type(exc).__name__})"
    return None
