"""`LogStorage` on PostgreSQL: any number of stateless frontends share one log.

Everything lives in the database: entries, leaf and interior hashes (tile rows), the
static read path's files (entry bundles and tiles as bytea), checkpoints and blobs.
A frontend keeps nothing of its own, so frontends on any hosts serve the same log.

One integrator at a time: `integration_lock` takes a session advisory lock on a
connection of its own and `commit_batch` writes through that same connection. If the
integrating process dies or loses its connection, PostgreSQL ends the session and
releases the lock, and a half-done transaction rolls back; the next frontend waiting
for the lock takes over. A stale integrator cannot fork the tree either: its commit
re-reads the stored size and last checkpoint inside the transaction, and the primary
keys on entry index, leaf hash and checkpoint size refuse a second writer.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from ledger.storage._files import check_file_path
from ledger.storage._pg_schema import INTEGRATE_LOCK, migrate
from ledger.storage._summaries import POSTGRES_SQL, SummaryBatch, SummaryCursor, run_batch
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
from ledger.storage._url import check_database_url, redact_url

_ENTRY_COLS = "idx, leaf_hash, data, predicate_type, keyids, integrated_at"
_SUMMARY_COLS = "idx, leaf_hash, subject_name, subject_sha256, predicate_type, keyids, integrated_at"
_SEARCH_SQL = {
    "digest": "SELECT DISTINCT idx FROM subjects WHERE sha256 = %s AND idx >= %s ORDER BY idx LIMIT %s",
    "name": "SELECT DISTINCT idx FROM subjects WHERE name = %s AND idx >= %s ORDER BY idx LIMIT %s",
    "keyid": "SELECT idx FROM signers WHERE keyid = %s AND idx >= %s ORDER BY idx LIMIT %s",
    "predicate_type": (
        "SELECT idx FROM entries WHERE predicate_type = %s AND idx >= %s ORDER BY idx LIMIT %s"
    ),
}
#: `search_newest`: the same lookups below an index, newest first.
_NEWEST_SQL = {
    field: sql.replace("idx >= %s", "idx < %s").replace("ORDER BY idx", "ORDER BY idx DESC")
    for field, sql in _SEARCH_SQL.items()
}

# The server notices a dead integrator's TCP connection within about 10 s.
_KEEPALIVE = (
    "SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3"
)


def _keyids(text: str) -> tuple[str, ...]:
    return tuple(k for k in text.split(",") if k)


def _summary(row: Sequence[Any]) -> EntrySummary:
    idx, leaf, name, digest, ptype, keyids, at = row
    return EntrySummary(
        int(idx), bytes(leaf), str(name), str(digest), str(ptype), _keyids(str(keyids)), float(at)
    )


def _checkpoint(row: Sequence[Any]) -> StoredCheckpoint:
    return StoredCheckpoint(int(row[0]), bytes(row[1]), bytes(row[2]), float(row[3]))


def commit_batch_rows(conn: psycopg.Connection[Any], batch: IntegratedBatch) -> None:
    """Write a batch's rows in the caller's transaction on ``conn``, which holds the
    integration lock; refuses a batch that does not extend the stored log exactly."""
    first, size = check_batch_shape(batch)
    row = conn.execute("SELECT MAX(idx) FROM entries").fetchone()
    have = 0 if row is None or row[0] is None else int(row[0]) + 1
    if have != first:
        raise StorageError(f"batch starts at {first} but the log holds {have} entries")
    row = conn.execute("SELECT MAX(size) FROM checkpoints").fetchone()
    if row is not None and row[0] is not None and int(row[0]) >= size:
        raise StorageError(f"refusing a checkpoint for size {size} after size {row[0]}")
    with conn.cursor() as cur:
        with cur.copy(
            "COPY entries (idx, leaf_hash, data, predicate_type, subject_name, "
            "subject_sha256, keyids, integrated_at) FROM STDIN"
        ) as copy:
            for e in batch.entries:
                copy.write_row((e.index, e.leaf_hash, e.data, e.predicate_type,
                                e.subjects[0][0], e.subjects[0][1], ",".join(e.keyids),
                                e.integrated_at))
        with cur.copy("COPY subjects (idx, pos, name, sha256) FROM STDIN") as copy:
            for e in batch.entries:
                for pos, (name, digest) in enumerate(e.subjects):
                    copy.write_row((e.index, pos, name, digest))
        with cur.copy("COPY signers (idx, keyid) FROM STDIN") as copy:
            for e in batch.entries:
                for k in dict.fromkeys(e.keyids):
                    copy.write_row((e.index, k))
        cur.executemany(
            "INSERT INTO digest_summaries (sha256, predicate_type, entries, bytes, last_idx) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (sha256, predicate_type) DO UPDATE SET "
            "entries = digest_summaries.entries + EXCLUDED.entries, "
            "bytes = digest_summaries.bytes + EXCLUDED.bytes, "
            "last_idx = GREATEST(digest_summaries.last_idx, EXCLUDED.last_idx)",
            summary_rows(batch.entries),
        )
        cur.executemany(
            "INSERT INTO tiles (level, idx, hashes, nodes) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (level, idx) DO UPDATE SET hashes = EXCLUDED.hashes, "
            "nodes = EXCLUDED.nodes",
            [(lv, ix, h, batch.nodes.get((lv, ix))) for (lv, ix), h in batch.tiles.items()],
        )
        cp = batch.checkpoint
        cur.execute(
            "INSERT INTO checkpoints (size, root_hash, note, created) VALUES (%s, %s, %s, %s)",
            (cp.size, cp.root_hash, cp.note, cp.created),
        )


class PostgresStorage:
    """`LogStorage` in the PostgreSQL database at ``url`` (schema migrated on open)."""

    def __init__(self, url: str, *, pool_size: int = 8, connect_timeout: float = 30.0) -> None:
        self.url = check_database_url(url)
        if not 1 <= pool_size <= 256:
            raise StorageError("pool_size must be between 1 and 256")
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self._pid = -1
        self._pool_obj: ConnectionPool[Any] | None = None
        self._lock_conn: psycopg.Connection[Any] | None = None
        self._holder = threading.local()
        self._thread_lock = threading.Lock()
        self._open_lock = threading.Lock()
        with self._conn() as conn:
            migrate(conn)

    def __repr__(self) -> str:
        return f"PostgresStorage({redact_url(self.url)!r})"

    # ---- connections (a pool per process, opened after any fork)
    def _pool(self) -> ConnectionPool[Any]:
        with self._open_lock:
            if self._pid != os.getpid() or self._pool_obj is None:
                # After a fork the parent's pool and lock connection are not ours to use.
                self._pool_obj = ConnectionPool(
                    self.url, min_size=1, max_size=self.pool_size, open=False,
                    kwargs={"autocommit": True}, timeout=self.connect_timeout,
                    name="ktl-log",
                )
                self._lock_conn = None
                self._pid = os.getpid()
                try:
                    self._pool_obj.open(wait=True, timeout=self.connect_timeout)
                except (PoolTimeout, psycopg.Error) as e:
                    self._pool_obj.close(timeout=0)  # stop its reconnecting workers
                    self._pool_obj = None
                    raise StorageError(
                        f"cannot connect to the database {redact_url(self.url)}: {e}"
                    ) from None
            return self._pool_obj

    @contextmanager
    def _conn(self) -> Iterator[psycopg.Connection[Any]]:
        try:
            with self._pool().connection() as conn:
                yield conn
        except PoolTimeout as e:
            raise StorageError(f"no database connection free in time: {e}") from None
        except pg_errors.UniqueViolation as e:
            raise StorageError(f"the database refused a duplicate: {e}") from None
        except psycopg.OperationalError as e:
            raise StorageError(f"database unavailable ({redact_url(self.url)}): {e}") from None

    def _one(self, sql: str, args: Sequence[object] = ()) -> Any:
        with self._conn() as conn:
            return conn.execute(sql, args).fetchone()

    def _all(self, sql: str, args: Sequence[object] = ()) -> list[Any]:
        with self._conn() as conn:
            return conn.execute(sql, args).fetchall()

    def close(self) -> None:
        with self._open_lock:
            if self._pid == os.getpid():
                if self._lock_conn is not None:
                    self._lock_conn.close()
                if self._pool_obj is not None:
                    self._pool_obj.close()
            self._lock_conn = None
            self._pool_obj = None

    # ---- reads
    def latest_checkpoint(self) -> StoredCheckpoint | None:
        row = self._one(
            "SELECT size, root_hash, note, created FROM checkpoints ORDER BY size DESC LIMIT 1"
        )
        return None if row is None else _checkpoint(row)

    def checkpoints(self, limit: int, before_size: int | None = None) -> list[StoredCheckpoint]:
        limit = max(1, min(limit, MAX_PAGE))
        bound = (1 << 63) - 1 if before_size is None else before_size
        rows = self._all(
            "SELECT size, root_hash, note, created FROM checkpoints WHERE size < %s "
            "ORDER BY size DESC LIMIT %s",
            (bound, limit),
        )
        return [_checkpoint(r) for r in rows]

    def entry_count(self) -> int:
        row = self._one("SELECT MAX(idx) FROM entries")
        return 0 if row[0] is None else int(row[0]) + 1

    def _entries_where(self, where: str, args: Sequence[object]) -> list[StoredEntry]:
        with self._conn() as conn:
            rows = conn.execute(
                f"SELECT {_ENTRY_COLS} FROM entries WHERE {where} ORDER BY idx", args
            ).fetchall()
            if not rows:
                return []
            subjects: dict[int, list[tuple[str, str]]] = {}
            for idx, name, digest in conn.execute(
                "SELECT idx, name, sha256 FROM subjects WHERE idx BETWEEN %s AND %s "
                "ORDER BY idx, pos",
                (rows[0][0], rows[-1][0]),
            ):
                subjects.setdefault(int(idx), []).append((str(name), str(digest)))
        return [
            StoredEntry(
                int(r[0]), bytes(r[1]), bytes(r[2]), str(r[3]), tuple(subjects.get(int(r[0]), ())),
                _keyids(str(r[4])), float(r[5]),
            )
            for r in rows
        ]

    def get_entry(self, index: int) -> StoredEntry | None:
        if not 0 <= index < 1 << 63:
            return None
        got = self._entries_where("idx = %s", (index,))
        return got[0] if got else None

    def get_entries(self, start: int, end: int) -> list[StoredEntry]:
        check_range(start, end)
        return self._entries_where("idx >= %s AND idx < %s", (start, end))

    def find_leaf(self, leaf_hash: bytes) -> int | None:
        return self.find_leaves([leaf_hash]).get(leaf_hash)

    def find_leaves(self, leaf_hashes: Sequence[bytes]) -> dict[bytes, int]:
        wanted = list({bytes(h) for h in leaf_hashes})
        found: dict[bytes, int] = {}
        for i in range(0, len(wanted), 5000):
            for idx, leaf in self._all(
                "SELECT idx, leaf_hash FROM entries WHERE leaf_hash = ANY(%s)",
                (wanted[i : i + 5000],),
            ):
                found[bytes(leaf)] = int(idx)
        return found

    def search(self, field: str, value: str, cursor: int = 0, limit: int = 50) -> SearchPage:
        limit = check_search(field, cursor, limit)
        if "\x00" in value:
            # PostgreSQL text cannot hold NUL, and no stored name, digest or type does.
            return SearchPage((), None)
        ids = [int(r[0]) for r in self._all(_SEARCH_SQL[field], (value, cursor, limit + 1))]
        more = len(ids) > limit
        ids = ids[:limit]
        return self._page(ids, ids[-1] + 1 if more and ids else None)

    def _page(self, ids: list[int], next_cursor: int | None) -> SearchPage:
        if not ids:
            return SearchPage((), next_cursor)
        rows = self._all(
            f"SELECT {_SUMMARY_COLS} FROM entries WHERE idx = ANY(%s) ORDER BY idx", (ids,)
        )
        return SearchPage(tuple(_summary(r) for r in rows), next_cursor)

    def search_signed(self, digest: str, keyid: str, cursor: int = 0, limit: int = 50
                      ) -> SearchPage:
        limit = check_search("digest", cursor, limit)
        if "\x00" in digest or "\x00" in keyid:
            return SearchPage((), None)
        scanned = [(int(r[0]), bool(r[1])) for r in self._all(
            "SELECT s.idx, EXISTS (SELECT 1 FROM subjects AS j WHERE j.idx = s.idx "
            "AND j.sha256 = %s) FROM signers AS s "
            "WHERE s.keyid = %s AND s.idx >= %s ORDER BY s.idx LIMIT %s",
            (digest, keyid, cursor, SIGNED_SCAN + 1))]
        ids, next_cursor = signed_page(scanned, limit)
        return self._page(ids, next_cursor)

    def summary_batch(self, cursor: SummaryCursor, limit: int, fix: bool) -> SummaryBatch:
        """One batch of `check_summaries` in one transaction (a rebuild runs under
        `integration_lock`: see `ledger.storage._summaries`)."""
        def query(sql: str, args: tuple[object, ...]) -> list[Any]:
            cur = conn.execute(sql, args)
            return cur.fetchall() if cur.description is not None else []

        with self._conn() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")  # one snapshot
            return run_batch(query, POSTGRES_SQL, cursor, limit, fix)

    def digest_summary(self, digest: str) -> DigestSummary:
        if "\x00" in digest:
            return summary_of(digest, [])
        rows = self._all(
            "SELECT predicate_type, entries, bytes, last_idx FROM digest_summaries "
            "WHERE sha256 = %s ORDER BY entries DESC, predicate_type LIMIT %s",
            (digest, MAX_SUMMARY_KINDS + 1),
        )
        return summary_of(digest, [(r[0], r[1], r[2], r[3]) for r in rows])

    def search_newest(self, field: str, value: str, before: int, limit: int = 50
                      ) -> SearchPage:
        limit = check_search(field, max(0, before), limit)
        if "\x00" in value:
            return SearchPage((), None)
        ids = [int(r[0]) for r in self._all(_NEWEST_SQL[field], (value, before, limit + 1))]
        more = len(ids) > limit
        ids = ids[:limit]
        if not ids:
            return SearchPage((), None)
        rows = self._all(
            f"SELECT {_SUMMARY_COLS} FROM entries WHERE idx = ANY(%s) ORDER BY idx DESC", (ids,)
        )
        return SearchPage(tuple(_summary(r) for r in rows), ids[-1] if more else None)

    def recent_entries(self, limit: int = 20, before: int | None = None) -> list[EntrySummary]:
        limit = max(1, min(limit, MAX_PAGE))
        bound = (1 << 63) - 1 if before is None else before
        rows = self._all(
            f"SELECT {_SUMMARY_COLS} FROM entries WHERE idx < %s ORDER BY idx DESC LIMIT %s",
            (bound, limit),
        )
        return [_summary(r) for r in rows]

    def read_tile(self, level: int, index: int) -> bytes:
        row = self._one("SELECT hashes FROM tiles WHERE level = %s AND idx = %s", (level, index))
        return b"" if row is None else bytes(row[0])

    def read_tile_nodes(self, level: int, index: int) -> bytes:
        row = self._one("SELECT nodes FROM tiles WHERE level = %s AND idx = %s", (level, index))
        return b"" if row is None or row[0] is None else bytes(row[0])

    def blob_info(self, digest_hex: str) -> int | None:
        row = self._one("SELECT size FROM blobs WHERE digest = %s", (digest_hex,))
        return None if row is None else int(row[0])

    def get_blob(self, digest_hex: str) -> bytes | None:
        row = self._one("SELECT data FROM blobs WHERE digest = %s", (digest_hex,))
        return None if row is None else bytes(row[0])

    def blob_digests(self, after: str = "", limit: int = MAX_PAGE) -> list[str]:
        limit = max(1, min(limit, MAX_PAGE))
        rows = self._all(
            "SELECT digest FROM blobs WHERE digest > %s ORDER BY digest LIMIT %s", (after, limit)
        )
        return [str(r[0]) for r in rows]

    # ---- writes
    def put_blob(self, digest_hex: str, data: bytes) -> bool:
        with self._conn() as conn:
            cur = conn.execute(
                "INSERT INTO blobs (digest, size, data, created) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (digest) DO NOTHING",
                (digest_hex, len(data), bytes(data), time.time()),
            )
            return cur.rowcount == 1

    def blobs_before(self, cutoff: float, after: tuple[float, str] | None, limit: int
                     ) -> list[tuple[float, str]]:
        if not 1 <= limit <= MAX_RANGE:
            raise StorageError(f"blob listing limit must be 1 to {MAX_RANGE}")
        at, digest = after if after is not None else (float("-inf"), "")
        rows = self._all(
            "SELECT created, digest FROM blobs WHERE created < %s AND "
            "(created > %s OR (created = %s AND digest > %s)) ORDER BY created, digest LIMIT %s",
            (cutoff, at, at, digest, limit),
        )
        return [(float(c), str(d)) for c, d in rows]

    def delete_blob(self, digest_hex: str) -> bool:
        with self._conn() as conn:
            cur = conn.execute("DELETE FROM blobs WHERE digest = %s", (digest_hex,))
            return cur.rowcount == 1

    def _lock_connection(self) -> psycopg.Connection[Any]:
        self._pool()  # re-opens after a fork
        conn = self._lock_conn
        if conn is None or conn.closed or conn.broken:
            try:
                conn = psycopg.connect(
                    self.url, autocommit=True, connect_timeout=int(self.connect_timeout),
                    application_name=f"ktl-integrator pid {os.getpid()}",
                )
                conn.execute(_KEEPALIVE)
            except psycopg.Error as e:
                raise StorageError(
                    f"cannot connect to the database {redact_url(self.url)}: {e}"
                ) from None
            self._lock_conn = conn
        return conn

    @contextmanager
    def integration_lock(self) -> Iterator[None]:
        """A session advisory lock: one integrator across every frontend on this database."""
        with self._thread_lock, self._advisory(wait=True):
            yield

    @contextmanager
    def try_integration_lock(self) -> Iterator[psycopg.Connection[Any] | None]:
        """`integration_lock` if it is free now: yields the lock's connection, else None.

        The long-lived integrator (`ledger.queued`) polls with this, so it never blocks
        in a call it cannot leave when its frontend shuts down.
        """
        if not self._thread_lock.acquire(blocking=False):
            yield None
            return
        try:
            with self._advisory(wait=False) as conn:
                yield conn
        finally:
            self._thread_lock.release()

    def lock_waiters(self) -> int:
        """How many sessions wait, blocked, for the integration lock (start-up checks, tools)."""
        row = self._one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND classid = 0 AND objid = %s AND objsubid = 1", (INTEGRATE_LOCK,))
        return int(row[0])

    @contextmanager
    def _advisory(self, wait: bool) -> Iterator[psycopg.Connection[Any] | None]:
        """Hold the advisory lock on the lock connection (caller holds ``_thread_lock``)."""
        conn = self._lock_connection()
        sql = "SELECT pg_advisory_lock(%s)" if wait else "SELECT pg_try_advisory_lock(%s)"
        try:
            row = conn.execute(sql, (INTEGRATE_LOCK,)).fetchone()
        except psycopg.Error as e:
            self._lock_conn = None
            conn.close()
            raise StorageError(f"lost the database while waiting to integrate: {e}") from None
        if not wait and not (row is not None and row[0] is True):
            yield None
            return
        self._holder.conn = conn
        try:
            yield conn
        finally:
            self._holder.conn = None
            try:
                conn.execute("SELECT pg_advisory_unlock(%s)", (INTEGRATE_LOCK,))
            except psycopg.Error:
                # The session is gone, and the lock with it.
                self._lock_conn = None
                conn.close()

    def commit_empty_checkpoint(self, checkpoint: StoredCheckpoint) -> None:
        check_empty_checkpoint(checkpoint)
        conn: psycopg.Connection[Any] | None = getattr(self._holder, "conn", None)
        try:
            if conn is not None:  # under integration_lock: its session holds the lock
                with conn.transaction():
                    self._commit_empty_locked(conn, checkpoint)
                return
            with self._conn() as pooled, pooled.transaction():
                pooled.execute("SELECT pg_advisory_xact_lock(%s)", (INTEGRATE_LOCK,))
                self._commit_empty_locked(pooled, checkpoint)
        except pg_errors.UniqueViolation as e:
            raise StorageError(f"the database refused a duplicate: {e}") from None
        except psycopg.OperationalError as e:
            raise StorageError(f"database unavailable while committing: {e}") from None

    @staticmethod
    def _commit_empty_locked(conn: psycopg.Connection[Any], checkpoint: StoredCheckpoint) -> None:
        if (conn.execute("SELECT 1 FROM checkpoints LIMIT 1").fetchone() is not None
                or conn.execute("SELECT 1 FROM entries LIMIT 1").fetchone() is not None):
            raise StorageError("the log already has a checkpoint; only a new log gets size 0")
        conn.execute(
            "INSERT INTO checkpoints (size, root_hash, note, created) VALUES (%s, %s, %s, %s)",
            (0, checkpoint.root_hash, checkpoint.note, checkpoint.created),
        )

    def latest_cosigned(self) -> StoredCheckpoint | None:
        row = self._one(
            "SELECT size, root_hash, note, created FROM cosigned ORDER BY size DESC LIMIT 1", ()
        )
        return None if row is None else StoredCheckpoint(
            int(row[0]), bytes(row[1]), bytes(row[2]), float(row[3]))

    def publish_cosigned(self, checkpoint: StoredCheckpoint) -> bool:
        with self._conn() as conn, conn.transaction():
            # One publisher at a time, so "newer than the newest" is decided atomically.
            conn.execute("LOCK TABLE cosigned IN SHARE ROW EXCLUSIVE MODE")
            row = conn.execute("SELECT root_hash FROM checkpoints WHERE size = %s",
                               (checkpoint.size,)).fetchone()
            if row is None or bytes(row[0]) != checkpoint.root_hash:
                raise StorageError(f"no checkpoint of size {checkpoint.size} with that root "
                                   "was signed by this log")
            top = conn.execute("SELECT MAX(size) FROM cosigned").fetchone()
            if top is not None and top[0] is not None and int(top[0]) >= checkpoint.size:
                return False
            conn.execute(
                "INSERT INTO cosigned (size, root_hash, note, created) VALUES (%s, %s, %s, %s)",
                (checkpoint.size, checkpoint.root_hash, checkpoint.note, checkpoint.created),
            )
            return True

    def commit_batch(self, batch: IntegratedBatch) -> None:
        check_batch_shape(batch)
        conn: psycopg.Connection[Any] | None = getattr(self._holder, "conn", None)
        try:
            if conn is not None:
                with conn.transaction():
                    commit_batch_rows(conn, batch)
                return
            # Not under `integration_lock` (tools, tests): hold the same lock for the
            # length of the transaction, so no integrator can interleave.
            with self._conn() as pooled, pooled.transaction():
                pooled.execute("SELECT pg_advisory_xact_lock(%s)", (INTEGRATE_LOCK,))
                commit_batch_rows(pooled, batch)
        except pg_errors.UniqueViolation as e:
            raise StorageError(f"the database refused a duplicate: {e}") from None
        except psycopg.OperationalError as e:
            raise StorageError(f"database unavailable while committing: {e}") from None

    # ---- the static read path's files, as rows
    def write_files(self, files: Mapping[str, bytes]) -> None:
        rows = [(check_file_path(p), bytes(d)) for p, d in files.items()]
        full = [p for p, _ in rows if p.startswith("tile/") and ".p/" not in p]
        with self._conn() as conn, conn.transaction():
            # Derived data (the rows are the truth; the read path falls back to them and
            # the start-up check rewrites what a crash lost): no wait for a WAL flush.
            conn.execute("SET LOCAL synchronous_commit = off")
            conn.cursor().executemany(
                "INSERT INTO files (path, data) VALUES (%s, %s) "
                "ON CONFLICT (path) DO UPDATE SET data = EXCLUDED.data",
                rows,
            )
            for path in full:
                # The full tile exists now; tlog-tiles lets partial ones go.
                conn.execute("DELETE FROM files WHERE path LIKE %s", (f"{path}.p/%",))

    def read_file(self, path: str) -> bytes | None:
        row = self._one("SELECT data FROM files WHERE path = %s", (check_file_path(path),))
        return None if row is None else bytes(row[0])

    def list_files(self) -> Iterator[str]:
        return iter([str(r[0]) for r in self._all("SELECT path FROM files ORDER BY path")])
