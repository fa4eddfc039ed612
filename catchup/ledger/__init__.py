"""The data-access layer: every statement catchup sends goes through :class:`Ledger` (its
text in ``sql/``) and comes back as a typed row or value. Nothing else runs SQL."""

from __future__ import annotations

from .alerts import Alerting
from .base import LedgerBase
from .batches import Batches, Many
from .cancels import Cancels
from .changes import Changing
from .claims import ClaimPath, ClaimRequest, FinishFields
from .compaction import Compaction
from .evidence import EvidenceCheck, EvidenceQuery
from .keys import Keys, read_keys
from .leader import Leading
from .pages import Pages
from .scans import Scanning
from .tools import Tools

__all__ = [
    "ClaimRequest",
    "EvidenceQuery",
    "FinishFields",
    "Ledger",
    "LedgerBase",
    "Many",
    "read_keys",
]


class Ledger(
    ClaimPath,
    Batches,
    Changing,
    EvidenceCheck,
    Keys,
    Alerting,
    Scanning,
    Compaction,
    Pages,
    Cancels,
    Leading,
    Tools,
):
    """The ledger in ``schema``, through one autocommit connection."""
