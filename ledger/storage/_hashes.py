"""Stored Merkle hashes read back from the tile rows of a `LogStorage`.

Only tile-level hashes (tree levels 0, 8, 16, ...) are stored; a hash at a level in
between is folded from at most 128 hashes of one tile. Full tiles never change, so
their expanded levels are kept in a small per-process LRU cache.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

from ledger.tlog.merkle import HASH_SIZE, NODE_PREFIX, MissingHashError

_TILE_HEIGHT = 8
_TILE_WIDTH = 1 << _TILE_HEIGHT

_sha256 = hashlib.sha256


#: Interior hashes of a full tile: sub-levels 1..7 (128 + 64 + ... + 2 = 254 hashes).
NODES_BYTES = (_TILE_WIDTH - 2) * HASH_SIZE


class TileSource(Protocol):
    def read_tile(self, level: int, index: int) -> bytes: ...
    def read_tile_nodes(self, level: int, index: int) -> bytes: ...


def expand_tile(data: bytes) -> list[list[bytes]]:
    """All levels of the subtree a tile spans: ``[level0 hashes, level1 hashes, ...]``."""
    level = [data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]
    levels = [level]
    while len(level) > 1:
        level = [
            _sha256(NODE_PREFIX + level[i] + level[i + 1]).digest()
            for i in range(0, len(level) - 1, 2)
        ]
        levels.append(level)
    return levels


def tile_nodes(data: bytes) -> bytes:
    """The stored interior of a full tile: its sub-levels 1..7, concatenated in order."""
    if len(data) != _TILE_WIDTH * HASH_SIZE:
        raise MissingHashError("only full tiles have stored interior hashes")
    return b"".join(b"".join(level) for level in expand_tile(data)[1:_TILE_HEIGHT])


def _levels_from_nodes(data: bytes, nodes: bytes) -> list[list[bytes]]:
    levels = [[data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]]
    offset = 0
    for sub in range(1, _TILE_HEIGHT):
        count = _TILE_WIDTH >> sub
        levels.append([nodes[offset + i * HASH_SIZE : offset + (i + 1) * HASH_SIZE]
                       for i in range(count)])
        offset += count * HASH_SIZE
    return levels


class TileCache:
    """A thread-safe LRU of expanded tiles keyed by ``(tile level, tile index, width)``."""

    def __init__(self, capacity: int = 512) -> None:
        self.capacity = capacity
        self._items: OrderedDict[tuple[int, int, int], list[list[bytes]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[int, int, int]) -> list[list[bytes]] | None:
        with self._lock:
            got = self._items.get(key)
            if got is not None:
                self._items.move_to_end(key)
            return got

    def put(self, key: tuple[int, int, int], value: list[list[bytes]]) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def put_tile(self, tlevel: int, tindex: int, data: bytes, nodes: bytes = b"") -> list[list[bytes]]:
        """Expand the first ``len(data) // 32`` hashes of tile ``tlevel/tindex`` (with its
        stored interior ``nodes`` when it is full), cache them and return the levels.

        Only hashes that are durable in storage may be put here: every reader of this
        cache takes them as the stored tile at that width.
        """
        if not data or len(data) % HASH_SIZE or len(data) > _TILE_WIDTH * HASH_SIZE:
            raise MissingHashError(f"tile {tlevel}/{tindex}: {len(data)} bytes is not 1 to "
                                   f"{_TILE_WIDTH} hashes")
        if len(nodes) == NODES_BYTES and len(data) == _TILE_WIDTH * HASH_SIZE:
            levels = _levels_from_nodes(data, nodes)
        else:
            levels = expand_tile(data)
        self.put((tlevel, tindex, len(data) // HASH_SIZE), levels)
        return levels


class StoredHashReader:
    """A `ledger.tlog.merkle.HashReader` over the tiles of a tree of ``size`` leaves."""

    def __init__(self, source: TileSource, size: int, cache: TileCache | None = None) -> None:
        self.source = source
        self.size = size
        self.cache = cache if cache is not None else TileCache(64)

    def _tile(self, tlevel: int, tindex: int) -> list[list[bytes]]:
        have = (self.size >> (_TILE_HEIGHT * tlevel)) - tindex * _TILE_WIDTH
        width = min(_TILE_WIDTH, have)
        if width <= 0:
            raise MissingHashError(
                f"tile {tlevel}/{tindex} is beyond a tree of size {self.size}"
            )
        key = (tlevel, tindex, width)
        got = self.cache.get(key)
        if got is None:
            data = self.source.read_tile(tlevel, tindex)
            if len(data) < width * HASH_SIZE:
                raise MissingHashError(
                    f"tile {tlevel}/{tindex} holds {len(data) // HASH_SIZE} hashes, "
                    f"a tree of size {self.size} needs {width}"
                )
            nodes = self.source.read_tile_nodes(tlevel, tindex) if width == _TILE_WIDTH else b""
            got = self.cache.put_tile(tlevel, tindex, data[: width * HASH_SIZE], nodes)
        return got

    def read_hashes(self, coords: Sequence[tuple[int, int]]) -> list[bytes]:
        out: list[bytes] = []
        for level, index in coords:
            if level < 0 or index < 0 or ((index + 1) << level) > self.size:
                raise MissingHashError(
                    f"no complete subtree at level {level} index {index} in a tree of size {self.size}"
                )
            tlevel, sub = divmod(level, _TILE_HEIGHT)
            base = index << sub
            levels = self._tile(tlevel, base >> _TILE_HEIGHT)
            out.append(levels[sub][(base & (_TILE_WIDTH - 1)) >> sub])
        return out
