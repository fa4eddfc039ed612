"""A batch's Python calls run back to back on the worker's call thread, watched by the worker.

One call at a time is :func:`catchup.execution.runner.run_callable`: a thread runs it while the
caller
polls for a reason to stop it. For thousands of short calls the switches between those two
threads cost ten times the calls (benchmarks/keys.py), so a batch hands its whole sequence to
the call thread: it starts each call as soon as the one before returns (after ``begin`` says it
may: the lease held, nothing asked to stop), and the worker wakes every POLL_SECONDS to watch
the one running exactly as run_callable does (asked to stop, lease lost, out of time: its
``ctx.cancelled`` is set and, if it does not return within the kill grace, the outcome is
recorded without it and the sequence ends there)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..claims.lease import POLL_SECONDS, LeaseKeeper
from ..config.job import Job
from ..config.values import storable
from ..errors import describe
from ..render.text import log_prefix
from ..vocabulary import Ended
from .callthread import CallThread
from .output import (
    TAIL_BYTES,
    LoggedLines,
    Tail,
    forget_thread,
    register_thread,
    thread_streams,
)
from .preflight import load_call
from .runner import (
    Execution,
    JobContext,
    log_ended,
    reopen_standard_streams,
    stop_reason,
    traceback_text,
)


@dataclass
class _Running:
    n: int
    ctx: JobContext
    keeper: LeaseKeeper
    started: float


Ended_ = Execution | str  # how a step ended: its execution, or why it never started

# what ``begin(n)`` gives for a period that may start: its context and its lease's keeper;
# or, for one that must not, why (recorded as a release)
Begun = tuple[JobContext, LeaseKeeper] | str


class CallSequence:
    """The calls of ``steps`` on ``calls``' thread, one after another; :meth:`results` yields
    each one's (n, Execution or the reason it did not start), in order."""

    def __init__(
        self,
        job: Job,
        calls: CallThread,
        interrupted: threading.Event,
        begin: Callable[[int], Begun],
        steps: list[int],
        log: bool = False,
    ) -> None:
        self.job = job
        self.log = log  # each call's output logged to catchup's stderr (log_output)
        self.calls = calls
        self.interrupted = interrupted
        self.begin = begin
        self.steps = steps
        self._cond = threading.Condition()
        self._ended: list[tuple[int, Execution | str]] = []
        self._running: _Running | None = None
        self._over = False  # the call thread is done with the sequence
        self._held = False  # a call failed: the next waits until the worker has told it
        self._given_up = False  # the worker recorded a call without it: start nothing more
        self._seen_held = False  # the worker has taken the failure that holds the next call
        self._error: BaseException | None = None  # what broke the call thread's own work

    def _serve(self) -> None:
        """On the call thread: each step, begun and called, one after another; whatever
        breaks it (a renewal, a callback) ends the sequence and is raised to the worker."""
        try:
            self._steps()
        except BaseException as exc:
            self._error = exc
        finally:
            with self._cond:
                self._over = True
                self._cond.notify_all()

    def _steps(self) -> None:
        error = ""
        try:
            target = load_call(self.job.call, self.job.workdir)  # type: ignore[arg-type]
        except Exception as exc:
            error = f"cannot load {self.job.call}: {describe(exc)}"
            target = None
        # the thread-aware streams in place once for the whole sequence, not call by call
        with thread_streams():
            self._each(target, error)

    def _each(self, target: Callable[..., object] | None, error: str) -> None:
        for n in self.steps:
            if self._held or self._given_up:  # set under the lock; looked at without first
                with self._cond:
                    while self._held and not self._given_up:
                        self._cond.wait()
                    if self._given_up:
                        return
            begun = self.begin(n)
            if isinstance(begun, str):
                self._end(n, begun)
                continue
            ctx, keeper = begun
            started = time.monotonic()
            if target is None:
                self._end(n, Execution(Ended.exited, None, error, "", 0.0))
                continue
            with self._cond:
                self._running = _Running(n, ctx, keeper, started)
            lines = None
            if self.log:
                lines = LoggedLines(log_prefix(ctx.job, ctx.key, ctx.period, ctx.attempt))
            failed, tail = _call(target, ctx, lines)
            keeper.stop()
            with self._cond:
                if self._running is None or self._running.n != n:
                    return  # the worker gave up on it and recorded it: the sequence is over
                self._running = None
            self._end(n, _execution(failed, tail, started))

    def _end(self, n: int, ended: Execution | str) -> None:
        with self._cond:
            self._ended.append((n, ended))
            if isinstance(ended, Execution) and (ended.error is not None):
                self._held = True  # told at once: stop_on_failure stops before the next
                self._cond.notify_all()

    def halt(self) -> list[tuple[int, Execution | str]]:
        """The worker cannot go on (its caller failed): start nothing more, wait for the call
        running (up to the kill grace); what ended meanwhile, not taken yet."""
        deadline = time.monotonic() + self.job.kill_grace.total_seconds()
        with self._cond:
            self._given_up = True
            self._cond.notify_all()
            while self._running is not None and not self._over:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(POLL_SECONDS, left))
            ended, self._ended = self._ended, []
        return ended

    def go_on(self) -> None:
        """The worker has told what it took: after a failure, the next call may start."""
        with self._cond:
            if self._seen_held:
                self._held = self._seen_held = False
                self._cond.notify_all()

    def results(self) -> Iterator[list[tuple[int, Execution | str]]]:
        """What ended since the last look, every POLL_SECONDS (at once after a failure),
        until the sequence is over; the one running is watched meanwhile."""
        self.calls.submit(self._serve)
        timeout_at = self.job.timeout.total_seconds() if self.job.timeout else None
        while True:
            with self._cond:
                if not (self._ended or self._over or self._held):
                    self._cond.wait(POLL_SECONDS)
                ended, self._ended = self._ended, []
                self._seen_held = self._held  # a failure holds the next call: it is in ended
                over, running = self._over or self._given_up, self._running
                if self._over and self._error is not None:
                    raise self._error
            if running is not None and not over:
                reason = stop_reason(self.interrupted, running.keeper, running.started, timeout_at)
                if reason is not None and (stopped := self._stop(running, *reason)) is not None:
                    ended.extend(stopped)
                    over = True
            yield ended
            if over:
                return

    def _stop(
        self, running: _Running, ended: Ended, error: str
    ) -> list[tuple[int, Execution | str]] | None:
        """Ask the running call to stop; the outcome, recorded without waiting past the grace.
        None when it had ended already (the next may be running: it is watched in turn)."""
        deadline = time.monotonic() + self.job.kill_grace.total_seconds()
        with self._cond:
            if self._running is not running:
                return None
            running.ctx.cancelled.set()
            self._given_up = True  # whatever happens now, nothing more starts
            self._cond.notify_all()
            while self._running is running and time.monotonic() < deadline:
                self._cond.wait(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
            late = self._running is running
            self._running = None
            done, self._ended = self._ended, []
        if late:
            self.calls.abandon()  # it still runs: the next call gets a thread of its own
        elif done and done[-1][0] == running.n:
            done.pop()  # it returned in the grace: recorded as stopped all the same
        seconds = time.monotonic() - running.started
        return [*done, (running.n, Execution(ended, None, error, "", seconds))]


def _call(
    target: Callable[..., object], ctx: JobContext, lines: LoggedLines | None
) -> tuple[str | None, str]:
    """``target(ctx)`` on this thread, what it prints captured (and logged, with ``lines``):
    (its error, its output)."""
    printed = Tail()
    error: str | None = "the call ended without returning"
    tail = ""
    register_thread(printed, False, lines)  # the sequence holds the streams (thread_streams)
    try:
        target(ctx)
        error = None
    except BaseException as exc:  # report everything the job raised
        error = describe(exc)
        tail = traceback_text(exc)
    finally:
        forget_thread()
    reopen_standard_streams()
    log_ended(lines, tail)
    return error, printed.text() + tail


def _execution(error: str | None, tail: str, started: float) -> Execution:
    return Execution(
        Ended.exited,
        None if error else 0,
        None if error is None else storable(error),
        storable(tail[-TAIL_BYTES:]),
        time.monotonic() - started,
    )
