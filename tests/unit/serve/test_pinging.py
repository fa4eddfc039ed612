"""``/ping/…``'s answers before anything is written (routes, codes, bounds), and the per-address
bucket that slows a flood; the desk's facade is a stand-in that records what it was asked."""

from __future__ import annotations

from typing import Any

import pytest

from catchup.errors import ConfigError
from catchup.pings.ingest import PingAsk
from catchup.serve import pinging
from catchup.serve.pinging import BODY_LIMIT, PingDesk

UUID = "5bf66975-d4c7-4bf5-bcc8-b8d8a82ea278"


class Recorder:
    def __init__(self, fail: Exception | None = None) -> None:
        self.asked: list[tuple[str, str, PingAsk]] = []
        self.fail = fail
        self.closed = False

    def ping_from(self, source: str, job: str, asked: PingAsk) -> None:
        if self.fail is not None:
            raise self.fail
        self.asked.append((source, job, asked))

    def close(self) -> None:
        self.closed = True


def desk(app: Recorder) -> PingDesk:
    return PingDesk(lambda: app, lambda: {UUID: "vendor"})


@pytest.mark.parametrize(
    ("path", "kind", "exit_status"),
    [
        (f"/ping/{UUID}", "success", None),
        (f"/ping/{UUID}/", "success", None),
        (f"/ping/{UUID.upper()}/start", "start", None),
        (f"/ping/{UUID}/fail", "fail", None),
        (f"/ping/{UUID}/log", "log", None),
        (f"/ping/{UUID}/0", "success", 0),
        (f"/ping/{UUID}/255", "fail", 255),
    ],
)
def test_each_endpoint_says_its_kind(path: str, kind: str, exit_status: int | None) -> None:
    app = Recorder()
    assert desk(app).answer(path, {}, b"", "ping from 10.0.0.5") == (200, b"OK")
    ((source, job, asked),) = app.asked
    assert (source, job, asked.kind, asked.exit_status) == (
        "ping from 10.0.0.5",
        "vendor",
        kind,
        exit_status,
    )


@pytest.mark.parametrize(
    ("path", "query", "answer"),
    [
        (f"/ping/{UUID}/256", {}, (400, b"invalid url format")),
        (f"/ping/{UUID}", {"rid": ["nope"]}, (400, b"invalid uuid format")),
        ("/ping/07c2f548-9850-4b27-af5d-6c9dc157ec02", {}, (404, b"not found")),
        ("/ping/not-a-uuid", {}, (404, b"not found")),
        (f"/ping/{UUID}/start/more", {}, (404, b"not found")),
        (f"/ping/{UUID}/-1", {}, (404, b"not found")),
    ],
)
def test_a_bad_ping_is_answered_before_anything_is_asked(
    path: str, query: dict[str, list[str]], answer: tuple[int, bytes]
) -> None:
    def never() -> Any:
        raise AssertionError("no facade for a ping that names nothing")

    assert PingDesk(never, lambda: {UUID: "vendor"}).answer(path, query, b"", "x") == answer


def test_the_body_kept_is_bounded_and_decoded_whatever_it_holds() -> None:
    app = Recorder()
    body = b"\xe9" * (BODY_LIMIT + 50)
    desk(app).answer(f"/ping/{UUID}", {"rid": [UUID.upper()]}, body, "x")
    ((_, _, asked),) = app.asked
    assert asked.body == "\ufffd" * BODY_LIMIT and asked.rid == UUID


def test_a_refusal_is_a_400_and_a_broken_ledger_a_503_with_the_facade_dropped() -> None:
    refused = Recorder(ConfigError("vendor: no key 'acme' among its keys\nmore"))
    assert desk(refused).answer(f"/ping/{UUID}", {}, b"", "x") == (
        400,
        b"vendor: no key 'acme' among its keys",
    )
    broken = Recorder(OSError("gone"))
    status, _ = desk(broken).answer(f"/ping/{UUID}", {}, b"", "x")
    assert status == 503 and broken.closed


def test_a_flood_from_one_address_is_slowed_and_the_others_are_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pinging, "RATE", 10.0)
    monkeypatch.setattr(pinging, "BURST", 5.0)
    monkeypatch.setattr(pinging, "WAIT", 0.05)
    flooded = desk(Recorder())
    assert all(flooded.turn("10.0.0.9") for _ in range(5))
    assert not flooded.turn("10.0.0.9")  # empty: its next ping is 0.1 s away, over WAIT
    assert flooded.turn("10.0.0.10")


def test_the_slug_form_needs_the_ping_key_and_a_job_that_takes_pings() -> None:
    app = Recorder()
    key = "k3y-of-twenty-chars_"
    slugged = PingDesk(lambda: app, lambda: {UUID: "vendor"}, lambda: key)
    assert slugged.answer(f"/ping/{key}/vendor/fail", {}, b"", "x") == (200, b"OK")
    assert [(job, asked.kind) for _, job, asked in app.asked] == [("vendor", "fail")]
    assert slugged.answer(f"/ping/{key[:-1]}X/vendor", {}, b"", "x") == (404, b"not found")
    assert slugged.answer(f"/ping/{key}/billing", {}, b"", "x") == (404, b"not found")
    keyless = PingDesk(lambda: app, lambda: {UUID: "vendor"})
    assert keyless.answer(f"/ping/{key}/vendor", {}, b"", "x") == (404, b"not found")
    assert len(app.asked) == 1


def test_a_content_length_is_ascii_digits_or_more_than_any_limit() -> None:
    from catchup.serve.httpd import _length

    assert _length("0") == 0 and _length("100000") == 100_000
    for odd in ("²", "1" * 5001, "-1", "", " 12", "1e3", "١٢"):
        assert _length(odd) > 10**8, odd


def test_a_slug_key_of_any_bytes_is_compared_not_raised() -> None:
    app = Recorder()
    slugged = PingDesk(lambda: app, lambda: {UUID: "vendor"}, lambda: "k3y-of-twenty-chars_")
    assert slugged.answer("/ping/\xe9\xe9\xe9/vendor", {}, b"", "x") == (404, b"not found")
    assert app.asked == []
