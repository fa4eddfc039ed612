"""The renderers, pure: Markdown, OpenMetrics, tables, JSON and the lines of changes and
dry runs, from results built by hand (no database)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console

from catchup.claims.failover import Failover
from catchup.config.loading import make_job
from catchup.render import batches, changes, documents, tables
from catchup.render import json as render_json
from catchup.render.scan import scan_tables, suspect_line
from catchup.render.text import safe, schedule_text
from catchup.render.webparts import replay_command
from catchup.results import Batch, Change, Changes, History, JobScan, Planned, Range, ScanReport
from catchup.schedule import Period, span
from catchup.scheduler.pulsefacts import Pulse
from catchup.vocabulary import EventAction, PeriodState

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def printed(render: Any, *args: Any) -> str:
    out = io.StringIO()
    render(Console(file=out, width=200, markup=False, highlight=False, emoji=False), *args)
    return out.getvalue()


def scan_result(job: str, gaps: list[Range], *, tz: str = "UTC") -> JobScan:
    nightly = make_job("nightly", "daily", "2026-11-01", command=["true"], timezone=tz)
    counts: dict[str, int] = dict.fromkeys(PeriodState, 0)
    counts[PeriodState.succeeded] = 20
    for gap in gaps:
        counts[PeriodState(gap.state)] += gap.periods
    return JobScan(
        job=job,
        schedule="daily",
        timezone=tz,
        daily_or_longer=True,
        paused=False,
        first=T0,
        until=T0 + timedelta(days=25),
        expected=sum(counts.values()),
        counts=counts,
        ranges=tuple(gaps),
        last_success=T0,
        labeler=nightly.label,
    )


def test_markdown_orders_gaps_oldest_first_like_the_table_and_escapes_text() -> None:
    late = scan_result(
        "a|pipe", [Range("missing", T0 + timedelta(days=9), T0 + timedelta(days=9), 1)]
    )
    early = scan_result("b", [Range("failed", T0 + timedelta(days=2), T0 + timedelta(days=3), 2)])
    pulse = Pulse(T0, "host|<b>", 300.0, False, (), T0)
    report = ScanReport(T0 + timedelta(days=25), T0, T0 + timedelta(days=25), (late, early), pulse)
    text = documents.scan_markdown(report)
    gap_rows = [line for line in text.splitlines() if line.endswith((" | 1 |", " | 2 |"))]
    assert gap_rows == [
        "| b | failed | 2026-11-03 | 2026-11-04 | 2 |",
        "| a\\|pipe | missing | 2026-11-10 | 2026-11-10 | 1 |",
    ]
    assert "from host\\|<b>." in text
    table = printed(scan_tables, report)
    gap_table = table.split("gaps, oldest first")[1]
    order = [line.split("│")[1].strip() for line in gap_table.splitlines() if "│ 2026-11-" in line]
    assert order == ["b", "a|pipe"]


def test_markdown_shows_the_zone_and_counts_that_add_up() -> None:
    job = scan_result("nightly", [], tz="Europe/Berlin")
    report = ScanReport(T0, T0, T0, (job,))
    row = next(line for line in documents.scan_markdown(report).splitlines() if "nightly" in line)
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == "daily (Europe/Berlin)" == schedule_text("daily", "Europe/Berlin")
    numbers = [int(c) for c in cells[2:10]]
    assert numbers[0] == sum(numbers[1:])


def test_the_suspect_line_names_who_decides_each_jobs_suspect_periods() -> None:
    """A job's evidence is named as a decider only where a job with suspect periods has one."""
    failover = Failover(2, T0 + timedelta(days=25), T0 + timedelta(days=25, seconds=-3))
    gap = [Range(PeriodState.suspect, T0, T0, 1)]
    billing = replace(scan_result("billing", gap), evidence=True)
    export = scan_result("export", gap)
    quiet = replace(scan_result("quiet", []), evidence=True)  # no suspect period: not named

    def line(*jobs: JobScan) -> str:
        said = suspect_line(ScanReport(T0, T0, T0, jobs, failover=failover))
        assert said is not None
        return said.split("not run until decided: ")[1]

    person = "a person with `catchup mark JOB PERIOD --done --reason …` (it ran) or `catchup"
    assert line(export, quiet).startswith(person)
    assert line(billing, quiet).startswith(
        f"the evidence of billing at the next claim, or by {person}"
    )
    assert line(billing, export, quiet).startswith(
        f"the evidence of billing at the next claim; the others by {person}"
    )
    assert suspect_line(ScanReport(T0, T0, T0, (quiet,), failover=failover)) is None


def test_openmetrics_escapes_label_values() -> None:
    report = ScanReport(T0, T0, T0, (scan_result('we"ird\\', []),))
    text = documents.scan_openmetrics(report)
    assert 'catchup_missing_periods{job="we\\"ird\\\\"} 0' in text
    assert text.endswith("# EOF\n")


def test_changes_say_what_changed_by_kind() -> None:
    period = Period(T0, T0 + timedelta(days=1))
    rows = (
        Change("j", period, "2026-11-01", PeriodState.failed, PeriodState.failed, True),
        Change("j", period, "2026-11-02", PeriodState.missing, PeriodState.missing, False),
    )
    text = printed(changes.changes, Changes("j", EventAction.reset, rows))
    assert "j 2026-11-01: failed → failed (runnable)" in text
    assert "j 2026-11-02: unchanged (already missing)" in text
    assert "reset: 1 of 2 period(s)" in text
    marked = printed(changes.changes, Changes("j", EventAction.skip, rows[:1]))
    assert "marked skip: 1 of 1 period(s)" in marked and "runnable" not in marked


def test_history_says_how_many_it_left_out() -> None:
    history = History("j", None, 2, (), 169, (), 0)
    assert "0 of 169 attempts, newest first (--limit 169 for all)" in printed(
        tables.history, history
    )
    complete = History("j", None, 50, (), 0, (), 0)
    assert "of" not in printed(tables.history, complete).split("history of j")[1]


def test_json_names_each_period_by_start_end_and_label() -> None:
    assert render_json.period_json(T0, T0 + timedelta(hours=1), "x") == {
        "period": "2026-11-01T00:00:00Z",
        "start": "2026-11-01T00:00:00Z",
        "end": "2026-11-01T01:00:00Z",
        "label": "x",
    }
    midnight = datetime(2026, 10, 31, 23, tzinfo=UTC)  # Berlin's, on 2026-11-01
    job = scan_result(
        "j", [Range("missing", midnight, midnight + timedelta(days=1), 2)], tz="Europe/Berlin"
    )
    document = json.loads(render_json.scan_json(ScanReport(T0, T0, T0, (job,))))
    (gap,) = document["jobs"][0]["gaps"]
    assert (gap["first_label"], gap["last_label"]) == ("2026-11-01", "2026-11-02")


def test_stored_text_is_printed_as_text() -> None:
    assert safe("[bold]x\x1b]0;t\x07\u202e") == "[bold]x\\x1b]0;t\\x07\\u202e"
    assert safe("a\nb", lines=True) == "a\nb" and safe("a\nb") == "a\\x0ab"
    period = Period(T0, T0 + timedelta(days=1))
    rows = (Change("[red]j", period, "l", PeriodState.missing, PeriodState.waived, True),)
    assert "[red]j l: missing → waived" in printed(
        changes.changes, Changes("j", EventAction.done, rows)
    )


def test_one_duration_format() -> None:
    assert [span(s) for s in (90, 5400, 84600, 88200, 7 * 86400, 0.5)] == [
        "1m30s",
        "1h30m",
        "23h30m",
        "24h30m",
        "7d",
        "0.5s",
    ]


def test_the_render_layer_knows_neither_the_database_nor_click() -> None:
    code = (
        "import sys\n"
        "import catchup.render.json, catchup.render.tables, catchup.render.scan\n"
        "import catchup.render.documents, catchup.render.batches\n"
        "print(sorted({'psycopg', 'click', 'catchup.ledger.whole', 'catchup.ledger.base',"
        " 'catchup.session', 'catchup.claims.path'}"
        " & set(sys.modules)))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "[]"


def test_markdown_of_a_hundred_thousand_gap_ranges_fits_a_job_summary() -> None:
    day = timedelta(days=1)
    ranges = [Range("failed", T0 + 2 * k * day, T0 + 2 * k * day, 1) for k in range(100_000)]
    big = scan_result("nightly", ranges)
    report = ScanReport(T0, T0, T0, (big,))
    everything = documents.scan_markdown(report, limit=None)
    assert len(everything.encode()) < 1_048_576
    assert "gap ranges shown, oldest first to fit a GitHub job summary (1 MiB)" in everything
    assert "of 100,000 gap ranges shown" in everything
    default = documents.scan_markdown(report)
    assert "50 of 100,000 gap ranges shown, oldest first: `catchup scan --all" in default
    assert default.count("| nightly | failed |") == 50


def test_the_table_says_how_many_gap_ranges_it_left_out() -> None:
    day = timedelta(days=1)
    ranges = [Range("missing", T0 + 2 * k * day, T0 + 2 * k * day, 1) for k in range(80)]
    report = ScanReport(T0, T0, T0, (scan_result("nightly", ranges),))
    text = printed(scan_tables, report)
    assert "50 of 80 gap ranges shown, oldest first: --limit N or --all" in text
    assert text.count("│ nightly │ missing") == 50
    everything = printed(lambda c, r: scan_tables(c, r, limit=None), report)
    assert everything.count("│ nightly │ missing") == 80 and "gap ranges shown" not in everything


def test_a_dry_run_summarises_runs_of_periods_per_job() -> None:
    def item(name: str, hour: int, state: str = "missing") -> Planned:
        job = make_job(name, "hourly", "2026-11-01", command=["true"])
        start = T0 + timedelta(hours=hour)
        return Planned(job, Period(start, start + timedelta(hours=1)), PeriodState(state))

    plan = [
        item("a", 0),
        item("b", 0),
        item("a", 1),
        item("a", 2),
        item("a", 5),
        item("b", 1, "failed"),
    ]
    batch = Batch(planned=6, outcomes=(), interrupted=False, dry_run=True, plan=iter(plan))
    text = printed(batches.plan, batch)
    assert text.splitlines() == [
        "would run a: 4 periods (4 missing), 2026-11-01T00:00:00Z .. 2026-11-01T05:00:00Z",
        "would run b: 2 periods (1 missing, 1 failed), 2026-11-01T00:00:00Z .. "
        "2026-11-01T01:00:00Z",
        "runs of consecutive periods, oldest first",
        "  a 2026-11-01T00:00:00Z .. 2026-11-01T02:00:00Z (3 missing)",
        "  b 2026-11-01T00:00:00Z (1 missing)",
        "  b 2026-11-01T01:00:00Z (1 failed)",
        "  a 2026-11-01T05:00:00Z (1 missing)",
        "6 period(s) would run; nothing was written",
    ]
    cut = Batch(planned=6, outcomes=(), interrupted=False, dry_run=True, plan=iter(plan))
    shown = printed(lambda c, b: batches.plan(c, b, limit=2), cut)
    assert "  b 2026-11-01T00:00:00Z (1 missing)" in shown and "  a 2026-11-01T05" not in shown
    assert "2 of 4 runs shown: --limit N or --all for more, --each for every period" in shown
    each = Batch(planned=6, outcomes=(), interrupted=False, dry_run=True, plan=iter(plan))
    assert len(printed(lambda c, b: batches.plan(c, b, each=True), each).splitlines()) == 7


def test_the_pages_command_for_suspect_periods_decides_them_instead_of_a_replay() -> None:
    # a replay refuses a suspect period: the page names the reset that makes it runnable
    nightly = make_job("nightly", "daily", "2026-11-01", command=["true"])
    suspect = Range("suspect", T0 + timedelta(days=2), T0 + timedelta(days=4), 3)
    one = Range("suspect", T0 + timedelta(days=6), T0 + timedelta(days=6), 1)
    missing = Range("missing", T0 + timedelta(days=8), T0 + timedelta(days=8), 1)
    scan = scan_result("nightly", [suspect, one, missing])
    assert replay_command(scan, suspect, nightly) == (
        'catchup reset nightly 2026-11-03..2026-11-05 --reason "…"'
    )
    assert replay_command(scan, one, nightly) == 'catchup reset nightly 2026-11-07 --reason "…"'
    assert replay_command(scan, missing, nightly).startswith("catchup replay --job nightly")
