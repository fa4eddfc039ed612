"""A keyed job's keys: the user's keys query (on the ledger's database or the job's
``keys_dsn``), the key history the ledger keeps, and the scan of each (key, period)."""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import Hashable, Iterable, Iterator, Sequence
from datetime import datetime
from decimal import Decimal
from itertools import batched, chain
from typing import Any, cast

import psycopg
from psycopg import sql

from ..errors import ConfigError
from ..scan.targets import KeyCounts, KeyRange, KeyRow, Prejudged, Settled
from ..scan.verified import HOLED_SHARE
from . import sqlfiles
from .base import LedgerBase
from .evidence import bound, fenced

# how long one keys query may take, and how many keys it may return
KEYS_TIMEOUT = 30.0  # seconds (a job's keys_timeout: its own)
MAX_KEYS = 10_000_000
# an index read of one key's rows over a stretch of periods costs about what reading this many
# of a job's rows in a merge does (benchmarks/keys.py: 4.5 us against 0.15 us): when the
# stretches cost less than reading every row, a scan probes for holes instead
HOLE_PROBE_COST = 30
BATCH = 2_000  # rows taken at a time of a keys query and of a key history
BLOCK = 50_000  # keys a read holds as one text, and records in one statement
# a character no plain printable ASCII key has, but the line break between a block's keys
NOT_PLAIN = re.compile(r"[^ -~\n]")
# the memory keys_diff's aggregate and join of a million keys, and a scan's sorts of them, take
# on the server in their transaction (PostgreSQL's default, 4MB, spills them to disk in
# batches: twice as slow)
DIFF_WORK_MEM = "64MB"
ANALYZE_AFTER = 10_000  # keys added by one read after which the key history is analyzed
# the keys a first read's prejudgement (prejudge_first_keys) brings back, at most: judged to be
# written (a few of a million keys, the holed ones); more, and the first scan settles them
PREJUDGED_MOST = 200_000
SINCE_KINDS = {
    None: "keys_since_none",
    "date": "keys_since_date",
    "timestamp": "keys_since_timestamp",
    "timestamptz": "keys_since_timestamptz",
}


class KeysRead:
    """What a job's keys source gave: its keys and, from a dated keys query, from when each is
    expected. Iterated as (key, since) pairs; held as two lists, no tuple a key (a million
    keys read every tick)."""

    __slots__ = ("froms", "keys")

    def __init__(self, keys: list[str], froms: list[datetime | None] | None = None) -> None:
        self.keys = keys
        self.froms = froms

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[tuple[str, datetime | None]]:
        if self.froms is None:
            return ((key, None) for key in self.keys)
        return zip(self.keys, self.froms, strict=True)

    def __repr__(self) -> str:
        return f"KeysRead({len(self.keys):,} keys)"


class KeysRaced(Exception):
    """A first read of a job's keys (no key was held when it was read: every key new) about
    to be recorded over keys another read recorded meanwhile. Nothing is written, and no key
    row waited for: read against no key, it says nothing of keys gone since, and the other
    read's record, just made, stands (the job's next read compares with it). Or any read of a
    job whose row went meanwhile (``catchup rename`` over it deleted it and its keys): none of
    its keys is written under an id no job has."""


class KeysDiff:
    """What one read of a job's keys query changed against the key history of ``job_id`` (0:
    a job the ledger does not know yet, every key new), found on the ledger's database
    (keys_diff): a million keys that did not change never come here. Held as keys_diff's texts
    (a line a key, at most :data:`BLOCK` a text: ten million keys cost their characters, not
    ten million objects; a key holds no line break), in the ledger's key order from block to
    block (each block's rows are locked in the order every writer of key rows locks them, and
    a first read's are written into the key index in order): the keys new, back, or
    expected from another date (what record_keys writes, with their dates: ``froms``) and
    those held that it no longer returns (gone); ``blocks`` gives them a block at a time.
    ``odd``: each key not plain printable ASCII, for :func:`catchup.scan.keyed.changed_keys`
    to check, and ``twice``: a key returned twice; ``count``: how many keys it returned."""

    __slots__ = (
        "_blocks",
        "_froms",
        "_shared",
        "changed",
        "count",
        "first_read",
        "gone",
        "job_id",
        "odd",
        "same",
        "twice",
    )

    def __init__(self, job_id: int, dated: bool) -> None:
        self.job_id = job_id
        self.first_read = False  # the job held no key when it was read
        self._blocks: list[str] = []  # a line a key: "+key" changed, "-key" gone
        self._froms: list[datetime | None] | None = [] if dated else None
        self._shared = Shared()
        self.changed = 0
        self.gone = 0
        self.odd: list[str | None] = []
        self.twice: str | None = None
        self.count = 0
        self.same = False  # compared whole, alike the keys held: nothing else was read

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"KeysDiff({self.count:,} keys, {self.changed:,} changed, {self.gone:,} gone)"

    def take(
        self, what: str, n: int | None, key: str | None, froms: list[datetime | None] | None
    ) -> None:
        """One row of keys_diff."""
        if what == "count":
            self.count = n or 0
            self.same = key == "true"
        elif what == "odd":
            self.odd.append(key)
        elif what == "twice" and key is not None:
            self.twice = key
        elif what == "block" and key is not None and n:
            self._look_at(key, n)
            self._blocks.append(key)
            gone = key.count("\n-") + key.startswith("-")
            self.gone += gone
            self.changed += n - gone
            if self._froms is not None:
                self._froms.extend(self._shared(since) for since in froms or ())

    def _look_at(self, block: str, n: int) -> None:
        """The changed keys of a block that are not plain printable ASCII, in ``odd`` for
        key_problem to judge (most keys of most reads are: a scan of the text finds none); a
        block of more lines than its ``n`` keys (a key with a line break in it) as one odd key
        refused (so a key "a\\n-b" is never taken for "a" and "b" gone)."""
        if block.count("\n") + 1 != n:
            self.odd.append("\n")
        elif NOT_PLAIN.search(block) is not None:
            self.odd.extend(
                line[1:] for line in block.split("\n") if line[0] == "+" and NOT_PLAIN.search(line)
            )

    def blocks(self) -> Iterator[tuple[KeysRead, list[str]]]:
        """The keys changed (with their dates) and gone, a block at a time, as they came."""
        taken = 0
        for text in self._blocks:
            block = text.split("\n")
            changed = [line[1:] for line in block if line[0] == "+"]
            gone = [line[1:] for line in block if line[0] == "-"]
            froms = None
            if self._froms is not None:
                froms = self._froms[taken : taken + len(changed)]
                taken += len(changed)
            yield KeysRead(changed, froms), gone


def _probe(conn: psycopg.Connection[Any], schema: str, keys: sql.SQL) -> str | None:
    """The keys query's columns checked without running it: the kind of its second, dated
    column (None without one). A ConfigError says what is wrong with them."""
    # parameters (none) given, so the user's %, sent as %%, reaches the server as %
    probe = sqlfiles.query_naming("keys_probe", schema, keys=keys)
    columns = conn.execute(probe, {}).description
    columns = columns or []
    if len(columns) not in (1, 2):
        raise ConfigError(
            f"returns {len(columns)} columns; keys needs a key column and, optionally, "
            "a date or timestamp column (from when the key is expected)"
        )
    if len(columns) != 2:
        return None
    info = psycopg.adapters.types.get(columns[1].type_code)
    kind = info.name if info is not None else f"type {columns[1].type_code}"
    if kind not in SINCE_KINDS:
        raise ConfigError(f"its second column is {kind}; it must be a date or timestamp")
    return kind


def _keys_query(name: str, schema: str, keys: sql.SQL, kind: str | None) -> sql.Composed:
    """``name`` (keys_read, keys_diff or keys_diff_first) over the keys query, its columns
    named."""
    return sqlfiles.query_naming(
        name,
        schema,
        keys=keys,
        names=sql.SQL("(key, since)" if kind else "(key)"),
        since=_since(name, schema, kind),
        digest=sqlfiles.query("key_digest", schema),
        order=sqlfiles.query("keys_diff_in_order", schema),
        pairs=sqlfiles.query("keys_diff_pairs", schema),
    )


def _since(name: str, schema: str, kind: str | None) -> sql.Composed:
    """When a key is expected from, by the query's second column; in a diff, a held key the
    column leaves NULL keeps its own date (it is no change, and its digest compares alike)."""
    since = sqlfiles.query(SINCE_KINDS[kind], schema)
    if name != "keys_diff" or kind is None:
        return since
    return sqlfiles.query_naming("keys_since_or_held", schema, since=since)


def diff_keys(
    conn: psycopg.Connection[Any],
    text: str,
    zone: str,
    schema: str,
    job_id: int,
    timeout: float | None = None,
) -> KeysDiff:
    """The keys query run on the ledger's database, in a read-only transaction with a
    statement timeout (``timeout`` seconds, the job's keys_timeout; KEYS_TIMEOUT by default),
    against the key history of ``job_id`` (:class:`KeysDiff`). A ConfigError says what is
    wrong with its columns or its size."""
    keys = sql.SQL(text.replace("%", "%%"))  # the user's SQL: % is not a placeholder
    timeout = KEYS_TIMEOUT if timeout is None else timeout
    with fenced(conn, schema, timeout):  # nothing it changes outlives it
        kind = _probe(conn, schema, keys)
        held = conn.execute(sqlfiles.query("has_keys", schema), {"job_id": job_id}).fetchone()
        first = not (held and held[0])
        query = _keys_query("keys_diff_first" if first else "keys_diff", schema, keys, kind)
        conn.execute(sqlfiles.query("keys_work_mem", schema), {"work_mem": DIFF_WORK_MEM})
        bound(conn, schema, timeout)  # the probe cannot have lifted it
        diff = KeysDiff(job_id, kind is not None)
        diff.first_read = first
        params = {"zone": zone, "limit": MAX_KEYS + 1, "job_id": job_id, "dated": bool(kind)}
        params |= {"block": BLOCK}
        params |= {"seed_a": secrets.randbits(63), "seed_b": secrets.randbits(63)}
        with conn.cursor() as cur:
            for row in cur.stream(query, params, size=BATCH):
                diff.take(*row)
    if diff.count > MAX_KEYS:
        raise ConfigError(f"returns more than {MAX_KEYS:,} keys")
    return diff


def read_keys(
    conn: psycopg.Connection[Any], text: str, zone: str, schema: str, timeout: float | None = None
) -> tuple[KeysRead, bool]:
    """The keys query's rows (key, from when expected), in a read-only transaction with a
    statement timeout (``timeout`` seconds; KEYS_TIMEOUT by default); and whether it has the
    second, dated column. A ConfigError says what is wrong with its columns or its size."""
    keys = sql.SQL(text.replace("%", "%%"))  # the user's SQL: % is not a placeholder
    timeout = KEYS_TIMEOUT if timeout is None else timeout
    with fenced(conn, schema, timeout):  # nothing it changes outlives it
        kind = _probe(conn, schema, keys)
        query = _keys_query("keys_read", schema, keys, kind)
        bound(conn, schema, timeout)  # the probe cannot have lifted it
        read = KeysRead([], [] if kind else None)
        # one statement (its timeout bounds it whole), its rows taken in chunks as they come:
        # a million keys are never held as one result
        with conn.cursor() as cur:
            for key, since in cur.stream(query, {"zone": zone, "limit": MAX_KEYS + 1}, size=BATCH):
                read.keys.append(key)
                if read.froms is not None:
                    read.froms.append(since)
    if len(read) > MAX_KEYS:
        raise ConfigError(f"returns more than {MAX_KEYS:,} keys")
    return read, kind is not None


def prejudge_first_keys(
    conn: psycopg.Connection[Any],
    asked: tuple[str, str, str],
    job_id: int,
    start: datetime,
    periods: Sequence[tuple[datetime, datetime]],
    timeout: float | None = None,
) -> Prejudged | None:
    """A first read's keys (the keys query, run as :func:`diff_keys` runs it, bounded alike)
    judged as the first scan of ``periods`` after they are recorded would settle them
    (prejudge_first_keys), on ``conn``, a connection of its own; None when more than
    :data:`PREJUDGED_MOST` are to be written, or there is no key. ``asked``: the keys query,
    the job's zone, the ledger's schema."""
    text, zone, schema = asked
    keys = sql.SQL(text.replace("%", "%%"))  # the user's SQL: % is not a placeholder
    timeout = KEYS_TIMEOUT if timeout is None else timeout
    seeds = (secrets.randbits(63), secrets.randbits(63))
    params: dict[str, object] = {
        "zone": zone,
        "limit": MAX_KEYS + 1,
        "job_id": job_id,
        "start": start,
        "most": PREJUDGED_MOST,
        "dated": True,
        "seed_a": seeds[0],
        "seed_b": seeds[1],
        **_settle_params(None, periods),
    }
    texts: list[str] = []  # the judged keys, BATCH a text
    los: list[datetime | None] = []
    with fenced(conn, schema, timeout):  # nothing it changes outlives it
        kind = _probe(conn, schema, keys)
        conn.execute(sqlfiles.query("keys_work_mem", schema), {"work_mem": DIFF_WORK_MEM})
        conn.execute(sqlfiles.query("prejudge_settings", schema))
        bound(conn, schema, timeout)  # the probe cannot have lifted it
        query = _settling(
            "prejudge_first_keys",
            schema,
            keys=keys,
            names=sql.SQL("(key, since)" if kind else "(key)"),
            since=sqlfiles.query(SINCE_KINDS[kind], schema),
            digest=sqlfiles.query("key_digest", schema),
        )
        read = _judged_rows(conn, query, params, texts, los)
    if read is None or len(los) > PREJUDGED_MOST or read[1][0] == 0:
        return None
    text = lines(t for t in texts if t)
    return Prejudged(job_id, start, read[0], read[2], read[1], seeds, text, los)


def _judged_rows(
    conn: psycopg.Connection[Any],
    query: sql.Composed,
    params: dict[str, object],
    texts: list[str],
    los: list[datetime | None],
) -> tuple[datetime, list[Decimal], tuple[str, int] | None] | None:
    """prejudge_first_keys' rows streamed: each judged key into ``texts`` (BATCH a text) and
    its start into ``los``; the read's own row returned (when, digest, scan state)."""
    read = None
    shared, chunk = Shared(), list[str]()
    with conn.cursor(binary=True) as cur:
        for what, key, at, digest, signature, generation in cur.stream(query, params, size=BATCH):
            if what == "judged":
                chunk.append(key)
                los.append(shared(at))
                if len(chunk) == BATCH:
                    texts.append(lines(chunk))
                    chunk = []
            else:
                read = (at, digest, None if generation is None else (signature, generation))
    texts.append(lines(chunk))
    return read


def _settling(name: str, schema: str, **parts: sql.Composable) -> sql.Composed:
    """settle_complete_keys or prejudge_first_keys, with the window and judgement they share."""
    return sqlfiles.query_naming(
        name,
        schema,
        window=sqlfiles.query("settle_window", schema),
        judging=sqlfiles.query("settle_judging", schema),
        **parts,
    )


def _settle_params(
    horizon: datetime | None, periods: Sequence[tuple[datetime, datetime]]
) -> dict[str, object]:
    """What settle_complete_keys and prejudge_first_keys take of the horizon and window."""
    return {
        "holed_share": HOLED_SHARE,
        "horizon": horizon,
        "newest": periods[-1][0] if periods else None,
        **window_params(periods),
    }


def _spans(
    lowers: list[datetime] | None, uppers: list[datetime] | None
) -> tuple[tuple[datetime, datetime], ...] | None:
    """What scans verified of a key (its multirange's bounds) as (lower, upper) pairs."""
    if lowers is None or uppers is None:
        return None
    return tuple(zip(lowers, uppers, strict=True))


def lines(values: Iterable[str]) -> str:
    """Keys (or numbers) as one text, one a line, for ``string_to_array(%(keys)s, E'\\n')``:
    a key holds no control character (config.values.key_problem)."""
    return "\n".join(values)


class Shared(dict[Hashable, Any]):
    """One object for each value read many times over (a million keys expected from one
    date, verified over one range): each key's row holds the shared one, not a copy."""

    def __call__[T: Hashable](self, value: T) -> T:
        return cast(T, self.setdefault(value, value))


def window_params(periods: Sequence[tuple[datetime, datetime]]) -> dict[str, object]:
    """A scan window's periods as its statements take them: starts, ends, first, until."""
    return {
        "starts": [s for s, _ in periods],
        "ends": [e for _, e in periods],
        "first": periods[0][0],
        "until": periods[-1][1],
    }


def key_row(row: tuple[Any, ...], shared: Shared) -> KeyRow:
    """A key_history row as a :class:`KeyRow`, its dates and ranges shared with other keys'."""
    key, since, first, last, gone, paused, lowers, uppers, follows = row
    spans = _spans(lowers, uppers)
    return KeyRow(
        key,
        shared(since),
        shared(first),
        shared(last),
        None if gone is None else shared(gone),
        paused,
        None if spans is None else shared(spans),
        follows,
    )


class Keys(LedgerBase):
    """The ledger's side of keys: their history, and the scan of (key, period)."""

    def key_history(self, job_id: int) -> list[KeyRow]:
        # binary: the bounds' arrays read several times faster than as text; rows turned
        # into KeyRows as they come (a million keys are never held twice)
        shared = Shared()
        with self.conn.cursor(binary=True) as cur:
            query = self._with_history_columns("key_history")
            rows = cur.stream(query, {"job_id": job_id}, size=BATCH)
            return [key_row(row, shared) for row in rows]

    def key_page(self, job_id: int, after: str | None, limit: int | None) -> list[KeyRow]:
        """The job's keys as :meth:`key_history` gives them, in key order: those after
        ``after`` (None: from the first), at most ``limit`` (None: all)."""
        shared = Shared()
        with self.conn.cursor(binary=True) as cur:
            query = self._with_history_columns("key_page")
            params = {"job_id": job_id, "after": after, "limit": limit}
            return [key_row(row, shared) for row in cur.stream(query, params, size=BATCH)]

    def key_counts(self, job_id: int) -> KeyCounts:
        """How many keys the job has recorded, gone and paused, and when they were read."""
        row = self.conn.execute(self._q("key_counts"), {"job_id": job_id}).fetchone()
        return KeyCounts(*row) if row is not None else KeyCounts()

    def keys_to_scan(
        self,
        job_id: int,
        periods: Sequence[tuple[datetime, datetime]],
        signature: str,
    ) -> tuple[list[KeyRow], Settled]:
        """The job's keys a scan of ``periods`` (its window's, under the schedules of
        ``signature``) must look at, with their history, in key order; the others, settled
        there, counted (:class:`Settled`). One statement: both from one snapshot."""
        shared = Shared()
        rows: list[KeyRow] = []
        buckets: list[tuple[int, int]] = []
        params = {"job_id": job_id, "signature": signature, **window_params(periods)}
        with self._roomy(), self.conn.cursor(binary=True) as cur:
            self.conn.execute(self._q("keys_in_workers"))
            query = sqlfiles.query_naming(
                "keys_to_scan",
                self.schema,
                columns=sqlfiles.query("key_history_columns", self.schema),
                window=sqlfiles.query("key_window", self.schema),
                settled=sqlfiles.query("key_settled", self.schema),
            )
            for row in cur.stream(query, params, size=BATCH):
                if row[0] is None:  # settled keys counted: bucket, keys
                    buckets.append((row[9], row[10]))
                else:
                    rows.append(key_row(row[:9], shared))
        return rows, Settled(tuple(sorted(buckets)), split=True)

    def settle_complete_keys(
        self,
        job_id: int,
        signature: str,
        seen: tuple[tuple[str, int] | None, datetime | None],
        periods: Sequence[tuple[datetime, datetime]],
    ) -> bool:
        """What a scan of every key of ``periods`` would record of the keys with a row for each
        period after the horizon they are expected in, written in one statement, and the
        job's horizon moved (settle_complete_keys), unless rows were removed since the scan
        state and horizon ``seen`` were read, or the horizon moved meanwhile; for other
        schedules than those recorded, the old ranges are forgotten first (and the horizon
        with them). False when nothing was written."""
        state, horizon = seen
        params: dict[str, object] = {
            "job_id": job_id,
            "signature": signature,
            **_settle_params(horizon, periods),
        }
        try:
            with self.conn.transaction():
                if not self._scan_state_holds(params, state, horizon):
                    return False
                if state is None or state[0] != signature:
                    params["horizon"] = None  # forgotten with the old schedules' ranges
                self.conn.execute(self._q("keys_work_mem"), {"work_mem": DIFF_WORK_MEM})
                self.conn.execute(self._q("settle_sorted"))
                self.conn.execute(_settling("settle_complete_keys", self.schema), params)
        except psycopg.errors.InsufficientPrivilege:
            return False
        return True

    def settle_prejudged(self, signature: str, judged: Prejudged) -> bool:
        """What :func:`prejudge_first_keys` judged of a first read's keys written, and the
        job's horizon moved, as :meth:`settle_complete_keys` would have (settle_prejudged):
        unless the keys the job holds are not those it judged, or are not as the first read
        recorded them, or the scan state is not as it read it (a row removed since, a horizon
        moved). False when nothing was written: then the scan settles them itself."""
        params: dict[str, object] = {
            "job_id": judged.job_id,
            "signature": signature,
            "keys": judged.lines,
            "los": judged.los,
            "start": judged.start,
            "horizon": judged.horizon,
            "digest": judged.digest,
            "dated": True,
            "seed_a": judged.seeds[0],
            "seed_b": judged.seeds[1],
        }
        try:
            with self.conn.transaction() as tx:
                if not self._scan_state_holds(params, judged.state, None):
                    return False
                self.conn.execute(self._q("keys_by_index"))  # the few written, by the key index
                digest = sqlfiles.query("key_digest", self.schema)
                query = sqlfiles.query_naming("settle_prejudged", self.schema, digest=digest)
                row = self.conn.execute(query, params).fetchone()
                if row is None or not row[0]:  # not the keys it judged: nothing written
                    raise psycopg.Rollback(tx)
        except psycopg.errors.InsufficientPrivilege:
            return False
        return bool(row and row[0])

    def has_keys(self, job_id: int) -> bool:
        """Whether the ledger recorded any key of the job (a read of its keys before)."""
        row = self.conn.execute(self._q("has_keys"), {"job_id": job_id}).fetchone()
        return bool(row and row[0])

    def key_horizon(self, job_id: int) -> datetime | None:
        """Where the unbounded ranges of what scans verified of the job's keys end."""
        row = self.conn.execute(self._q("key_horizon"), {"job_id": job_id}).fetchone()
        return None if row is None else row[0]

    def record_keys(
        self,
        job_id: int,
        seen: Iterable[tuple[str, datetime | None]],
        *,
        start: datetime,
    ) -> None:
        """Record one read of the job's keys, under the job's row lock: only the key rows it
        changes are written, locked in key order first (as :meth:`record_verified` locks those
        it updates); the job's row says when its keys were read."""
        if not isinstance(seen, KeysRead):
            pairs = list(seen)
            seen = KeysRead([k for k, _ in pairs], [f for _, f in pairs])
        froms = seen.froms
        params = {
            "job_id": job_id,
            "keys": lines(seen.keys),
            "froms": froms if froms and any(f is not None for f in froms) else None,
            "start": start,
            "first_read": None,
            "at": None,
            "before": None,
        }
        with self.conn.transaction():
            if self.conn.execute(self._q("lock_job_row"), {"job_id": job_id}).fetchone() is None:
                raise KeysRaced(job_id)  # the job's row went meanwhile: no key row written
            self.conn.execute(self._q("lock_changed_keys"), params)
            written = self.conn.execute(self._recording("gone_unseen"), params).fetchone()
        self._analyze_after(written)

    def record_key_changes(self, diff: KeysDiff, *, job_id: int, start: datetime) -> None:
        """Record one read of the keys of ``job_id`` from what it changed (:class:`KeysDiff`),
        as :meth:`record_keys` records every key read, a block of keys at a time in one
        transaction: each block's key rows locked in key order first (the blocks come in key
        order, so every row is locked in that order), each written only if it still changes
        something. The read's time and whether it is the job's first are its first block's."""
        # a first read (no key held, as checked under the lock below) looks none up
        first: dict[str, object] = {
            "first_read": diff.first_read or None,
            "at": None,
            "before": None,
        }
        added = 0
        nothing = [(KeysRead([]), list[str]())]  # a read that changed nothing: its time
        with self.conn.transaction():
            self.conn.execute(self._q("keys_by_index"))
            locked = self.conn.execute(self._q("lock_job_row"), {"job_id": job_id}).fetchone()
            if locked is None or (diff.first_read and self.has_keys(job_id)):
                # rolled back: the other read's record stands, or the job's row went meanwhile
                # (renamed over: catchup rename deleted it and its keys), no key row written
                raise KeysRaced(job_id)
            for block in diff.blocks() if diff.changed or diff.gone else nothing:
                row = self._record_block(job_id, block, start, first)
                added += row[0]
                first = {"first_read": row[2], "at": row[3], "before": row[4]}
        self._analyze_after((added,))

    def _record_block(
        self,
        job_id: int,
        block: tuple[KeysRead, list[str]],
        start: datetime,
        first: dict[str, object],
    ) -> tuple[Any, ...]:
        """One block of a read's changes recorded (record_keys): its key rows locked first."""
        changed, gone = block
        if (changed.keys or gone) and first["first_read"] is not True:  # a first: none held
            listed = lines(chain(changed.keys, gone))
            self.conn.execute(self._q("lock_listed_keys"), {"job_id": job_id, "listed": listed})
        froms = changed.froms
        params = {
            "job_id": job_id,
            "keys": lines(changed.keys),
            "froms": froms if froms and any(f is not None for f in froms) else None,
            "gone": lines(gone),
            "start": start,
            **first,
        }
        recording = (  # a first read's keys, none there under the lock: inserted, not upserted
            self._q("record_first_keys")
            if first["first_read"] is True and not gone
            else self._recording("gone_listed")
        )
        row = self.conn.execute(recording, params).fetchone()
        assert row is not None
        return tuple(row)

    def _analyze_after(self, written: tuple[Any, ...] | None) -> None:
        """After a read that added many keys (a first read of a million): the key history's
        statistics, which the planner would otherwise take from an empty table until
        autovacuum came (keys_to_scan's joins, sized on them, are then 3x slower)."""
        if written is not None and written[0] >= ANALYZE_AFTER:
            with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
                self.conn.execute(self._q("analyze_keys"))

    @contextlib.contextmanager
    def _roomy(self) -> Iterator[None]:
        """Around one statement over a million keys: a transaction whose sorts and hashes may
        take DIFF_WORK_MEM (PostgreSQL's default, 4MB, has them spill to disk)."""
        with self.conn.transaction():
            self.conn.execute(self._q("keys_work_mem"), {"work_mem": DIFF_WORK_MEM})
            yield

    def _with_history_columns(self, name: str) -> sql.Composed:
        """A query reading keys as key_history gives them (key_history_columns)."""
        columns = sqlfiles.query("key_history_columns", self.schema)
        return sqlfiles.query_naming(name, self.schema, columns=columns)

    def _recording(self, gone: str) -> sql.Composed:
        """record_keys, with which keys are gone (gone_unseen or gone_listed)."""
        return sqlfiles.query_naming(
            "record_keys", self.schema, gone=sqlfiles.query(gone, self.schema)
        )

    def record_verified(
        self,
        job_id: int,
        signature: str,
        seen: tuple[tuple[str, int] | None, datetime | None],
        verified: Iterable[tuple[KeyRow, tuple[Sequence[tuple[datetime, datetime]], bool]]],
        horizon: datetime | None,
    ) -> bool:
        """Record what scans verified of each key whose ranges changed (all its ranges of
        period starts with a row each; the last one unbounded when it follows the job's
        horizon) and where the horizon is now, unless rows were removed since this scan's
        snapshot (the job's generation moved) or another scan moved the horizon meanwhile
        (``seen``: the scan state and horizon the scan read); for other schedules than those
        recorded, the old ranges are forgotten first. False when nothing was recorded."""
        state, before = seen
        params: dict[str, object] = {"job_id": job_id, "signature": signature}
        try:
            with self.conn.transaction():
                if not self._scan_state_holds(params, state, before):
                    return False
                self._write_verified(job_id, verified)
                if horizon != before:
                    self.conn.execute(self._q("move_key_horizon"), {**params, "horizon": horizon})
        except psycopg.errors.InsufficientPrivilege:
            return False
        return True

    def _scan_state_holds(
        self, params: dict[str, object], state: tuple[str, int] | None, horizon: datetime | None
    ) -> bool:
        """Under the job's scan_state row lock: whether what a scan read of it still holds
        (its generation, its horizon); the old ranges forgotten when its signature changed."""
        if state is None:
            return self.conn.execute(self._q("open_scan_state"), params).fetchone() is not None
        current = self.conn.execute(self._q("lock_scan_state"), params).fetchone()
        if current is None or current[1] != state[1]:
            return False  # rows were removed since the scan's snapshot
        if current[0] == "" != params["signature"]:  # a state a removal made: no scan's ranges
            self.conn.execute(self._q("sign_scan_state"), params)
            return horizon is None
        if current[0] != params["signature"]:  # every key row: locked in key order first
            self.conn.execute(self._q("lock_key_rows"), {**params, "keys": None})
            self.conn.execute(self._q("forget_verified"), params)
            return horizon is None
        row = self.conn.execute(self._q("lock_key_horizon"), params).fetchone()
        return row is not None and row[0] == horizon

    def _write_verified(
        self,
        job_id: int,
        verified: Iterable[tuple[KeyRow, tuple[Sequence[tuple[datetime, datetime]], bool]]],
    ) -> None:
        """Each key's ranges replaced, if the key is still as the scan read it, a chunk of
        keys at a time (they come in key order), each chunk's rows locked in key order first
        (as record_keys locks those it changes); an unbounded last range (upper null) follows
        the horizon."""
        for chunk in batched(verified, BATCH, strict=False):
            spans: list[tuple[KeyRow, datetime, datetime | None]] = []
            for row, (ranges, follows) in chunk:
                for n, (lo, hi) in enumerate(ranges):
                    spans.append((row, lo, None if follows and n == len(ranges) - 1 else hi))
                if not ranges:  # none: an empty range (a first read's presumed one cut)
                    spans.append((row, row.expected_from, row.expected_from))
            if not spans:
                continue
            keys = sorted({row.key for row, _, _ in spans})
            self.conn.execute(self._q("lock_key_rows"), {"job_id": job_id, "keys": keys})
            self.conn.execute(
                self._q("record_verified"),
                {
                    "job_id": job_id,
                    "keys": [row.key for row, _, _ in spans],
                    "los": [lo for _, lo, _ in spans],
                    "his": [hi for _, _, hi in spans],
                    "froms": [row.expected_from for row, _, _ in spans],
                    "gones": [row.gone_at for row, _, _ in spans],
                },
            )

    def pause_key(self, job_id: int, key: str) -> datetime | None:
        row = self.conn.execute(self._q("pause_key"), {"job_id": job_id, "key": key}).fetchone()
        return None if row is None else row[0]

    def key_paused(self, job_id: int, key: str) -> datetime | None:
        """Since when one key of a job is paused; None when it is not."""
        row = self.conn.execute(self._q("key_paused"), {"job_id": job_id, "key": key}).fetchone()
        return None if row is None else row[0]

    def resume_key(self, job_id: int, key: str) -> bool:
        row = self.conn.execute(self._q("resume_key"), {"job_id": job_id, "key": key}).fetchone()
        return row is not None

    def scan_keys(
        self,
        job_id: int,
        keys: Sequence[KeyRow],
        periods: Sequence[tuple[datetime, datetime]],
        stretches: Sequence[tuple[str, int, int]],
        *,
        now: datetime,
        max_attempts: int,
        settled: Settled | None = None,
    ) -> list[KeyRange]:
        """Each key's ranges of periods that have not succeeded, oldest first; holes (no row)
        are looked for only in ``stretches`` (a key, and ``[i0, i1)`` of 0-based indexes of
        ``periods``). ``settled``: the job's other keys, only counted (none has a hole): when
        there are (``split``), the rows that have not succeeded are read of every key the
        ledger holds, not only of ``keys``."""
        others = settled.count if settled is not None else 0
        every_row = settled is not None and settled.split
        if not periods or not (keys or every_row):
            return []
        times: dict[datetime | None, int] = {None: 0}  # NULL: index 0, out of the array
        params = {
            "job_id": job_id,
            "keys": lines(k.key for k in keys),
            "froms": lines(str(times.setdefault(k.expected_from, len(times))) for k in keys),
            "gones": lines(str(times.setdefault(k.gone_at, len(times))) for k in keys),
            "ukeys": lines(key for key, _, _ in stretches),
            "i0s": lines(str(i0 + 1) for _, i0, _ in stretches),  # ORDINALITY counts from 1
            "i1s": lines(str(i1 + 1) for _, _, i1 in stretches),
            "now": now,
            "max_attempts": max_attempts,
            **window_params(periods),
        }
        params["times"] = list(times)[1:]  # the times the indexes name, from 1
        # an index read per stretch costs about as much as reading 30 of the job's rows in a
        # merge, and then its own rows
        unverified = sum(i1 - i0 for _, i0, i1 in stretches)
        probes = len(stretches) * HOLE_PROBE_COST + unverified
        few = probes <= (len(keys) + others) * len(periods)
        holes = sqlfiles.query("scan_holes_probed" if few else "scan_holes_merged", self.schema)
        rows_of = sqlfiles.query(
            "scan_rows_of_all" if every_row else "scan_rows_of_listed", self.schema
        )
        query = sqlfiles.query_naming("scan_keys", self.schema, holes=holes, rows_of=rows_of)
        found: list[KeyRange] = []
        with self._roomy(), self.conn.cursor(binary=True) as cur:
            # plain rows made KeyRanges as they are (a third of class_row's cost per row), read
            # in binary (the times a fifth faster than as text), BATCH rows at a time (a row
            # at a time, a scan of a million keys' 87,762 ranges spent 0.15 s more)
            cur.execute(query, params)
            while rows := cur.fetchmany(BATCH):
                found.extend(map(KeyRange._make, rows))
        return found
