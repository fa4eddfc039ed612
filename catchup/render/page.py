"""The status page of ``catchup serve``: the scan report as ``--output html`` draws it (per-job
summary, gap ranges, the scheduler's pulse, calendars), under a line that says which database
and schema, how old the scan is, and whether the newest one failed. Static HTML that refreshes
itself: no JavaScript, readable without colour (every state has a glyph), and every text from a
user or a job escaped (Rich's HTML export escapes all text; the page adds nothing unescaped)."""

from __future__ import annotations

import html
import os
from datetime import datetime
from urllib.parse import quote

from rich.style import Style
from rich.text import Text

from ..models import ScanReport
from ..results import KeysReport
from .limits import GAP_LIMIT
from .scan import calendars, recorder, scan_tables
from .tables import keys as keys_table
from .tables import scheduler
from .text import iso_utc, safe

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="refresh" content="{refresh}">
<title>{title}</title>
<style>
{{stylesheet}}
body {{{{
    color: {{foreground}};
    background-color: {{background}};
}}}}
</style>
</head>
<body>
<pre style="font-family:Menlo,'DejaVu Sans Mono',consolas,'Courier New',monospace"><code
 style="font-family:inherit">{{code}}</code></pre>
</body>
</html>
"""


def status_page(
    report: ScanReport | None,
    *,
    database: str,
    schema: str,
    refresh: int,
    error: str | None,
    scanned: datetime | None,
    took: float | None,
) -> str:
    """The page for the newest successful scan ``report`` (None: none yet), and ``error`` when
    the newest attempt failed."""
    with open(os.devnull, "w") as sink:
        page = recorder(sink)
        page.print(Text("catchup status", style="bold"))
        page.print(Text(safe(f"database: {database} · schema {schema}")))
        if scanned is not None and took is not None:
            page.print(
                Text(
                    f"scanned {iso_utc(scanned)} in {took:.2f}s · this page refreshes every "
                    f"{refresh}s"
                )
            )
        if error is not None:
            when = f" (shown: the scan of {iso_utc(scanned)})" if scanned is not None else ""
            page.print(Text(safe(f"the newest scan failed: {error}{when}"), style="bold red"))
        if report is None:
            page.print(Text("no scan has succeeded yet"))
        else:
            scan_tables(page, report, limit=GAP_LIMIT)
            keyed = [(job.job, job.keys) for job in report.jobs if job.keys]
            for name, count in keyed:
                line = Text(f"keys of {safe(name)}: {count:,} ")
                line.append("(the list)", style=Style(link=keys_path(name), underline=True))
                page.print(line)
            if report.pulse is not None:
                scheduler(page, report.pulse)
            calendars(page, report.calendars)
    template = PAGE.format(refresh=int(refresh), title="catchup status")
    return page.export_html(code_format=template, inline_styles=True)


# a keys page lists at most this many keys; /api/keys/NAME has every one
KEYS_SHOWN = 1_000


def keys_path(job: str, api: bool = False) -> str:
    """Where the status page serves a job's keys (``/keys/NAME``, or its JSON)."""
    return ("/api/keys/" if api else "/keys/") + quote(job, safe="")


def keys_page(report: KeysReport, *, refresh: int) -> str:
    """A keyed job's page of keys, as ``catchup keys`` lists them (the first
    :data:`KEYS_SHOWN`; the JSON has them all), linked back to the status page."""
    with open(os.devnull, "w") as sink:
        page = recorder(sink)
        home = Text("catchup status", style=Style(link="/", bold=True, underline=True))
        page.print(home)
        keys_table(page, report, limit=KEYS_SHOWN)
        if len(report.keys) > KEYS_SHOWN:
            api = keys_path(report.job, api=True)
            line = Text(f"shown: the first {KEYS_SHOWN:,} of {len(report.keys):,} keys; all: ")
            line.append(api, style=Style(link=api, underline=True))
            page.print(line)
    title = html.escape(f"catchup keys: {report.job}")
    template = PAGE.format(refresh=int(refresh), title=title.replace("{", "{{").replace("}", "}}"))
    return page.export_html(code_format=template, inline_styles=True)
