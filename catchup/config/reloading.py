"""A long-running process's config, read again when it changes (``catchup scheduler``,
``catchup serve``): on SIGHUP, and when the file's content changes (an edit, a Kubernetes
ConfigMap swapped under it). A version that does not load, or names another ledger, is
refused: the last good config stays in use, and the problem is said once in the log and shown
until a good version comes (the page, ``/readyz``)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .job import Config
from .loading import load_config

if TYPE_CHECKING:
    from ..serve.watcher import Watcher

SETTLE = 0.1  # seconds a changed file must stay the same before it is read
CONFIG_POLL = 2.0  # seconds between looks at the config file (and at a SIGHUP)


@dataclass(frozen=True)
class ConfigState:
    """The config in use (the last good one), when it was read (the host's clock: a label
    for people), and why the file's newest version is not in use, if it is not."""

    config: Config
    loaded_at: datetime
    problem: str | None = None

    @property
    def notice(self) -> str | None:
        """The problem as the page and ``/readyz`` say it."""
        if self.problem is None:
            return None
        return (
            f"{self.problem}; still running on the config read at "
            f"{self.loaded_at:%Y-%m-%dT%H:%M:%SZ} (the last good one)"
        )


def fingerprint(path: Path) -> bytes | None:
    """What tells one version of the file from another (None: it cannot be read now)."""
    try:
        return hashlib.sha256(path.read_bytes()).digest()
    except OSError:
        return None


def ledger_of(config: Config) -> tuple[object, ...]:
    """What names the ledger a config uses: a reload never moves a running process to
    another one (its claims, leases and lead are there)."""
    folder = None if config.path is None else config.path.resolve().parent
    return (config.dsn, config.schema, config.schema_given, config.embedded, folder)


def changes(old: Config, new: Config) -> str:
    """``2 jobs (added export; removed sync; changed bill)``: what a reload changed."""
    added = sorted(set(new.jobs) - set(old.jobs))
    removed = sorted(set(old.jobs) - set(new.jobs))
    changed = sorted(n for n in set(old.jobs) & set(new.jobs) if old.jobs[n] != new.jobs[n])
    parts = [
        f"{what} {', '.join(names)}"
        for what, names in (("added", added), ("removed", removed), ("changed", changed))
        if names
    ]
    count = f"{len(new.jobs)} {'job' if len(new.jobs) == 1 else 'jobs'}"
    return f"{count} ({'; '.join(parts)})" if parts else f"{count} (no job changed)"


class ConfigWatch:
    """Watches ``config``'s file. ``pending()`` (cheap, any thread) says whether it must be
    read again: a SIGHUP came (``hup``) or its content changed since last read; ``load()``
    reads it and returns the new state, the config in use replaced only by one that loads
    and names the same ledger."""

    def __init__(self, config: Config, *, schema: str | None = None) -> None:
        if config.path is None:
            raise ValueError("a config without a file is never reloaded")
        self.path = config.path
        self._schema = schema
        self.hup = threading.Event()
        self._seen = fingerprint(self.path)
        self.state = ConfigState(config, datetime.now(UTC))
        self._lock = threading.Lock()

    def pending(self) -> bool:
        return self.hup.is_set() or fingerprint(self.path) != self._seen

    def load(self) -> tuple[ConfigState, str]:
        """Read the file now: the state after it, and what to log (the change, or why the
        version read is refused)."""
        with self._lock:
            forced = self.hup.is_set()
            self.hup.clear()
            seen = fingerprint(self.path)
            if seen == self._seen and not forced:
                return self.state, ""
            # an editor (or a test) that truncates the file and then writes it: a read between
            # the two would load an empty config; a file still changing is read at the next look
            time.sleep(SETTLE)
            if fingerprint(self.path) != seen:
                if forced:
                    self.hup.set()
                return self.state, ""
            self._seen = seen
            used = self.state.config
            try:
                new = load_config(self.path, schema=self._schema)
            except ConfigError as exc:
                lines = str(exc).splitlines() or ["it does not load"]
                more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
                return self._refused(f"{lines[0]}{more}")
            if ledger_of(new) != ledger_of(used):
                return self._refused(
                    f"{self.path}: [database] names another ledger: restart to use it"
                )
            self.state = ConfigState(new, datetime.now(UTC))
            return self.state, f"config reloaded: {changes(used, new)}"

    def _refused(self, problem: str) -> tuple[ConfigState, str]:
        self.state = ConfigState(self.state.config, self.state.loaded_at, problem)
        return self.state, f"config not reloaded: {self.state.notice}"


def reread(
    watch: ConfigWatch,
    watcher: Watcher,
    reload: threading.Event,
    stop: threading.Event,
    say: Callable[[str], None],
) -> None:
    """``catchup serve``'s: a thread that reads the config again on ``reload`` (a SIGHUP) or
    a change of its file, every :data:`CONFIG_POLL` seconds: said, and scanned at once."""

    def run() -> None:
        while not stop.wait(CONFIG_POLL):
            if reload.is_set():
                reload.clear()
                watch.hup.set()
            if not watch.pending():
                continue
            state, said = watch.load()
            if said:
                say(said)
            watcher.title = state.config.title
            watcher.scan_soon()  # its jobs, and the notice, on the page at once

    threading.Thread(target=run, name="catchup-serve-config", daemon=True).start()
