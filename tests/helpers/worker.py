"""A replica for concurrency tests: waits at a barrier, then runs periods through catchup.

    python worker.py CONFIG JOB GO_FILE READY_FILE PASSES PERIOD...

Each pass tries every period once through the library's one claim path (the same call as
``catchup run JOB --period P``); prints one JSON line per outcome. PASSES may be ``until-done``:
passes repeat until every period is recorded as succeeded (at most 90 seconds).
"""

from __future__ import annotations

import faulthandler
import json
import sys
import time
from pathlib import Path

from catchup.claims.path import run_period
from catchup.config.loading import load_config, parse_instant
from catchup.postgres import database as db
from catchup.session import Session


def main() -> None:
    config_path, job_name, go, ready, passes, *periods = sys.argv[1:]
    config = load_config(Path(config_path))
    job = config.job(job_name)
    starts = [parse_instant(p) for p in periods]
    # a replica that cannot reach the barrier (stuck connecting or registering) prints where
    # it is and ends, so the test that waits for it can say why
    faulthandler.dump_traceback_later(100, exit=True)
    with Session(config, db.resolve(None, config.dsn)) as session:
        session.registered_id(job_name)
        faulthandler.cancel_dump_traceback_later()
        Path(ready).touch()
        deadline = time.monotonic() + 60
        while not Path(go).exists():
            if time.monotonic() > deadline:
                raise SystemExit("barrier never opened")
            time.sleep(0.002)
        job_id = session.registered_id(job_name)
        todo = list(starts)
        count = 0
        stop_at = time.monotonic() + 90
        while todo and (
            count < int(passes) if passes != "until-done" else time.monotonic() < stop_at
        ):
            count += 1
            for start in todo:
                period = job.timeline.period(start)
                outcome = run_period(session, job, period, stream=False)
                print(
                    json.dumps(
                        {
                            "period": period.start.isoformat(),
                            "status": outcome.status,
                            "attempt": outcome.attempt,
                            "detail": outcome.detail,
                        }
                    ),
                    flush=True,
                )
            if passes == "until-done":
                todo = [
                    t
                    for t in todo
                    if (row := session.ledger.run_row(job_id, t)) is None
                    or row.status != "succeeded"
                ]
                time.sleep(0.02)


if __name__ == "__main__":
    main()
