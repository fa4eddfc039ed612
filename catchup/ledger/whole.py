"""The whole :class:`Ledger`: one class made of the data-access layer's parts, each a file of
``ledger/`` and of ``sql/queries/``."""

from __future__ import annotations

from .alerts import Alerting
from .batches import Batches
from .cancels import Cancels
from .changes import Changing
from .claims import ClaimPath
from .compaction import Compaction
from .evidence import EvidenceCheck
from .exclusions import Exclusions
from .keys import Keys
from .leader import Leading
from .pages import Pages
from .pings import Pings
from .scans import Scanning
from .tools import Tools


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
    Pings,
    Exclusions,
    Leading,
    Tools,
):
    """The ledger in ``schema``, through one autocommit connection."""
