"""The scheduler's pulse: when `catchup tick` last ran, from where, how often, and whether it
stopped. Read by ``scan``, ``jobs``, ``doctor`` and ``serve``."""

from __future__ import annotations

import itertools
import statistics

import psycopg

from .models import Pulse
from .session import Session


def read_pulse(session: Session) -> Pulse:
    """When the scheduler last ticked, and whether ticks stopped (none for three of their usual
    intervals) or come from several hosts in the same minute; and who leads the built-in
    scheduler (``catchup scheduler``), if it ever ran."""
    now = session.now()
    try:
        leader = session.ledger.leader_now()
    except psycopg.errors.UndefinedTable:  # a ledger from before migration 0018 (doctor reads)
        leader = None
    ticks = session.ledger.recent_ticks(50)
    crowded = tuple((minute, tuple(hosts)) for minute, hosts in session.ledger.crowded_minutes())
    if not ticks:
        return Pulse(None, None, None, False, crowded, now, leader)
    times = sorted({at for _, at in ticks})
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    gaps = [g for g in gaps if g >= 30]  # ticks from replicas in one minute are one beat
    interval = statistics.median(gaps) if len(gaps) >= 2 else None
    last_host, last = ticks[0]
    stopped = interval is not None and (now - last).total_seconds() > 3 * interval
    return Pulse(last, last_host, interval, stopped, crowded, now, leader)
