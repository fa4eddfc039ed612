"""One claimed period: run it as a process group or a callable, keep the lease, stop on loss."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..claims.lease import POLL_SECONDS, LeaseKeeper
from ..config.job import Job
from ..config.values import storable
from ..errors import describe
from ..schedule import Period, iso_utc, span
from ..vocabulary import Ended
from .callthread import CallThread
from .output import TAIL_BYTES, LoggedLines, Tail, capturing, forget_thread, pump
from .preflight import load_call, not_runnable, program_path


class Cancelled(threading.Event):
    """``ctx.cancelled``: the event a call is told to stop by (a cancel, a timeout, a lost
    lease), true exactly when it is set, so ``if ctx.cancelled:`` means what it says;
    ``is_set()`` and ``wait()`` work as on any :class:`threading.Event`."""

    def __bool__(self) -> bool:
        return self.is_set()


@dataclass
class JobContext:
    """What a Python ``call`` job receives: the period, the attempt, and its checkpoint."""

    job: str
    period: str
    period_start: datetime
    period_end: datetime
    attempt: int
    run_id: int
    checkpoint: str | None
    key: str = ""  # the period's key, for a job with keys ('' otherwise)
    cancelled: Cancelled = field(default_factory=Cancelled)
    _saver: Callable[[str], bool] | None = None

    def save_checkpoint(self, value: str) -> None:
        """Save progress for a later attempt of this period (fenced by this attempt)."""
        if self._saver is None or not self._saver(value):
            raise RuntimeError("checkpoint not saved: this attempt no longer owns the period")
        self.checkpoint = value


@dataclass(frozen=True)
class Execution:
    """How the job ended, before anything is written to the ledger."""

    ended: Ended
    exit_code: int | None
    error: str | None
    output_tail: str
    seconds: float


def placeholders(job: Job, period: Period, attempt: int) -> dict[str, Any]:
    return {
        "job": job.name,
        "key": job.key,
        "period": job.period_value(period.start),
        "period_start": period.start,
        "period_end": period.end,
        "attempt": attempt,
    }


def child_env(
    job: Job,
    period: Period,
    attempt: int,
    run_id: int,
    checkpoint: str | None,
    extra: dict[str, str],
) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    env.update(
        {
            "CATCHUP_JOB": job.name,
            "CATCHUP_PERIOD": job.period_value(period.start),
            "CATCHUP_PERIOD_START": iso_utc(period.start),
            "CATCHUP_PERIOD_END": iso_utc(period.end),
            "CATCHUP_ATTEMPT": str(attempt),
            "CATCHUP_RUN_ID": str(run_id),
        }
    )
    env.pop("CATCHUP_KEY", None)
    if job.keyed:
        env["CATCHUP_KEY"] = job.key
    env.pop("CATCHUP_CHECKPOINT", None)
    if checkpoint is not None:
        env["CATCHUP_CHECKPOINT"] = checkpoint
    return env


# The job runs as the leader of its own process group, next to a watcher in the same group: if
# this runner dies without cleaning up (SIGKILL, OOM), the watcher takes the whole group down,
# grandchildren included, within a second or so plus the grace. The job's argv is passed as
# arguments, never as shell text.
GUARD = """\
runner=$1; grace=$2; shift 2
( while kill -0 "$runner" 2>/dev/null; do sleep 1; done
  trap '' TERM; kill -TERM 0 2>/dev/null; sleep "$grace"; kill -KILL 0 2>/dev/null
) </dev/null >/dev/null 2>&1 &
exec "$@"
"""


def _signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def _group_alive(pgid: int) -> bool:
    return _signal_group(pgid, 0)


def stop_group(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM to the job's process group, SIGKILL to whatever is left after ``grace``."""
    pgid = proc.pid
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc.poll() is not None and not _group_alive(pgid):
            return
        time.sleep(POLL_SECONDS)
    _signal_group(pgid, signal.SIGKILL)
    proc.wait()


def run_command(
    job: Job,
    argv: list[str],
    env: dict[str, str],
    keeper: LeaseKeeper,
    interrupted: threading.Event,
    stream: bool = True,
    lines: LoggedLines | None = None,
) -> Execution:
    """Run ``argv`` in its own process group until it exits, times out, loses its lease or is
    interrupted; the whole group is stopped in every case but the first. Its output is kept
    (the tail), streamed on as it is (``stream``) or logged a prefixed line at a time
    (``lines``)."""
    started = time.monotonic()
    tail = Tail()
    shown = argv[0]
    argv = [program_path(job, argv[0]), *argv[1:]]
    missing = not_runnable(argv[0], env, shown)
    if missing:
        return Execution(Ended.exited, None, missing, "", time.monotonic() - started)
    try:
        proc = _started(job, argv, env, stream)
    except OSError as exc:
        return Execution(
            Ended.exited,
            None,
            f"cannot start {shown!r}: {exc.strerror}",
            "",
            time.monotonic() - started,
        )
    pumps = _pumps(proc, stream, tail, lines)
    exited = _ExitWaiter(proc)

    def gone(seconds: float) -> bool:
        if seconds and proc.poll() is None:
            exited.wait(seconds)
        return proc.poll() is not None

    ended, error = supervise(
        job,
        gone,
        lambda: stop_group(proc, job.kill_grace.total_seconds()),
        interrupted,
        keeper,
        started,
    )
    exited.close()
    # Whatever the job left behind in its group (background children holding our pipes) goes.
    _signal_group(proc.pid, signal.SIGKILL)
    for pumping in pumps:
        pumping.join(timeout=5)
    if lines is not None:
        lines.close()
    code = proc.returncode
    if ended == Ended.exited and code != 0:
        error = f"exited with {code}" if code > 0 else f"killed by {signal.Signals(-code).name}"
    return Execution(ended, code, error, tail.text(), time.monotonic() - started)


def _started(
    job: Job, argv: list[str], env: dict[str, str], stream: bool
) -> subprocess.Popen[bytes]:
    """``argv`` started under the guard that stops its group should catchup die, in a process
    group of its own."""
    grace = max(1, round(job.kill_grace.total_seconds()))
    return subprocess.Popen(
        ["/bin/sh", "-c", GUARD, "catchup-guard", str(os.getpid()), str(grace), *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        # not streamed (tick, replay, the scheduler): one pipe for both, so the tail has them
        # in the order the job wrote them; streamed, each goes on to its own
        stderr=subprocess.PIPE if stream else subprocess.STDOUT,
        env=env,
        cwd=job.workdir,
        start_new_session=True,
    )


def _pumps(
    proc: subprocess.Popen[bytes], stream: bool, tail: Tail, lines: LoggedLines | None
) -> list[threading.Thread]:
    """The threads that copy a command's stdout and stderr (one pipe, when not streamed) into
    its tail (and on, streamed; to its logged lines, logged)."""
    assert proc.stdout is not None
    pipes = [(proc.stdout, sys.stdout)]
    if proc.stderr is not None:
        pipes.append((proc.stderr, sys.stderr))
    pumps = [
        threading.Thread(
            target=pump, args=(pipe, out.buffer if stream else None, tail, lines), daemon=True
        )
        for pipe, out in pipes
    ]
    for pumping in pumps:
        pumping.start()
    return pumps


class _ExitWaiter:
    """Waits until the process exits (a pidfd on Linux) or ``seconds`` pass, whichever is
    first; Popen.wait's own polling can notice an exit tens of milliseconds late."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.fd: int | None = None
        try:
            self.fd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            return
        self.poller = select.poll()
        self.poller.register(self.fd, select.POLLIN)

    def wait(self, seconds: float) -> None:
        if self.fd is None:
            try:
                self.proc.wait(seconds)
            except subprocess.TimeoutExpired:
                pass
        else:
            self.poller.poll(seconds * 1000)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


# the threads of the calls that run now: what each prints goes to its tail (and on, if streamed)
def run_callable(
    job: Job,
    ctx: JobContext,
    keeper: LeaseKeeper,
    interrupted: threading.Event,
    stream: bool = True,
    calls: CallThread | None = None,
    lines: LoggedLines | None = None,
) -> Execution:
    """Run a Python ``call`` in a thread (of ``calls``, when given); on timeout, loss or
    interrupt, ``ctx.cancelled`` is set and the outcome recorded without waiting (a callable
    cannot be killed, only asked)."""
    started = time.monotonic()
    target = _loaded(job, started)
    if isinstance(target, Execution):
        return target
    # a failure until the callable returns: a handler that itself fails (an exception whose
    # text cannot be rendered) must never leave "no error", which is a success
    result: dict[str, str | None] = {"error": "the call ended without returning"}
    printed = Tail()
    capture = contextlib.ExitStack()
    register = capture.enter_context(capturing(printed, stream, lines))

    def work() -> None:
        register()
        try:
            target(ctx)
            result["error"] = None
        except BaseException as exc:  # report everything the job raised
            result["error"] = describe(exc)
            result["tail"] = traceback_text(exc)
        finally:
            forget_thread()

    if calls is None:
        thread = threading.Thread(target=work, name=f"catchup-call-{job.name}", daemon=True)
        thread.start()
        running: Callable[[float], bool] = _joiner(thread)
    else:
        running = calls.submit(work)

    def ask_to_stop() -> None:
        ctx.cancelled.set()
        if not running(job.kill_grace.total_seconds()) and calls is not None:
            calls.abandon()  # still running: the next call gets a thread of its own

    ended, error = supervise(job, running, ask_to_stop, interrupted, keeper, started)
    capture.close()  # a call still running (timed out, asked to stop) prints through from now
    reopen_standard_streams()
    if ended == Ended.exited:
        error = result.get("error")
    # text a job raised is data: whatever it holds, it is stored and printed (cleaned like
    # command output)
    # what it printed, then (for a failure) the traceback, like a command's stdout and stderr
    tail = printed.text() + (result.get("tail") or "")
    log_ended(lines, result.get("tail"))
    return Execution(
        ended,
        None if error else 0,
        None if error is None else storable(error),
        storable(tail[-TAIL_BYTES:]),
        time.monotonic() - started,
    )


def _loaded(job: Job, started: float) -> Callable[..., object] | Execution:
    """The job's callable, or (it cannot be loaded) the failure recorded for it."""
    assert job.call is not None
    try:
        return load_call(job.call, job.workdir)
    except Exception as exc:
        error = f"cannot load {job.call}: {describe(exc)}"
        return Execution(Ended.exited, None, error, "", time.monotonic() - started)


def log_ended(lines: LoggedLines | None, traceback: str | None) -> None:
    """A call's logged lines ended: its traceback logged too (a command's is on its stderr)."""
    if lines is not None:
        if traceback:
            lines.add(traceback.encode("utf-8", "replace"))
        lines.close()


def _joiner(thread: threading.Thread) -> Callable[[float], bool]:
    def joined(seconds: float) -> bool:
        thread.join(seconds)
        return not thread.is_alive()

    return joined


def reopen_standard_streams() -> None:
    """A callable that closed fd 1 or 2 (it runs in this process) gets /dev/null put there at
    once, before anything this process opens next (a connection) could take that number."""
    for fd in (1, 2):
        try:
            os.fstat(fd)
        except OSError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)


def traceback_text(exc: BaseException) -> str:
    """What a call raised, from its own frames: the first is catchup's, which called it."""
    try:
        tb = exc.__traceback__
        shown = traceback.format_exception(type(exc), exc, tb.tb_next if tb else None)
        return "".join(shown)[-TAIL_BYTES:]
    except BaseException:
        return f"{describe(exc)} (its traceback could not be rendered)\n"


def supervise(
    job: Job,
    done: Callable[[float], bool],
    stop: Callable[[], None],
    interrupted: threading.Event,
    keeper: LeaseKeeper,
    started: float,
) -> tuple[Ended, str | None]:
    """The one supervision loop of a command and a call: wait until ``done`` (asked with 0,
    whether it ended; with seconds, wait at most that long) or until a reason to stop it comes
    (:func:`stop_reason`), then ``stop`` it and say why."""
    timeout = job.timeout.total_seconds() if job.timeout else None
    while not done(0.0):
        reason = stop_reason(interrupted, keeper, started, timeout)
        if reason is None:
            done(POLL_SECONDS)
            continue
        stop()
        return reason
    return Ended.exited, None


def stop_reason(
    interrupted: threading.Event, keeper: LeaseKeeper, started: float, timeout: float | None
) -> tuple[Ended, str] | None:
    """Why a running job must stop now, if it must: asked to, lease lost, cancelled by a
    person (``catchup cancel``, seen by the heartbeat), or out of time."""
    if interrupted.is_set():
        return Ended.interrupted, "interrupted: catchup was asked to stop"
    keeper.watch()
    if (lost := keeper.expired()) is not None:
        return Ended.lost, lost
    if keeper.cancel is not None:
        return Ended.cancelled, keeper.cancel
    if timeout is not None and time.monotonic() - started >= timeout:
        return Ended.timeout, f"timed out after {span(timeout)}"
    return None
