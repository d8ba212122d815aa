"""vindex: the verifiable index, a map from index keys to entry indices committed by the log.

Holds which keys an entry names (`_keys`), the map's hashes and the pure
verification of a lookup proof (`_proof`), the trie with incremental updates and
proof generation over a node store (`_map`), and the index over a log's entries
(`_index`). The format is specified in docs/vindex.md.

May import: `attest` (its strict JSON reader) and `ledger._errors`. The pure
verification (`_proof`) imports neither a web framework nor storage, so a client
verifies lookups with it alone.
"""

from __future__ import annotations

from ledger.vindex._index import IndexAnswer, ListStore, MemoryLists, VerifiableIndex
from ledger.vindex._keys import KEY_KINDS, IndexKey, entry_keys
from ledger.vindex._map import MemoryNodes, NodeStore, lookup_proof, root_of, update
from ledger.vindex._proof import (
    EMPTY,
    IndexProofError,
    IndexRootMismatchError,
    LookupProof,
    leaf_hash,
    list_hash,
    node_hash,
    verify_lookup,
)

__all__ = ["EMPTY", "KEY_KINDS", "IndexAnswer", "IndexKey", "IndexProofError",
           "IndexRootMismatchError", "ListStore", "LookupProof", "MemoryLists", "MemoryNodes",
           "NodeStore", "VerifiableIndex", "entry_keys", "leaf_hash", "list_hash",
           "lookup_proof", "node_hash", "root_of", "update", "verify_lookup"]
