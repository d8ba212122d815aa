"""The map's nodes grouped in tiles of 8 levels, so storage reads and writes whole tiles.

A tile is addressed by (depth, path) with depth a multiple of 8 and path the first
depth/8 bytes of every key below it; it holds the stored nodes at depths depth ..
depth + 7 under that path. An update of k keys writes O(k * map depth / 8) tiles and
a lookup proof reads one tile per 8 levels.

A tile's bytes are its nodes, each 67 bytes: the depth below the tile's (0..7), the
bits of the node's path below the tile's, packed MSB-first (0 at depth 0), the kind
(0 leaf, 1 inner), then key and value hashes (leaf) or left and right hashes (inner).
The order of the nodes is not significant: a record's first two bytes name the node
within its tile, and the rest is the node itself (`ledger.vindex._map.Node`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from ledger.vindex._map import Node, extend_lists
from ledger.vindex._proof import IndexProofError

__all__ = ["TILE_LEVELS", "Tile", "TileKey", "TileNodes", "TilePath", "TiledNodes", "compiled",
           "decode_tile", "encode_tile", "merge_encoded", "parse_tile", "tile_of"]

TILE_LEVELS = 8
"""Levels per tile: a byte of key per tile, so a tile's path is whole bytes."""
_RECORD = 67
_TOP = b"\x00\x00"
TileKey = tuple[int, bytes]
"""(depth, path) of a tile: depth a multiple of 8, path of depth/8 bytes."""
TilePath = bytes
"""A tile's path alone (its depth is 8 times its length): how tiles are kept in memory."""
TileNodes = dict[tuple[int, bytes], Node]
Tile = dict[bytes, bytes]
"""A tile in memory: each node's record by its first two bytes (where it sits in the
tile). Re-encoding a tile after an update encodes only the nodes it wrote and joins
the others' bytes as they were."""


CompiledUpdate = Callable[[list[bytes], list[list[int]], dict[TilePath, Tile],
                           dict[TilePath, Tile], Callable[[TilePath], Tile],
                           dict[TilePath, Tile], dict[TilePath, Tile]], bytes]
_compiled: CompiledUpdate | None
_split: Callable[[bytes], Tile | None] | None
try:  # built at install where a C compiler and OpenSSL's headers are (setup.py)
    from ledger.vindex._ctrie import split_records as _split
    from ledger.vindex._ctrie import update_tiles as _compiled
except ImportError:  # the same walk and split in Python
    _compiled = _split = None


def compiled() -> bool:
    """Whether `TiledNodes.extend_lists` and `parse_tile` run compiled (`_ctrie.c`)."""
    return _compiled is not None


def tile_of(depth: int, path: bytes) -> TileKey:
    """The tile holding the node at (depth, path)."""
    top = depth - depth % TILE_LEVELS
    return top, path[: top // 8]


def _place(depth: int, path: bytes) -> tuple[TilePath, bytes]:
    """The path of the tile holding the node at (depth, path), and the node's 2-byte
    name in it (depth below the tile's, the path's bits below the tile's)."""
    rel = depth % TILE_LEVELS
    if rel:
        return path[:-1], bytes((rel, path[-1]))
    return path, _TOP


def encode_tile(nodes: Mapping[tuple[int, bytes], Node]) -> bytes:
    """The bytes of a tile holding `nodes` (all must lie in one tile), in the mapping's
    order (a reader does not depend on it)."""
    return b"".join(_place(depth, path)[1] + node for (depth, path), node in nodes.items())


def parse_tile(top: int, path: bytes, data: bytes) -> Tile:
    """Split and check a tile's bytes; IndexProofError on a malformed one (a damaged store)."""
    if len(data) % _RECORD:
        raise IndexProofError(f"index tile ({top}, {path.hex()}) is {len(data)} bytes, "
                              f"not a multiple of {_RECORD}")
    split = _split and _split(data)  # None: malformed, named below
    if split is not None:
        return split
    tile: Tile = {}
    for at in range(0, len(data), _RECORD):
        rel, bits, kind = data[at], data[at + 1], data[at + 2]
        if rel >= TILE_LEVELS or kind > 1 or (rel == 0 and bits) or bits & (0xFF >> rel):
            raise IndexProofError(f"index tile ({top}, {path.hex()}) holds a malformed node")
        tile[data[at: at + 2]] = data[at: at + _RECORD]
    return tile


def decode_tile(top: int, path: bytes, data: bytes) -> TileNodes:
    """A tile's nodes from its bytes; IndexProofError on a malformed one (a damaged store)."""
    return {(top + name[0], path + name[1:] if name[0] else path): record[2:]
            for name, record in parse_tile(top, path, data).items()}


class TiledNodes:
    """A `NodeStore` over tiles read through `read_tiles` (missing tiles are empty).

    Reads are cached for the life of the object, after `known` (tiles the caller
    already holds, never modified here). `put_nodes` only records the written nodes,
    tile by tile, beside the tiles they change (no tile is copied): `changes` returns
    them, `changed_tiles` the changed tiles encoded, for the caller to store.
    """

    def __init__(self, read_tiles: Callable[[Iterable[TileKey]], Mapping[TileKey, bytes]],
                 known: Mapping[TilePath, Tile] | None = None) -> None:
        self._read = read_tiles
        self._known = known if known is not None else {}
        self._tiles: dict[TilePath, Tile] = {}
        self._fresh: dict[TilePath, Tile] = {}
        self._changes: dict[TilePath, Tile] = {}

    def _tile(self, path: TilePath) -> Tile:
        tile = self._tiles.get(path)
        if tile is None:
            self._load([path])
            tile = self._tiles[path]
        return tile

    def _load(self, paths: Iterable[TilePath]) -> None:
        """Have the tiles of `paths` in memory, those not known read in one call."""
        tiles, known = self._tiles, self._known
        reading = []
        for path in paths:
            if path not in tiles:
                tile = known.get(path)
                if tile is None:
                    reading.append(path)
                else:
                    tiles[path] = tile
        if not reading:
            return
        keys = [(8 * len(path), path) for path in reading]
        got = self._read(keys)
        for path, key in zip(reading, keys, strict=True):
            data = got.get(key)
            tiles[path] = self._fresh[path] = {} if data is None else parse_tile(key[0], path,
                                                                                   data)

    def get_node(self, depth: int, path: bytes) -> Node | None:
        where, name = _place(depth, path)
        changed = self._changes.get(where)
        record = None if changed is None else changed.get(name)
        if record is None:
            tile = self._tiles.get(where)
            if tile is None:
                tile = self._tile(where)
            record = tile.get(name)
        return None if record is None else record[2:]

    def put_nodes(self, nodes: Mapping[tuple[int, bytes], Node]) -> None:
        """Record written nodes. A tile not read yet (a leaf pushed down beside a new key
        lands in a tile no changed key's path crosses) is read with the others like it
        in one call, for the rest of its records, before its changes are recorded."""
        changes, tiles = self._changes, self._tiles
        later: list[tuple[TilePath, bytes, Node]] = []
        for (depth, path), node in nodes.items():
            rel = depth % TILE_LEVELS
            if rel:
                where, name = path[:-1], bytes((rel, path[-1]))
            else:
                where, name = path, _TOP
            changed = changes.get(where)
            if changed is None:
                if where not in tiles:
                    later.append((where, name, node))
                    continue
                changed = changes[where] = {}
            changed[name] = name + node
        if later:
            self._load({where for where, _, _ in later})
            for where, name, node in later:
                changed = changes.get(where)
                if changed is None:
                    changed = changes[where] = {}
                changed[name] = name + node

    def extend_lists(self, added: Mapping[bytes, Sequence[int]]) -> bytes:
        """`ledger.vindex._map.extend_lists` on these tiles: the compiled walk where it
        was built (the same nodes written, the same root), else the Python one. As with
        the Python walk, nothing is recorded unless the whole update succeeds; tiles
        written but not read on the way are read after it, in one call, as `put_nodes`
        reads them."""
        update = _compiled
        if update is None or not added:
            return extend_lists(self, added)
        keys, known, tiles = sorted(added), self._known, self._tiles
        written: dict[TilePath, Tile] = {}
        root = update(keys, [list(added[k]) for k in keys], tiles,
                      known if isinstance(known, dict) else dict(known), self._tile,
                      self._changes, written)
        self._load([path for path in written if path not in tiles])
        for path, records in written.items():
            self._changes.setdefault(path, {}).update(records)
        return root

    def changes(self) -> dict[TilePath, Tile]:
        """The records written since this object was made, by tile (what to lay over
        `loaded_tiles` for the tiles as of after the writes)."""
        return self._changes

    def fresh_tiles(self) -> dict[TilePath, Tile]:
        """The tiles this object read through `read_tiles` (not from `known`), as read."""
        return self._fresh

    def changed_tiles(self) -> dict[TileKey, bytes]:
        """The tiles written since this object was made, encoded, top down."""
        return {(8 * len(path), path): merge_encoded(self._tiles[path], self._changes[path])
                for path in sorted(self._changes, key=lambda p: (len(p), p))}

    def loaded_tiles(self) -> dict[TilePath, Tile]:
        """Every tile this object read or wrote, as of after its writes (copies of those
        it wrote)."""
        out = dict(self._tiles)
        for path, changed in self._changes.items():
            out[path] = {**out[path], **changed}
        return out


def merge_encoded(tile: Tile, changed: Tile) -> bytes:
    """The bytes of `tile` with the records of `changed` laid over it."""
    if not changed:
        return b"".join(tile.values())
    kept = b"".join(record for name, record in tile.items() if name not in changed)
    return kept + b"".join(changed.values())
