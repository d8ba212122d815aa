"""ledger: the log (RFC 9162 Merkle tree, checkpoints, storage, HTTP server)."""

from __future__ import annotations


class LedgerError(Exception):
    """Root of every error raised by the ledger package."""


__all__ = ["LedgerError"]
