"""One claimed period: run it as a process group or a callable, keep the lease, stop on loss."""

from __future__ import annotations

import contextlib
import importlib
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

from .job import Job
from .schedule import Period, iso_utc, span
from .values import storable
from .vocabulary import Ended

TAIL_BYTES = 64 * 1024
POLL_SECONDS = 0.05
RENEW_AFTER = 2 * POLL_SECONDS


class Tail:
    """The last ``limit`` bytes of a stream, with a count of what was dropped before them."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self.limit = limit
        self.dropped = 0
        self._buf = bytearray()
        self._lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self._buf += chunk
            excess = len(self._buf) - self.limit
            if excess > self.limit:  # trim in batches, not on every chunk
                del self._buf[:excess]
                self.dropped += excess

    def text(self) -> str:
        with self._lock:
            excess = max(0, len(self._buf) - self.limit)
            dropped = self.dropped + excess
            body = bytes(self._buf[excess:])
        text = body.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
        if dropped:
            text = f"[catchup: {dropped} earlier bytes of output not kept]\n" + text
        return text


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
    cancelled: threading.Event = field(default_factory=threading.Event)
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


def retry_wait(failures: int, interval: float, left: float) -> float:
    """Seconds the heartbeat waits after ``failures`` failed renewals in a row, with ``left``
    seconds of lease: none after the first, then doubling from 0.2 s, never longer than a beat
    or half of what is left, so the retries fit inside the lease."""
    if failures <= 1:
        return 0.0
    return max(0.0, min(0.05 * 2.0**failures, interval, left / 2))


class LeaseKeeper(threading.Thread):
    """Renews the lease on its own connection; trips when the lease is lost or runs out.

    ``renew(within)`` gets the seconds the lease has left, to bound a reconnect by them. A failed
    renewal is retried at once (a cut connection is the usual cause, and a new one is a round
    trip away), then with a short backoff, never waiting past the lease it protects."""

    def __init__(self, renew: Callable[[float], datetime | None], lease: timedelta) -> None:
        super().__init__(name="catchup-heartbeat", daemon=True)
        self.renew = renew
        self.lease = lease.total_seconds()
        self.armed = time.monotonic()
        self.deadline = self.armed + self.lease  # conservative: measured after the claim
        self.lost: str | None = None
        self.failures = 0  # renewals that failed in a row
        self._stop = threading.Event()

    def run(self) -> None:
        interval = max(self.lease / 3, 0.2)
        wait = interval
        while not self._stop.wait(wait):
            sent = time.monotonic()
            try:
                renewed = self.renew(max(self.deadline - sent, 0.0))
            except Exception as exc:
                self.failures += 1
                left = self.deadline - time.monotonic()
                if left <= 0:
                    self.lost = self.lost or f"lease could not be renewed before it ran out ({exc})"
                    return
                wait = retry_wait(self.failures, interval, left)
                continue
            if renewed is None:
                self.lost = self.lost or "lease lost: the period was taken over or expired"
                return
            self.failures = 0
            self.deadline = sent + self.lease
            wait = interval

    def watch(self) -> None:
        """Called by the job's poll loop while the job runs: the renewing thread starts once the
        job has run for RENEW_AFTER (its first renewal is a third of the lease away, at least
        0.2 s). A job done sooner never needed a renewal, and cost no thread: a backlog of short
        periods runs about a tenth faster (benchmarks/replay.py)."""
        if self.ident is None and time.monotonic() >= self.armed + RENEW_AFTER:
            self.start()

    def expired(self) -> str | None:
        if self.lost:
            return self.lost
        if time.monotonic() >= self.deadline:
            self.lost = "lease could not be renewed before it ran out"
        return self.lost

    def stop(self) -> None:
        self._stop.set()


def placeholders(job: Job, period: Period, attempt: int) -> dict[str, Any]:
    return {
        "job": job.name,
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
    env.pop("CATCHUP_CHECKPOINT", None)
    if checkpoint is not None:
        env["CATCHUP_CHECKPOINT"] = checkpoint
    return env


def _pump(source: BinaryIO, sink: BinaryIO | None, tail: Tail) -> None:
    fd = source.fileno()
    while chunk := os.read(fd, 65536):
        tail.add(chunk)
        if sink is not None:
            try:
                sink.write(chunk)
                sink.flush()
            except (OSError, ValueError):
                sink = None  # our own output went away; keep draining the job's
    source.close()


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


def program_path(job: Job, program: str) -> str:
    """``command[0]`` as it is started: a relative path (``./close.sh``, ``bin/x``) from the
    job's folder, whatever folder the scheduler started catchup in; a bare name from PATH."""
    if "/" in program and not os.path.isabs(program) and job.workdir is not None:
        return str(job.workdir / program)
    return program


def _not_runnable(program: str, env: dict[str, str], shown: str | None = None) -> str | None:
    """Why ``program`` cannot be started, as the exec would say it; None when it can."""
    shown = shown or program
    path = program if "/" in program else shutil.which(program, path=env.get("PATH"))
    if path is None or not os.path.exists(path):
        return f"cannot start {shown!r}: not found"
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        return f"cannot start {shown!r}: permission denied"
    return None


def cannot_start(job: Job) -> str | None:
    """Why ``job`` cannot start at all (its folder, its program or its module is missing),
    found before a period is claimed, so a bad deploy counts no attempt; None when it can.
    A ``call`` is imported here (the import is what would fail)."""
    if job.workdir is not None and not job.workdir.is_dir():
        return f"cannot start: its folder {job.workdir} does not exist"
    if job.command is not None:
        program = job.command[0]
        if "{" in program:
            return None  # a placeholder in the program: known once the period is
        return _not_runnable(program_path(job, program), dict(os.environ), program)
    if job.call is not None:
        try:
            load_call(job.call, job.workdir)
        except Exception as exc:
            return f"cannot load {job.call}: {describe(exc)}"
    return None


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
) -> Execution:
    """Run ``argv`` in its own process group until it exits, times out, loses its lease or is
    interrupted; the whole group is stopped in every case but the first."""
    started = time.monotonic()
    tail = Tail()
    shown = argv[0]
    argv = [program_path(job, argv[0]), *argv[1:]]
    missing = _not_runnable(argv[0], env, shown)
    if missing:
        return Execution(Ended.exited, None, missing, "", time.monotonic() - started)
    grace = max(1, round(job.kill_grace.total_seconds()))
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", GUARD, "catchup-guard", str(os.getpid()), str(grace), *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=job.workdir,
            start_new_session=True,
        )
    except OSError as exc:
        return Execution(
            Ended.exited,
            None,
            f"cannot start {shown!r}: {exc.strerror}",
            "",
            time.monotonic() - started,
        )
    assert proc.stdout is not None and proc.stderr is not None
    pumps = [
        threading.Thread(
            target=_pump,
            args=(proc.stdout, sys.stdout.buffer if stream else None, tail),
            daemon=True,
        ),
        threading.Thread(
            target=_pump,
            args=(proc.stderr, sys.stderr.buffer if stream else None, tail),
            daemon=True,
        ),
    ]
    for pump in pumps:
        pump.start()
    timeout = job.timeout.total_seconds() if job.timeout else None
    ended, error = Ended.exited, None
    exited = _ExitWaiter(proc)
    while proc.poll() is None:
        reason = _stop_reason(interrupted, keeper, started, timeout)
        if reason is None:
            exited.wait(POLL_SECONDS)
            continue
        ended, error = reason
        stop_group(proc, job.kill_grace.total_seconds())
        break
    exited.close()
    # Whatever the job left behind in its group (background children holding our pipes) goes.
    _signal_group(proc.pid, signal.SIGKILL)
    for pump in pumps:
        pump.join(timeout=5)
    code = proc.returncode
    if ended == Ended.exited and code != 0:
        error = f"exited with {code}" if code > 0 else f"killed by {signal.Signals(-code).name}"
    return Execution(ended, code, error, tail.text(), time.monotonic() - started)


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
_CALL_TAILS: dict[int, tuple[Tail, bool]] = {}


class _ThreadOutput:
    """sys.stdout or sys.stderr while calls run: what a call's own thread prints goes to its
    tail as well (``history --period`` shows it), and on to the stream when it is streamed;
    every other thread writes straight through."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        taken = _CALL_TAILS.get(threading.get_ident())
        if taken is None:
            return int(self._stream.write(text))
        tail, stream = taken
        tail.add(text.encode("utf-8", "replace"))
        if stream:
            try:
                self._stream.write(text)
            except (OSError, ValueError):
                pass
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


_install_lock = threading.Lock()
_installed: list[Any] = []  # the streams replaced, while any call runs


@contextlib.contextmanager
def _capturing(tail: Tail, stream: bool) -> Iterator[Callable[[], None]]:
    """While a call runs, the thread-aware streams are in place (and taken away after the
    last call ends); the function returned registers the calling thread as the call's."""
    with _install_lock:
        if not _installed:
            _installed.extend([sys.stdout, sys.stderr])
            sys.stdout = _ThreadOutput(sys.stdout)
            sys.stderr = _ThreadOutput(sys.stderr)
        _installed.append(None)  # one more call running
    try:
        yield lambda: _CALL_TAILS.__setitem__(threading.get_ident(), (tail, stream))
    finally:
        with _install_lock:
            _installed.pop()
            if len(_installed) == 2:  # the last call: put the streams back
                out, err = _installed
                if isinstance(sys.stdout, _ThreadOutput):
                    sys.stdout = out
                if isinstance(sys.stderr, _ThreadOutput):
                    sys.stderr = err
                _installed.clear()


def run_callable(
    job: Job,
    ctx: JobContext,
    keeper: LeaseKeeper,
    interrupted: threading.Event,
    stream: bool = True,
) -> Execution:
    """Run a Python ``call`` in a thread; on timeout, loss or interrupt, ``ctx.cancelled`` is set
    and the outcome recorded without waiting (a callable cannot be killed, only asked)."""
    started = time.monotonic()
    assert job.call is not None
    try:
        target = load_call(job.call, job.workdir)
    except Exception as exc:
        return Execution(
            Ended.exited,
            None,
            f"cannot load {job.call}: {describe(exc)}",
            "",
            time.monotonic() - started,
        )
    # a failure until the callable returns: a handler that itself fails (an exception whose
    # text cannot be rendered) must never leave "no error", which is a success
    result: dict[str, str | None] = {"error": "the call ended without returning"}
    printed = Tail()
    capture = contextlib.ExitStack()
    register = capture.enter_context(_capturing(printed, stream))

    def work() -> None:
        register()
        try:
            target(ctx)
            result["error"] = None
        except BaseException as exc:  # report everything the job raised
            result["error"] = describe(exc)
            result["tail"] = _traceback(exc)
        finally:
            _CALL_TAILS.pop(threading.get_ident(), None)

    thread = threading.Thread(target=work, name=f"catchup-call-{job.name}", daemon=True)
    thread.start()
    timeout = job.timeout.total_seconds() if job.timeout else None
    ended, error = Ended.exited, None
    while thread.is_alive():
        reason = _stop_reason(interrupted, keeper, started, timeout)
        if reason is None:
            thread.join(POLL_SECONDS)
            continue
        ended, error = reason
        ctx.cancelled.set()
        thread.join(job.kill_grace.total_seconds())
        break
    capture.close()  # a call still running (timed out, asked to stop) prints through from now
    _reopen_standard_streams()
    if ended == Ended.exited:
        error = result.get("error")
    # text a job raised is data: whatever it holds, it is stored and printed (cleaned like
    # command output)
    # what it printed, then (for a failure) the traceback, like a command's stdout and stderr
    tail = printed.text() + (result.get("tail") or "")
    return Execution(
        ended,
        None if error else 0,
        None if error is None else storable(error),
        storable(tail[-TAIL_BYTES:]),
        time.monotonic() - started,
    )


def _reopen_standard_streams() -> None:
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


def describe(exc: BaseException) -> str:
    """``Type: text`` of an exception, whatever its ``__str__`` does (raises, returns a
    non-string): the text is then said to be unreadable, never missing."""
    name = type(exc).__name__
    try:
        text = str(exc)
    except BaseException:
        return f"{name}: <its text could not be rendered>"
    return f"{name}: {text}" if text else name


def _traceback(exc: BaseException) -> str:
    try:
        return "".join(traceback.format_exception(exc))[-TAIL_BYTES:]
    except BaseException:
        return f"{describe(exc)} (its traceback could not be rendered)\n"


def _stop_reason(
    interrupted: threading.Event, keeper: LeaseKeeper, started: float, timeout: float | None
) -> tuple[Ended, str] | None:
    """Why a running job must stop now, if it must: asked to, lease lost, or out of time."""
    if interrupted.is_set():
        return Ended.interrupted, "interrupted: catchup was asked to stop"
    keeper.watch()
    if (lost := keeper.expired()) is not None:
        return Ended.lost, lost
    if timeout is not None and time.monotonic() - started >= timeout:
        return Ended.timeout, f"timed out after {span(timeout)}"
    return None


def load_call(
    call: str | Callable[..., object], folder: Path | None = None
) -> Callable[..., object]:
    """A ``module:function`` reference imported, or a callable given in code, as is. The job's
    ``folder`` (the config file's) is on ``sys.path``, after what is there already, so a
    module beside catchup.toml is found and can shadow nothing installed."""
    if callable(call):
        return call
    if folder is not None and str(folder) not in sys.path:
        sys.path.append(str(folder))
    module_name, _, attr = call.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    return target  # type: ignore[no-any-return]
