"""Print sql/schema.sql anew: pg_dump of a freshly migrated schema on the embedded server, the
schema's name as {schema}, pg_dump's session settings and banners left out.

    uv run python tests/schema_dump.py > sql/schema.sql
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catchup.ledger import Ledger
from catchup.postgres import embedded

HEADER = """\
-- The whole ledger schema as the migrations leave it, in one file to read (generated with
-- pg_dump from a freshly migrated schema; {schema} stands for the ledger's schema). catchup never
-- runs this file: sql/migrations/ are the truth, and tests/integration/test_schema.py fails when
-- this file and a freshly migrated schema differ. After a new migration, regenerate it:
--   uv run python tests/schema_dump.py > sql/schema.sql

"""
SKIP = ("SET ", "SELECT pg_catalog.set_config", "\\restrict", "\\unrestrict", "-- Dumped")
BANNER = re.compile(r"--\n-- Name: ([^;]+); Type: ([^;]+); Schema: [^;]+; Owner: -\n--\n")


def dump() -> str:
    server = embedded.ensure_running()
    name = f"s_{uuid.uuid4().hex[:8]}"
    params = conninfo_to_dict(server.conninfo)
    with psycopg.connect(server.conninfo, autocommit=True) as conn:
        Ledger(conn, name).migrate()
        try:
            out = subprocess.run(
                [
                    str(embedded.usable_bins() / "pg_dump"),
                    *("--schema-only", "--no-owner", "--no-privileges", "--schema", name),
                    *("-h", str(params["host"]), "-p", str(params["port"])),
                    *("-U", str(params["user"]), "postgres"),
                ],
                env={"PGPASSWORD": str(params.get("password") or ""), "PATH": "/usr/bin:/bin"},
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            ).stdout
        finally:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')
    kept = [line for line in out.split("\n") if not line.startswith(SKIP)]
    text = "\n".join(kept).replace(f'"{name}"', "{schema}").replace(name, "{schema}")
    text = re.sub(r"^-- PostgreSQL database dump( complete)?\n", "", text, flags=re.MULTILINE)
    text = BANNER.sub(lambda m: f"-- {m.group(2).lower()} {m.group(1)}\n", text)
    text = re.sub(r"^--\n", "", text, flags=re.MULTILINE)
    text = re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"
    return HEADER + text


if __name__ == "__main__":
    sys.stdout.write(dump())
