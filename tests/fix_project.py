"""A project folder with a catchup.toml on the test's schema, and catchup run in it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from fix_db import Database


@dataclass
class Project:
    """A folder with a catchup.toml using this test's schema, and ways to call catchup in it."""

    path: Path
    schema: str
    database: Database
    jobs: dict[str, str] = field(default_factory=dict)

    @property
    def config(self) -> Path:
        return self.path / "catchup.toml"

    def write(self, jobs_toml: str) -> Path:
        body = f'[database]\nschema = "{self.schema}"\n\n' + textwrap.dedent(jobs_toml)
        self.config.write_text(body)
        return self.config

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k == "CATCHUP_PG_BIN" or not k.startswith(("CATCHUP_", "PG"))
        }
        env.pop("DATABASE_URL", None)
        env.update(self.database.env)
        env["CATCHUP_CONFIG"] = str(self.config)
        env.update(extra)
        return env

    def cli(self, *args: str, env: dict[str, str] | None = None) -> Result:
        """catchup in this process, through click's runner."""
        from catchup.cli import cli

        runner = CliRunner()
        return runner.invoke(
            cli,
            ["--config", str(self.config), *args],
            env={**self.database.env, **(env or {})},
            catch_exceptions=False,
        )

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "catchup", *args]

    def spawn(self, *args: str, **popen: Any) -> subprocess.Popen[str]:
        """catchup in a child process of its own."""
        return subprocess.Popen(
            self.command(*args),
            cwd=self.path,
            env=self.env(),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            **popen,
        )

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args),
            cwd=self.path,
            env=self.env(),
            text=True,
            capture_output=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture
def project(tmp_path: Path, schema: str, database: Database) -> Project:
    return Project(tmp_path, schema, database)


def job_toml(name: str, schedule: str = "daily", start: str = "2026-10-01", **keys: object) -> str:
    """The one config builder: a ``[jobs.NAME]`` table with its schedule and start (a fixed
    past date; tests pass explicit windows, or build dates from the database clock) and any
    other key, each value written as TOML (strings, numbers, booleans, lists and inline
    tables of those)."""
    import json

    def toml(value: object) -> str:
        if isinstance(value, dict):
            return "{ " + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + " }"
        if isinstance(value, list):
            return "[" + ", ".join(toml(v) for v in value) + "]"
        return json.dumps(value)

    lines = [f"[jobs.{name}]", f"schedule = {json.dumps(schedule)}", f"start = {json.dumps(start)}"]
    lines += [f"{key} = {toml(value)}" for key, value in keys.items()]
    return "\n".join(lines) + "\n"
