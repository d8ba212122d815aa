"""The ledger package's exception root (kept apart so submodules can import it)."""

from __future__ import annotations


class LedgerError(Exception):
    """Root of every error raised by the ledger package."""
