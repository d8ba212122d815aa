"""Where the log keeps its entries, hashes, checkpoints, blobs and tile files.

`LogStorage` is the interface; `SqliteStorage` the embedded default; `MemoryStorage`
the fake for tests. A PostgreSQL backend would implement the same protocol.
"""

from __future__ import annotations

from ledger.storage._audit import LogAudit, Problem, ProblemKind, audit_log, repair_log
from ledger.storage._check import LogCheck, check_log
from ledger.storage._hashes import StoredHashReader, TileCache, expand_tile, tile_nodes
from ledger.storage._memory import MemoryStorage
from ledger.storage._schema import SCHEMA_VERSION
from ledger.storage._sqlite import DB_NAME, SqliteStorage
from ledger.storage._types import (
    MAX_PAGE,
    MAX_RANGE,
    SEARCH_FIELDS,
    EntryFacts,
    EntrySummary,
    IntegratedBatch,
    LogStorage,
    SearchPage,
    StorageError,
    StoredCheckpoint,
    StoredEntry,
)

__all__ = [
    "DB_NAME",
    "MAX_PAGE",
    "MAX_RANGE",
    "SCHEMA_VERSION",
    "SEARCH_FIELDS",
    "EntryFacts",
    "EntrySummary",
    "IntegratedBatch",
    "LogAudit",
    "LogCheck",
    "LogStorage",
    "MemoryStorage",
    "Problem",
    "ProblemKind",
    "SearchPage",
    "SqliteStorage",
    "StorageError",
    "StoredCheckpoint",
    "StoredEntry",
    "StoredHashReader",
    "TileCache",
    "audit_log",
    "check_log",
    "expand_tile",
    "repair_log",
    "tile_nodes",
]
