"""Where the log keeps its entries, hashes, checkpoints, blobs and tile files.

`LogStorage` is the interface; `SqliteStorage` the embedded default; `MemoryStorage`
the fake for tests; `PostgresStorage` (``ledger.storage._postgres``, needs the
``postgresql`` extra) lets several frontends share one log. `open_storage` picks one.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ledger.storage._audit import LogAudit, Problem, ProblemKind, audit_log, repair_log
from ledger.storage._check import LogCheck, check_log
from ledger.storage._copy import CopyResult, copy_log
from ledger.storage._hashes import StoredHashReader, TileCache, expand_tile, tile_nodes
from ledger.storage._memory import MemoryStorage
from ledger.storage._queue import (
    MAX_QUEUED,
    MAX_TAKE,
    Outcome,
    Queued,
    QueueFull,
    QueueRow,
    SharedQueue,
)
from ledger.storage._schema import SCHEMA_VERSION
from ledger.storage._sqlite import DB_NAME, SqliteStorage
from ledger.storage._summaries import (
    SUMMARY_BATCH,
    SummaryCheck,
    SummaryCursor,
    SummaryDrift,
    SummarySource,
    check_summaries,
)
from ledger.storage._types import (
    MAX_PAGE,
    MAX_RANGE,
    SEARCH_FIELDS,
    SIGNED_SCAN,
    DigestSummary,
    EntryFacts,
    EntrySummary,
    IntegratedBatch,
    KindCount,
    LogStorage,
    SearchPage,
    StorageError,
    StoredCheckpoint,
    StoredEntry,
)
from ledger.storage._url import check_database_url, redact_url

if TYPE_CHECKING:
    from ledger.storage._postgres import PostgresStorage


def __getattr__(name: str) -> Any:
    """`PostgresStorage`, imported when asked for (it needs the optional psycopg)."""
    if name == "PostgresStorage":
        from ledger.storage._postgres import PostgresStorage

        return PostgresStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_storage(data_dir: str | os.PathLike[str] | None, database: str | None = None) -> LogStorage:
    """The log's storage: PostgreSQL at ``database`` if given, else SQLite in ``data_dir``."""
    if database is not None:
        try:
            from ledger.storage._postgres import PostgresStorage
        except ImportError as e:
            raise StorageError(
                f"--database needs the PostgreSQL driver ({e}): install this project with "
                "its postgresql extra (psycopg, psycopg_pool)"
            ) from None
        return PostgresStorage(database)
    if data_dir is None:
        raise StorageError("no storage: give a data folder or a database URL")
    return SqliteStorage(data_dir)


def open_queue(storage: LogStorage, max_queued: int = MAX_QUEUED) -> SharedQueue | None:
    """The shared queue of a PostgreSQL log (several frontends, one integrator); None for
    the embedded backends, which integrate in process."""
    try:
        from ledger.storage._pg_queue import PgQueue
        from ledger.storage._postgres import PostgresStorage
    except ImportError:
        return None
    if not isinstance(storage, PostgresStorage):
        return None
    return PgQueue(storage, max_queued=max_queued)


__all__ = [
    "DB_NAME",
    "MAX_PAGE",
    "MAX_QUEUED",
    "MAX_RANGE",
    "MAX_TAKE",
    "SCHEMA_VERSION",
    "SEARCH_FIELDS",
    "SIGNED_SCAN",
    "SUMMARY_BATCH",
    "CopyResult",
    "DigestSummary",
    "EntryFacts",
    "EntrySummary",
    "IntegratedBatch",
    "KindCount",
    "LogAudit",
    "LogCheck",
    "LogStorage",
    "MemoryStorage",
    "Outcome",
    "PostgresStorage",
    "Problem",
    "ProblemKind",
    "QueueFull",
    "QueueRow",
    "Queued",
    "SearchPage",
    "SharedQueue",
    "SqliteStorage",
    "StorageError",
    "StoredCheckpoint",
    "StoredEntry",
    "StoredHashReader",
    "SummaryCheck",
    "SummaryCursor",
    "SummaryDrift",
    "SummarySource",
    "TileCache",
    "audit_log",
    "check_database_url",
    "check_log",
    "check_summaries",
    "copy_log",
    "expand_tile",
    "open_queue",
    "open_storage",
    "redact_url",
    "repair_log",
    "tile_nodes",
]
