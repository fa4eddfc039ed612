"""``catchup doctor``: what a new user gets wrong, one line per finding with what to do."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta

import psycopg

from ..changes.held import held_said
from ..config.job import Config
from ..config.loading import find_config, load_config
from ..config.upstream import ranks
from ..errors import CatchupError, first_line
from ..execution.preflight import cannot_start
from ..ledger import Ledger, sqlfiles
from ..postgres import database as db
from ..reports.explain import dst_warnings, falls_due_on_the_hour
from ..reports.jobs import unconfigured
from ..scan import evidence
from ..scan.keyed import keys_findings
from ..schedule import is_utc, iso_utc, span, to_wall, zone
from ..scheduler.pulse import read_pulse
from ..scheduler.pulsefacts import Pulse
from ..session import Session, definition_clashes
from .compaction import ledger_findings
from .findings import Finding
from .privileges import privilege_findings
from .replication import replication_findings

CLOCK_TOLERANCE = 2.0  # seconds


def graph_findings(config: Config) -> list[Finding]:
    """The jobs that wait for others, upstream first: ``billing ← export``."""

    waiting = {name: job.after for name, job in config.jobs.items() if job.after}
    if not waiting:
        return []
    rank = ranks({name: job.after for name, job in config.jobs.items()})
    lines = [
        f"{name} waits for " + ", ".join(str(dep) for dep in deps)
        for name, deps in sorted(waiting.items(), key=lambda item: (rank[item[0]], item[0]))
    ]
    return [Finding("info", "graph", line) for line in lines]


def clock_finding(host: datetime, database: datetime, rtt: float) -> Finding:
    """The host clock against the database clock (informational: catchup uses the latter)."""
    skew = (host - database).total_seconds()
    if abs(skew) <= CLOCK_TOLERANCE + rtt:
        return Finding("ok", "clock", f"host and database clocks agree within {abs(skew):.1f}s")
    side = "ahead of" if skew > 0 else "behind"
    return Finding(
        "info",
        "clock",
        f"this host's clock is {abs(skew):.0f}s {side} the "
        "database clock; catchup decides by the database clock, but fix NTP here so "
        "logs line up",
    )


def dst_findings(config: Config, now: datetime) -> list[Finding]:
    """Local times a DST change skips or repeats, per job in a time zone (see explain)."""

    local = [job for job in config.jobs.values() if not is_utc(job.timezone)]
    if not config.jobs:
        return []
    if not local:
        return [Finding("ok", "time zones", "every schedule is in UTC: no DST surprises")]
    found = []
    for job in local:
        warnings = dst_warnings(job.schedule, now)
        found += [Finding("info", "time zones", f"{job.name}: {w}") for w in warnings]
        if not warnings:
            found.append(
                Finding(
                    "ok",
                    "time zones",
                    f"{job.name} ({job.timezone}): no DST change in the next 400 days skips or "
                    "repeats one of its local times",
                )
            )
    return found


def zone_agreement(session: Session, config: Config, now: datetime) -> list[Finding]:
    """PostgreSQL and Python each carry a time zone database; catchup's schedules use Python's
    and ``scan --full`` PostgreSQL's. Compare them, hour by hour, over the next 400 days."""

    zones = sorted({job.timezone for job in config.jobs.values() if not is_utc(job.timezone)})
    if not zones:
        return []
    start = now.replace(minute=0, second=0, microsecond=0)
    instants = [start + timedelta(hours=h) for h in range(0, 400 * 24, 3)]
    first_difference: dict[str, datetime] = {}
    for key, t, wall in session.ledger.zone_walls(zones, instants):
        if key not in first_difference and wall != to_wall(t, zone(key)):
            first_difference[key] = t
    found = []
    for name in zones:
        if name in first_difference:
            at = first_difference[name].strftime("%Y-%m-%dT%H:%M:%SZ")
            found.append(
                Finding(
                    "warning",
                    "time zones",
                    f"{name}: the server's time zone database disagrees with Python's tzdata "
                    f"(first at {at}); periods come from Python's, `scan --full` would use the "
                    "server's: update one of them",
                )
            )
        else:
            found.append(
                Finding(
                    "ok",
                    "time zones",
                    f"{name}: the server and Python agree on its clock for the next 400 days",
                )
            )
    return found


def crowded_hour_findings(config: Config, now: datetime) -> list[Finding]:
    """Jobs due exactly on a UTC boundary start together with everything else."""

    crowded = [job for job in config.jobs.values() if falls_due_on_the_hour(job, now)]
    if not crowded:
        return []

    names = ", ".join(job.name for job in crowded[:5])
    more = f" and {len(crowded) - 5} more" if len(crowded) > 5 else ""
    first = crowded[0]
    # a few minutes more than the delay it has: a job due at 02:00 with delay = "2h" is told
    # "2h7m", not a delay shorter than its own
    example = span(first.delay - first.spread + timedelta(minutes=7))
    return [
        Finding(
            "warning",
            "schedules",
            f"{names}{more} fall due exactly on the hour: add a few minutes to the delay "
            f'(for {first.name}, delay = "{example}") to spread runs off the hour',
        )
    ]


def pooler_findings(session: Session) -> list[Finding]:
    """A pooler between catchup and PostgreSQL, and whether it pools per transaction."""
    server_port = session.ledger.probe().port
    client_port = session.conn.info.port
    if client_port == server_port:
        return [Finding("ok", "pooler", "no connection pooler between catchup and PostgreSQL")]
    # In transaction pooling, this client's next transaction moves to another server connection
    # when another client holds its current one in a transaction; in session pooling it never
    # moves.
    before = session.ledger.probe().pid
    other = db.connect(session.target, application="catchup-doctor")
    try:
        holder = Ledger(other, session.config.schema)
        with holder.transaction():
            holder.probe()
            after = session.ledger.probe().pid
    finally:
        other.close()
    if after != before:
        return [
            Finding(
                "warning",
                "pooler",
                f"a transaction-mode pooler (port {client_port} → "
                f"{server_port}): catchup's claims are safe through it (transaction-"
                "scoped locks, lease rows, no session state), but psycopg's prepared "
                "statements need PgBouncer >= 1.21 with max_prepared_statements > 0",
            )
        ]
    return [
        Finding(
            "info",
            "pooler",
            f"a pooler (port {client_port} → {server_port}), "
            "apparently in session mode: fine for catchup",
        )
    ]


def evidence_findings(session: Session, config: Config, now: datetime) -> list[Finding]:
    """Each job's evidence query, run once (over its latest due period): syntax, permission,
    an unreachable evidence_dsn, the column's type and the timeout, one line per problem."""
    found = []
    for job in config.jobs.values():
        if job.evidence is None:
            continue
        period = job.timeline.latest_due(job.delay, now) or job.timeline.period(job.anchor)
        try:
            evidence.present(session.ledger, job, period)
        except (psycopg.Error, CatchupError) as exc:
            if session.conn.broken:
                session.reconnect()
            found.append(
                Finding("serious", "evidence", f"{job.name}: {evidence.failure(exc, job)}")
            )
            continue
        where = "its evidence_dsn" if job.evidence_dsn else "the ledger's database"
        found.append(Finding("ok", "evidence", f"{job.name}: the evidence query runs on {where}"))
    return found


# run in a child process by doctor: imports a job's call from its folder, says why not
_IMPORT_CHECK = """\
import sys
folder, call = sys.argv[1], sys.argv[2]
from catchup.errors import describe
from catchup.execution.preflight import load_call
try:
    load_call(call, None if folder == "-" else __import__("pathlib").Path(folder))
except BaseException as exc:
    print(describe(exc))
"""


def start_findings(config: Config) -> list[Finding]:
    """Every job's program resolved and every ``call`` imported (in a child process, so a
    module's import-time work never runs in doctor's): what cannot start, a line each."""

    found = []
    for job in config.jobs.values():
        if isinstance(job.call, str):
            folder = "-" if job.workdir is None else str(job.workdir)
            try:
                child = subprocess.run(
                    [sys.executable, "-c", _IMPORT_CHECK, folder, job.call],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                    cwd=job.workdir,
                )
                said = child.stdout.strip().splitlines()
                why = f"cannot load {job.call}: {said[-1]}" if said else None
                if child.returncode != 0 and why is None:
                    why = f"cannot load {job.call}: the check exited {child.returncode}"
            except (OSError, subprocess.TimeoutExpired) as exc:
                why = f"cannot load {job.call}: {type(exc).__name__}"
        else:
            why = cannot_start(job)
        if why is not None:
            found.append(Finding("serious", "jobs", f"{job.name}: {why}"))
    if config.jobs and not found:
        found.append(Finding("ok", "jobs", "every job's program or module is there to start"))
    return found


def definition_findings(session: Session) -> list[Finding]:
    """Jobs another project defines differently in this ledger: every command refuses them."""

    rows = session.ledger.job_rows(sorted(session.config.jobs))
    return [Finding("serious", "jobs", line) for line in definition_clashes(session.config, rows)]


def unconfigured_findings(session: Session) -> list[Finding]:
    """Jobs the ledger has that the config does not name, and new jobs that look like them."""

    gone, lookalikes = unconfigured(session)
    found = [Finding("warning", "jobs", held_said(new, old)) for new, old in lookalikes]
    paired = {old for _, old in lookalikes}
    found += [
        Finding(
            "info",
            "jobs",
            f"the ledger has {u.name}, which the config does not name (last success "
            f"{iso_utc(u.last_success) if u.last_success else 'never'}): `catchup rename` if it "
            "was renamed, `catchup retire` if it is gone on purpose",
        )
        for u in gone
        if u.name not in paired
    ]
    return found


def _guarded(topic: str, probe: Callable[[], list[Finding]]) -> list[Finding]:
    try:
        return probe()
    except psycopg.OperationalError:
        raise  # the connection or the server: nothing further can be asked
    except psycopg.Error as exc:
        return [Finding("serious", topic, f"the server refused the check: {first_line(exc)}")]


def examine(config_path: str | None, dsn: str | None) -> list[Finding]:
    """Every finding, in the order people read them: the config and the jobs, then the
    database, the ledger and the host against it, then the scheduler."""
    config, found = _config_findings(config_path)
    found += start_findings(config)
    found += graph_findings(config)
    try:
        target = db.resolve(
            dsn, config.dsn, embedded_allowed=config.embedded, project=config.project
        )
        sent = time.monotonic()
        session = Session(config, target, prepare=False)  # doctor looks, it does not migrate
    except CatchupError as exc:
        found.append(Finding("serious", "database", str(exc)))
        return found
    try:
        rtt = time.monotonic() - sent
        version, latest = session.ledger.version(), len(sqlfiles.migrations())
        current = version == latest
        found += _database_findings(session, target, config, version, latest)
        found += _ledger_findings(session, target, config, current, rtt)
        found += _scheduler_findings(read_pulse(session) if current else None)
    finally:
        session.close()
    return found


def _config_findings(config_path: str | None) -> tuple[Config, list[Finding]]:
    """The config found and read (an empty one when it does not load), and what it says."""
    try:
        path = find_config(config_path)
        config = load_config(path)
    except CatchupError as exc:
        return Config(path=None), [
            Finding("serious", "config", line) for line in str(exc).splitlines()
        ]
    if path is None:
        said = "no catchup.toml here or above: only migrate, demo and postgres commands will work"
        return config, [Finding("info", "config", said)]
    return config, [Finding("ok", "config", f"{path}: {len(config.jobs)} job(s)")]


def _database_findings(
    session: Session, target: db.Target, config: Config, version: int, latest: int
) -> list[Finding]:
    """Which server and version, the schema's version, another ledger of this project."""
    where = f"{target.describe()}, PostgreSQL {db.server_version(session.conn)}"
    if version == latest:
        found = [Finding("ok", "database", f"{where}, schema {config.schema} at version {version}")]
    else:
        found = [
            Finding(
                "info",
                "database",
                f"{where}; schema {config.schema} is at "
                f"version {version} of {latest}: the next command (or "
                "`catchup migrate`) brings it up to date",
            )
        ]
    twins = db.twin_ledgers(target, config.project)  # another ledger of this project
    return found + [Finding("warning", "database", line) for line in twins]


def _ledger_findings(
    session: Session, target: db.Target, config: Config, current: bool, rtt: float
) -> list[Finding]:
    """The probes of the ledger and the host against it; one probe's database error is its
    finding, the others are still reported."""
    found: list[Finding] = []
    if current:
        found += _guarded("jobs", lambda: unconfigured_findings(session))
        found += _guarded("jobs", lambda: definition_findings(session))
    if target.embedded_data is None:  # the embedded server's role is catchup's own
        found += _guarded("role", lambda: privilege_findings(session, config.schema))
    found += _guarded("pooler", lambda: pooler_findings(session))
    found += _guarded("failover", lambda: replication_findings(session, current))
    start = time.monotonic()
    db_now = session.now()
    host_now = datetime.now(db_now.tzinfo)
    found.append(clock_finding(host_now, db_now, rtt + time.monotonic() - start))
    found += crowded_hour_findings(config, db_now)
    found += dst_findings(config, db_now)
    found += _guarded("time zones", lambda: zone_agreement(session, config, db_now))
    found += _guarded("evidence", lambda: evidence_findings(session, config, db_now))

    found += _guarded("keys", lambda: keys_findings(session.ledger, [*config.jobs.values()]))
    if current:
        found += _guarded("ledger", lambda: ledger_findings(session, db_now))
    return found


def _scheduler_findings(pulse: Pulse | None) -> list[Finding]:
    """Whether one scheduler ticks (nothing said of a ledger not yet migrated)."""
    if pulse is None:
        return []
    if pulse.last_tick is None:
        said = (
            "no `catchup tick` recorded yet: call it "
            "from one scheduler (see `catchup deploy --help`)"
        )
        return [Finding("info", "scheduler", said)]
    if pulse.warnings:
        return [Finding("warning", "scheduler", w) for w in pulse.warnings]
    return [Finding("ok", "scheduler", f"last tick from {pulse.last_host}")]
