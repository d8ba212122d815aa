"""The embedded default storage: one SQLite database (WAL) plus tile files in a folder.

Durability: integrations commit with ``synchronous=FULL`` so that an acknowledged
entry and a checkpoint that was handed out survive a power loss, not only a process
crash (with NORMAL in WAL mode the last commits may roll back on power loss, and the
log could then sign a different tree for a size it already published). Group commit
makes that one fsync per batch, not per entry.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils

from ledger.storage._files import TileFiles
from ledger.storage._schema import key64, migrate, sha_key
from ledger.storage._summaries import SummaryBatch, SummaryCursor, sqlite_batch
from ledger.storage._types import (
    MAX_PAGE,
    MAX_RANGE,
    MAX_SUMMARY_KINDS,
    SIGNED_SCAN,
    DigestSummary,
    EntrySummary,
    IntegratedBatch,
    SearchPage,
    StorageError,
    StoredCheckpoint,
    StoredEntry,
    check_batch_shape,
    check_empty_checkpoint,
    check_range,
    check_search,
    signed_page,
    summary_of,
    summary_rows,
)

DB_NAME = "log.db"
TILES_DIR = "tiles"
LOCK_NAME = "integrator.lock"

_ENTRY_COLS = "idx, leaf_hash, data, predicate_type, keyids, integrated_at"
_SUMMARY_COLS = "idx, leaf_hash, subject_name, subject_sha256, predicate_type, keyids, integrated_at"
_SEARCH_SQL = {
    "digest": (
        "SELECT DISTINCT idx FROM subjects WHERE sha_key = ? AND sha256 = ? AND idx >= ? "
        "ORDER BY idx LIMIT ?"
    ),
    "name": "SELECT DISTINCT idx FROM subjects WHERE name = ? AND idx >= ? ORDER BY idx LIMIT ?",
    "keyid": "SELECT idx FROM signers WHERE keyid = ? AND idx >= ? ORDER BY idx LIMIT ?",
    "predicate_type": (
        "SELECT idx FROM entries WHERE predicate_type = ? AND idx >= ? ORDER BY idx LIMIT ?"
    ),
}

#: `search_newest`: the same lookups below an index, newest first.
_NEWEST_SQL = {
    field: sql.replace("idx >= ?", "idx < ?").replace("ORDER BY idx", "ORDER BY idx DESC")
    for field, sql in _SEARCH_SQL.items()
}


def _matching(conn: sqlite3.Connection, sql: str, field: str, value: str, bound: int,
              limit: int) -> list[int]:
    """The entry indices one search query finds (a digest is looked up by its key too; a
    value that is no digest finds nothing)."""
    args: tuple[object, ...] = (value, bound, limit)
    if field == "digest":
        try:
            args = (key64(bytes.fromhex(value)), *args)
        except ValueError:
            return []
    return [int(r[0]) for r in conn.execute(sql, args)]


def _keyids(text: str) -> tuple[str, ...]:
    return tuple(k for k in text.split(",") if k)


def _summary(row: Sequence[Any]) -> EntrySummary:
    idx, leaf, name, digest, ptype, keyids, at = row
    return EntrySummary(
        int(idx), bytes(leaf), str(name), str(digest), str(ptype), _keyids(str(keyids)), float(at)
    )


class SqliteStorage:
    """`LogStorage` on SQLite in ``data_dir`` (``log.db``, ``tiles/``, ``integrator.lock``)."""

    def __init__(self, data_dir: str | os.PathLike[str], fsync_files: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.db_path = self.data_dir / DB_NAME
        self.files = TileFiles(self.data_dir / TILES_DIR, fsync=fsync_files)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._thread_lock = threading.Lock()
        self._stop = threading.Event()
        self._checkpoint_thread: threading.Thread | None = None
        migrate(self._conn())

    # ---- connections (one per thread; opened after any fork)
    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.db_path, isolation_level=None, check_same_thread=False, timeout=60.0
            )
            db = sqlite_utils.Database(conn)
            db.enable_wal()
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA busy_timeout = 60000")
            conn.execute("PRAGMA cache_size = -65536")
            conn.execute("PRAGMA mmap_size = 268435456")
            # Checkpoints normally run in a background thread (see `_checkpointer`); this
            # only bounds the WAL (400 MB) if that thread cannot keep up.
            conn.execute("PRAGMA wal_autocheckpoint = 100000")
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    def _checkpointer(self) -> None:
        """Copy the WAL back into the database off the integrator's path (PASSIVE: never blocks)."""
        conn = sqlite3.connect(self.db_path, isolation_level=None, timeout=60.0)
        try:
            while not self._stop.wait(0.5):
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error:
            return
        finally:
            conn.close()

    def _start_checkpointer(self) -> None:
        if self._checkpoint_thread is None or not self._checkpoint_thread.is_alive():
            self._stop.clear()
            self._checkpoint_thread = threading.Thread(
                target=self._checkpointer, name="ktl-wal-checkpoint", daemon=True
            )
            self._checkpoint_thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._checkpoint_thread is not None:
            self._checkpoint_thread.join(10)
            self._checkpoint_thread = None
        with self._all_lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()

    # ---- reads
    def latest_checkpoint(self) -> StoredCheckpoint | None:
        row = self._conn().execute(
            "SELECT size, root_hash, note, created FROM checkpoints ORDER BY size DESC LIMIT 1"
        ).fetchone()
        return None if row is None else StoredCheckpoint(row[0], bytes(row[1]), bytes(row[2]), row[3])

    def checkpoints(self, limit: int, before_size: int | None = None) -> list[StoredCheckpoint]:
        limit = max(1, min(limit, 500))
        bound = (1 << 63) - 1 if before_size is None else before_size
        rows = self._conn().execute(
            "SELECT size, root_hash, note, created FROM checkpoints WHERE size < ? "
            "ORDER BY size DESC LIMIT ?",
            (bound, limit),
        ).fetchall()
        return [StoredCheckpoint(r[0], bytes(r[1]), bytes(r[2]), r[3]) for r in rows]

    def entry_count(self) -> int:
        row = self._conn().execute("SELECT MAX(idx) FROM entries").fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def _entries_where(self, where: str, args: Sequence[object]) -> list[StoredEntry]:
        conn = self._conn()
        rows = conn.execute(
            f"SELECT {_ENTRY_COLS} FROM entries WHERE {where} ORDER BY idx", args
        ).fetchall()
        if not rows:
            return []
        lo, hi = rows[0][0], rows[-1][0]
        subjects: dict[int, list[tuple[str, str]]] = {}
        for idx, name, digest in conn.execute(
            "SELECT idx, name, sha256 FROM subjects WHERE idx BETWEEN ? AND ? ORDER BY idx, pos",
            (lo, hi),
        ):
            subjects.setdefault(idx, []).append((name, digest))
        return [
            StoredEntry(
                int(r[0]), bytes(r[1]), bytes(r[2]), r[3], tuple(subjects.get(r[0], ())),
                _keyids(r[4]), r[5],
            )
            for r in rows
        ]

    def get_entry(self, index: int) -> StoredEntry | None:
        got = self._entries_where("idx = ?", (index,))
        return got[0] if got else None

    def get_entries(self, start: int, end: int) -> list[StoredEntry]:
        check_range(start, end)
        return self._entries_where("idx >= ? AND idx < ?", (start, end))

    def find_leaf(self, leaf_hash: bytes) -> int | None:
        return self.find_leaves([leaf_hash]).get(leaf_hash)

    def find_leaves(self, leaf_hashes: Sequence[bytes]) -> dict[bytes, int]:
        return self._find_leaves(self._conn(), leaf_hashes)

    @staticmethod
    def _find_leaves(conn: sqlite3.Connection, leaf_hashes: Sequence[bytes]) -> dict[bytes, int]:
        wanted = set(leaf_hashes)
        keys = sorted({key64(h) for h in wanted})
        found: dict[bytes, int] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for idx, leaf in conn.execute(
                f"SELECT idx, leaf_hash FROM entries WHERE leaf_key IN ({marks})", chunk
            ):
                leaf = bytes(leaf)
                if leaf in wanted:
                    found[leaf] = int(idx)
        return found

    def search(self, field: str, value: str, cursor: int = 0, limit: int = 50) -> SearchPage:
        limit = check_search(field, cursor, limit)
        conn = self._conn()
        ids = _matching(conn, _SEARCH_SQL[field], field, value, cursor, limit + 1)
        more = len(ids) > limit
        ids = ids[:limit]
        return self._page(conn, ids, ids[-1] + 1 if more and ids else None)

    @staticmethod
    def _page(conn: sqlite3.Connection, ids: list[int], next_cursor: int | None) -> SearchPage:
        if not ids:
            return SearchPage((), next_cursor)
        marks = ",".join("?" * len(ids))
        rows = conn.execute(
            f"SELECT {_SUMMARY_COLS} FROM entries WHERE idx IN ({marks}) ORDER BY idx", ids
        ).fetchall()
        return SearchPage(tuple(_summary(r) for r in rows), next_cursor)

    def search_signed(self, digest: str, keyid: str, cursor: int = 0, limit: int = 50
                      ) -> SearchPage:
        limit = check_search("digest", cursor, limit)
        key = sha_key(digest)  # 0 for what is no digest: then nothing matches
        conn = self._conn()
        scanned = [(int(r[0]), bool(r[1])) for r in conn.execute(
            "SELECT s.idx, EXISTS (SELECT 1 FROM subjects AS j WHERE j.idx = s.idx "
            "AND j.sha_key = ? AND j.sha256 = ?) FROM signers AS s "
            "WHERE s.keyid = ? AND s.idx >= ? ORDER BY s.idx LIMIT ?",
            (key, digest, keyid, cursor, SIGNED_SCAN + 1))]
        ids, next_cursor = signed_page(scanned, limit)
        return self._page(conn, ids, next_cursor)

    def digest_summary(self, digest: str) -> DigestSummary:
        rows = self._conn().execute(
            "SELECT predicate_type, entries, bytes, last_idx FROM digest_summaries "
            "WHERE sha256 = ? ORDER BY entries DESC, predicate_type LIMIT ?",
            (digest, MAX_SUMMARY_KINDS + 1),
        ).fetchall()
        return summary_of(digest, rows)

    def summary_batch(self, cursor: SummaryCursor, limit: int, fix: bool) -> SummaryBatch:
        """One batch of `check_summaries` (see `ledger.storage._summaries`)."""
        return sqlite_batch(self._conn(), cursor, limit, fix)

    def search_newest(self, field: str, value: str, before: int, limit: int = 50
                      ) -> SearchPage:
        limit = check_search(field, max(0, before), limit)
        conn = self._conn()
        ids = _matching(conn, _NEWEST_SQL[field], field, value, before, limit + 1)
        more = len(ids) > limit
        page = self._page(conn, ids[:limit], ids[limit - 1] if more else None)
        return SearchPage(tuple(reversed(page.results)), page.next_cursor)

    def recent_entries(self, limit: int = 20, before: int | None = None) -> list[EntrySummary]:
        limit = max(1, min(limit, 500))
        bound = (1 << 63) - 1 if before is None else before
        rows = self._conn().execute(
            f"SELECT {_SUMMARY_COLS} FROM entries WHERE idx < ? ORDER BY idx DESC LIMIT ?",
            (bound, limit),
        ).fetchall()
        return [_summary(r) for r in rows]

    def read_tile(self, level: int, index: int) -> bytes:
        row = self._conn().execute(
            "SELECT hashes FROM tiles WHERE level = ? AND idx = ?", (level, index)
        ).fetchone()
        return b"" if row is None else bytes(row[0])

    def read_tile_nodes(self, level: int, index: int) -> bytes:
        row = self._conn().execute(
            "SELECT nodes FROM tiles WHERE level = ? AND idx = ?", (level, index)
        ).fetchone()
        return b"" if row is None or row[0] is None else bytes(row[0])

    def blob_info(self, digest_hex: str) -> int | None:
        row = self._conn().execute(
            "SELECT size FROM blobs WHERE digest = ?", (digest_hex,)
        ).fetchone()
        return None if row is None else int(row[0])

    def get_blob(self, digest_hex: str) -> bytes | None:
        row = self._conn().execute(
            "SELECT data FROM blobs WHERE digest = ?", (digest_hex,)
        ).fetchone()
        return None if row is None else bytes(row[0])

    def blob_digests(self, after: str = "", limit: int = MAX_PAGE) -> list[str]:
        limit = max(1, min(limit, MAX_PAGE))
        rows = self._conn().execute(
            "SELECT digest FROM blobs WHERE digest > ? ORDER BY digest LIMIT ?", (after, limit)
        ).fetchall()
        return [str(r[0]) for r in rows]

    # ---- writes
    def put_blob(self, digest_hex: str, data: bytes) -> bool:
        cur = self._conn().execute(
            "INSERT OR IGNORE INTO blobs (digest, size, data, created) VALUES (?, ?, ?, ?)",
            (digest_hex, len(data), data, time.time()),
        )
        return cur.rowcount == 1

    def blobs_before(self, cutoff: float, after: tuple[float, str] | None, limit: int
                     ) -> list[tuple[float, str]]:
        if not 1 <= limit <= MAX_RANGE:
            raise StorageError(f"blob listing limit must be 1 to {MAX_RANGE}")
        at, digest = after if after is not None else (float("-inf"), "")
        rows = self._conn().execute(
            "SELECT created, digest FROM blobs WHERE created < ? AND "
            "(created > ? OR (created = ? AND digest > ?)) ORDER BY created, digest LIMIT ?",
            (cutoff, at, at, digest, limit),
        ).fetchall()
        return [(float(c), str(d)) for c, d in rows]

    def delete_blob(self, digest_hex: str) -> bool:
        cur = self._conn().execute("DELETE FROM blobs WHERE digest = ?", (digest_hex,))
        return cur.rowcount == 1

    @contextmanager
    def integration_lock(self) -> Iterator[None]:
        """Held by the one integrator extending the tree, across threads and processes."""
        with self._thread_lock:
            fd = os.open(self.data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def commit_empty_checkpoint(self, checkpoint: StoredCheckpoint) -> None:
        check_empty_checkpoint(checkpoint)
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            if (conn.execute("SELECT 1 FROM checkpoints LIMIT 1").fetchone() is not None
                    or conn.execute("SELECT 1 FROM entries LIMIT 1").fetchone() is not None):
                raise StorageError("the log already has a checkpoint; only a new log gets size 0")
            conn.execute(
                "INSERT INTO checkpoints (size, root_hash, note, created) VALUES (?, ?, ?, ?)",
                (0, checkpoint.root_hash, checkpoint.note, checkpoint.created),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def latest_cosigned(self) -> StoredCheckpoint | None:
        row = self._conn().execute(
            "SELECT size, root_hash, note, created FROM cosigned ORDER BY size DESC LIMIT 1"
        ).fetchone()
        return None if row is None else StoredCheckpoint(row[0], bytes(row[1]), bytes(row[2]),
                                                         row[3])

    def publish_cosigned(self, checkpoint: StoredCheckpoint) -> bool:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute("SELECT root_hash FROM checkpoints WHERE size = ?",
                               (checkpoint.size,)).fetchone()
            if row is None or bytes(row[0]) != checkpoint.root_hash:
                raise StorageError(f"no checkpoint of size {checkpoint.size} with that root "
                                   "was signed by this log")
            top = conn.execute("SELECT MAX(size) FROM cosigned").fetchone()[0]
            if top is not None and top >= checkpoint.size:
                conn.execute("ROLLBACK")
                return False
            conn.execute(
                "INSERT INTO cosigned (size, root_hash, note, created) VALUES (?, ?, ?, ?)",
                (checkpoint.size, checkpoint.root_hash, checkpoint.note, checkpoint.created),
            )
            conn.execute("COMMIT")
            return True
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def commit_batch(self, batch: IntegratedBatch) -> None:
        first, size = check_batch_shape(batch)
        self._start_checkpointer()
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            have = conn.execute("SELECT MAX(idx) FROM entries").fetchone()[0]
            have = 0 if have is None else have + 1
            if have != first:
                raise StorageError(f"batch starts at {first} but the log holds {have} entries")
            last = conn.execute("SELECT MAX(size) FROM checkpoints").fetchone()[0]
            if last is not None and last >= size:
                raise StorageError(f"refusing a checkpoint for size {size} after size {last}")
            # Duplicates against the log were removed by the integrator under the
            # integration lock (the only writer); repeating that lookup here would double
            # the random index reads. Duplicates within the batch: `check_batch_shape`.
            conn.executemany(
                "INSERT INTO entries (idx, leaf_key, leaf_hash, data, predicate_type, subject_name, "
                "subject_sha256, keyids, integrated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (e.index, key64(e.leaf_hash), e.leaf_hash, e.data, e.predicate_type,
                     e.subjects[0][0], e.subjects[0][1], ",".join(e.keyids), e.integrated_at)
                    for e in batch.entries
                ],
            )
            conn.executemany(
                "INSERT INTO subjects (idx, pos, name, sha256, sha_key) VALUES (?, ?, ?, ?, ?)",
                [(e.index, p, n, d, sha_key(d))
                 for e in batch.entries for p, (n, d) in enumerate(e.subjects)],
            )
            conn.executemany(
                "INSERT OR IGNORE INTO signers (idx, keyid) VALUES (?, ?)",
                [(e.index, k) for e in batch.entries for k in e.keyids],
            )
            conn.executemany(
                "INSERT INTO digest_summaries (sha256, predicate_type, entries, bytes, last_idx) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (sha256, predicate_type) DO UPDATE SET "
                "entries = entries + excluded.entries, bytes = bytes + excluded.bytes, "
                "last_idx = MAX(last_idx, excluded.last_idx)",
                summary_rows(batch.entries),
            )
            conn.executemany(
                "INSERT OR REPLACE INTO tiles (level, idx, hashes, nodes) VALUES (?, ?, ?, ?)",
                [(lv, ix, h, batch.nodes.get((lv, ix))) for (lv, ix), h in batch.tiles.items()],
            )
            cp = batch.checkpoint
            conn.execute(
                "INSERT INTO checkpoints (size, root_hash, note, created) VALUES (?, ?, ?, ?)",
                (cp.size, cp.root_hash, cp.note, cp.created),
            )
            conn.execute("COMMIT")
        except BaseException:
            # SQLite rolls back by itself on some errors (a full disk during COMMIT): a
            # second ROLLBACK would raise and hide the real error.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    # ---- tile files
    def write_files(self, files: Mapping[str, bytes]) -> None:
        self.files.write(files)

    def read_file(self, path: str) -> bytes | None:
        return self.files.read(path)

    def list_files(self) -> Iterator[str]:
        return self.files.list()
