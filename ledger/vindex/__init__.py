"""vindex: the verifiable index, a map from index keys to entry indices committed by the log.

Holds which keys an entry names (`_keys`), the map's hashes and the pure
verification of a lookup proof (`_proof`), the trie with incremental updates and
proof generation over a node store (`_map`), and the index over a log's entries
(`_index`), the map in tiles of 8 levels (`_tiles`), the index kept next to the
log's storage and updated with each batch (`_stored`; rows in SQLite `_sqlite`,
PostgreSQL `_postgres`, chosen by `open_index`), and the checkpoint line that commits
to the root (`_commit`), and a long list read and checked page by page (`_pages`). The format is specified in docs/vindex.md.

May import: `attest` (its strict JSON reader), `ledger.tlog` (its exception root), `ledger.tlog.checkpoint`;
`ledger.storage` only in the backends, which `open_index` imports when called. The
pure verification (`_proof`, `_commit`) imports neither a web framework nor storage,
so a client verifies lookups with it alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.vindex._commit import (
    COMMITMENT_PREFIX,
    commitment_line,
    commitment_lines,
    committed_root,
)
from ledger.vindex._index import IndexAnswer, ListStore, MemoryLists, VerifiableIndex
from ledger.vindex._keys import KEY_KINDS, IndexKey, entry_key_hashes, entry_keys
from ledger.vindex._map import MemoryNodes, NodeStore, extend_lists, lookup_proof, root_of, update
from ledger.vindex._open import open_index as _open_index
from ledger.vindex._pages import MAX_PAGE, ListChain, ListPage, PageOrderError
from ledger.vindex._proof import (
    EMPTY,
    IndexProofError,
    IndexRootMismatchError,
    ListHashMismatch,
    LookupProof,
    leaf_hash,
    list_hash,
    node_hash,
    verify_lookup,
    verify_lookup_value,
)
from ledger.vindex._sqlite import SqliteIndexRows
from ledger.vindex._stored import (
    MAX_ANSWER,
    IndexRows,
    IndexStoreError,
    MemoryIndexRows,
    PendingIndex,
    PreparedIndex,
    RawLookup,
    StoredAnswer,
    StoredIndex,
    TooManyResults,
    WriteBack,
    path_tiles,
)
from ledger.vindex._tiles import TILE_LEVELS, TiledNodes, TileKey, decode_tile, encode_tile

if TYPE_CHECKING:
    from ledger.storage import LogStorage


def open_index(storage: LogStorage, write_back: WriteBack | None = None) -> StoredIndex:
    """The index in `storage`'s backend (SQLite, PostgreSQL; in memory otherwise);
    `write_back`: how long it may hold committed batches' rows (`WriteBack`)."""

    return _open_index(storage, write_back)


__all__ = [
    "COMMITMENT_PREFIX",
    "EMPTY",
    "KEY_KINDS",
    "MAX_ANSWER",
    "MAX_PAGE",
    "TILE_LEVELS",
    "IndexAnswer",
    "IndexKey",
    "IndexProofError",
    "IndexRootMismatchError",
    "IndexRows",
    "IndexStoreError",
    "ListChain",
    "ListHashMismatch",
    "ListPage",
    "ListStore",
    "LookupProof",
    "MemoryIndexRows",
    "MemoryLists",
    "MemoryNodes",
    "NodeStore",
    "PageOrderError",
    "PendingIndex",
    "PreparedIndex",
    "RawLookup",
    "SqliteIndexRows",
    "StoredAnswer",
    "StoredIndex",
    "TileKey",
    "TiledNodes",
    "TooManyResults",
    "VerifiableIndex",
    "WriteBack",
    "commitment_line",
    "commitment_lines",
    "committed_root",
    "decode_tile",
    "encode_tile",
    "entry_key_hashes",
    "entry_keys",
    "extend_lists",
    "leaf_hash",
    "list_hash",
    "lookup_proof",
    "node_hash",
    "open_index",
    "path_tiles",
    "root_of",
    "update",
    "verify_lookup",
    "verify_lookup_value",
]
