"""The status page of ``catchup serve``: the scan report as ``--output html`` draws it (per-job
summary, gap ranges, the scheduler's pulse, calendars), under a line that says which database
and schema, how old the scan is, and whether the newest one failed. Static HTML that refreshes
itself: no JavaScript, readable without colour (every state has a glyph), and every text from a
user or a job escaped (Rich's HTML export escapes all text; the page adds nothing unescaped)."""

from __future__ import annotations

import os
from datetime import datetime

from rich.text import Text

from ..models import ScanReport
from .limits import GAP_LIMIT
from .scan import calendars, recorder, scan_tables
from .tables import scheduler
from .text import iso_utc, safe

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="refresh" content="{refresh}">
<title>catchup status</title>
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
            if report.pulse is not None:
                scheduler(page, report.pulse)
            calendars(page, report.calendars)
    template = PAGE.format(refresh=int(refresh))
    return page.export_html(code_format=template, inline_styles=True)
