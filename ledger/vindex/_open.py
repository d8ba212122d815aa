"""`open_index`: the verifiable index in the same backend as a log's storage."""

from __future__ import annotations

import weakref

from ledger.storage import LogStorage, SqliteStorage
from ledger.vindex._sqlite import SqliteIndexRows
from ledger.vindex._stored import IndexRows, MemoryIndexRows, StoredIndex, WriteBack

__all__ = ["open_index"]

_MEMORY: weakref.WeakKeyDictionary[object, MemoryIndexRows] = weakref.WeakKeyDictionary()


def open_index(storage: LogStorage, write_back: WriteBack | None = None) -> StoredIndex:
    """The index next to `storage`'s log: tables in its SQLite or PostgreSQL database;
    for any other storage (the in-memory one) rows in memory, one set per storage."""
    rows: IndexRows
    if isinstance(storage, SqliteStorage):
        rows = SqliteIndexRows(storage._conn)
    elif type(storage).__name__ == "PostgresStorage":
        from ledger.vindex._postgres import PgIndexRows

        rows = PgIndexRows(storage)  # type: ignore[arg-type]
    else:
        rows = _MEMORY.setdefault(storage, MemoryIndexRows())
    return StoredIndex(rows, write_back)
