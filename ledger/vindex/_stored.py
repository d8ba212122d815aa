"""The index kept in the log's database: prepared with a batch, written after it commits.

The integrator, holding the integration lock, calls `prepare` with the batch's entries
before it signs the batch's checkpoint (the checkpoint carries the new root), and
`commit` once the batch is durable. The index is derived data: if the process dies
between the two, `catch_up` recomputes the missing entries from the log and gets
the same roots (the index at size N is a function of entries [0, N)).

`IndexRows` is what a backend provides (SQLite and PostgreSQL in ``ledger.storage``,
`MemoryIndexRows` here); a lookup reads the index's size, the tiles on the key's path
and the key's list in one consistent snapshot: O(depth / 8 + results) rows.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ledger._errors import LedgerError
from ledger.vindex._keys import IndexKey, entry_key_hashes
from ledger.vindex._map import extend_lists, lookup_proof, root_of
from ledger.vindex._proof import KEY_BITS, LookupProof
from ledger.vindex._tiles import TILE_LEVELS, Tile, TiledNodes, TileKey, TilePath

__all__ = ["MAX_ANSWER", "IndexRows", "IndexStoreError", "MemoryIndexRows", "PendingIndex", "RawLookup",
           "StoredAnswer", "StoredIndex", "TooManyResults", "path_tiles"]

MAX_ANSWER = 100_000
"""Most entry indices one lookup answers with (a longer list: search a narrower key)."""
_CATCH_UP_CHUNK = 1000
_CACHED_TILES = 20_000
"""Most tiles (split into their records) a `StoredIndex` keeps between batches (the top
levels are hot)."""


class IndexStoreError(LedgerError, ValueError):
    """Index rows that do not extend the stored index exactly (or a damaged store)."""


class TooManyResults(ValueError):
    """The key's list is longer than a lookup answers with."""

    def __init__(self, key: IndexKey, limit: int) -> None:
        super().__init__(f"{key.text()} names more than {limit} entries; search by a "
                         "narrower key (a digest or a kernel name)")
        self.limit = limit


@dataclass(frozen=True)
class PendingIndex:
    """The index rows one batch adds, computed before its checkpoint is signed."""

    start: int
    size: int
    root: bytes
    tiles: Mapping[TileKey, bytes]
    postings: Sequence[tuple[bytes, int]] = field(default=())
    loaded: Mapping[TilePath, Tile] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class RawLookup:
    """What one snapshot read holds for a key: the size, the tiles on its path, its list."""

    size: int
    tiles: Mapping[TileKey, bytes]
    indices: Sequence[int]


@dataclass(frozen=True)
class StoredAnswer:
    """A key's list at index size `size`, with its lookup proof against that size's root."""

    key: IndexKey
    size: int
    indices: list[int]
    proof: LookupProof
    more: bool = False
    """A page only: more of the key's indices follow the last one here."""


def path_tiles(key: bytes) -> list[TileKey]:
    """Every tile a lookup of `key` can touch, top down."""
    return [(d, key[: d // 8]) for d in range(0, KEY_BITS + 1, TILE_LEVELS)]


class IndexRows(Protocol):
    def indexed_size(self) -> int: ...

    def read_tiles(self, keys: Iterable[TileKey]) -> dict[TileKey, bytes]: ...

    def write(self, pending: PendingIndex) -> None:
        """Store `pending` in one transaction; IndexStoreError unless the stored index's
        size is `pending.start`."""
        ...

    def lookup_rows(self, key: bytes, limit: int, after: int = -1) -> RawLookup:
        """One snapshot: the size, the tiles of `path_tiles(key)` that exist, and up to
        `limit` + 1 of the key's indices above `after` and below the size, ascending
        (O(depth / 8 + limit) rows: a range of the (key, index) primary key)."""
        ...


class MemoryIndexRows:
    """`IndexRows` in dicts (tests, the in-memory log)."""

    def __init__(self) -> None:
        self.size = 0
        self.tiles: dict[TileKey, bytes] = {}
        self.lists: dict[bytes, list[int]] = {}
        self._lock = threading.Lock()

    def indexed_size(self) -> int:
        return self.size

    def read_tiles(self, keys: Iterable[TileKey]) -> dict[TileKey, bytes]:
        with self._lock:
            return {k: self.tiles[k] for k in keys if k in self.tiles}

    def write(self, pending: PendingIndex) -> None:
        with self._lock:
            if self.size != pending.start:
                raise IndexStoreError(f"the index holds entries [0, {self.size}); "
                                 f"cannot add from {pending.start}")
            self.tiles.update(pending.tiles)
            for key, index in pending.postings:
                self.lists.setdefault(key, []).append(index)
            self.size = pending.size

    def lookup_rows(self, key: bytes, limit: int, after: int = -1) -> RawLookup:
        with self._lock:
            tiles = {k: self.tiles[k] for k in path_tiles(key) if k in self.tiles}
            have = self.lists.get(key, [])
            start = bisect.bisect_right(have, after)
            return RawLookup(self.size, tiles, have[start: start + limit + 1])


class StoredIndex:
    """The verifiable index over `rows`: prepare/commit per batch, catch up, look up."""

    def __init__(self, rows: IndexRows) -> None:
        self.rows = rows
        #: Tiles as of index size `_cached_size` (what this object committed); a
        #: size that moved otherwise (another process) empties it.
        self._cache: dict[TilePath, Tile] = {}
        self._cached_size = -1

    @property
    def size(self) -> int:
        return self.rows.indexed_size()

    def root(self) -> bytes:
        """The root at the stored size (reads the top tile)."""
        return root_of(TiledNodes(self.rows.read_tiles))

    def prepare(self, start: int, entries: Sequence[bytes]) -> PendingIndex:
        """The rows entries start, start+1, ... add (start must be the stored size)."""
        have = self.rows.indexed_size()
        if start != have:
            raise IndexStoreError(f"the index holds entries [0, {have}); cannot add from {start}")
        added: dict[bytes, list[int]] = {}
        for offset, entry in enumerate(entries):
            for key in entry_key_hashes(entry):
                added.setdefault(key, []).append(start + offset)
        if self._cached_size != have or len(self._cache) > _CACHED_TILES:
            self._cache = {}
        nodes = TiledNodes(self.rows.read_tiles, self._cache)
        root = extend_lists(nodes, added)  # each list's head is its leaf's value
        postings = [(k, i) for k, more in added.items() for i in more]
        return PendingIndex(start, start + len(entries), root, nodes.changed_tiles(),
                            postings, nodes.loaded_tiles())

    def commit(self, pending: PendingIndex) -> None:
        self.rows.write(pending)
        if self._cached_size != pending.start:
            self._cache = {}
        self._cache.update(pending.loaded)
        self._cached_size = pending.size

    def catch_up(self, read_entries: Callable[[int, int], Sequence[bytes]], size: int) -> int:
        """Index entries [stored size, size) read with `read_entries(start, end)`; how many."""
        start = first = self.rows.indexed_size()
        while start < size:
            end = min(size, start + _CATCH_UP_CHUNK)
            got = read_entries(start, end)
            if len(got) != end - start:
                raise IndexStoreError(f"the log returned {len(got)} entries for [{start}, {end})")
            self.commit(self.prepare(start, got))
            start = end
        return start - first

    def lookup(self, key: IndexKey, limit: int = MAX_ANSWER) -> StoredAnswer:
        """`key`'s list and proof at the stored size; TooManyResults past `limit`."""
        raw = self.rows.lookup_rows(key.hash, limit)
        if len(raw.indices) > limit:
            raise TooManyResults(key, limit)
        return _answer(key, raw, limit)

    def lookup_page(self, key: IndexKey, after: int | None, limit: int) -> StoredAnswer:
        """The next `limit` of `key`'s indices above `after` (None: from the first), with
        the proof at the stored size and whether more follow: O(depth / 8 + limit) rows."""
        if limit < 1:
            raise ValueError("a page holds at least one index")
        raw = self.rows.lookup_rows(key.hash, limit, -1 if after is None else after)
        return _answer(key, raw, limit)


def _answer(key: IndexKey, raw: RawLookup, limit: int) -> StoredAnswer:
    tiles = dict(raw.tiles)
    nodes = TiledNodes(lambda keys: {k: tiles[k] for k in keys if k in tiles})
    proof, leaf = lookup_proof(nodes, key.hash)
    indices = list(raw.indices[:limit]) if leaf is not None else []
    return StoredAnswer(key, raw.size, indices, proof, leaf is not None and len(raw.indices) > limit)
