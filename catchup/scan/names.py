"""A job's scan result read by the names ``scan --json`` gives (``job.missing``, ``job.error``):
the JSON's names as attributes of ``JobScan``, beside the fields it keeps (``counts``,
``evidence_error``). Pure."""

from __future__ import annotations

from typing import Protocol, overload


class _Counted(Protocol):
    @property
    def counts(self) -> dict[str, int]: ...


class Count:
    """One state's count, an attribute named for the state: ``job.missing`` is
    ``job.counts["missing"]`` (zero when the scan counted none)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.state = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Count: ...
    @overload
    def __get__(self, obj: _Counted, owner: type | None = None) -> int: ...
    def __get__(self, obj: _Counted | None, owner: type | None = None) -> Count | int:
        return self if obj is None else obj.counts.get(self.state, 0)


class JsonNames:
    """Mixed into ``JobScan``: each count of ``scan --json`` (one per period state) and its
    ``error`` (why the evidence query could not be read)."""

    evidence_error: str | None

    succeeded = Count()
    waived = Count()
    excluded = Count()
    untracked = Count()
    running = Count()
    unverified = Count()
    outdated = Count()
    missing = Count()
    blocked = Count()
    interrupted = Count()
    cancelled = Count()
    stale = Count()
    suspect = Count()
    failed = Count()
    exhausted = Count()

    @property
    def error(self) -> str | None:
        """``evidence_error``, by its name in the JSON."""
        return self.evidence_error
