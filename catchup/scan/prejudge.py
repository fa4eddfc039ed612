"""A keyed job's first scan, its keys judged beside their first read: while the read records a
million keys on the ledger's connection, a connection of its own runs the keys query again
and counts each key's rows (Ledger's prejudge_first_keys), so the first scan writes only what
that judged (the few keys to cut) instead of counting every key's rows after the read. It
only ever saves time: what it judged is written only when the keys the job then holds are
those it judged and nothing it read has moved (Ledger.settle_prejudged); else, or when it
failed, the scan settles the keys itself (Ledger.settle_complete_keys)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from ..config.job import Job
from ..ledger import Ledger
from ..ledger.keys import prejudge_first_keys
from ..postgres import database as db
from ..session import Session
from .targets import Prejudged
from .window import Moment, window

APPLICATION = "catchup-prejudge"  # its connection's application_name
CONNECT_WITHIN = 2.0  # seconds the judging connection may take to open, at most

# a job to judge: the job, its id, its window's periods
Wanted = tuple[Job, int, tuple[tuple[datetime, datetime], ...]]
# where a command's own scan of a job starts, at a time (None: it does not scan it)
From = Callable[[Job, datetime], datetime | None]


class Prejudging:
    """Each first read's judgement (one per job, in turn, on one connection of its own, in
    a thread: the read that records the keys goes on meanwhile), taken by :meth:`take`."""

    def __init__(self, target: db.Target, schema: str, jobs: list[Wanted]) -> None:
        self._target = target
        self._schema = schema
        self._jobs = jobs
        self._done = {job.name: threading.Event() for job, _, _ in jobs}
        self._periods = {job.name: periods for job, _, periods in jobs}
        self._judged: dict[str, Prejudged | None] = {}
        self.errors: list[Exception] = []  # what failed (then the scan settles alone)
        self._thread = threading.Thread(target=self._run, name="catchup-prejudge", daemon=True)
        self._thread.start()

    def take(self, name: str, periods: Sequence[tuple[datetime, datetime]]) -> Prejudged | None:
        """The judgement of job ``name``'s first read for ``periods``, once made (None: none,
        it failed, or it is of other periods: then not waited for)."""
        done = self._done.get(name)
        if done is None or self._periods[name] != tuple(periods):
            return None
        done.wait()
        return self._judged.pop(name, None)

    def _run(self) -> None:
        try:
            # (not waited for long: a server at its connection limit leaves the scan to it)
            opened = db.connect(
                self._target, application=APPLICATION, within=CONNECT_WITHIN, writes=False
            )
            with opened as conn:
                for job, job_id, periods in self._jobs:
                    try:  # one job's failure is its own: its scan settles its keys alone
                        assert isinstance(job.keys, str)
                        self._judged[job.name] = prejudge_first_keys(
                            conn,
                            (job.keys, job.timezone, self._schema),
                            job_id,
                            job.anchor,
                            periods,
                            job.keys_timeout.total_seconds(),
                        )
                    except Exception as exc:
                        self.errors.append(exc)
                    finally:
                        self._done[job.name].set()
        except Exception as exc:  # not connected: every job's scan settles its keys alone
            self.errors.append(exc)
        finally:
            for done in self._done.values():
                done.set()


def start(
    session: Session,
    jobs: list[Job],
    since: Moment | None,
    until: Moment | None,
    now: datetime,
    scanned_from: From | None = None,
) -> Prejudging | None:
    """The first reads of ``jobs`` judged beside them (:class:`Prejudging`): each keyed job
    whose keys are a query on the ledger's database, read in full, registered, holding no key
    and no horizon yet, whose scan settles its keys in SQL (no evidence), for the window its
    scan at ``now`` will have: from ``since``, or where ``scanned_from`` says the command's
    own scan of it starts (a tick's: its catchup_window; None there: it is not scanned, and
    not judged). None when there is none."""
    candidates = [job for job in jobs if _judgeable(job)]
    if not candidates:
        return None
    rows = session.job_rows(write=False)
    registered = [(job, rows[job.name].id) for job in candidates if job.name in rows]
    firsts = [(job, job_id) for job, job_id in registered if _first_read(session.ledger, job_id)]
    wanted: list[Wanted] = []
    for job, job_id in firsts:
        start = scanned_from(job, now) if scanned_from else since
        if scanned_from and start is None:
            continue
        first, end = window(job, now, start, until)
        periods = tuple((p.start, p.end) for p in job.timeline.periods(first, end))
        if periods:
            wanted.append((job, job_id, periods))
    return Prejudging(session.target, session.ledger.schema, wanted) if wanted else None


def _judgeable(job: Job) -> bool:
    return (
        isinstance(job.keys, str)
        and job.keys_dsn is None
        and not job.selected_keys
        and job.evidence is None
    )


def _first_read(ledger: Ledger, job_id: int) -> bool:
    """Whether the job holds no key and no horizon: its next read is its first."""
    return not ledger.has_keys(job_id) and ledger.key_horizon(job_id) is None
