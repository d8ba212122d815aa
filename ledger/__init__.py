"""ledger: the log (RFC 9162 Merkle tree, checkpoints, storage, HTTP server).

Importing this package pulls in only the pure verifying core (no web framework,
database or HTTP client), so auditors can install and read as little as possible.
"""

from __future__ import annotations

from ledger._errors import LedgerError
from ledger.checkpoint import (
    Checkpoint,
    CheckpointError,
    SignedCheckpoint,
    open_checkpoint,
    sign_checkpoint,
)
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
from ledger.note import (
    Note,
    NoteError,
    NoteSignature,
    NoteSigner,
    NoteVerifier,
    Signer,
    Verifier,
    key_id,
    open_note,
    sign_note,
    verifier_key_string,
)

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "LEAF_PREFIX",
    "NODE_PREFIX",
    "Checkpoint",
    "CheckpointError",
    "CompactRange",
    "HashReader",
    "LedgerError",
    "MemoryHashStore",
    "MissingHashError",
    "Note",
    "NoteError",
    "NoteSignature",
    "NoteSigner",
    "NoteVerifier",
    "ProofError",
    "RootMismatchError",
    "SignedCheckpoint",
    "Signer",
    "Verifier",
    "consistency_proof",
    "inclusion_proof",
    "key_id",
    "leaf_hash",
    "node_hash",
    "open_checkpoint",
    "open_note",
    "root_of",
    "sign_checkpoint",
    "sign_note",
    "tree_root",
    "verifier_key_string",
    "verify_consistency",
    "verify_inclusion",
]
