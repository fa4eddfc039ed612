"""``explain --since`` from catchup.toml alone (issue 51): no ledger, no database connection, no
embedded server; the job as configured and due times on this host's clock. Without ``--since``
it reads the ledger as before, so a database nobody listens on is exit 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from fix_project import job_toml

from catchup.api import Catchup
from catchup.cli import cli
from catchup.postgres.database import PG_ENV

# nothing listens on port 1: a command that connects fails at once
DEAD = "postgresql://catchup@127.0.0.1:1/ledger?connect_timeout=3"


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A catchup.toml whose [database] dsn leads nowhere, and nothing in the environment
    that would take precedence over it (CATCHUP_DSN) or lead to the suite's server."""
    for name in ("CATCHUP_DSN", "CATCHUP_CONFIG", "DATABASE_URL", *PG_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CATCHUP_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CATCHUP_EMBEDDED", "never")
    path = tmp_path / "catchup.toml"
    path.write_text(
        f'[database]\ndsn = "{DEAD}"\n\n'
        + job_toml("billing", command=["true"], delay="30m")
        + job_toml("nightly", "30 3 * * *", command=["true"], timezone="Europe/Helsinki")
    )
    return path


def explain(config: Path, *args: str, columns: int = 200) -> Result:
    return CliRunner().invoke(
        cli,
        ["--config", str(config), "-q", "explain", *args],
        env={"COLUMNS": str(columns)},
        catch_exceptions=False,
    )


def test_explain_since_needs_no_database(config: Path) -> None:
    shown = explain(config, "billing", "--since", "2026-10-01", "--limit", "3")
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.stdout.split())
    assert "billing: daily, time zone UTC, delay 30m" in text
    for day in ("2026-10-01", "2026-10-02", "2026-10-03"):
        assert f"{day}T00:00:00Z" in text
    assert "due since 2026-10-02T00:30:00Z" in text
    assert "due (this host's clock)" in text
    said = json.loads(explain(config, "billing", "--since", "2026-10-01", "--json").stdout)
    assert said["clock"] == "host" and said["periods"][0]["label"] == "2026-10-01"
    # without --since: the ledger's schedule history and the database clock, as before
    refused = explain(config, "billing", "--limit", "3")
    assert refused.exit_code == 3, refused.output
    assert "cannot connect" in refused.stderr and "127.0.0.1" in refused.stderr


def test_the_facade_opens_no_session_for_explain_since(config: Path) -> None:
    with Catchup(config) as app:
        ex = app.explain("nightly", start="2027-03-27", count=3)
        assert app._session is None  # nothing opened: not the ledger, not a server
    assert ex.clock == "host" and len(ex.rows) == 3


@pytest.mark.parametrize("columns", [80, 200])
def test_helsinki_spring_forward_reads_as_clocks_going_forward(config: Path, columns: int) -> None:
    """Issue 51, item 5: a note called the spring-forward change "DST ends" at 04:00 EEST."""
    shown = explain(config, "nightly", "--since", "2027-03-27", "--limit", "3", columns=columns)
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.stdout.split())
    assert "DST clocks go forward 1h at 2027-03-28T01:00:00Z; the period runs until 04:30 EEST" in (
        text
    )
    assert "DST the period starts at 04:30 EEST: the scheduled 03:30 does not exist" in text
    assert "03:30 on 2027-03-28 does not exist in Europe/Helsinki (clocks jump from 03:00" in text
    assert "ends" not in text and "DST starts" not in text, shown.stdout
