"""What ``doctor`` says of the ledger's server and a failover (issue 30): whether it has
standbys, whether ``durable_claims`` has a synchronous one to wait for (refused as ineffective
when it has none), and what a claim's commit then costs."""

from __future__ import annotations

import statistics

from ..claims.failover import told
from ..session import Session
from .findings import Finding

PROBES = 7  # commits timed each way


def replication_findings(session: Session, migrated: bool = True) -> list[Finding]:
    """The failover findings; what the ledger records of its timelines only when ``migrated``
    (an older ledger has no such record yet)."""
    found: list[Finding] = []
    if migrated and (failover := session.ledger.failover()) is not None:
        found.append(
            Finding(
                "info",
                "failover",
                f"{told(failover)}; the periods it does not show settled are suspect until "
                "decided (`catchup scan` lists them)",
            )
        )
    if migrated and session.durable and session.ledger.timeline_durable() is False:
        found.append(
            Finding(
                "warning",
                "failover",
                "durable_claims: a claim on the server's timeline did not wait for a "
                "synchronous standby (a host without durable_claims, or a server that does not "
                "wait by default): a failover from this timeline opens a suspect window",
            )
        )
    return found + _standbys(session)


def _standbys(session: Session) -> list[Finding]:
    ledger = session.ledger
    seen = ledger.standbys()
    if session.durable:
        if seen.synchronous == 0 and seen.unseen == 0:
            why = (
                "synchronous_standby_names is empty"
                if not seen.names.strip()
                else f"none of synchronous_standby_names ({seen.names}) is streaming"
            )
            return [
                Finding(
                    "serious",
                    "failover",
                    f"durable_claims = true has no effect: the server has no synchronous "
                    f"standby ({why}); a claim committed just before a failover can be lost",
                )
            ]
        plain = statistics.median(ledger.commit_probe(durable=False) for _ in range(PROBES))
        durable = statistics.median(ledger.commit_probe(durable=True) for _ in range(PROBES))
        who = (
            f"{seen.synchronous} synchronous standby(s)"
            if seen.unseen == 0
            else f"synchronous_standby_names = {seen.names} (this role cannot see their state)"
        )
        return [
            Finding(
                "ok",
                "failover",
                f"durable_claims: {who} apply each claim and finish before it counts; a commit "
                f"takes {durable * 1e3:.1f} ms (median of {PROBES}), "
                f"{plain * 1e3:.1f} ms without",
            )
        ]
    if seen.streaming:
        return [
            Finding(
                "warning",
                "failover",
                f"the server streams to {seen.streaming} standby(s) and durable_claims is off: "
                "a failover can lose the claims of its last moments, and the periods the new "
                "primary does not show settled are suspect until decided (set [database] "
                "durable_claims = true with a synchronous standby)",
            )
        ]
    return [Finding("info", "failover", "the server has no standby streaming from it")]
