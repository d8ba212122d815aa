"""The map's nodes grouped in tiles of 8 levels, so storage reads and writes whole tiles.

A tile is addressed by (depth, path) with depth a multiple of 8 and path the first
depth/8 bytes of every key below it; it holds the stored nodes at depths depth ..
depth + 7 under that path. An update of k keys writes O(k * map depth / 8) tiles and
a lookup proof reads one tile per 8 levels.

A tile's bytes are its nodes, each 67 bytes: the depth below the tile's (0..7), the
bits of the node's path below the tile's, packed MSB-first (0 at depth 0), the kind
(0 leaf, 1 inner), then key and value hashes (leaf) or left and right hashes (inner).
The order of the nodes is not significant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from ledger.vindex._map import Inner, Leaf, Node
from ledger.vindex._proof import IndexProofError

__all__ = ["TILE_LEVELS", "Tile", "TileKey", "TileNodes", "TiledNodes", "decode_tile", "encode_tile",
           "tile_of"]

TILE_LEVELS = 8
_RECORD = 67
TileKey = tuple[int, bytes]
"""(depth, path) of a tile: depth a multiple of 8, path of depth/8 bytes."""
TileNodes = dict[tuple[int, bytes], Node]


def tile_of(depth: int, path: bytes) -> TileKey:
    """The tile holding the node at (depth, path)."""
    top = depth - depth % TILE_LEVELS
    return top, path[: top // 8]


def _record(depth: int, path: bytes, node: Node) -> bytes:
    """One node's 67 bytes in its tile."""
    rel = depth % TILE_LEVELS
    head = bytes((rel, path[-1] if rel else 0))
    if type(node) is Leaf:
        return head + b"\x00" + node.key + node.value
    assert type(node) is Inner
    return head + b"\x01" + node.left + node.right


def _node(record: bytes) -> Node:
    """The node a (checked) record holds."""
    if record[2]:
        return Inner(record[3:35], record[35:67])
    return Leaf(record[3:35], record[35:67])


class Tile:
    """A tile as its nodes' records: a node is decoded when read, and re-encoding a tile
    after an update encodes only the nodes it wrote and joins the others' bytes as
    they were."""

    __slots__ = ("records",)

    def __init__(self, records: dict[tuple[int, bytes], bytes] | None = None) -> None:
        self.records: dict[tuple[int, bytes], bytes] = {} if records is None else records

    def get(self, where: tuple[int, bytes]) -> Node | None:
        record = self.records.get(where)
        return None if record is None else _node(record)

    def nodes(self) -> TileNodes:
        return {where: _node(record) for where, record in self.records.items()}

    def encode(self) -> bytes:
        return b"".join(self.records.values())


def encode_tile(nodes: Mapping[tuple[int, bytes], Node]) -> bytes:
    """The bytes of a tile holding `nodes` (all must lie in one tile), in the mapping's
    order (a reader does not depend on it)."""
    return b"".join(_record(depth, path, node) for (depth, path), node in nodes.items())


def parse_tile(top: int, path: bytes, data: bytes) -> Tile:
    """Split and check a tile's bytes; IndexProofError on a malformed one (a damaged store)."""
    if len(data) % _RECORD:
        raise IndexProofError(f"index tile ({top}, {path.hex()}) is {len(data)} bytes, "
                              f"not a multiple of {_RECORD}")
    records: dict[tuple[int, bytes], bytes] = {}
    for at in range(0, len(data), _RECORD):
        rel, bits, kind = data[at], data[at + 1], data[at + 2]
        if rel >= TILE_LEVELS or kind > 1 or (rel == 0 and bits) or bits & (0xFF >> rel):
            raise IndexProofError(f"index tile ({top}, {path.hex()}) holds a malformed node")
        records[(top + rel, path + bytes((bits,)) if rel else path)] = data[at: at + _RECORD]
    return Tile(records)


def decode_tile(top: int, path: bytes, data: bytes) -> TileNodes:
    """A tile's nodes from its bytes; IndexProofError on a malformed one (a damaged store)."""
    return parse_tile(top, path, data).nodes()


class TiledNodes:
    """A `NodeStore` over tiles read through `read_tiles` (missing tiles are empty).

    Reads are cached for the life of the object, after `known` (tiles the caller
    already holds, never modified here: a tile is copied before its first write);
    `put_nodes` only records the writes, which `changed_tiles` returns encoded, for
    the caller to store.
    """

    def __init__(self, read_tiles: Callable[[Iterable[TileKey]], Mapping[TileKey, bytes]],
                 known: Mapping[TileKey, Tile] | None = None) -> None:
        self._read = read_tiles
        self._known = known if known is not None else {}
        self._tiles: dict[TileKey, Tile] = {}
        self._dirty: set[TileKey] = set()

    def _tile(self, key: TileKey) -> Tile:
        tile = self._tiles.get(key)
        if tile is None:
            tile = self._known.get(key)
            if tile is None:
                data = self._read([key]).get(key)
                tile = Tile() if data is None else parse_tile(key[0], key[1], data)
            self._tiles[key] = tile
        return tile

    def get_node(self, depth: int, path: bytes) -> Node | None:
        top = depth - depth % TILE_LEVELS
        key = (top, path[: top >> 3])
        tile = self._tiles.get(key)
        if tile is None:
            tile = self._tile(key)
        record = tile.records.get((depth, path))
        return None if record is None else _node(record)

    def put_nodes(self, nodes: Mapping[tuple[int, bytes], Node]) -> None:
        tiles, dirty = self._tiles, self._dirty
        for (depth, path), node in nodes.items():
            top = depth - depth % TILE_LEVELS
            key = (top, path[: top >> 3])
            if key in dirty:
                records = tiles[key].records
            else:  # copy on first write
                records = dict(self._tile(key).records)
                tiles[key] = Tile(records)
                dirty.add(key)
            records[(depth, path)] = _record(depth, path, node)

    def changed_tiles(self) -> dict[TileKey, bytes]:
        """The tiles written since this object was made, encoded."""
        return {key: self._tiles[key].encode() for key in sorted(self._dirty)}

    def loaded_tiles(self) -> dict[TileKey, Tile]:
        """Every tile this object read or wrote, as of after its writes."""
        return dict(self._tiles)
