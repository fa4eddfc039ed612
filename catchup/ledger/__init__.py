"""The data-access layer: every statement catchup sends goes through :class:`Ledger` (its
text in ``sql/``) and comes back as a typed row (:mod:`catchup.ledger.rows`) or value. Nothing
else runs SQL.

Names are imported lazily: a row type (``catchup.ledger.rows``) is read without the driver and
every part of the ledger being imported with it (the render layer knows no database)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "ClaimRequest": ".claims",
    "EvidenceQuery": ".evidence",
    "FinishFields": ".claims",
    "KeysDiff": ".keys",
    "KeysRaced": ".keys",
    "KeysRead": ".keys",
    "Ledger": ".whole",
    "LedgerBase": ".base",
    "Many": ".batches",
    "diff_keys": ".keys",
    "read_keys": ".keys",
}

__all__ = [
    "ClaimRequest",
    "EvidenceQuery",
    "FinishFields",
    "KeysDiff",
    "KeysRaced",
    "KeysRead",
    "Ledger",
    "LedgerBase",
    "Many",
    "diff_keys",
    "read_keys",
]

if TYPE_CHECKING:
    from .base import LedgerBase
    from .batches import Many
    from .claims import ClaimRequest, FinishFields
    from .evidence import EvidenceQuery
    from .keys import KeysDiff, KeysRaced, KeysRead, diff_keys, read_keys
    from .whole import Ledger


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name], __name__), name)
    raise AttributeError(f"module 'catchup.ledger' has no attribute {name!r}")
