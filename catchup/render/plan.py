"""``catchup plan NEW.toml``, for people (a line per job, then what runs at once) and for
scripts (JSON)."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.text import Text

from ..results import JobPlan, KeysChange, Plan
from ..vocabulary import JobChange
from .json import dumps
from .pasted import command
from .text import iso_utc, safe

MARK = {
    JobChange.added: "+",
    JobChange.held: "!",
    JobChange.renamed: ">",
    JobChange.redefined: "~",
    JobChange.unchanged: "=",
    JobChange.removed: "-",
}
QUOTED = frozenset(',"\\ ')  # a key holding one is quoted where keys are listed
STYLE = {"+": "green", "!": "yellow", ">": "cyan", "~": "yellow", "=": "dim", "-": "red"}


def plan_text(out: Console, plan: Plan) -> None:
    against = f"against {safe(plan.against)}" if plan.against else "against the ledger alone"
    out.print(Text(f"plan of {safe(plan.config)} {against}: {safe(plan.ledger)}"), soft_wrap=True)
    for other in plan.others:
        out.print(
            Text(
                f"note: the ledger records its jobs as defined by {safe(other)}: deployed as "
                "another file, this config is refused (one job, one definition) unless both "
                "say the same [project] name"
            ),
            soft_wrap=True,
        )
    for job in plan.jobs:
        mark = MARK[job.change]
        head, *parts = _said(job)
        line = Text(f"{mark} ", style=STYLE[mark])
        line.append(head)
        out.print(line, soft_wrap=True)
        for part in parts:  # each on a line of its own, under the job's
            out.print(Text(f"    {part}"), soft_wrap=True)
    out.print(Text(_verdict(plan), style="bold"))
    if plan.against is None and plan.runs:
        out.print(
            Text(
                "(with no current config to compare, every period the first tick would run "
                "counts: `catchup --config CURRENT.toml plan NEW.toml` counts only what the "
                "change adds)"
            )
        )


def _verdict(plan: Plan) -> str:
    if not plan.runs:
        return "Nothing would run at once."
    jobs = sum(1 for job in plan.jobs if job.runs)
    return (
        f"The first tick after this change would run {plan.runs:,} period(s) of {jobs:,} "
        "job(s) at once."
    )


def _said(job: JobPlan) -> list[str]:
    """What one job's line says, part by part."""
    head = f"{safe(job.job)}: {job.change}"
    if job.back:
        head += " back (the ledger has its past periods)"
    if job.change == JobChange.renamed:
        head += f" from {safe(job.was or '')}"
    elif job.change == JobChange.held:
        head += f": it has the schedule of {safe(job.was or '')}, which the config no longer names"
    if job.differs:
        head += f" ({', '.join(job.differs)})"
    if job.change == JobChange.removed:
        return [head, *_removed(job)]
    return [head, *_runs(job), *_older(job), *_counts(job), *_keys(job.keys)]


def _runs(job: JobPlan) -> list[str]:
    if job.change == JobChange.held:
        return ["nothing of it runs until the config says which it is (see catchup why)"]
    if job.paused:
        return [f"paused: nothing of it runs until `{command('resume', job.job)}`"]
    if not job.at_once:
        what = "(key, period)s" if job.keys is not None else "period(s)"
        return [f"{job.already:,} due {what} run as they would anyway"] if job.already else []
    span = job.label(job.at_once[0])
    if len(job.at_once) > 1:
        span += f" .. {job.label(job.at_once[-1])}"
    said = f"runs {len(job.at_once):,} period(s) at once: {safe(span)}"
    if job.at_once_keys:
        said = f"runs {job.at_once_keys:,} (key, period)s at once over {safe(span)}"
    more = [f"{job.left:,} more for later ticks (max_per_tick)"] if job.left else []
    return [said, *more]


def _older(job: JobPlan) -> list[str]:
    """The gaps no tick runs (before its catchup_window, or of its catch-up policy): replay's."""
    older = job.gaps - job.runs - job.already - job.left
    if older <= 0 or job.keys or job.paused:
        return []
    return [f"{older:,} older gap(s) left to replay"]


def _counts(job: JobPlan) -> list[str]:
    """Periods expected, excluded and gaps from its start to now: with what they were under
    the current config when that differs (or, of a new job, when there are any)."""
    said = []
    for name, now, before in (
        ("expected", job.expected, job.expected_before),
        ("excluded", job.excluded, job.excluded_before),
        ("gaps", job.gaps, job.gaps_before),
    ):
        if before is not None and before != now and job.change != JobChange.added:
            said.append(f"{name} {now:,} (was {before:,})")
        elif job.change == JobChange.added and now:
            said.append(f"{name} {now:,}")
    return [" · ".join(said)] if said else []


def _keys(keys: KeysChange | None) -> list[str]:
    if keys is None:
        return []
    if keys.error is not None:
        return [f"its keys query fails: {safe(keys.error)}"]
    said = []
    if keys.added:
        said.append(f"+{keys.added:,} ({_first(keys.first_added, keys.added)})")
    if keys.gone:
        said.append(f"-{keys.gone:,} ({_first(keys.first_gone, keys.gone)})")
    return [f"keys {', '.join(said)}"] if said else []


def _first(names: tuple[str, ...], count: int) -> str:
    """The keys named, each quoted when it holds a comma, a quote or a space (or is '…')."""
    shown = [json.dumps(n) if _needs_quotes(n) else n for n in names]
    return ", ".join(safe(n) for n in shown) + (", …" if count > len(names) else "")


def _needs_quotes(key: str) -> bool:
    return not key or key == "…" or any(c in key for c in QUOTED)


def _removed(job: JobPlan) -> list[str]:
    said = ["its periods stop being expected; nothing of it runs"]
    if job.expected_before is not None:
        said[0] = f"its {job.expected_before:,} period(s) stop being expected; nothing of it runs"
    if job.last_success is not None:
        said.append(f"last success {iso_utc(job.last_success)}")
    said.append(f"`{command('retire', job.job, reason=True)}` records it as gone on purpose")
    return said


def plan_json(plan: Plan) -> str:
    return dumps(
        {
            "config": plan.config,
            "against": plan.against,
            "ledger": plan.ledger,
            "now": iso_utc(plan.now),
            "runs_at_once": plan.runs,
            "defined_by_others": list(plan.others),
            "jobs": [_job_json(job) for job in plan.jobs],
        },
        indent=2,
    )


def _job_json(job: JobPlan) -> dict[str, Any]:
    keys = job.keys
    return {
        "job": job.job,
        "change": str(job.change),
        "was": job.was,
        "differs": list(job.differs),
        "runs_at_once": job.runs,
        "periods_at_once": [
            {"start": iso_utc(start), "label": job.label(start)} for start in job.at_once
        ],
        "already_due": job.already,
        "left_for_later_ticks": job.left,
        "expected": job.expected,
        "expected_before": job.expected_before,
        "excluded": job.excluded,
        "excluded_before": job.excluded_before,
        "gaps": job.gaps,
        "gaps_before": job.gaps_before,
        "keys": None
        if keys is None
        else {
            "added": keys.added,
            "gone": keys.gone,
            "first_added": list(keys.first_added),
            "first_gone": list(keys.first_gone),
            "error": keys.error,
        },
        "last_success": iso_utc(job.last_success) if job.last_success else None,
        "paused": job.paused,
        "back": job.back,
    }
