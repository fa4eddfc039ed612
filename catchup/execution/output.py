"""What a job prints, kept: the last 64 KiB of its output (the tail ``history --period`` shows),
read from a command's pipes or, for a ``call``, from what its own thread writes to sys.stdout and
sys.stderr."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

TAIL_BYTES = 64 * 1024


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
        if not self._buf and not self.dropped:
            return ""  # most calls print nothing
        with self._lock:
            excess = max(0, len(self._buf) - self.limit)
            dropped = self.dropped + excess
            body = bytes(self._buf[excess:])
        text = body.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
        if dropped:
            text = f"[catchup: {dropped} earlier bytes of output not kept]\n" + text
        return text


def pump(source: BinaryIO, sink: BinaryIO | None, tail: Tail) -> None:
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
def thread_streams() -> Iterator[None]:
    """While calls run, the thread-aware streams are in place (and taken away after the last
    call ends): what a registered thread prints goes to its call's tail
    (:func:`register_thread`), every other thread's straight through."""
    with _install_lock:
        if not _installed:
            _installed.extend([sys.stdout, sys.stderr])
            sys.stdout = _ThreadOutput(sys.stdout)
            sys.stderr = _ThreadOutput(sys.stderr)
        _installed.append(None)  # one more call running
    try:
        yield
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


def register_thread(tail: Tail, stream: bool) -> None:
    """What the calling thread prints from now on goes to ``tail`` (and on to the stream when
    ``stream``), while :func:`thread_streams` holds the streams in place."""
    _CALL_TAILS[threading.get_ident()] = (tail, stream)


@contextlib.contextmanager
def capturing(tail: Tail, stream: bool) -> Iterator[Callable[[], None]]:
    """:func:`thread_streams` for one call; the function returned registers the calling thread
    as the call's."""
    with thread_streams():
        yield lambda: register_thread(tail, stream)


def forget_thread() -> None:
    """The calling thread's call has ended: what it prints from now on is its own again."""
    _CALL_TAILS.pop(threading.get_ident(), None)
