"""ledger: the log (RFC 9162 Merkle tree, checkpoints, storage, HTTP server).

Importing this package pulls in only the pure verifying core (no web framework,
database or HTTP client), so auditors can install and read as little as possible.
"""

from __future__ import annotations

from ledger._errors import LedgerError
from ledger.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    LEAF_PREFIX,
    NODE_PREFIX,
    CompactRange,
    HashReader,
    MemoryHashStore,
    MissingHashError,
    ProofError,
    RootMismatchError,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root_of,
    tree_root,
    verify_consistency,
    verify_inclusion,
)

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "LEAF_PREFIX",
    "NODE_PREFIX",
    "CompactRange",
    "HashReader",
    "LedgerError",
    "MemoryHashStore",
    "MissingHashError",
    "ProofError",
    "RootMismatchError",
    "consistency_proof",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "root_of",
    "tree_root",
    "verify_consistency",
    "verify_inclusion",
]
