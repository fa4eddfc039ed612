"""The scan report as documents for other programs to show: GitHub-flavoured Markdown for a CI
job summary, and OpenMetrics gauges for a node_exporter textfile collector."""

from __future__ import annotations

from collections.abc import Iterator

from ..results import ScanReport
from ..vocabulary import PeriodState
from .limits import GAP_LIMIT
from .scan import gap_count, gaps_oldest_first, keys_said, summary_states, suspect_line, when
from .text import iso_utc, schedule_text

# GitHub keeps a job summary up to 1 MiB; stay under it with room for the closing note
MARKDOWN_BUDGET = 1_000_000


def scan_markdown(report: ScanReport, *, limit: int | None = GAP_LIMIT) -> str:
    """A summary for a CI job summary (GitHub-flavoured Markdown): a row per job, then the
    oldest ``limit`` gap ranges (all with ``None``) in the table's order, saying how many more
    there are; cut, with a note, to stay under the 1 MiB a GitHub job summary takes."""
    states = summary_states(report.jobs)
    total = gap_count(report)
    head = "no gaps" if not total else f"{total:,} gap range{'s' if total != 1 else ''}"
    lines = [
        f"### catchup scan: {head}",
        "",
        f"Periods starting {iso_utc(report.since)} .. {iso_utc(report.until)}, "
        f"database clock {iso_utc(report.generated_at)}.",
        "",
        "| job | schedule | expected | " + " | ".join(states) + " | oldest gap | last success |",
        "|---|---|--:|" + "--:|" * len(states) + "---|---|",
    ]
    pulse = report.pulse
    tail: list[str] = []
    if pulse is not None:
        tail.append("")
        if pulse.last_tick is not None:
            host = _md(pulse.last_host or "")
            tail.append(f"Scheduler: last tick {iso_utc(pulse.last_tick)} from {host}.")
        tail += [f"> **warning:** {_md(w)}" for w in pulse.warnings]
    if (said := suspect_line(report)) is not None:
        tail.append(f"> **suspect:** {_md(said)}")
    tail += [
        f"> **{_md(job.job)}:** {_md(job.evidence_error)}"
        for job in report.jobs
        if job.evidence_error
    ]
    budget = Budget(MARKDOWN_BUDGET - sum(len(x.encode()) + 1 for x in (*lines, *tail)))

    def job_rows() -> Iterator[str]:
        for job in report.jobs:
            c = job.counts
            name = _md(job.job) + (" (paused)" if job.paused else "")
            oldest = when(job, job.gaps[0].first) if job.gaps else "-"
            last = when(job, job.last_success) if job.last_success else "never"
            counts = " | ".join(str(c[state]) for state in states)
            yield (
                f"| {name} | {_md(schedule_text(job.schedule, job.timezone))} | {job.expected} "
                f"| {counts} | {_md(oldest)} | {_md(last)} |"
            )

    shown_jobs = budget.take(job_rows(), lines)
    if shown_jobs < len(report.jobs):
        lines.append(
            f"\n*{len(report.jobs) - shown_jobs:,} more jobs not shown: the report is cut to fit "
            "a GitHub job summary (1 MiB); `catchup scan --json` has them all.*"
        )
    if total:
        rows = gaps_oldest_first(report, limit)
        # what blocked ranges wait for, in a column of its own when any is shown
        waits = any(job.waits(gap) is not None for job, gap in rows)
        # and the keys of a job with keys (how many, the first few)
        keyed = any(job.keys_in(gap) is not None for job, gap in rows)
        extra = (" waits for |" if waits else "") + (" keys |" if keyed else "")
        lines += [
            "",
            "| job | state | first | last | periods |" + extra,
            "|---|---|---|---|--:|" + "---|" * ((" waits for |" in extra) + keyed),
        ]
        shown = budget.take(
            (
                f"| {_md(job.job)} | {gap.state} | {_md(when(job, gap.first))} "
                f"| {_md(when(job, gap.last))} | {gap.periods} |"
                + (f" {_md(job.waits(gap) or '')} |" if waits else "")
                + (f" {_md(keys_said(job, gap) or '')} |" if keyed else "")
                for job, gap in rows
            ),
            lines,
        )
        if shown < total:
            cut = " to fit a GitHub job summary (1 MiB)" if shown < len(rows) else ""
            lines.append(
                f"\n*{shown:,} of {total:,} gap ranges shown, oldest first{cut}: "
                "`catchup scan --all --format markdown` for more, `--json` for every one.*"
            )
    return "\n".join([*lines, *tail]) + "\n"


class Budget:
    """What is left of the document's size, in bytes, for rows."""

    NOTE = 400  # room kept for a closing note after the rows

    def __init__(self, left: int) -> None:
        self.left = left - 2 * self.NOTE

    def take(self, rows: Iterator[str], into: list[str]) -> int:
        """Append rows while they fit; how many did."""
        taken = 0
        for row in rows:
            size = len(row.encode()) + 1
            if size > self.left:
                break
            self.left -= size
            into.append(row)
            taken += 1
        return taken


def _md(text: str) -> str:
    return text.replace("|", "\\|")


METRICS = (
    ("catchup_missing_periods", "Due periods of the job that have no run.", PeriodState.missing),
    (
        "catchup_blocked_periods",
        "Due periods waiting for upstream periods (after) that are not done.",
        PeriodState.blocked,
    ),
    ("catchup_failed_periods", "Periods that failed and will be retried.", PeriodState.failed),
    (
        "catchup_exhausted_periods",
        "Periods that failed with no attempts left.",
        PeriodState.exhausted,
    ),
    ("catchup_stale_periods", "Periods running with an expired lease.", PeriodState.stale),
    (
        "catchup_suspect_periods",
        "Periods a database failover left in doubt: not run until decided.",
        PeriodState.suspect,
    ),
    (
        "catchup_interrupted_periods",
        "Periods whose last attempt was interrupted, counting no failure.",
        PeriodState.interrupted,
    ),
    (
        "catchup_cancelled_periods",
        "Periods whose last attempt a person cancelled (catchup cancel), counting no failure.",
        PeriodState.cancelled,
    ),
    ("catchup_running_periods", "Periods running with a live lease.", PeriodState.running),
    (
        "catchup_outdated_periods",
        "Periods that succeeded before an upstream period they waited for ran again.",
        PeriodState.outdated,
    ),
    (
        "catchup_unverified_periods",
        "Periods that succeeded but left no evidence.",
        PeriodState.unverified,
    ),
    (
        "catchup_untracked_periods",
        "Periods with evidence of output but no run in the ledger.",
        PeriodState.untracked,
    ),
    (
        "catchup_excluded_periods",
        "Periods nobody expects: excluded by the job's exclude or a recorded window.",
        PeriodState.excluded,
    ),
)


FAILED_KEYS = (
    "Failed or exhausted periods of the job's keys that have the most ([serve] metric_keys"
    " of them per job, default 5)."
)

DUE_TO_START = (
    "How long the periods that fell due in the last hour waited to start (first attempts;"
    " while a scheduler leads, one not started yet counts its wait so far)."
)
WORKERS = "The live `catchup scheduler` leader's workers in the lane (the default: --workers)."
WORKERS_BUSY = "Of those, how many run a period now: all busy, and a due period waits."


def scan_openmetrics(report: ScanReport) -> str:  # noqa: C901
    """Gauges per job for a node_exporter textfile collector (OpenMetrics text format)."""
    out: list[str] = []

    def family(name: str, help_text: str, unit: str = "") -> None:
        out.append(f"# TYPE {name} gauge")
        if unit:
            out.append(f"# UNIT {name} {unit}")
        out.append(f"# HELP {name} {help_text}")

    for name, help_text, state in METRICS:
        family(name, help_text)
        for job in report.jobs:
            out.append(f'{name}{{job="{_label(job.job)}"}} {job.counts[state]}')
    out += _paused_and_failed_keys(report)
    family(
        "catchup_last_success_timestamp_seconds", "Start of the newest succeeded period.", "seconds"
    )
    for job in report.jobs:
        if job.last_success is not None:
            out.append(
                f'catchup_last_success_timestamp_seconds{{job="{_label(job.job)}"}} '
                f"{job.last_success.timestamp():.0f}"
            )
    family("catchup_oldest_gap_timestamp_seconds", "Start of the oldest gap period.", "seconds")
    for job in report.jobs:
        if job.gaps:
            out.append(
                f'catchup_oldest_gap_timestamp_seconds{{job="{_label(job.job)}"}} '
                f"{job.gaps[0].first.timestamp():.0f}"
            )
    pulse = report.pulse
    if pulse is not None and pulse.last_tick is not None:
        family("catchup_last_tick_timestamp_seconds", "When `catchup tick` last ran.", "seconds")
        out.append(f"catchup_last_tick_timestamp_seconds {pulse.last_tick.timestamp():.0f}")
    if pulse is not None and (lead := pulse.leader) is not None:
        family(
            "catchup_scheduler_leader",
            "1 while a `catchup scheduler` leads (its holder, host:pid:token), else 0.",
        )
        out.append(f'catchup_scheduler_leader{{holder="{_label(lead.holder)}"}} {int(lead.live)}')
        family("catchup_scheduler_term", "The term of the newest `catchup scheduler` lead.")
        out.append(f"catchup_scheduler_term {lead.term}")
    if pulse is not None and (lead := pulse.leader) is not None and lead.live:
        for name, said, at in (
            ("catchup_scheduler_workers", WORKERS, 0),
            ("catchup_scheduler_workers_busy", WORKERS_BUSY, 1),
        ):
            family(name, said)
            for lane, load in sorted((lead.lanes or {}).items()):
                out.append(f'{name}{{lane="{_label(lane)}"}} {load[at]}')
    if pulse is not None and (late := pulse.late) is not None:
        out += [
            "# TYPE catchup_due_to_start_seconds histogram",
            "# UNIT catchup_due_to_start_seconds seconds",
            f"# HELP catchup_due_to_start_seconds {DUE_TO_START}",
            *(
                f'catchup_due_to_start_seconds_bucket{{le="{le}"}} {count}'
                for le, count in late.histogram()
            ),
            f"catchup_due_to_start_seconds_count {late.count}",
            f"catchup_due_to_start_seconds_sum {late.total:.6g}",
        ]
    family("catchup_scan_timestamp_seconds", "When the scan ran (database clock).", "seconds")
    out.append(f"catchup_scan_timestamp_seconds {report.generated_at.timestamp():.0f}")
    out.append("# EOF")
    return "\n".join(out) + "\n"


def _paused_and_failed_keys(report: ScanReport) -> list[str]:
    """``catchup_paused`` and ``catchup_failed_keys`` (each job's most failed keys), as lines."""
    out = ["# TYPE catchup_paused gauge", "# HELP catchup_paused 1 when the job is paused."]
    out += [f'catchup_paused{{job="{_label(job.job)}"}} {int(job.paused)}' for job in report.jobs]
    out += ["# TYPE catchup_failed_keys gauge", f"# HELP catchup_failed_keys {FAILED_KEYS}"]
    for job in report.jobs:
        out += [
            f'catchup_failed_keys{{job="{_label(job.job)}",key="{_label(key)}"}} {n}'
            for key, n in job.failed_keys(report.metric_keys)
        ]
    return out


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
