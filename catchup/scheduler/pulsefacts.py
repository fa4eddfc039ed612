"""The scheduler's pulse as frozen objects (no I/O here; :mod:`catchup.scheduler.pulse` reads it):
when
`catchup tick` last ran and how often, who leads ``catchup scheduler``, what ticks beside it,
how late periods start, and the warnings all of that gives."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..config.job import Job
from ..schedule import Period, span
from .leadership import Leader

# the last hour's due-to-start p99 (seconds) past which the pulse is amber, then red: never a
# green tick beside an hour of periods started late (issue 49)
LATE_WARN = 60.0
LATE_BAD = 15 * 60.0
# the histogram's upper bounds (seconds) of catchup_due_to_start_seconds in /metrics
LATE_BUCKETS = (1.0, 2.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)


def due_within(job: Job, now: datetime, window: timedelta, most: int) -> list[Period]:
    """The periods of ``job`` that fell due in the ``window`` before ``now`` (newest first, at
    most ``most``) and that its catch-up policy would start: every one (``all``, inside its
    ``catchup_window``), else only the newest."""
    found: list[Period] = []
    latest = job.timeline.latest_due(job.delay, now)
    while latest is not None and len(found) < most and latest.start >= job.anchor:
        if latest.end + job.delay <= now - window:
            break
        if job.catchup != "all" and found:
            break
        if job.catchup == "all" and latest.start < now - job.catchup_window:
            break
        found.append(latest)
        before = job.timeline.before(latest.start)
        latest = None if before is None else Period(before, latest.start)
    return found


@dataclass(frozen=True)
class Lateness:
    """How long periods waited between falling due and their first start (seconds), over
    the periods that fell due in the last hour: the scheduler's due-to-start latency."""

    count: int
    total: float
    p50: float
    p99: float
    worst: float
    # how many waited at most each bound of LATE_BUCKETS (cumulative, as a histogram says it)
    buckets: tuple[int, ...] = ()
    waiting: int = 0  # of ``count``, how many have not started yet (their wait so far)

    @property
    def level(self) -> str:
        """``ok``, ``warn`` (p99 past :data:`LATE_WARN`) or ``bad`` (past :data:`LATE_BAD`)."""
        return "bad" if self.p99 > LATE_BAD else "warn" if self.p99 > LATE_WARN else "ok"

    @classmethod
    def of(cls, waits: Sequence[float], waiting: Sequence[float] = ()) -> Lateness | None:
        """Of the started periods' ``waits``, and the ``waiting`` ones' waits so far."""
        waits = [*waits, *waiting]
        if not waits:
            return None
        ranked = sorted(waits)

        def rank(q: float) -> float:  # nearest rank
            return ranked[max(0, min(len(ranked) - 1, math.ceil(len(ranked) * q) - 1))]

        counted = tuple(sum(1 for w in ranked if w <= le) for le in LATE_BUCKETS)
        late = rank(0.5), rank(0.99), ranked[-1]
        return cls(len(ranked), sum(ranked), *late, counted, len(waiting))

    def histogram(self) -> list[tuple[str, int]]:
        """(le, count) for each bound, then +Inf: the histogram's buckets."""
        return [(f"{le:g}", n) for le, n in zip(LATE_BUCKETS, self.buckets, strict=True)] + [
            ("+Inf", self.count)
        ]


@dataclass(frozen=True)
class Pulse:
    """Is the scheduler that calls ``catchup tick`` alive, and is there only one?"""

    last_tick: datetime | None
    last_host: str | None
    interval: float | None  # seconds, the median gap between recent `catchup tick`s
    stopped: bool
    crowded: tuple[tuple[datetime, tuple[str, ...]], ...]
    now: datetime
    leader: Leader | None = None  # catchup scheduler's lead, if one was ever taken
    # hosts whose `catchup tick` ran while the scheduler led: host, ticks, the newest
    beside: tuple[tuple[str, int, datetime], ...] = ()
    late: Lateness | None = None  # the last hour's due-to-start latency

    @property
    def warnings(self) -> list[str]:
        found = []
        lead = self.leader
        if self.beside and lead is not None:
            host, count, _ = self.beside[0]
            more = f" and {len(self.beside) - 1} more hosts" if len(self.beside) > 1 else ""
            found.append(
                f"`catchup tick` ran {count} {'time' if count == 1 else 'times'} from {host}"
                f"{more} while catchup scheduler leads (term {lead.term}): remove the CronJob "
                "or timer that calls it (the claim keeps it correct, but two schedulers are "
                "the mistake catchup exists to end)"
            )
        if (
            lead is not None
            and not lead.live
            and (self.last_tick is None or self.last_tick <= lead.expires_at)
        ):
            gone = span(round((self.now - lead.expires_at).total_seconds()))
            found.append(
                f"no catchup scheduler has led for {gone} and no `catchup tick` ran since: "
                "nothing starts the jobs (is a replica running `catchup scheduler`?)"
            )
        if self.stopped and self.last_tick is not None and self.interval is not None:
            ago = (self.now - self.last_tick).total_seconds()
            found.append(
                f"no tick for {span(round(ago))} (they came every "
                f"{span(round(self.interval))}): the "
                "scheduler that calls `catchup tick` seems to be gone"
            )
        if (late := self.late) is not None and late.level != "ok":
            bound = span(round(LATE_BAD if late.level == "bad" else LATE_WARN))
            found.append(
                f"the last hour's periods started late: p99 {span(round(late.p99))} after "
                f"falling due (over {bound}; worst {span(round(late.worst))}): every worker "
                "busy, or the scheduler held up (`catchup scheduler --workers`, `why JOB "
                "PERIOD`)"
            )
        if self.crowded:
            minute, hosts = self.crowded[0]
            found.append(
                f"ticks from {len(hosts)} hosts in the same minute "
                f"({minute:%Y-%m-%dT%H:%MZ}: {', '.join(hosts)}): a scheduler runs in every "
                "replica; keep one (the claim keeps it correct, but that is the mistake catchup "
                "exists to end)"
            )
        return found
