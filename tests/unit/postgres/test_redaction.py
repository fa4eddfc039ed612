"""Password redaction: a DSN shown without its password, an unparseable one not echoed."""

from __future__ import annotations

import pytest

from catchup.postgres.database import redact, scrub


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://app:s3cret@db.example:5433/ledger",
        "host=db.example port=5433 user=app password=s3cret dbname=ledger",
    ],
)
def test_redaction_never_shows_the_password(dsn: str) -> None:
    assert redact(dsn) == "postgresql://app@db.example:5433/ledger"
    assert "s3cret" not in scrub("FATAL: password s3cret rejected", dsn)


def test_an_unparseable_dsn_is_not_echoed() -> None:
    shown = redact("postgresql://app:s3cret@db:notaport/x?bad=1 ' junk")
    assert "s3cret" not in shown
