"""Which database: --dsn > CATCHUP_DSN > [database] dsn > DATABASE_URL > PG* > embedded."""

from __future__ import annotations

import pytest

from catchup.postgres import database as db

SOURCES = ["--dsn", "CATCHUP_DSN", "catchup.toml [database] dsn", "DATABASE_URL", "PGHOST"]


@pytest.mark.parametrize("first", range(len(SOURCES)))
def test_the_first_source_given_wins(monkeypatch: pytest.MonkeyPatch, first: int) -> None:
    """With every source from ``first`` on given, the earliest of them is used, as documented
    (no connection is made for a DSN source)."""
    for name in ("CATCHUP_DSN", "DATABASE_URL", "PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("PGUSER", "PGSERVICE", "CATCHUP_EMBEDDED"):
        monkeypatch.delenv(name, raising=False)
    given = SOURCES[first:]
    if "CATCHUP_DSN" in given:
        monkeypatch.setenv("CATCHUP_DSN", "host=from-env dbname=a")
    if "DATABASE_URL" in given:
        monkeypatch.setenv("DATABASE_URL", "postgresql://from-url/b")
    if "PGHOST" in given:
        monkeypatch.setenv("PGHOST", "from-pg")
    target = db.resolve(
        "host=from-flag dbname=c" if "--dsn" in given else None,
        "host=from-config dbname=d" if "catchup.toml [database] dsn" in given else None,
    )
    assert target.source == SOURCES[first]


def test_connect_retry_is_bounded_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    from catchup.errors import ConfigError
    from catchup.postgres.database import busy_retry_seconds

    monkeypatch.delenv("CATCHUP_CONNECT_RETRY", raising=False)
    assert busy_retry_seconds() == 15
    monkeypatch.setenv("CATCHUP_CONNECT_RETRY", "2.5")
    assert busy_retry_seconds() == 2.5
    for bad in ("1s", "-1", "nan", "99999", ""):
        monkeypatch.setenv("CATCHUP_CONNECT_RETRY", bad)
        with pytest.raises(ConfigError, match="CATCHUP_CONNECT_RETRY: expected seconds from 0"):
            busy_retry_seconds()


@pytest.mark.parametrize(
    "name", ["billing", "Billing", "billing!", 'a "quoted"; DROP DATABASE x', "账单", "x" * 300]
)
def test_a_project_name_names_a_safe_bounded_database(name: str) -> None:
    """[project] name, whatever its characters, maps to one database name: ASCII letters,
    digits and '_', at most 63 bytes, the same each time, apart from its neighbours' and from
    every folder's (the hash is of the name, marked as one)."""
    import re
    from pathlib import Path

    from catchup.postgres.projectdb import named_database_name, project_database_name

    made = named_database_name(name)
    assert re.fullmatch(r"catchup_[a-z0-9_]+_[0-9a-f]{8}", made) and len(made.encode()) <= 63
    assert made == named_database_name(name)
    others = {named_database_name(n) for n in ("billing", "Billing", "billing!") if n != name}
    assert made not in others
    assert made != project_database_name(Path("/") / name[:200])
