"""C2SP tlog-tiles: tile arithmetic, paths, entry bundles, and proofs from tiles alone.

Tile ``n`` at level ``l`` holds the stored hashes at tree level ``8 * l``, indexes
``n * 256 ...``: the hash at position ``i`` is the complete subtree ``(8 * l, n * 256 + i)``
of :mod:`ledger.tlog.merkle`. Hashes between tile levels are recomputed from the tile.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.tlog._errors import LedgerError
from ledger.tlog.merkle import (
    HASH_SIZE,
    MAX_TREE_SIZE,
    HashReader,
    node_hash,
    root_of,
    subtree_coords,
)

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
MAX_TILE_LEVEL = 63
#: Largest entry an entry bundle can hold (big-endian uint16 length prefix).
MAX_BUNDLE_ENTRY = 0xFFFF
_MAX_PATH = 96
_DEC = re.compile(r"0|[1-9][0-9]*")


class TileError(LedgerError):
    """A tile path, tile or entry bundle is malformed."""


class TileVerificationError(TileError):
    """A fetched tile is truncated or does not match the trusted checkpoint root."""


@dataclass(frozen=True)
class TileRef:
    """A hash tile (``entries=False``) or an entry bundle (``entries=True``, level 0)."""

    level: int
    index: int
    width: int
    entries: bool = False

    def __post_init__(self) -> None:
        for name in ("level", "index", "width"):
            if not isinstance(getattr(self, name), int) or isinstance(getattr(self, name), bool):
                raise TileError(f"tile {name} must be an integer")
        if not 0 <= self.level <= MAX_TILE_LEVEL or (self.entries and self.level != 0):
            raise TileError(f"tile level {self.level} out of range (0..{MAX_TILE_LEVEL}; 0 for entries)")
        if not 1 <= self.width <= TILE_WIDTH:
            raise TileError(f"tile width {self.width} out of range 1..{TILE_WIDTH}")
        if self.index < 0 or self.start >= MAX_TREE_SIZE:
            raise TileError(f"tile index {self.index} out of range")

    @property
    def start(self) -> int:
        """First leaf covered."""
        return self.index << (TILE_HEIGHT * (self.level + 1))

    @property
    def end(self) -> int:
        """One past the last leaf covered (for this width)."""
        return self.start + (self.width << (TILE_HEIGHT * self.level))

    @property
    def is_partial(self) -> bool:
        return self.width < TILE_WIDTH

    def path(self) -> str:
        if self.entries:
            return entries_path(self.index, self.width)
        return tile_path(self.level, self.index, self.width)

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level, "index": self.index, "width": self.width, "entries": self.entries}

    @classmethod
    def from_json(cls, obj: object) -> TileRef:
        if not isinstance(obj, dict) or set(obj) != {"level", "index", "width", "entries"}:
            raise TileError("tile JSON needs exactly level, index, width, entries")
        if not isinstance(obj["entries"], bool):
            raise TileError("tile JSON entries must be true or false")
        return cls(obj["level"], obj["index"], obj["width"], obj["entries"])

    def coords(self) -> list[tuple[int, int]]:
        """The stored-hash coordinates of this tile's hashes, in order."""
        level = TILE_HEIGHT * self.level
        base = self.index * TILE_WIDTH
        return [(level, base + i) for i in range(self.width)]


def encode_index(n: int) -> str:
    """``1234067 -> "x001/x234/067"``: 3-digit groups, all but the last prefixed with x."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise TileError(f"tile index must be a non-negative integer, got {n!r}")
    groups = [f"{n % 1000:03d}"]
    n //= 1000
    while n:
        groups.append(f"x{n % 1000:03d}")
        n //= 1000
    return "/".join(reversed(groups))


def _suffix(width: int) -> str:
    if isinstance(width, bool) or not isinstance(width, int) or not 1 <= width <= TILE_WIDTH:
        raise TileError(f"tile width must be 1..{TILE_WIDTH}, got {width!r}")
    return "" if width == TILE_WIDTH else f".p/{width}"


def tile_path(level: int, index: int, width: int = TILE_WIDTH) -> str:
    """``tile/<L>/<N>[.p/<W>]``."""
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= MAX_TILE_LEVEL:
        raise TileError(f"tile level must be 0..{MAX_TILE_LEVEL}, got {level!r}")
    return f"tile/{level}/{encode_index(index)}{_suffix(width)}"


def entries_path(index: int, width: int = TILE_WIDTH) -> str:
    """``tile/entries/<N>[.p/<W>]``."""
    return f"tile/entries/{encode_index(index)}{_suffix(width)}"


def parse_tile_path(path: str) -> TileRef:
    """Parse a tile or entry-bundle path strictly (it may come from an untrusted URL).

    Only the canonical spelling is accepted: no leading zeros, no empty or
    ``..`` segments, ``.p/W`` only for 1 <= W <= 255, level 0..63, and an index
    whose first leaf fits in a tree size.
    """
    if not isinstance(path, str) or len(path) > _MAX_PATH or not path.isascii():
        raise TileError("tile path must be a short ASCII string")
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "tile":
        raise TileError(f"tile path {path!r} must start with tile/<L>/ or tile/entries/")
    entries = parts[1] == "entries"
    if entries:
        level = 0
    elif _DEC.fullmatch(parts[1]) and len(parts[1]) <= 2:
        level = int(parts[1])
    else:
        raise TileError(f"tile level {parts[1]!r} must be a decimal 0..63 without leading zeros")
    rest = parts[2:]
    width = TILE_WIDTH
    if len(rest) >= 2 and rest[-2].endswith(".p"):
        w = rest[-1]
        if not (_DEC.fullmatch(w) and len(w) <= 3 and 1 <= int(w) < TILE_WIDTH):
            raise TileError(f"partial tile width {w!r} must be a decimal 1..255")
        width = int(w)
        rest = [*rest[:-2], rest[-2][:-2]]
    index = 0
    for i, group in enumerate(rest):
        last = i == len(rest) - 1
        digits = group if last else group[1:]
        if (not last and not group.startswith("x")) or len(digits) != 3 or not digits.isdigit():
            raise TileError(f"tile index element {group!r} is malformed in {path!r}")
        index = index * 1000 + int(digits)
    try:
        ref = TileRef(level, index, width, entries)
    except TileError as e:
        raise TileError(f"{e} in {path!r}") from None
    if ref.path() != path:
        raise TileError(f"tile path {path!r} is not in canonical form (expected {ref.path()!r})")
    return ref


def _check_size(size: int) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_TREE_SIZE:
        raise TileError(f"tree size must be an integer in [0, 2^63), got {size!r}")


def _levels(size: int) -> int:
    """Number of tile levels that hold at least one hash for ``size``."""
    levels = 0
    while size >> (TILE_HEIGHT * levels):
        levels += 1
    return levels


def tile_width(level: int, index: int, size: int) -> int:
    """Width of tile (level, index) in the tree of ``size``, or 0 if it does not exist."""
    full = size >> (TILE_HEIGHT * (level + 1))
    if index < full:
        return TILE_WIDTH
    if index == full:
        return (size >> (TILE_HEIGHT * level)) & (TILE_WIDTH - 1)
    return 0


def tiles_for_size(size: int) -> list[TileRef]:
    """Every hash tile that exists for a tree of ``size`` leaves, level by level."""
    _check_size(size)
    refs: list[TileRef] = []
    for level in range(_levels(size)):
        full = size >> (TILE_HEIGHT * (level + 1))
        refs.extend(TileRef(level, n, TILE_WIDTH) for n in range(full))
        w = tile_width(level, full, size)
        if w:
            refs.append(TileRef(level, full, w))
    return refs


def right_edge_tiles(size: int) -> list[TileRef]:
    """The partial tiles of ``size``; their hashes alone determine the root."""
    _check_size(size)
    out = []
    for level in range(_levels(size)):
        full = size >> (TILE_HEIGHT * (level + 1))
        w = tile_width(level, full, size)
        if w:
            out.append(TileRef(level, full, w))
    return out


def new_tiles(old_size: int, new_size: int) -> list[TileRef]:
    """Hash tiles that exist at ``new_size`` but not (with that width) at ``old_size``."""
    _check_size(old_size)
    _check_size(new_size)
    if old_size > new_size:
        raise TileError(f"old size {old_size} is larger than new size {new_size}")
    out: list[TileRef] = []
    for level in range(_levels(new_size)):
        first = old_size >> (TILE_HEIGHT * (level + 1))
        last = new_size >> (TILE_HEIGHT * (level + 1))
        for n in range(first, last + 1):
            w = tile_width(level, n, new_size)
            if w > tile_width(level, n, old_size):
                out.append(TileRef(level, n, w))
    return out


def entry_bundles_for_size(size: int) -> list[TileRef]:
    """Every entry bundle that exists for a tree of ``size`` leaves."""
    return [TileRef(0, t.index, t.width, entries=True) for t in tiles_for_size(size) if t.level == 0]


def encode_bundle(entries: Sequence[bytes]) -> bytes:
    """Concatenate entries, each as a big-endian uint16 length followed by its bytes."""
    if not 1 <= len(entries) <= TILE_WIDTH:
        raise TileError(f"an entry bundle holds 1..{TILE_WIDTH} entries, got {len(entries)}")
    out = bytearray()
    for i, e in enumerate(entries):
        if not isinstance(e, bytes):
            raise TileError(f"bundle entry {i} must be bytes")
        if len(e) > MAX_BUNDLE_ENTRY:
            raise TileError(f"bundle entry {i} is {len(e)} bytes; the limit is {MAX_BUNDLE_ENTRY}")
        out += len(e).to_bytes(2, "big") + e
    return bytes(out)


def decode_bundle(data: bytes, expected_count: int) -> list[bytes]:
    """Split an entry bundle; it must hold exactly ``expected_count`` entries and nothing more."""
    if not 1 <= expected_count <= TILE_WIDTH:
        raise TileError(f"expected entry count must be 1..{TILE_WIDTH}, got {expected_count}")
    if not isinstance(data, bytes):
        raise TileError("entry bundle must be bytes")
    entries: list[bytes] = []
    pos = 0
    for i in range(expected_count):
        if pos + 2 > len(data):
            raise TileError(f"entry bundle is truncated: {i} of {expected_count} entries present")
        n = int.from_bytes(data[pos : pos + 2], "big")
        pos += 2
        if pos + n > len(data):
            raise TileError(f"entry bundle is truncated inside entry {i}")
        entries.append(data[pos : pos + n])
        pos += n
    if pos != len(data):
        raise TileError(
            f"entry bundle has {len(data) - pos} bytes after its {expected_count} entries"
        )
    return entries


def tile_bytes(ref: TileRef, reader: HashReader) -> bytes:
    """The bytes of hash tile ``ref`` read from a full hash source."""
    if ref.entries:
        raise TileError("entry bundles are not built from hashes")
    return b"".join(reader.read_hashes(ref.coords()))


def split_tile(data: bytes, width: int) -> list[bytes]:
    """The hashes of a tile of ``width``; the length must be exactly ``width * 32``."""
    if not isinstance(data, bytes) or len(data) != width * HASH_SIZE:
        got = len(data) if isinstance(data, bytes) else type(data).__name__
        raise TileVerificationError(f"tile must be {width * HASH_SIZE} bytes, got {got}")
    return [data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]


class TileHashReader:
    """A :class:`ledger.tlog.merkle.HashReader` over tiles, trusting only (size, root).

    Right-edge tiles are authenticated by recomputing the root from them; every
    other tile by hashing it and comparing with its entry in the tile above.
    Authenticated tiles are cached. ``fetch_tile(path)`` returns the tile bytes;
    its own errors (network, not found) propagate unchanged to the caller.
    """

    def __init__(self, size: int, root: bytes, fetch_tile: Callable[[str], bytes]) -> None:
        _check_size(size)
        if not isinstance(root, bytes) or len(root) != HASH_SIZE:
            raise TileError(f"trusted root must be {HASH_SIZE} bytes")
        self._size = size
        self._root = root
        self._fetch = fetch_tile
        self._tiles: dict[TileRef, list[bytes]] = {}
        self._edge = {(t.level, t.index): t for t in right_edge_tiles(size)}

    @property
    def size(self) -> int:
        return self._size

    def _get(self, ref: TileRef) -> list[bytes]:
        path = ref.path()
        data = self._fetch(path)
        try:
            return split_tile(data, ref.width)
        except TileVerificationError as e:
            raise TileVerificationError(f"{path}: {e}") from None

    def _authenticate_edge(self) -> None:
        fetched = {(t.level, t.index): self._get(t) for t in self._edge.values()}
        parts = []
        for level, index in subtree_coords(0, self._size):
            parts.append(self._hash_in(fetched, level, index))
        h = parts[-1]
        for left in reversed(parts[:-1]):
            h = node_hash(left, h)
        if h != self._root:
            paths = ", ".join(t.path() for t in self._edge.values())
            raise TileVerificationError(
                f"right-edge tiles ({paths}) do not match the trusted root of size {self._size}"
            )
        for key, hashes in fetched.items():
            self._tiles[self._edge[key]] = hashes

    def _tile(self, level: int, index: int) -> list[bytes]:
        width = tile_width(level, index, self._size)
        if not width:
            raise TileError(f"tile {level}/{index} does not exist at size {self._size}")
        ref = TileRef(level, index, width)
        cached = self._tiles.get(ref)
        if cached is not None:
            return cached
        if (level, index) in self._edge:
            self._authenticate_edge()
            return self._tiles[ref]
        hashes = self._get(ref)  # a full tile: its root is one hash of the tile above
        parent = self._tile(level + 1, index >> TILE_HEIGHT)
        if root_of(hashes) != parent[index & (TILE_WIDTH - 1)]:
            raise TileVerificationError(
                f"{ref.path()} does not match its hash in the tile above (trusted size {self._size})"
            )
        self._tiles[ref] = hashes
        return hashes

    def _hash_in(self, tiles: dict[tuple[int, int], list[bytes]], level: int, index: int) -> bytes:
        tl, r = divmod(level, TILE_HEIGHT)
        lo = index << r
        hashes = tiles[(tl, lo >> TILE_HEIGHT)]
        pos = lo & (TILE_WIDTH - 1)
        return root_of(hashes[pos : pos + (1 << r)])

    def read_hashes(self, coords: Sequence[tuple[int, int]]) -> list[bytes]:
        out = []
        for level, index in coords:
            if not (0 <= level < 64 and index >= 0 and (index + 1) << level <= self._size):
                raise TileError(
                    f"hash ({level}, {index}) is not a complete subtree of size {self._size}"
                )
            tl, r = divmod(level, TILE_HEIGHT)
            lo = index << r
            n = lo >> TILE_HEIGHT
            hashes = self._tile(tl, n)
            out.append(self._hash_in({(tl, n): hashes}, level, index))
        return out
