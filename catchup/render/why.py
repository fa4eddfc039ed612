"""``catchup why``: one period's state and what explains it, with the upstream periods a
blocked one waits for indented under it, down the chain."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from ..results import Why
from .text import STYLE, safe


def why_text(console: Console, result: Why) -> None:
    _period(console, result, 0)
    commands = result.commands
    if commands:
        console.print(Text("to move it:", style="bold"))
        for command in commands:
            console.print(Text(f"  {safe(command)}"), soft_wrap=True)  # whole, to copy


def _period(console: Console, result: Why, depth: int) -> None:
    pad = "  " * depth
    line = Text(f"{pad}{safe(result.job)} {safe(result.label)}: ")
    line.append(result.state, style=STYLE.get(result.state, "bold"))
    console.print(line)
    for said in result.said:
        console.print(Text(f"{pad}  {safe(said)}"))
    for upstream in result.upstream:
        _period(console, upstream, depth + 1)
    if result.more:
        console.print(Text(f"{pad}  and {result.more} more upstream period(s) not done"))
