"""The verifiable index's rows in the log's SQLite database (new tables, next to the log's).

``vindex_tiles`` holds the map in tiles of 8 levels (`ledger.vindex._tiles`; a key's
leaf holds its list's hash), ``vindex_postings`` one row per (key, entry),
``vindex_size`` how many entries are in. A batch's rows are written in one
transaction; a lookup reads in one read transaction (a WAL snapshot).

``vindex_tiles`` is a rowid table: a dense tile (up to 511 records, 34 KB) spills into
overflow pages, which a WITHOUT ROWID table rewrites at more CPU (docs/performance.md, "Tile
rows on SQLite": the index's CPU per entry -16 % in process); a tile is updated in place
(an upsert keeps its row). A database made with the earlier WITHOUT ROWID table is moved over when opened.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable

from ledger.vindex._stored import IndexStoreError, PendingIndex, RawLookup, path_tiles
from ledger.vindex._tiles import TileKey

__all__ = ["SqliteIndexRows"]

_log = logging.getLogger(__name__)

_TILES = """
CREATE TABLE IF NOT EXISTS vindex_tiles (
    depth INTEGER NOT NULL, path BLOB NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (depth, path))"""
_SCHEMA = _TILES + """;
DROP TABLE IF EXISTS vindex_heads;
CREATE TABLE IF NOT EXISTS vindex_postings (
    key BLOB NOT NULL, idx INTEGER NOT NULL, PRIMARY KEY (key, idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vindex_size (
    one INTEGER PRIMARY KEY CHECK (one = 1), size INTEGER NOT NULL);
INSERT OR IGNORE INTO vindex_size (one, size) VALUES (1, 0);
"""


_UPSERT_TILE = ("INSERT INTO vindex_tiles (depth, path, data) VALUES (?, ?, ?) "
                "ON CONFLICT (depth, path) DO UPDATE SET data = excluded.data")


def _move_tiles_to_rowid(conn: sqlite3.Connection) -> None:
    """Move an earlier WITHOUT ROWID ``vindex_tiles`` into the rowid table, rows as they
    are (inside the caller's transaction; a failure leaves the old table)."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' "
                       "AND name = 'vindex_tiles'").fetchone()
    if row is None or "WITHOUT ROWID" not in str(row[0]).upper():
        return
    count = int(conn.execute("SELECT count(*) FROM vindex_tiles").fetchone()[0])
    _log.info("moving %d index tiles to a rowid table (cheaper dense-tile writes)", count)
    conn.execute("ALTER TABLE vindex_tiles RENAME TO vindex_tiles_without_rowid")
    conn.execute(_TILES)
    conn.execute("INSERT INTO vindex_tiles (depth, path, data) "
                 "SELECT depth, path, data FROM vindex_tiles_without_rowid")
    conn.execute("DROP TABLE vindex_tiles_without_rowid")
    _log.info("moved %d index tiles", count)


_READ_CHUNK = 500
"""Paths one query reads (under SQLite's oldest limit of 999 parameters)."""


def _path_tiles(conn: sqlite3.Connection, keys: Iterable[TileKey]) -> dict[TileKey, bytes]:
    """The tiles of `keys` (one key's path, top down) up to the first that is missing."""
    out: dict[TileKey, bytes] = {}
    for depth, path in keys:
        row = conn.execute("SELECT data FROM vindex_tiles WHERE depth = ? AND path = ?",
                           (depth, path)).fetchone()
        if row is None:
            break
        out[(depth, path)] = bytes(row[0])
    return out


class SqliteIndexRows:
    """`ledger.vindex.IndexRows` in the SQLite database `connect()` returns a connection to
    (autocommit mode: the log's storage gives each thread its own; a monitor, one file)."""

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        conn = connect()
        conn.execute("BEGIN IMMEDIATE")
        try:
            _move_tiles_to_rowid(conn)
            for statement in filter(str.strip, _SCHEMA.split(";")):
                conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def indexed_size(self) -> int:
        row = self._connect().execute("SELECT size FROM vindex_size").fetchone()
        return int(row[0])

    def read_tiles(self, keys: Iterable[TileKey]) -> dict[TileKey, bytes]:
        """The tiles of `keys` that exist: a query per depth and `_READ_CHUNK` paths."""
        by_depth: dict[int, list[bytes]] = {}
        for depth, path in keys:
            by_depth.setdefault(depth, []).append(path)
        conn = self._connect()
        out: dict[TileKey, bytes] = {}
        for depth, paths in by_depth.items():
            for at in range(0, len(paths), _READ_CHUNK):
                chunk = paths[at: at + _READ_CHUNK]
                marks = ", ".join("?" * len(chunk))
                rows = conn.execute("SELECT path, data FROM vindex_tiles WHERE depth = ? "
                                    f"AND path IN ({marks})", [depth, *chunk]).fetchall()
                out.update({(depth, bytes(p)): bytes(t) for p, t in rows})
        return out

    def write(self, pending: PendingIndex) -> None:
        """One transaction, not flushed to disk on its own: the index is derived data (a
        crash that loses it is caught up from the entries), and the log's next durable
        commit flushes it with its own (one write-ahead log)."""
        conn = self._connect()
        durable = conn.execute("PRAGMA synchronous").fetchone()[0]
        conn.execute("PRAGMA synchronous = NORMAL")
        try:
            self._write(conn, pending)
        finally:
            conn.execute(f"PRAGMA synchronous = {int(durable)}")

    @staticmethod
    def _write(conn: sqlite3.Connection, pending: PendingIndex) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            have = int(conn.execute("SELECT size FROM vindex_size").fetchone()[0])
            if have != pending.start:
                raise IndexStoreError(f"the index holds entries [0, {have}); "
                                   f"cannot add from {pending.start}")
            conn.executemany(_UPSERT_TILE, [(d, p, t) for (d, p), t in pending.tiles.items()])
            conn.executemany("INSERT INTO vindex_postings (key, idx) VALUES (?, ?)",
                             pending.postings)
            conn.execute("UPDATE vindex_size SET size = ?", (pending.size,))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def lookup_rows(self, key: bytes, limit: int, after: int = -1) -> RawLookup:
        conn = self._connect()
        conn.execute("BEGIN")
        try:
            size = int(conn.execute("SELECT size FROM vindex_size").fetchone()[0])
            tiles = _path_tiles(conn, path_tiles(key))
            rows = conn.execute("SELECT idx FROM vindex_postings WHERE key = ? AND idx > ? "
                                "AND idx < ? ORDER BY idx LIMIT ?", (key, after, size, limit + 1)).fetchall()
        finally:
            conn.execute("COMMIT")
        return RawLookup(size, tiles, [int(r[0]) for r in rows])
