"""Exactly once across a database failover, repeated, and what durable_claims costs a claim.

    uv run python benchmarks/failover.py [--trials 500] [--suspect 500] [--claims 400]

Two embedded PostgreSQL servers of its own, a primary and a streaming standby made by
pg_basebackup (the tests' pair, tests/fix_replica.py), the primary committing locally by
default (synchronous_commit = local) and the standby named synchronous, so only the
transactions that ask wait for it.

  latency  claim + finish of new periods of one job, the ledger's own statements on one
           connection, alternately with durable_claims (each commit waits until the standby
           has applied it: remote_apply) and without: p50 and p99 of each, and their ratio;
  durable  --trials failovers with durable_claims: the standby's WAL held back (its WAL
           receiver stopped), `catchup run` of a period until its claim's commit waits for the
           standby, the primary killed (immediate), the standby promoted, `catchup replay` of
           the period on the new primary, a new standby rebuilt from it. Counted: periods the
           job ran twice (target 0), periods lost (no success on the new primary; target 0);
  suspect  --suspect failovers without durable_claims, on a pair of their own (the standby
           asynchronous; tests/faults/test_suspects.py's trial): the standby's WAL held back,
           `catchup run` of a period of a job with evidence (its bills in a third server) and
           of one without, both finished on the primary, the primary killed, the standby
           promoted; a scan and a replay on the new primary, a reset of the job without
           evidence and a replay. Counted: trials where both periods were suspect (target all),
           periods the job with evidence ran twice (target 0), and periods of the one without
           that did not run exactly once after the reset (target 0).
The last line holds the figures.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "faults")]

from fix_db import HOMES  # noqa: E402  (the tests' helpers, found through the path above)
from fix_replica import Pair, primary_in, replica_pair  # noqa: E402
from test_failover import failover_project, trial  # noqa: E402
from test_suspects import suspects_project  # noqa: E402
from test_suspects import trial as suspect_trial  # noqa: E402

from catchup.config.loading import Config  # noqa: E402
from catchup.ledger import FinishFields  # noqa: E402
from catchup.postgres import database as db  # noqa: E402
from catchup.schedule import Period  # noqa: E402
from catchup.session import Session  # noqa: E402

DONE: FinishFields = dict(
    status="succeeded",
    history_status="succeeded",
    counts_as_failure=False,
    backoff=timedelta(seconds=1),
    exit_code=0,
    error=None,
    output_tail=None,
)


def p(samples: list[float], q: int) -> float:
    return statistics.quantiles(samples, n=100)[q - 1] * 1e3


def latency(pair: Pair, claims: int) -> tuple[list[float], list[float]]:
    """Seconds per claim + finish, durable and not, alternating, on one connection."""
    target = db.resolve(pair.dsn(), None)
    # a ledger of its own: its claims without durable_claims would make the failovers' ledger
    # not durable (sql/migrations/0021), and every failover would open a suspect window
    session = Session(Config(path=None, schema="catchup_latency"), target)
    try:
        job_id = session.ledger.register_jobs(["latency"])["latency"].id
        ledger = session.ledger
        at = ledger.now().replace(minute=0, second=0, microsecond=0) + timedelta(days=400)
        timed: dict[bool, list[float]] = {True: [], False: []}
        for n in range(2 * claims):
            durable = n % 2 == 1
            ledger.durable = durable
            start = at + timedelta(hours=n)
            started = time.perf_counter()
            claim = ledger.claim(
                job_id,
                Period(start, start + timedelta(hours=1)),
                owner="bench",
                lease=timedelta(minutes=5),
                max_attempts=3,
                allow_overlap=False,
            )
            assert claim is not None, start
            assert ledger.finish(job_id, start, claim.attempt, **DONE) is not None
            timed[durable].append(time.perf_counter() - started)
        return timed[True], timed[False]
    finally:
        session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=500, help="failovers with durable_claims")
    parser.add_argument("--suspect", type=int, default=500, help="failovers without")
    parser.add_argument("--claims", type=int, default=400, help="claims timed each way")
    args = parser.parse_args()
    with replica_pair(HOMES) as pair, tempfile.TemporaryDirectory() as folder:
        project, marks = failover_project(pair, Path(folder), durable=True)
        durable, plain = latency(pair, args.claims)
        print(
            f"latency: claim + finish, {args.claims} each way: durable_claims p50"
            f" {p(durable, 50):.2f}ms p99 {p(durable, 99):.2f}ms; without p50"
            f" {p(plain, 50):.2f}ms p99 {p(plain, 99):.2f}ms"
            f" ({statistics.median(durable) / statistics.median(plain):.2f}x at p50)",
            flush=True,
        )
        started = time.monotonic()
        twice = lost = by_first = 0
        for n in range(args.trials):
            done = trial(pair, project, marks, n, durable=True)
            twice += done.runs > 1
            lost += done.runs == 0 or done.status != "succeeded"
            by_first += done.first
            if (n + 1) % 50 == 0:
                print(f"  durable: {n + 1} trials, {twice} twice, {lost} lost", flush=True)
        took = time.monotonic() - started
        print(
            f"durable: {args.trials} failovers in {took:.0f}s ({took / args.trials:.2f}s each):"
            f" {twice} periods ran twice, {lost} lost; the first runner ran {by_first} (it"
            f" reconnected to the new primary and claimed it there), the replay the rest",
            flush=True,
        )
    detected, twice_evidence, wrong_after, took_suspect = suspects(args.suspect)
    print(
        f"suspect: {args.suspect} failovers without durable_claims in {took_suspect:.0f}s:"
        f" both periods suspect in {detected}; the job with evidence ran {twice_evidence}"
        f" twice; the one without ran other than once after its reset in {wrong_after}",
        flush=True,
    )
    print(
        f"figures: durable p50 {p(durable, 50):.2f}ms p99 {p(durable, 99):.2f}ms, plain p50"
        f" {p(plain, 50):.2f}ms p99 {p(plain, 99):.2f}ms; {args.trials} durable failovers:"
        f" twice {twice}, lost {lost}; {args.suspect} without: suspect"
        f" {detected}/{args.suspect}, evidence twice {twice_evidence}, wrong after reset"
        f" {wrong_after}"
    )


def suspects(trials: int) -> tuple[int, int, int, float]:
    """The suspect leg: (trials with both periods suspect, evidence periods run twice,
    periods without evidence not run exactly once after the reset, seconds)."""
    detected = twice = wrong = 0
    started = time.monotonic()
    with replica_pair(HOMES) as pair:
        bills = primary_in(pair.home, "bills")  # the evidence: outside the pair
        try:
            bills.sql("CREATE TABLE bills (period timestamptz)")
            folder = pair.home / "suspects"
            folder.mkdir()
            project, marks = suspects_project(pair, folder, bills.conninfo())
            for n in range(trials):
                done = suspect_trial(pair, project, marks, n)
                detected += done.suspect == {"billing": True, "export": True}
                twice += done.billing != 1
                wrong += (done.export_before, done.export) != (1, 2)
                if (n + 1) % 50 == 0:
                    print(f"  suspect: {n + 1} trials, {detected} detected", flush=True)
        finally:
            bills.stop("immediate")
    return detected, twice, wrong, time.monotonic() - started


if __name__ == "__main__":
    main()
