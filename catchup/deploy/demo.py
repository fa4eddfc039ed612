"""``catchup demo``: two weeks of a nightly billing run that waits for each day's hourly export,
daily invoices, and daily statements for three tenants (per-key periods), in a throwaway
ledger, with a host outage (a billing day blocked by the export hours it missed), a failing
night, one tenant's failed statement and a week of invoices an old cron job sent; scan, replay
in dependency order (the tenant alone), adopt, and a clean scan. Runs against the embedded
PostgreSQL (or the configured database) in a schema of its own, dropped at the end: nothing
the user owns is touched."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from rich.console import Console
from rich.rule import Rule

from ..changes.operations import adopt
from ..config.job import Config, Job
from ..config.loading import make_job
from ..execution.runner import JobContext
from ..postgres import database as db
from ..render import batches, changes, tables
from ..render import scan as scan_report
from ..replay.runs import replay
from ..results import Outcome
from ..scan.detector import scan
from ..schedule import Period
from ..session import Session
from ..vocabulary import OutcomeStatus

TENANTS = ("acme", "globex", "initech")


def billing(ctx: JobContext) -> None:
    """The demo's nightly billing run (the payment gateway is back)."""
    time.sleep(0.02)


def export(ctx: JobContext) -> None:
    """The demo's hourly export."""
    time.sleep(0.005)


@dataclass(frozen=True)
class DemoResult:
    schema: str
    gaps_before: int
    replayed: int
    gaps_after: int


def run_demo(target: db.Target, out: Console) -> DemoResult:
    schema = f"catchup_demo_{secrets.token_hex(4)}"
    session = Session(Config(path=None, schema=schema), target)
    try:
        return _demo(session, target, schema, out)
    finally:
        session.ledger.drop_schema()
        session.close()


@dataclass(frozen=True)
class _Story:
    """The demo's ledger as it is written: its jobs, their first day, the outage, the day
    catchup took the invoices over from the old cron job, and the billing night that failed."""

    jobs: list[Job]
    start: datetime
    outage_from: datetime
    adopted_from: datetime
    night: Period


def _printer(out: Console) -> Callable[[Outcome], None]:
    """What the replay prints: the first few outcomes, every billing day (each after its
    export hours), every failure, and … where it leaves some out."""
    shown = [0, 0]  # outcomes, and the last one printed

    def done(outcome: Outcome) -> None:
        shown[0] += 1
        if (
            shown[0] <= 3
            or outcome.job in ("billing", "statements")
            or outcome.status != OutcomeStatus.succeeded
        ):
            if shown[1] != shown[0] - 1:
                out.print("…")
            tables.outcome(out, outcome)
            shown[1] = shown[0]

    return done


def _demo_jobs(start: datetime, schema: str) -> list[Job]:
    """The demo's four jobs, from ``start``."""
    # invoices: sent by an old cron job for its first week, by catchup since (its evidence
    # table has every day; the ledger only catchup's)
    return [
        # each billing day waits for every export hour inside it
        make_job("billing", "daily", start, call=billing, delay="30m", after=["export"]),
        make_job("export", "hourly", start, call=export, delay="5m", max_per_tick=500),
        make_job(
            "invoices",
            "daily",
            start,
            call=billing,
            delay="1h",
            evidence=f'SELECT day FROM "{schema}".invoices_sent',
        ),
        # one statement per tenant a day: one tenant's night failed, and it runs alone
        make_job("statements", "daily", start, call=billing, delay="1h", keys=list(TENANTS)),
    ]


def _written(session: Session, schema: str) -> _Story:
    """Two weeks of the story written into the ledger, straight in SQL."""
    now = session.now()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    start = today - timedelta(days=14)
    jobs = _demo_jobs(start, schema)
    config = Config(path=None, jobs={job.name: job for job in jobs}, schema=schema)
    session.config = config
    ids = session.ledger.register_jobs([job.name for job in jobs])
    outage_from = today - timedelta(days=5, hours=-6)  # from 06:00, five days ago
    outage_to = outage_from + timedelta(hours=30)
    adopted_from = start + timedelta(days=7)  # catchup took over the invoices here
    for job in jobs:
        latest = job.timeline.latest_due(job.delay, now)
        assert latest is not None
        session.ledger.demo_fill(
            {
                "job_id": ids[job.name].id,
                "first": adopted_from if job.name == "invoices" else job.anchor,
                "last": latest.start,
                "step": job.schedule.step_sql,
                "gap_from": outage_from if job.name in ("billing", "export") else now,
                "gap_to": outage_to if job.name in ("billing", "export") else now,
                "keys": list(TENANTS) if job.name == "statements" else [""],
            },
        )
        if job.name == "invoices":
            session.ledger.demo_evidence({"first": job.anchor, "last": latest.start})
    night = jobs[0].timeline.period(jobs[0].anchor + timedelta(days=9))
    session.ledger.demo_fail(
        {
            "job_id": ids["billing"].id,
            "start": night.start,
            "end": night.end,
            "key": "",
            "error": "exited with 1: payment gateway timed out",
        },
    )
    session.ledger.demo_fail(
        {
            "job_id": ids["statements"].id,
            "start": night.start - timedelta(days=2),
            "end": night.end - timedelta(days=2),
            "key": "globex",
            "error": "exited with 1: globex's address is missing",
        },
    )
    return _Story(jobs, start, outage_from, adopted_from, night)


def _demo(session: Session, target: db.Target, schema: str, out: Console) -> DemoResult:
    story = _written(session, schema)
    jobs, start, outage_from = story.jobs, story.start, story.outage_from
    adopted_from, night = story.adopted_from, story.night
    out.print(Rule("catchup demo"))
    out.print(
        f"A throwaway ledger (schema {schema}) in {target.describe()}: a nightly "
        f"billing run that waits for each day's hourly export (after), since "
        f"{start:%Y-%m-%d}. The host was down "
        f"for 30 hours from {outage_from:%Y-%m-%d %H:%M} UTC, and the billing run of "
        f"{night.start:%Y-%m-%d} failed. The invoices were sent by an old cron job until "
        f"{adopted_from:%Y-%m-%d}, and their table shows it (the job's evidence query). "
        f"The statements go to three tenants each day (keys), and globex's of "
        f"{night.start - timedelta(days=2):%Y-%m-%d} failed.",
        highlight=False,
    )
    out.print(Rule("1. catchup scan --calendar: what is missing?"))
    before = scan(session, jobs, since=None, until=None, calendars=True)
    scan_report.scan_tables(out, before)
    scan_report.calendars(out, before.calendars)
    out.print(Rule("2. catchup replay: the gaps, oldest first, export before billing"))

    since = min(job.anchor for job in jobs)
    done = _printer(out)
    batch = replay(session, list(jobs), since=since, until=None, workers=2, on_done=done)
    batches.batch_summary(out, batch)
    out.print(Rule("3. catchup adopt invoices: record what the old cron job did"))
    adopted = adopt(
        session,
        [jobs[2]],
        since=None,
        until=None,
        reason="sent by the old cron job before catchup",
        actor="demo",
    )
    changes.adopted(out, adopted)
    out.print(Rule("4. catchup scan: clean"))
    after = scan(session, jobs, since=None, until=None)
    scan_report.scan_tables(out, after)
    gaps_before = sum(len(job.gaps) for job in before.jobs)
    gaps_after = sum(len(job.gaps) for job in after.jobs)
    out.print(
        f"Done: {gaps_before} gap range(s) found, {batch.totals['succeeded']} "
        f"period(s) replayed, {gaps_after} left. The demo schema is dropped now; nothing "
        "of yours was touched. Next: write a catchup.toml (see examples/) and run "
        "`catchup tick` from one scheduler (`catchup deploy --help`).",
        highlight=False,
    )
    return DemoResult(schema, gaps_before, batch.totals[OutcomeStatus.succeeded], gaps_after)
