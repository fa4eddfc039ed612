"""The scheduler's pulse for people: when `catchup tick` last ran, from where, and who leads
the built-in scheduler (``catchup scheduler``); one line each, a warning per problem."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from ..scheduler.pulsefacts import Pulse
from .text import iso_utc, safe, span


def scheduler(console: Console, pulse: Pulse) -> None:
    """One line on the scheduler's pulse, and a warning per problem."""
    if pulse.last_tick is None:
        console.print(
            Text(
                "scheduler: no tick recorded yet (is something calling `catchup tick`?)",
                style="dim",
            )
        )
    else:
        ago = (pulse.now - pulse.last_tick).total_seconds()
        every = f", about every {span(round(pulse.interval))}" if pulse.interval else ""
        console.print(
            Text(
                f"scheduler: last tick {iso_utc(pulse.last_tick)} from "
                f"{safe(pulse.last_host or '')} ({span(round(ago))} ago{every})",
                style="dim",
            )
        )
    if pulse.leader is not None:
        console.print(Text(f"scheduler: {safe(leader_text(pulse))}", style="dim"))
    if (late := lateness_text(pulse)) is not None:
        console.print(Text(f"scheduler: {late}", style="dim"))
    for warning in pulse.warnings:
        console.print(Text(f"warning: {safe(warning)}", style="yellow"), soft_wrap=True)


def leader_text(pulse: Pulse) -> str:
    """Who leads ``catchup scheduler``, in words (every report that shows the pulse)."""
    lead = pulse.leader
    if lead is None:
        return "catchup scheduler has never led here"
    if lead.live:
        since = span(round((lead.now - lead.since).total_seconds()))
        lanes = ", ".join(
            f"{lane} {busy} of {workers}"
            for lane, (workers, busy) in sorted((lead.lanes or {}).items())
        )
        busy = f"; workers busy: {lanes}" if lanes else ""
        return f"catchup scheduler led by {lead.holder} (term {lead.term}, for {since}{busy})"
    ago = span(round((lead.now - lead.expires_at).total_seconds()))
    return f"catchup scheduler: no leader for {ago} (the last: {lead.holder}, term {lead.term})"


def lateness_text(pulse: Pulse) -> str | None:
    """How late the last hour's periods started, in words; None when none fell due."""
    late = pulse.late
    if late is None:
        return None
    still = f"; {late.waiting} still waiting, counted as late as they are" if late.waiting else ""
    return (
        f"the last hour's {late.count} {'period' if late.count == 1 else 'periods'} started "
        f"{seconds(late.p50)} after falling due (p99 {seconds(late.p99)}, "
        f"worst {seconds(late.worst)}{still})"
    )


def seconds(value: float) -> str:
    """0.31 s, 4.2 s, 1m 5s."""
    if value < 10:
        return f"{value:.2g} s" if value < 1 else f"{value:.1f} s"
    return span(round(value))
