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
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ledger import LedgerError
from ledger.vindex._keys import IndexKey, entry_key_hashes
from ledger.vindex._map import lookup_proof, root_of
from ledger.vindex._proof import KEY_BITS, LookupProof
from ledger.vindex._tiles import TILE_LEVELS, Tile, TiledNodes, TileKey, TilePath

__all__ = ["MAX_ANSWER", "IndexRows", "IndexStoreError", "MemoryIndexRows", "PendingIndex",
           "PreparedIndex", "RawLookup", "StoredAnswer", "StoredIndex", "TooManyResults", "WriteBack",
           "path_tiles"]

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
    """The index rows that take the written index from size `start` to `size` (one
    transaction): the changed tiles encoded, the postings added."""

    start: int
    size: int
    root: bytes
    tiles: Mapping[TileKey, bytes]
    postings: Sequence[tuple[bytes, int]] = field(default=())


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


@dataclass(frozen=True)
class WriteBack:
    """How long a `StoredIndex` may hold committed batches in memory before it writes
    their rows: at most `entries` entries, or the first of them `seconds` old (checked at
    each commit). `StoredIndex.flush` writes them at once: the shared queue's integrator
    does when a take from the queue comes back short of a batch, and the in-process one
    after every batch (frontends take turns with the lock). The top tiles, rewritten by
    every batch, are then written once for many batches of a saturated log. Lookups
    answer from the written rows, at their size, with the checkpoint of that size."""

    entries: int = 8192
    seconds: float = 1.0

    def __post_init__(self) -> None:
        if self.entries < 1 or not self.seconds >= 0:
            raise ValueError("a write-back holds at least 1 entry for 0 or more seconds")


@dataclass(frozen=True)
class PreparedIndex:
    """What one batch changes in the index, computed before its checkpoint is signed."""

    start: int
    size: int
    root: bytes
    changes: Mapping[TilePath, Tile]
    """The records the batch writes, by tile."""
    postings: Sequence[tuple[bytes, int]] = field(default=())
    fresh: Mapping[TilePath, Tile] = field(default_factory=dict, compare=False)
    """The tiles it read from the rows (as read)."""


class StoredIndex:
    """The verifiable index over `rows`: prepare/commit per batch, catch up, look up.

    The object keeps decoded tiles between batches, as of its size; with `write_back`
    it also holds the rows of committed batches until `WriteBack` says to write them
    (every tile whose written copy is behind is held, so never dropped from the cache).
    Rows that another process moved (their size is not the one this object wrote last)
    void what it holds: it goes on from the rows, as a crash would (the index is a
    function of the log, so catching up gives the same roots).
    """

    def __init__(self, rows: IndexRows, write_back: WriteBack | None = None) -> None:
        self.rows = rows
        self.write_back = write_back
        self._cache: dict[TilePath, Tile] = {}
        self._size = -1  # entries in, with those held; -1: not read yet
        self._written = -1  # the rows' size as this object last read or wrote it
        self._held: set[TilePath] = set()
        self._postings: list[tuple[bytes, int]] = []
        self._held_since = 0.0

    def _sync(self) -> int:
        """The index's size, held batches included; voids them if the rows moved."""
        have = self.rows.indexed_size()
        if have != self._written:
            self._drop(have)
        return self._size

    def _drop(self, size: int) -> None:
        self._cache, self._held, self._postings = {}, set(), []
        self._size = self._written = size

    @property
    def size(self) -> int:
        """How many entries are in the index (entries [0, size)), held ones included."""
        return self._sync()

    @property
    def holding(self) -> bool:
        """Whether committed batches are held, their rows not yet written."""
        return self._size != self._written

    @property
    def written_size(self) -> int:
        """How many entries the rows hold: the size lookups answer at."""
        return self.rows.indexed_size()

    def root(self) -> bytes:
        """The root at `size` (reads the top tile, unless it is held)."""
        self._sync()
        return root_of(TiledNodes(self.rows.read_tiles, self._cache))

    def prepare(self, start: int, entries: Sequence[bytes]) -> PreparedIndex:
        """What entries start, start+1, ... change (start must be `size`)."""
        have = self._sync()
        if start != have:
            raise IndexStoreError(f"the index holds entries [0, {have}); cannot add from {start}")
        added: dict[bytes, list[int]] = {}
        for offset, entry in enumerate(entries):
            for key in entry_key_hashes(entry):
                added.setdefault(key, []).append(start + offset)
        nodes = TiledNodes(_prefetched(self.rows.read_tiles, self._cache, added), self._cache)
        root = nodes.extend_lists(added)  # each list's head is its leaf's value
        postings = [(k, i) for k, more in added.items() for i in more]
        return PreparedIndex(start, start + len(entries), root, nodes.changes(), postings,
                             nodes.fresh_tiles())

    def commit(self, prepared: PreparedIndex) -> None:
        """Take in a batch once it is durable; write the rows held, as `write_back` says
        (at once without it). On a failed write nothing stays held. The size is the one
        `prepare` read (the caller holds the integration lock; rows moved regardless
        are refused by their write's own check)."""
        if self._size != prepared.start:
            raise IndexStoreError(f"the index holds entries [0, {self._size}); "
                                  f"cannot add from {prepared.start}")
        cache = self._cache
        for path, tile in prepared.fresh.items():
            cache.setdefault(path, tile)
        for path, changed in prepared.changes.items():
            held = cache.get(path)
            if held is None:
                held = cache[path] = {}
            held.update(changed)
        if not self._held:
            self._held_since = time.monotonic()
        self._held.update(prepared.changes)
        self._postings.extend(prepared.postings)
        self._size = prepared.size
        wb = self.write_back
        if (wb is None or self._size - self._written >= wb.entries
                or time.monotonic() - self._held_since >= wb.seconds):
            self.flush()

    def flush(self) -> int:
        """Write the held rows in one transaction; how many entries they covered. On a
        failure (the rows moved, the database failed) nothing stays held: it raises,
        and the next batch catches up from the rows."""
        if not self.holding:
            return 0
        cache = self._cache
        tiles = {(8 * len(path), path): b"".join(cache[path].values())
                 for path in sorted(self._held, key=lambda p: (len(p), p))}
        pending = PendingIndex(self._written, self._size, root_of(TiledNodes(
            self.rows.read_tiles, cache)), tiles, self._postings)
        try:
            self.rows.write(pending)
        except BaseException:
            self._drop(-1)  # read the rows' size again before going on
            raise
        self._held, self._postings = set(), []
        self._written = self._size
        if len(cache) > _CACHED_TILES:  # keep the top two levels, hot in every batch
            self._cache = {p: t for p, t in cache.items() if len(p) < 2}
        return pending.size - pending.start

    def catch_up(self, read_entries: Callable[[int, int], Sequence[bytes]], size: int) -> int:
        """Index entries [`size`, size) read with `read_entries(start, end)`, then write
        what is held; how many were indexed."""
        start = first = self._sync()
        while start < size:
            end = min(size, start + _CATCH_UP_CHUNK)
            got = read_entries(start, end)
            if len(got) != end - start:
                raise IndexStoreError(f"the log returned {len(got)} entries for [{start}, {end})")
            self.commit(self.prepare(start, got))
            start = end
        if start > first:
            self.flush()
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


_PREFETCH_LEVELS = 4
"""Tiles of the top levels read for a whole batch in one call (as deep as a map of
billions of keys has tiles on most paths); deeper ones as the update meets them."""


def _prefetched(read: Callable[[Iterable[TileKey]], Mapping[TileKey, bytes]],
                cache: Mapping[TilePath, Tile], keys: Iterable[bytes]
                ) -> Callable[[Iterable[TileKey]], Mapping[TileKey, bytes]]:
    """`read`, answering from one read of every tile of the top levels on the paths of
    `keys` that `cache` lacks (an absent one is known absent)."""
    wanted = {(8 * n, key[:n]) for key in keys for n in range(_PREFETCH_LEVELS)
              if key[:n] not in cache}
    got = read(wanted) if wanted else {}

    def tiles(which: Iterable[TileKey]) -> Mapping[TileKey, bytes]:
        out, rest = {}, []
        for key in which:
            if key in wanted:
                if key in got:
                    out[key] = got[key]
            else:
                rest.append(key)
        if rest:
            out.update(read(rest))
        return out
    return tiles


def _answer(key: IndexKey, raw: RawLookup, limit: int) -> StoredAnswer:
    tiles = dict(raw.tiles)
    nodes = TiledNodes(lambda keys: {k: tiles[k] for k in keys if k in tiles})
    proof, leaf = lookup_proof(nodes, key.hash)
    indices = list(raw.indices[:limit]) if leaf is not None else []
    return StoredAnswer(key, raw.size, indices, proof, leaf is not None and len(raw.indices) > limit)
