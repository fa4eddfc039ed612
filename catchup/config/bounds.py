"""The numbers commands take (``--workers``, ``--limit``, …): each one's range and default,
written once. The facade checks a value against its bound, and the command line's option takes
its type and default from it, so ``catchup tick --workers 99`` and ``Catchup().tick(workers=99)``
are refused with the same words. Nothing is imported here: the command line reads it at start.
(A job's keys have a table of their own: :data:`catchup.config.job.JOB_KEYS`.)"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bound:
    """A number a command takes: its range and default, in one place that the facade checks
    and the command line's option reads (its type, its default, its message)."""

    option: str
    low: int
    high: int
    default: int | None = None
    unit: str = ""  # after the value in a message: "s"
    words: str | None = None  # the range in words, when numbers say it badly

    def problem(self, value: float) -> str | None:
        if self.low <= value <= self.high:
            return None
        allowed = self.words or f"from {self.low:,} to {self.high:,}"
        return f"{self.option} {value:g}{self.unit}: {allowed}"


TICK_WORKERS = Bound("--workers", 1, 64, 4)
# the scheduler's: its periods run side by side, a long one holding one worker (issue 49)
SCHEDULER_WORKERS = Bound("--workers", 1, 64, 8)
REPLAY_WORKERS = Bound("--workers", 1, 64, 1)
MAX_TIME = Bound("--max-time", 1, 86400, unit="s", words="from 1 second to 1 day")
ATTEMPT_MOST = 2_147_483_647  # an attempt number is the ledger's integer
HISTORY_LIMIT = Bound("--limit", 1, 100_000, 50)
EXPLAIN_COUNT = Bound("--limit", 1, 1000, 10)
PS_LIMIT = Bound("--limit", 1, 100_000, 1000)
SCHEDULER_LEASE = Bound("--lease", 3, 600, 15, unit="s", words="from 3 seconds to 10 minutes")
SERVE_REFRESH = Bound("--refresh", 1, 86400, 60, unit="s", words="from 1 second to 1 day")
SCHEDULER_GRACE = Bound("--grace", 0, 3600, 30, unit="s", words="from 0 to 1 hour")
# the keys `catchup keys` (a table), /keys/NAME and /api/keys/NAME list at a time: a million
# keys are never one table nor one page (`catchup keys --json` lists every one, a page at a time)
KEYS_SHOWN = 1_000
# a page of keys asked for in Python (`Catchup.keys(limit=…)`): at most every key a job may have
KEYS_LIMIT = Bound("limit", 1, 10_000_000, words="from 1 to 10,000,000 keys, or None for all")
