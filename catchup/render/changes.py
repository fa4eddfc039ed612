"""What changes by hand did: marks, resets, adoptions, pauses, resumes, renames and
retirements, for people on a terminal (one line per period or per run of alike periods) and as
JSON (``--json``)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from ..results import Changes, Paused, Renamed, Resumed, Retired, Windows
from ..vocabulary import EventAction
from .json import dumps, period_json
from .text import STYLE, iso_utc, safe, span

VERB = {
    EventAction.done: "marked done",
    EventAction.skip: "marked skip",
    EventAction.reset: "reset",
    EventAction.adopt: "adopted",
}


def adopted(console: Console, results: list[Changes]) -> None:
    """What an adopt did: per job, how many untracked periods it recorded, first and last."""
    for result in results:
        done = [row for row in result.rows if row.changed]
        if not done:
            console.print(Text(f"{safe(result.job)}: nothing untracked to adopt"))
            continue
        span_text = done[0].label if len(done) == 1 else f"{done[0].label} .. {done[-1].label}"
        console.print(
            Text(
                f"{safe(result.job)}: adopted {len(done)} untracked period(s), "
                f"{safe(span_text)} (waived, shown by history)"
            ),
            soft_wrap=True,
        )


CHANGE_LINES = 10  # a mark or reset of more periods prints runs of them


def changes(console: Console, result: Changes) -> None:
    """What a mark or reset did, one line per period (beyond a few, one per run of consecutive
    periods that changed alike), then how many changed."""
    rows = list(result.rows)
    groups: list[list[Any]] = []
    for row in rows:
        key = (row.job, row.key, row.previous, row.now, row.changed)
        if len(rows) > CHANGE_LINES and groups and groups[-1][0] == key:
            groups[-1][2] = row
            groups[-1][3] += 1
        else:
            groups.append([key, row, row, 1])
    for _, first, last, count in groups:
        label = first.label if count == 1 else f"{first.label} .. {last.label}"
        line = Text(
            safe(f"{first.job} {first.key} {label}: " if first.key else f"{first.job} {label}: ")
        )
        now = f"{first.now} (runnable)" if result.action == EventAction.reset else str(first.now)
        if not first.changed:
            line.append(f"unchanged (already {first.now})", style="dim")
        else:
            line.append(f"{first.previous} → {now}", style=STYLE.get(first.now, ""))
        if count > 1:
            line.append(f" ({count:,} periods)")
        console.print(line, soft_wrap=True)
    console.print(f"{VERB[result.action]}: {result.changed} of {len(result.rows)} period(s)")


def paused(console: Console, result: Paused) -> None:
    name = f"{result.job} {result.key}" if result.key else result.job
    console.print(Text(safe(f"{name}: paused since {iso_utc(result.since)}")))


def resumed(console: Console, result: Resumed) -> None:
    name = safe(f"{result.job} {result.key}" if result.key else result.job)
    if not result.resumed:
        console.print(Text(f"{name}: not paused; nothing to resume"))
        return
    policy = {
        "all": f"every gap of the last {span(result.catchup_window)}, at most "
        f"{result.max_per_tick} a tick",
        "latest": "only the newest due period",
        "none": "only periods that become due from now on",
    }[result.catchup]
    console.print(
        Text(f"{name}: resumed; the next tick runs {policy} (catchup = {result.catchup!r})"),
        soft_wrap=True,
    )


def renamed(console: Console, result: Renamed) -> None:
    console.print(
        safe(f"renamed {result.old} to {result.new}: its runs, attempts and changes go with it"),
        soft_wrap=True,
    )
    if result.config_behind:
        old, new = result.old, result.new
        console.print(
            safe(
                f"now rename [jobs.{old}] to [jobs.{new}] in the config: until then {old} is "
                "held (nothing of it runs)"
            ),
            soft_wrap=True,
        )


def retired(console: Console, result: Retired) -> None:
    console.print(
        safe(f"retired {result.job}: no longer said to be missing; its history stays"),
        soft_wrap=True,
    )


def changes_dict(result: Changes) -> dict[str, object]:
    """A mark's, reset's or one job's adoption as JSON: each period named, its state before
    and after, and whether it changed."""
    return {
        "job": result.job,
        "action": str(result.action),
        "changed": result.changed,
        "periods": [
            {
                **({"key": row.key} if row.key else {}),
                **period_json(row.period.start, row.period.end, row.label),
                "previous": str(row.previous),
                "now": str(row.now),
                "changed": row.changed,
            }
            for row in result.rows
        ],
    }


def changes_json(result: Changes) -> str:
    return dumps(changes_dict(result))


def adopted_json(results: list[Changes]) -> str:
    return dumps({"jobs": [changes_dict(result) for result in results]})


def paused_json(result: Paused) -> str:
    key = {"key": result.key} if result.key else {}
    return dumps({"job": result.job, **key, "paused": True, "since": iso_utc(result.since)})


def resumed_json(result: Resumed) -> str:
    return dumps(
        {
            "job": result.job,
            **({"key": result.key} if result.key else {}),
            "resumed": result.resumed,
            "catchup": result.catchup,
            "catchup_window_seconds": int(result.catchup_window.total_seconds()),
            "max_per_tick": result.max_per_tick,
        }
    )


def renamed_json(result: Renamed) -> str:
    return dumps({"old": result.old, "new": result.new, "config_behind": result.config_behind})


def retired_json(result: Retired) -> str:
    return dumps({"job": result.job, "retired": True})


def windows(console: Console, result: Windows) -> None:
    """What ``exclude`` recorded or undid: a line per window, then how many periods."""
    for w in result.windows:
        name = f"{w.job} {w.key}" if w.key else w.job
        verb = "excluded" if result.action == EventAction.exclude else "no longer excluded"
        line = Text(safe(f"{name}: "))
        line.append(verb, style=STYLE.get("excluded", "") if verb == "excluded" else "")
        line.append(
            safe(f" {iso_utc(w.first)} .. {iso_utc(w.until)} ({w.periods:,} period(s)): {w.reason}")
        )
        console.print(line, soft_wrap=True)
    done = "recorded" if result.action == EventAction.exclude else "undone"
    console.print(f"{done}: {len(result.windows)} window(s), {result.periods:,} period(s)")


def windows_json(result: Windows) -> str:
    return dumps(
        {
            "action": str(result.action),
            "windows": [
                {
                    "job": w.job,
                    "key": w.key,
                    "first": iso_utc(w.first),
                    "until": iso_utc(w.until),
                    "periods": w.periods,
                    "reason": w.reason,
                    "actor": w.actor,
                    "new": w.new,
                }
                for w in result.windows
            ],
        }
    )
