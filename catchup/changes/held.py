"""Held jobs (pure): a configured job new to the ledger whose schedule is that of a job the
ledger has and the config no longer names looks like a rename nobody finished. Until the
config says which it is (``renamed_from``, the config following a ``catchup rename``, or
``not_renamed = true``), nothing of it is claimed: its periods, done under the old name, would
all run again under the new one (a second invoice run)."""

from __future__ import annotations

from collections.abc import Iterable

from ..config.job import Config
from ..ledger.rows import Unconfigured
from ..render.pasted import command

# the job key that says a job is new, not a renamed one (catchup/config/settings.py)
NOT_RENAMED = "not_renamed"


def lookalikes(
    config: Config, gone: Iterable[Unconfigured], fresh: Iterable[str]
) -> tuple[tuple[str, str], ...]:
    """(new name, old name) for each configured job in ``fresh`` (without a run in the ledger)
    whose schedule is that of a ``gone`` job of this project (the ledger's, the config does
    not name; another project's sharing the schema is none of its business), unless
    the config says it is new (``not_renamed``): the held jobs. A ``renamed_from`` the ledger
    has is no ``gone`` job (renamed at the first write, it is not new for long); one the
    ledger lacks (renamed since, to a name the config does not give) says nothing."""
    gone = list(gone)
    pairs = []
    for name in sorted(fresh):
        job = config.jobs[name]
        if job.not_renamed:
            continue
        pairs += [
            (name, u.name)
            for u in gone
            if (u.schedule, u.timezone) == (job.schedule.canonical, job.schedule.timezone)
            and u.project in (None, config.registrant)  # another project's is not a rename
        ]
    return tuple(pairs)


def held_said(new: str, old: str) -> str:
    """The one line that says ``new`` is held, naming ``old``, and the ways out: keeping
    ``old``'s name first (the way out after ``catchup rename`` was run before the config was
    edited), then ``new``'s, then a new job."""
    return (
        f"{new} is held: it is new to the ledger and has the schedule of {old}, which this "
        f"config no longer names, so nothing of {new} runs until the config says which it is. "
        f"The same job as {old}: rename [jobs.{new}] to [jobs.{old}] in the config to keep "
        f"{old}'s name, or keep {new}'s with `{command('rename', old, new, reason=True)}` or "
        f'renamed_from = "{old}" in [jobs.{new}]. A new job: {NOT_RENAMED} = true in '
        f"[jobs.{new}]"
    )
