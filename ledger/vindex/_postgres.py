"""The verifiable index's rows in the log's PostgreSQL database (new tables, next to the log's).

The same tables as on SQLite (`ledger.storage._vindex_sqlite`), BYTEA for blobs. A
batch's rows are written in one transaction by the integrator (it holds the
integration lock); a lookup reads in one REPEATABLE READ transaction, the tiles on
the key's path in one query.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from ledger.storage import PostgresStorage
from ledger.vindex._stored import IndexStoreError, PendingIndex, RawLookup, path_tiles
from ledger.vindex._tiles import TileKey

__all__ = ["PgIndexRows"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vindex_tiles (depth INTEGER NOT NULL, path BYTEA NOT NULL, "
    "data BYTEA NOT NULL, PRIMARY KEY (depth, path))",
    "DROP TABLE IF EXISTS vindex_heads",  # a key's list hash is its leaf's value
    "CREATE TABLE IF NOT EXISTS vindex_postings (key BYTEA NOT NULL, idx BIGINT NOT NULL, "
    "PRIMARY KEY (key, idx))",
    "CREATE TABLE IF NOT EXISTS vindex_size (one INTEGER PRIMARY KEY CHECK (one = 1), "
    "size BIGINT NOT NULL)",
    "INSERT INTO vindex_size (one, size) VALUES (1, 0) ON CONFLICT DO NOTHING",
)
# Parameters and results in binary (%b, binary=True): a batch writes tens of thousands of
# tiles, and text-escaping every bytea (one upsert each) cost more than the trie's update.
_TILES = ("SELECT t.depth, t.path, t.data FROM vindex_tiles t "
          "JOIN unnest(%b::integer[], %b::bytea[]) AS u(d, p) ON t.depth = u.d AND t.path = u.p")
_UPSERT_TILES = ("INSERT INTO vindex_tiles (depth, path, data) "
                 "SELECT * FROM unnest(%b::integer[], %b::bytea[], %b::bytea[]) "
                 "ON CONFLICT (depth, path) DO UPDATE SET data = EXCLUDED.data")


#: Most tile bytes one upsert statement carries (a flush of a big map holds hundreds of
#: MB of tiles; one array parameter of them all would be built whole on both sides).
MAX_UPSERT_BYTES = 16 << 20


def _chunks(tiles: Mapping[TileKey, bytes], limit: int
            ) -> Iterator[list[tuple[TileKey, bytes]]]:
    """The tiles in runs of at most `limit` bytes (a longer tile alone)."""
    run: list[tuple[TileKey, bytes]] = []
    size = 0
    for key, data in tiles.items():
        if run and size + len(data) > limit:
            yield run
            run, size = [], 0
        run.append((key, data))
        size += len(data)
    if run:
        yield run


class PgIndexRows:
    """`ledger.vindex.IndexRows` in `storage`'s database."""

    def __init__(self, storage: PostgresStorage) -> None:
        self.storage = storage
        with storage._conn() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(7270001)")  # several frontends start
            for statement in _SCHEMA:
                conn.execute(statement)

    def indexed_size(self) -> int:
        return int(self.storage._one("SELECT size FROM vindex_size")[0])

    def read_tiles(self, keys: Iterable[TileKey]) -> dict[TileKey, bytes]:
        wanted = list(keys)
        if not wanted:
            return {}
        with self.storage._conn() as conn, conn.cursor(binary=True) as cur:
            rows = cur.execute(_TILES, ([d for d, _ in wanted], [p for _, p in wanted])).fetchall()
        return {(int(d), bytes(p)): bytes(t) for d, p, t in rows}

    def write(self, pending: PendingIndex) -> None:
        with self.storage._conn() as conn, conn.transaction(), conn.cursor() as cur:
            row = cur.execute("SELECT size FROM vindex_size FOR UPDATE").fetchone()
            have = 0 if row is None else int(row[0])
            if have != pending.start:
                raise IndexStoreError(f"the index holds entries [0, {have}); "
                                   f"cannot add from {pending.start}")
            for chunk in _chunks(pending.tiles, MAX_UPSERT_BYTES):  # keys unique: a mapping's
                cur.execute(_UPSERT_TILES, ([d for (d, _), _ in chunk], [p for (_, p), _ in chunk],
                                            [t for _, t in chunk]))
            with cur.copy("COPY vindex_postings (key, idx) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["bytea", "int8"])
                for row in pending.postings:
                    copy.write_row(row)
            cur.execute("UPDATE vindex_size SET size = %s", (pending.size,))

    def lookup_rows(self, key: bytes, limit: int, after: int = -1) -> RawLookup:
        wanted = path_tiles(key)
        with self.storage._conn() as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            try:
                row = conn.execute("SELECT size FROM vindex_size").fetchone()
                size = 0 if row is None else int(row[0])
                rows = conn.execute(_TILES, ([d for d, _ in wanted],
                                             [p for _, p in wanted])).fetchall()
                idx = conn.execute("SELECT idx FROM vindex_postings WHERE key = %s AND idx > %s "
                                   "AND idx < %s ORDER BY idx LIMIT %s",
                                   (key, after, size, limit + 1)).fetchall()
            finally:
                conn.execute("COMMIT")
        tiles = {(int(d), bytes(p)): bytes(t) for d, p, t in rows}
        return RawLookup(size, tiles, [int(r[0]) for r in idx])
