"""No password in any object's repr or str: a job's ``keys_dsn`` and ``evidence_dsn``, the
config's ``dsn`` and the database a facade opened are held as ``Dsn``, whose repr is the DSN
without its password, so ``print(job)``, ``print(app.ps())`` (every job) and the repr of every
result the facade returns show where a DSN points, never how it logs in; nor does a webhook's
URL (its path may hold a token) show."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fix_db import Database
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import catchup
from catchup import Catchup, CatchupError, JobContext, make_job
from catchup.config.loading import load_config
from catchup.pings.ingest import PingAsk
from catchup.postgres.database import Target

SECRET = "s3cret-never-shown"
FORMS = [
    f"postgresql://app:{SECRET}@db.example:5433/ledger",
    f"host=db.example port=5433 user=app password={SECRET} dbname=ledger",
    f"postgresql://app@db.example:5433/ledger?password={SECRET}&sslmode=prefer",
    f"dbname=ledger user=app password='{SECRET}' host=db.example",
]
# not results: they run until stopped (their results are those of tick and serve's pages)
RUN_FOREVER = {"scheduler", "serve"}
DAY = datetime(2026, 10, 2, tzinfo=UTC)
UNTIL = datetime(2026, 10, 6, tzinfo=UTC)


def shown(value: object) -> str:
    return repr(value) + "\n" + str(value)


@pytest.mark.parametrize("dsn", FORMS)
def test_a_job_and_a_config_show_their_dsns_without_the_password(dsn: str, tmp_path: Path) -> None:
    keys = "SELECT 'a'"
    keyed = make_job("bill", "daily", "2026-10-01", command=["true"], keys=keys, keys_dsn=dsn)
    checked = make_job(
        "export", "daily", "2026-10-01", command=["true"], evidence="SELECT now()", evidence_dsn=dsn
    )
    for job in (keyed, checked, keyed.for_key("a"), dataclasses.replace(checked, name="e2")):
        assert SECRET not in shown(job), shown(job)
        assert "db.example" in repr(job)  # where it points is still said
    assert str(keyed.keys_dsn) == dsn and keyed.keys_dsn == dsn  # the text connects as given
    assert Target(conninfo=dsn, source="--dsn").conninfo == dsn
    assert SECRET not in shown(Target(conninfo=dsn, source="--dsn"))

    path = tmp_path / "catchup.toml"
    path.write_text(
        f"[database]\ndsn = {dsn!r}\n"
        f'[alerts.webhooks.ops]\nurl = "https://hooks.example/T0/{SECRET}"\n'
        f'[serve]\nping_key = "{SECRET}-ping"\n'
        '[jobs.bill]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        f"keys = \"SELECT 'a'\"\nkeys_dsn = {dsn!r}\n"
        '[jobs.vendor]\nschedule = "daily"\nstart = "2026-10-01"\n'
        'ping = "5bf66975-d4c7-4bf5-bcc8-b8d8a82ea278"\n'
    )
    config = load_config(path)
    assert config.dsn == dsn and config.jobs["bill"].keys_dsn == dsn
    assert config.serve.ping_key == f"{SECRET}-ping"  # held, never shown (below)
    assert "5bf66975" not in shown(config) and "5bf66975" not in shown(config.jobs["vendor"])
    assert config.alerts is not None and SECRET in config.alerts.webhooks[0].url
    assert SECRET not in shown(config), shown(config)


def with_password(conninfo: str) -> tuple[str, str]:
    """The test database's conninfo and its password (one added where it has none: a server
    that trusts its clients ignores it)."""
    params = conninfo_to_dict(conninfo)
    password = str(params.get("password") or SECRET)
    params["password"] = password
    return make_conninfo("", **params), password


def url_form(conninfo: str) -> str:
    """The same database as ``postgresql://…?password=…``."""
    from urllib.parse import quote, urlencode

    # percent-encoded (libpq reads no + as a space): a value with spaces (options) survives
    params = {k: str(v) for k, v in conninfo_to_dict(conninfo).items()}
    return "postgresql://?" + urlencode(params, quote_via=quote)


@pytest.fixture
def app(
    database: Database, schema: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Catchup, str, list[JobContext]]]:
    """A facade on a DSN holding a password (as ?password=), a keyed job whose keys_dsn holds
    it (key=value form) and a job whose evidence_dsn holds it; each call's context kept."""
    monkeypatch.chdir(tmp_path)  # no catchup.toml of the checkout is found by doctor
    conninfo, password = with_password(database.conninfo)
    seen: list[JobContext] = []
    keys = "SELECT k FROM (VALUES ('acme'), ('beta')) AS v(k)"
    evidence = "SELECT d::date FROM generate_series('2026-10-01'::date, '2026-10-03', '1 day') d"
    jobs = [
        make_job("bill", "daily", "2026-10-01", call=seen.append, keys=keys, keys_dsn=conninfo),
        make_job(
            "export", "daily", "2026-10-01", call=seen.append, evidence=evidence,
            evidence_dsn=conninfo,
        ),
        make_job("spare", "daily", "2026-10-01", call=seen.append),
        # its first period never due while this test lives: `run` of it is NotDue
        make_job("later", "daily", "2199-12-01", call=seen.append),
        make_job("vendor", "daily", "2026-10-01", ping="5bf66975-d4c7-4bf5-bcc8-b8d8a82ea278"),
    ]  # fmt: skip
    with Catchup(jobs=jobs, dsn=url_form(conninfo), schema=schema) as facade:
        yield facade, password, seen


def written(dsn: str) -> Path:
    """A catchup.toml in the working folder whose ``[database] dsn`` is ``dsn``."""
    path = Path("catchup.toml")
    path.write_text(
        f"[database]\ndsn = {dsn!r}\n"
        '[jobs.bill]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
    )
    return path.resolve()


def planned(dsn: str, schema: str) -> Path:
    """A new version of a catchup.toml on the test's ledger, its ``[database] dsn`` ``dsn``."""
    path = Path("planned.toml")
    path.write_text(
        f"[database]\ndsn = {dsn!r}\nschema = {schema!r}\n"
        '[jobs.bill]\nschedule = "daily"\nstart = "2026-10-01"\ncommand = ["true"]\n'
        "keys = \"SELECT 'acme'\"\n"
    )
    return path.resolve()


def calls(app: Catchup, dsn: str) -> dict[str, Callable[[], object]]:
    """A call of every public name of the facade, in an order that leaves something to show."""
    report: list[Any] = []

    def scan() -> object:
        report[:] = [app.scan(until=UNTIL, calendars=True)]
        return report[0]

    return {
        "run": lambda: app.run("bill", DAY, key="acme"),
        "run_keys": lambda: app.run_keys("bill", DAY),
        "tick": lambda: app.tick(),
        "replay": lambda: app.replay(since=DAY, until=UNTIL, jobs=["spare"]),
        "scan": scan,
        "notify": lambda: app.notify(report[0]),
        "keys": lambda: app.keys("bill"),
        "jobs": lambda: app.jobs(),
        "history": lambda: app.history("bill", key="acme"),
        "explain": lambda: app.explain("bill"),
        "ps": lambda: app.ps(),
        "why": lambda: app.why("bill", DAY, key="acme"),
        "period": lambda: app.period("bill", DAY, key="acme"),
        "doctor": lambda: app.doctor(dsn=dsn),
        "mark": lambda: app.mark("spare", ["2026-10-01"], kind="skip", reason="r"),
        "exclude": lambda: app.exclude(["spare"], "2026-10-02", reason="r"),
        "adopt": lambda: app.adopt(["export"], since="2026-10-01", until=UNTIL, reason="r"),
        "reset": lambda: app.reset("spare", ["2026-10-01"], reason="r"),
        "cancel": lambda: app.cancel("spare", DAY, reason="r", wait=False),
        "pause": lambda: app.pause("spare", reason="r"),
        "resume": lambda: app.resume("spare", reason="r"),
        "checkpoint": lambda: app.checkpoint("x", run_id=1, attempt=1),
        "compact": lambda: app.compact(before=UNTIL, dry_run=True),
        "run_not_due": lambda: app.run("later"),
        "ping": lambda: app.ping("vendor", exit_status=0),
        "ping_from": lambda: app.ping_from("ping from here", "vendor", PingAsk("fail", period=DAY)),
        # a facade of a file whose [database] dsn holds the password: its watch holds that config
        "config_watch_of_a_file": lambda: Catchup(written(dsn)).config_watch(),
        "migrate": lambda: app.migrate(),
        "plan": lambda: app.plan(planned(dsn, app.config.schema)),
        "log_output": lambda: app.log_output,
        "connected": lambda: app.connected,
        "database": lambda: app.database,
        "config": lambda: app.config,
        "session": lambda: app.session,
        "job": lambda: app.job("bill"),
        "select": lambda: app.select(None),
        "one_key": lambda: app.one_key("bill", "acme"),
        "config_watch": lambda: app.config_watch(),
        "use_config": lambda: app.use_config(app.config),
        "rename": lambda: app.rename("spare", "spare2", reason="r"),
        "retire": lambda: app.retire("spare2", reason="r"),
        "close": lambda: app.close(),
    }


def reachable(value: object) -> Iterator[object]:
    """``value`` and every object in it: a dataclass's fields, a named tuple's, the items of
    tuples, lists, sets and dicts (each object once)."""
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, (str, int, float, bytes, type(None))):
            continue
        seen.add(id(item))
        yield item
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack += [getattr(item, f.name) for f in dataclasses.fields(item)]
        elif isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, (tuple, list, set, frozenset)):
            stack += list(item)


def test_every_result_of_the_facade_shows_no_password(
    app: tuple[Catchup, str, list[JobContext]], database: Database
) -> None:
    facade, password, seen = app
    public = {
        name
        for name, _ in inspect.getmembers(type(facade))
        if not name.startswith("_") and name not in RUN_FOREVER
    }
    made = calls(facade, url_form(with_password(database.conninfo)[0]))
    assert public <= set(made), f"not walked: {sorted(public - set(made))}"
    kinds: set[type] = set()
    results: list[object] = [facade, seen]
    for name, call in made.items():
        try:
            results.append(call())
        except CatchupError as exc:  # a refusal says no password either
            results.append(exc)
        assert password not in shown(results[-1]), (name, shown(results[-1])[:2000])
    for result in results:
        for item in reachable(result):
            kinds.add(type(item))
            assert password not in shown(item), (type(item), shown(item)[:2000])
    # each type catchup exports was among them (a job, the config, each result)
    exported = {getattr(catchup, name) for name in catchup.__all__ if name != "__version__"}
    missing = {t.__name__ for t in exported if isinstance(t, type) and t not in kinds}
    # Cancelled needs a running period whose runner hears the request (tests/integration/
    # test_cancel.py); it holds names, an attempt, a host and a status, never a DSN
    assert missing <= {"CatchupError", "DatabaseError", "Cancelled"}, missing
