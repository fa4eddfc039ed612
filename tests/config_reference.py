"""Write the table of a job's keys in docs/reference/config.md anew, from
:data:`catchup.config.job.JOB_KEYS` (the table the parser and ``make_job`` read).
``tests/unit/test_docs.py`` fails when the two drift apart.

    uv run python tests/config_reference.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catchup.config.settings import JOB_KEYS, JobKey

PAGE = Path(__file__).resolve().parent.parent / "docs" / "reference" / "config.md"
BEGIN = "<!-- job keys: generated from catchup/config/settings.py by tests/config_reference.py -->"
END = "<!-- end of job keys -->"


def written(key: JobKey) -> str:
    if key.required:
        return "required"
    if key.default is None:
        return "none"
    if isinstance(key.default, bool):
        return f"`{str(key.default).lower()}`"
    if isinstance(key.default, int):
        return f"`{key.default}`"
    return f'`"{key.default}"`'


def accepts(key: JobKey) -> str:
    bounds = []
    if key.kind == "duration" and key.at_least:
        bounds.append(f"at least {key.at_least}")
    elif key.kind == "duration":
        bounds.append("0s allowed" if key.zero else "more than 0s")
    if key.kind == "count":
        bounds.append(f"1 to {key.most:,}" if key.most else "at least 1")
    return key.accepts + (f" ({', '.join(bounds)})" if bounds else "")


def table() -> str:
    lines = [BEGIN, "", "| key | default | accepts | what it does |", "|---|---|---|---|"]
    for key in JOB_KEYS:
        cells = (f"`{key.name}`", written(key), accepts(key), key.means)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join([*lines, "", END])


def rewrite(text: str) -> str:
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + table() + tail


if __name__ == "__main__":
    PAGE.write_text(rewrite(PAGE.read_text()))
