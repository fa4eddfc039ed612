"""The thread a pool's worker keeps for its Python calls."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable


class CallThread:
    """A thread a pool's worker keeps for its Python calls, so a backlog of short calls does
    not start a thread for each (a batch of a keyed job's periods is thousands of them). A call
    that overruns (timed out, asked to stop: a callable cannot be killed) keeps its thread, and
    the next call gets a new one."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: queue.SimpleQueue[Callable[[], None] | None] | None = None

    def submit(self, work: Callable[[], None]) -> Callable[[float], bool]:
        """Start ``work``; the function returned waits up to its seconds, True once done."""
        if self._queue is None:
            self._queue = queue.SimpleQueue()
            threading.Thread(
                target=self._serve, args=(self._queue,), name=self.name, daemon=True
            ).start()
        done = threading.Event()

        def run() -> None:
            try:
                work()
            finally:
                done.set()

        self._queue.put(run)
        return lambda seconds: done.wait(seconds) if seconds > 0 else done.is_set()

    def abandon(self) -> None:
        """The running call overran: its thread ends after it, the next call starts another."""
        if self._queue is not None:
            self._queue.put(None)
            self._queue = None

    close = abandon

    @staticmethod
    def _serve(work: queue.SimpleQueue[Callable[[], None] | None]) -> None:
        while (run := work.get()) is not None:
            run()
