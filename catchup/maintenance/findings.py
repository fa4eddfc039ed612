"""A finding of ``catchup doctor``: its level, its topic, one line of text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["ok", "info", "warning", "serious"]


@dataclass(frozen=True)
class Finding:
    level: Level
    topic: str
    text: str
