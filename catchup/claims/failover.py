"""What the ledger knows of its server's timelines (sql/migrations/0021): the last failover
(``Failover``) and what a runner holds to write its row again after one lost it (``Held``).
Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..schedule import Period, iso_utc


@dataclass(frozen=True)
class Held:
    """What a runner holds of its claim, to write its row again when a failover lost it
    (``Ledger.recreate``): the claim's time is the old primary's (its lease's expiry less the
    lease). A job registered in the lost seconds is gone too: its row is written again with
    ``job_id`` under ``job``, its name."""

    job_id: int
    job: str
    key: str
    period: Period
    attempt: int
    owner: str
    claimed_at: datetime


@dataclass(frozen=True)
class Failover:
    """The ledger's server moved to a new timeline (a standby promoted, a backup restored)
    from one whose claims were not all durable (the newest such move): seen first at
    ``seen_at``; the new primary's newest commit of the old timeline was at ``replayed_until``
    (None: not known, the server restarted since). Periods of the old timeline it does not
    show settled are suspect (sql/migrations/0021)."""

    timeline: int
    seen_at: datetime
    replayed_until: datetime | None

    @property
    def window(self) -> float | None:
        """The seconds of the old primary's writes the new one may lack, at most."""
        if self.replayed_until is None:
            return None
        return max((self.seen_at - self.replayed_until).total_seconds(), 0.0)


@dataclass(frozen=True)
class Moved:
    """The ledger's server on a timeline the ledger had not seen (a standby promoted, a backup
    restored), first seen by this session: ``failover`` is the window it opens (None: every
    claim on the timeline before waited for a synchronous standby, nothing is suspect)."""

    timeline: int
    failover: Failover | None


def moved_said(moved: Moved) -> str:
    """The move in words, said once by the command that saw it first."""
    if moved.failover is None:
        return (
            f"the ledger's server moved to timeline {moved.timeline} (a standby promoted, or "
            "a backup restored); every claim on the one before waited for a synchronous "
            "standby (durable_claims): nothing is suspect"
        )
    return (
        f"{told(moved.failover)}; the periods it does not show settled are suspect, not run "
        "until decided (`catchup scan` lists them)"
    )


def told(failover: Failover) -> str:
    """The failover in words, for a refusal, a scan's line, the doctor."""
    lost = (
        "how much of the old primary's last writes it lacks is not known (restarted since)"
        if failover.window is None
        else f"it may lack up to {failover.window:.1f} s of the old primary's last writes"
    )
    return (
        f"the ledger's server moved to timeline {failover.timeline} "
        f"(seen at {iso_utc(failover.seen_at)}): {lost}"
    )
