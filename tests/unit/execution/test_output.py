"""The output tail: the last bytes kept, what was dropped said."""

from __future__ import annotations

from catchup.execution.output import Tail


def test_the_tail_keeps_the_last_bytes_and_says_what_it_dropped() -> None:
    tail = Tail(limit=10)
    for n in range(100):
        tail.add(f"{n:03d}\n".encode())
    text = tail.text()
    assert text.endswith("098\n099\n")
    assert text.startswith("[catchup: 390 earlier bytes of output not kept]\n")
    binary = Tail(limit=10)
    binary.add(b"\xff\x00ok")
    assert binary.text() == "\ufffd\ufffdok"
