"""What a job prints, kept: the last 64 KiB of its output (the tail ``history --period`` shows),
read from a command's pipes or, for a ``call``, from what its own thread writes to sys.stdout and
sys.stderr; and, for a job with ``log_output``, passed on to catchup's stderr a prefixed line at
a time (:class:`LoggedLines`)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from rich.file_proxy import FileProxy

from ..render.text import safe

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


LOG_LINES = 1000  # lines of one attempt's output logged (log_output); the rest counted
LOG_LINE_BYTES = 4096  # of one line; a longer one is cut, the cut said

_LOG_LOCK = threading.Lock()  # one line at a time on catchup's stderr, from any worker


class LoggedLines:
    """A job's output as lines on catchup's stderr (``log_output``), each after ``prefix``
    (``job=billing key=globex period=2026-12-02 attempt=1``): at most :data:`LOG_LINES` per
    attempt and :data:`LOG_LINE_BYTES` per line, control characters escaped; what was left out
    is said in one more line when the attempt ends (:meth:`close`)."""

    def __init__(self, prefix: str, limit: int = LOG_LINES) -> None:
        self.prefix = prefix
        self.limit = limit
        self.logged = 0
        self.left_out = 0
        self._partial = bytearray()
        self._cut = False  # the line being read was too long: the rest of it is dropped
        self._closed = False  # the attempt ended: what a child left behind writes is not its
        self._lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self._lock:
            while chunk and not self._closed:
                line, newline, chunk = chunk.partition(b"\n")
                self._take(line)
                if newline:
                    self._line_ended()

    def _take(self, piece: bytes) -> None:
        room = LOG_LINE_BYTES - len(self._partial)
        if len(piece) > room:
            self._partial += piece[:room]
            self._cut = True
        elif not self._cut:
            self._partial += piece

    def _line_ended(self) -> None:
        line, cut = bytes(self._partial), self._cut
        self._partial.clear()
        self._cut = False
        if self.logged >= self.limit:
            self.left_out += 1
            return
        self.logged += 1
        text = safe(line.decode("utf-8", errors="replace").removesuffix("\r"))
        if len(text.encode()) > LOG_LINE_BYTES:  # escaped, it grew (\x00 is four)
            text = text.encode()[:LOG_LINE_BYTES].decode("utf-8", errors="ignore")
            cut = True
        self._write(text + (" [catchup: the rest of this line not logged]" if cut else ""))

    def _write(self, text: str) -> None:
        line = f"{self.prefix} | {text}\n"
        with _LOG_LOCK:
            stream = real_stderr()
            try:
                stream.write(line)
                stream.flush()
            except (OSError, ValueError):
                pass  # our own stderr went away; the tail still has it

    def close(self) -> None:
        """The attempt ended: its last line, if it had no newline, and what was left out."""
        with self._lock:
            if self._partial or self._cut:
                self._line_ended()
            if self.left_out:
                more = f"{self.left_out:,} more line{'s' if self.left_out > 1 else ''}"
                self._write(f"[catchup: {more} not logged; the ledger keeps the tail]")
                self.left_out = 0
            self._closed = True


def pump(
    source: BinaryIO, sink: BinaryIO | None, tail: Tail, lines: LoggedLines | None = None
) -> None:
    fd = source.fileno()
    while chunk := os.read(fd, 65536):
        tail.add(chunk)
        if lines is not None:
            lines.add(chunk)
        if sink is not None:
            try:
                sink.write(chunk)
                sink.flush()
            except (OSError, ValueError):
                sink = None  # our own output went away; keep draining the job's
    source.close()


_CALL_TAILS: dict[int, tuple[Tail, bool, LoggedLines | None]] = {}


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
        tail, stream, lines = taken
        data = text.encode("utf-8", "replace")
        tail.add(data)
        if lines is not None:
            lines.add(data)
        if stream:
            try:
                self._stream.write(text)
            except (OSError, ValueError):
                pass
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    @property
    def buffer(self) -> Any:
        """The binary stream under it: a call's thread writing bytes is captured as well."""
        if _CALL_TAILS.get(threading.get_ident()) is None:
            return self._stream.buffer
        return _ThreadBuffer(self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _ThreadBuffer:
    """``sys.stdout.buffer`` as a call's own thread sees it: bytes go where its text goes."""

    def __init__(self, text: _ThreadOutput) -> None:
        self._text = text

    def write(self, data: bytes) -> int:
        self._text.write(bytes(data).decode("utf-8", "replace"))
        return len(data)

    def flush(self) -> None:
        self._text.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._text._stream.buffer, name)


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


def register_thread(tail: Tail, stream: bool, lines: LoggedLines | None = None) -> None:
    """What the calling thread prints from now on goes to ``tail`` (and on to the stream when
    ``stream``; to ``lines`` when logged), while :func:`thread_streams` holds the streams in
    place."""
    _CALL_TAILS[threading.get_ident()] = (tail, stream, lines)


@contextlib.contextmanager
def capturing(
    tail: Tail, stream: bool, lines: LoggedLines | None = None
) -> Iterator[Callable[[], None]]:
    """:func:`thread_streams` for one call; the function returned registers the calling thread
    as the call's."""
    with thread_streams():
        yield lambda: register_thread(tail, stream, lines)


def real_stderr() -> Any:
    """catchup's own stderr, under the thread-aware stream a call's thread writes through and
    under Rich's proxy while a progress bar draws (which would wrap a line at the terminal's
    width and print it on stdout's console)."""
    stream = sys.stderr
    while isinstance(stream, (_ThreadOutput, FileProxy)):
        stream = stream._stream if isinstance(stream, _ThreadOutput) else stream.rich_proxied_file
    return stream


def forget_thread() -> None:
    """The calling thread's call has ended: what it prints from now on is its own again."""
    _CALL_TAILS.pop(threading.get_ident(), None)
