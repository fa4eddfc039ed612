"""``/metrics`` of ``catchup serve``: the families of ``scan --format openmetrics`` plus the
server's own (up, scan age and duration), through the Prometheus project's Python client, which
writes the classic text format or OpenMetrics as the scraper asks."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from ..maintenance.retention import LedgerSize
from ..results import ScanReport
from ..scheduler.leadership import Leader
from ..scheduler.pulsefacts import Pulse
from .documents import DUE_TO_START, FAILED_KEYS, METRICS, WORKERS, WORKERS_BUSY


@dataclass(frozen=True)
class Served:
    """What ``/metrics`` shows: the newest scan that succeeded (if any), whether the newest
    attempt did, how long it took, and its age in seconds."""

    report: ScanReport | None
    up: bool
    duration: float | None
    age: float | None
    size: LedgerSize | None = None


def families(served: Served) -> Iterator[Metric]:
    """The metric families for ``served``: the scan's own, each job's, the scheduler's."""
    yield from _scan_families(served)
    report = served.report
    if report is None:
        return
    yield from _job_families(report)
    if report.pulse is not None:
        yield from _pulse_families(report.pulse)
    scanned = GaugeMetricFamily(
        "catchup_scan_timestamp_seconds", "When the scan ran (database clock).", unit="seconds"
    )
    scanned.add_metric([], report.generated_at.timestamp())
    yield scanned
    if served.size is not None:
        yield from ledger_families(served.size, [job.job for job in report.jobs])


def _scan_families(served: Served) -> Iterator[Metric]:
    """Whether the newest scan succeeded, how old it is and how long it took."""
    up = GaugeMetricFamily("catchup_up", "1 when the newest scan of the ledger succeeded.")
    up.add_metric([], 1 if served.up else 0)
    yield up
    if served.age is not None:
        age = GaugeMetricFamily(
            "catchup_scan_age_seconds", "Seconds since the served scan ran.", unit="seconds"
        )
        age.add_metric([], served.age)
        yield age
    if served.duration is not None:
        took = GaugeMetricFamily(
            "catchup_scan_duration_seconds", "How long the served scan took.", unit="seconds"
        )
        took.add_metric([], served.duration)
        yield took


def _job_families(report: ScanReport) -> Iterator[Metric]:
    """Each job's periods by state, paused, keys failed, last success and oldest gap."""
    for name, help_text, state in METRICS:
        family = GaugeMetricFamily(name, help_text, labels=["job"])
        for job in report.jobs:
            family.add_metric([job.job], job.counts[state])
        yield family
    paused = GaugeMetricFamily("catchup_paused", "1 when the job is paused.", labels=["job"])
    for job in report.jobs:
        paused.add_metric([job.job], int(job.paused))
    yield paused
    worst = GaugeMetricFamily("catchup_failed_keys", FAILED_KEYS, labels=["job", "key"])
    for job in report.jobs:
        for key, n in job.failed_keys(report.metric_keys):
            worst.add_metric([job.job, key], n)
    yield worst
    keys_failed = GaugeMetricFamily(
        "catchup_keys_read_failed",
        "1 when the job's keys query failed (it goes on with the keys it read last), else 0.",
        labels=["job"],
    )
    for job in report.jobs:
        keys_failed.add_metric([job.job], int(job.keys_error is not None))
    yield keys_failed
    success = GaugeMetricFamily(
        "catchup_last_success_timestamp_seconds",
        "Start of the newest succeeded period.",
        labels=["job"],
        unit="seconds",
    )
    oldest = GaugeMetricFamily(
        "catchup_oldest_gap_timestamp_seconds",
        "Start of the oldest gap period.",
        labels=["job"],
        unit="seconds",
    )
    for job in report.jobs:
        if job.last_success is not None:
            success.add_metric([job.job], job.last_success.timestamp())
        if job.gaps:
            oldest.add_metric([job.job], job.gaps[0].first.timestamp())
    yield success
    yield oldest


def _pulse_families(pulse: Pulse) -> Iterator[Metric]:
    """The scheduler's: the last tick, who leads and its term, the lanes, how late due periods
    start."""
    if pulse.last_tick is not None:
        tick = GaugeMetricFamily(
            "catchup_last_tick_timestamp_seconds", "When `catchup tick` last ran.", unit="seconds"
        )
        tick.add_metric([], pulse.last_tick.timestamp())
        yield tick
    if pulse.leader is not None:
        lead = pulse.leader
        leading = GaugeMetricFamily(
            "catchup_scheduler_leader",
            "1 while a `catchup scheduler` leads (its holder, host:pid:token), else 0.",
            labels=["holder"],
        )
        leading.add_metric([lead.holder], 1 if lead.live else 0)
        yield leading
        term = GaugeMetricFamily(
            "catchup_scheduler_term", "The term of the newest `catchup scheduler` lead."
        )
        term.add_metric([], lead.term)
        yield term
    if pulse.leader is not None and pulse.leader.live:
        yield from lane_families(pulse.leader)
    if (late := pulse.late) is not None:
        name = "catchup_due_to_start_seconds"
        histogram = Metric(name, DUE_TO_START, "histogram", unit="seconds")
        for le, count in late.histogram():
            histogram.add_sample(f"{name}_bucket", {"le": le}, count)
        histogram.add_sample(f"{name}_count", {}, late.count)
        histogram.add_sample(f"{name}_sum", {}, late.total)
        yield histogram


def lane_families(leader: Leader) -> Iterator[Metric]:
    """The live leader's lanes: each one's workers, and how many are busy."""
    workers = GaugeMetricFamily("catchup_scheduler_workers", WORKERS, labels=["lane"])
    busy = GaugeMetricFamily("catchup_scheduler_workers_busy", WORKERS_BUSY, labels=["lane"])
    for lane, (size, used) in sorted((leader.lanes or {}).items()):
        workers.add_metric([lane], size)
        busy.add_metric([lane], used)
    yield workers
    yield busy


def ledger_families(size: LedgerSize, jobs: list[str]) -> Iterator[Metric]:
    """The ledger's size per table, its oldest detail, and how far compaction is behind."""
    by_table = GaugeMetricFamily(
        "catchup_ledger_bytes", "The table's size with indexes and TOAST.", labels=["table"]
    )
    rows = GaugeMetricFamily(
        "catchup_ledger_rows", "The table's rows (the planner's estimate).", labels=["table"]
    )
    for table in size.tables:
        by_table.add_metric([table.name], table.bytes)
        rows.add_metric([table.name], table.rows)
    yield by_table
    yield rows
    if size.oldest_detail is not None:
        oldest = GaugeMetricFamily(
            "catchup_ledger_oldest_detail_timestamp_seconds",
            "When the oldest attempt the history keeps started.",
            unit="seconds",
        )
        oldest.add_metric([], size.oldest_detail.timestamp())
        yield oldest
    if size.cutoff is not None:
        behind = GaugeMetricFamily(
            "catchup_compaction_behind_seconds",
            "How long before keep_detail's cutoff the oldest run not compacted yet ended.",
            labels=["job"],
            unit="seconds",
        )
        for job in jobs:
            behind.add_metric([job], size.behind_seconds(job))
        yield behind


class _Collector(Collector):
    def __init__(self, served: Served) -> None:
        self.served = served

    def collect(self) -> Iterator[Metric]:
        return families(self.served)


def exposition(served: Served, accept: str | None) -> tuple[bytes, str]:
    """The body and content type for a scraper that sent ``accept``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(served))
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type
