"""RFC 9162 section 2.1 Merkle tree: hashing, roots, proofs and their verification.

Pure code, no I/O. Stored hashes are addressed as in C2SP tlog-tiles and Go's
``sumdb/tlog``: the hash at ``(level, index)`` is the root of the complete
subtree over leaves ``[index << level, (index + 1) << level)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Protocol

from ledger.tlog._errors import LedgerError

HASH_SIZE = 32
LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
EMPTY_ROOT = hashlib.sha256(b"").digest()
#: Largest tree size accepted anywhere (sizes are uint64 on the wire; keep one bit spare).
MAX_TREE_SIZE = (1 << 63) - 1

_sha256 = hashlib.sha256


class ProofError(LedgerError):
    """A proof or its parameters are malformed, or a proof cannot be generated."""


class RootMismatchError(ProofError):
    """A well-formed proof does not lead to the root it was checked against."""

    def __init__(self, message: str, expected_root: bytes, computed_root: bytes) -> None:
        super().__init__(
            f"{message}: expected root {expected_root.hex()}, computed {computed_root.hex()}"
        )
        self.expected_root = expected_root
        self.computed_root = computed_root


class MissingHashError(LedgerError):
    """A hash source does not hold a requested stored hash."""


def leaf_hash(entry: bytes) -> bytes:
    """SHA-256(0x00 || entry)."""
    return _sha256(LEAF_PREFIX + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return _sha256(NODE_PREFIX + left + right).digest()


class HashReader(Protocol):
    """A source of stored complete-subtree hashes addressed by ``(level, index)``."""

    def read_hashes(self, coords: Sequence[tuple[int, int]]) -> list[bytes]: ...


# ---------------------------------------------------------------------------
# Roots


def root_of(leaf_hashes: Sequence[bytes]) -> bytes:
    """The RFC 9162 root of a list of leaf hashes (EMPTY_ROOT for none)."""
    if not leaf_hashes:
        return EMPTY_ROOT
    level = list(leaf_hashes)
    for h in level:
        _check_hash(h, "leaf hash")
    prefix = NODE_PREFIX
    sha = _sha256
    while len(level) > 1:
        odd = level[-1] if len(level) % 2 else None
        level = [
            sha(prefix + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)
        ]
        if odd is not None:
            level.append(odd)
    return level[0]


def _fold(hashes: Sequence[bytes]) -> bytes:
    """Combine the hashes of consecutive complete subtrees, largest first, right to left."""
    h = hashes[-1]
    for left in reversed(hashes[:-1]):
        h = _sha256(NODE_PREFIX + left + h).digest()
    return h


def subtree_coords(lo: int, hi: int) -> list[tuple[int, int]]:
    """Complete subtrees, largest first, that make up leaves ``[lo, hi)`` as RFC 9162 splits it.

    ``lo`` must be a multiple of the largest power of two not above ``hi - lo``,
    which holds for every range the RFC recursion produces and for ``lo == 0``.
    """
    if not 0 <= lo < hi:
        raise ProofError(f"empty or negative leaf range [{lo}, {hi})")
    coords: list[tuple[int, int]] = []
    while lo < hi:
        level = (hi - lo).bit_length() - 1
        if lo & ((1 << level) - 1):
            raise ProofError(f"leaf range [{lo}, {hi}) is not aligned to a subtree")
        coords.append((level, lo >> level))
        lo += 1 << level
    return coords


def _range_hashes(ranges: Sequence[tuple[int, int]], reader: HashReader) -> list[bytes]:
    """The Merkle hash of each leaf range, reading all needed stored hashes in one call."""
    per_range = [subtree_coords(lo, hi) for lo, hi in ranges]
    flat = [c for coords in per_range for c in coords]
    if not flat:
        return []
    hashes = reader.read_hashes(flat)
    if len(hashes) != len(flat):
        raise MissingHashError(f"hash source returned {len(hashes)} hashes for {len(flat)} requested")
    for h in hashes:
        _check_hash(h, "stored hash")
    out: list[bytes] = []
    pos = 0
    for coords in per_range:
        out.append(_fold(hashes[pos : pos + len(coords)]))
        pos += len(coords)
    return out


def tree_root(size: int, reader: HashReader) -> bytes:
    """Root of the tree of ``size`` leaves from stored hashes (at most log2(size) reads)."""
    _check_size(size, "tree size")
    if size == 0:
        return EMPTY_ROOT
    return _range_hashes([(0, size)], reader)[0]


# ---------------------------------------------------------------------------
# Proof generation (RFC 9162 2.1.3.1 and 2.1.4.1)


def _split(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """Leaf ranges whose hashes form PATH(index, D[0:size]), leaf's sibling first."""
    _check_size(size, "tree size")
    _check_index(index, size)
    lo, hi = 0, size
    ranges: list[tuple[int, int]] = []
    while hi - lo > 1:
        k = _split(hi - lo)
        if index < lo + k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo += k
    ranges.reverse()
    return ranges


def consistency_ranges(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """Leaf ranges whose hashes form PROOF(old_size, D[0:new_size]), deepest first."""
    _check_size(old_size, "old size")
    _check_size(new_size, "new size")
    if old_size > new_size:
        raise ProofError(f"old size {old_size} is larger than new size {new_size}")
    if old_size == 0 or old_size == new_size:
        return []
    lo, hi, m = 0, new_size, old_size
    ranges: list[tuple[int, int]] = []
    complete = True  # the RFC's "b": the old tree is a complete subtree seen so far
    while m != hi - lo:
        k = _split(hi - lo)
        if m <= k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo += k
            m -= k
            complete = False
    if not complete:
        ranges.append((lo, hi))
    ranges.reverse()
    return ranges


def inclusion_proof(index: int, size: int, reader: HashReader) -> list[bytes]:
    """The RFC 9162 inclusion proof for leaf ``index`` in the tree of ``size`` leaves."""
    return _range_hashes(inclusion_ranges(index, size), reader)


def consistency_proof(old_size: int, new_size: int, reader: HashReader) -> list[bytes]:
    """The RFC 9162 consistency proof from ``old_size`` to ``new_size`` (empty if equal or 0)."""
    return _range_hashes(consistency_ranges(old_size, new_size), reader)


# ---------------------------------------------------------------------------
# Verification (RFC 9162 2.1.3.2 and 2.1.4.2); every precondition before any hashing


def inclusion_proof_length(index: int, size: int) -> int:
    """The exact number of hashes in an inclusion proof for ``index`` in ``size``."""
    _check_size(size, "tree size")
    _check_index(index, size)
    inner = (index ^ (size - 1)).bit_length()
    return inner + (index >> inner).bit_count()


def consistency_proof_length(old_size: int, new_size: int) -> int:
    """The exact number of hashes in a consistency proof from ``old_size`` to ``new_size``."""
    _check_size(old_size, "old size")
    _check_size(new_size, "new size")
    if old_size > new_size:
        raise ProofError(f"old size {old_size} is larger than new size {new_size}")
    if old_size == 0 or old_size == new_size:
        return 0
    shift = (old_size & -old_size).bit_length() - 1  # trailing zeros of old_size
    index = (old_size - 1) >> shift
    last = (new_size - 1) >> shift
    inner = (index ^ last).bit_length()
    seed = 0 if index == 0 else 1  # the old root is omitted when old_size is a power of two
    return seed + inner + (index >> inner).bit_count()


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Check that ``leaf_hash`` is leaf ``index`` of the tree of ``size`` with ``root``."""
    _check_hash(leaf_hash, "leaf hash")
    _check_hash(root, "root")
    _check_size(size, "tree size")
    _check_index(index, size)
    want = inclusion_proof_length(index, size)
    _check_proof(proof, want)
    _verify_path(leaf_hash, index, size - 1, proof, root)


def subtree_proof(level: int, index: int, size: int, reader: HashReader) -> list[bytes]:
    """The path from the complete subtree (``level``, ``index``) up to the root of ``size``."""
    _check_subtree(level, index, size)
    return _range_hashes(inclusion_ranges(index << level, size)[level:], reader)


def verify_subtree(node: bytes, level: int, index: int, size: int, proof: Sequence[bytes],
                   root: bytes) -> None:
    """Check that ``node`` is the hash of leaves ``[index << level, (index + 1) << level)``
    in the tree of ``size`` with ``root`` (a tile's or an entry bundle's own root)."""
    _check_hash(node, "subtree hash")
    _check_hash(root, "root")
    _check_size(size, "tree size")
    _check_subtree(level, index, size)
    # Below ``level`` an inclusion path inside a complete subtree has one hash a level.
    _check_proof(proof, inclusion_proof_length(index << level, size) - level)
    _verify_path(node, index, (size - 1) >> level, proof, root)


def _check_subtree(level: int, index: int, size: int) -> None:
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level < 64:
        raise ProofError(f"subtree level {level!r} is not in [0, 64)")
    if isinstance(index, bool) or not isinstance(index, int) or index < 0 or (
            (index + 1) << level) > size:
        raise ProofError(f"no complete subtree at level {level} index {index!r} in a tree of "
                         f"size {size}")


def _verify_path(node: bytes, fn: int, sn: int, proof: Sequence[bytes], root: bytes) -> None:
    r = node
    for p in proof:
        if fn & 1 or fn == sn:
            r = _sha256(NODE_PREFIX + p + r).digest()
            while not fn & 1 and fn:
                fn >>= 1
                sn >>= 1
        else:
            r = _sha256(NODE_PREFIX + r + p).digest()
        fn >>= 1
        sn >>= 1
    if sn != 0:  # unreachable once the length check passed; kept as the RFC states it
        raise ProofError("inclusion proof does not end at the root")
    if r != root:
        raise RootMismatchError("inclusion proof does not lead to the root", root, r)


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree (``new_size``, ``new_root``) extends (``old_size``, ``old_root``).

    Old size 0: the empty tree is a prefix of every tree, so the proof must be
    empty and ``old_root`` must be the empty-tree hash; nothing else is proved.
    """
    _check_hash(old_root, "old root")
    _check_hash(new_root, "new root")
    _check_size(old_size, "old size")
    _check_size(new_size, "new size")
    if old_size > new_size:
        raise ProofError(f"old size {old_size} is larger than new size {new_size}")
    want = consistency_proof_length(old_size, new_size)
    _check_proof(proof, want)
    if old_size == 0:
        if old_root != EMPTY_ROOT:
            raise RootMismatchError("old root of size 0 is not the empty-tree hash",
                                    EMPTY_ROOT, old_root)
        if new_size == 0 and new_root != EMPTY_ROOT:
            raise RootMismatchError("new root of size 0 is not the empty-tree hash",
                                    EMPTY_ROOT, new_root)
        return
    if old_size == new_size:
        if old_root != new_root:
            raise RootMismatchError("trees of equal size have different roots",
                                    old_root, new_root)
        return
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if fn & 1 or fn == sn:
            fr = _sha256(NODE_PREFIX + c + fr).digest()
            sr = _sha256(NODE_PREFIX + c + sr).digest()
            while not fn & 1 and fn:
                fn >>= 1
                sn >>= 1
        else:
            sr = _sha256(NODE_PREFIX + sr + c).digest()
        fn >>= 1
        sn >>= 1
    if sn != 0:  # unreachable once the length check passed; kept as the RFC states it
        raise ProofError("consistency proof does not end at the new root")
    if fr != old_root:
        raise RootMismatchError("consistency proof does not lead to the old root", old_root, fr)
    if sr != new_root:
        raise RootMismatchError("consistency proof does not lead to the new root", new_root, sr)


def _check_hash(h: object, what: str) -> None:
    if not isinstance(h, bytes) or len(h) != HASH_SIZE:
        got = f"{len(h)} bytes" if isinstance(h, bytes | bytearray) else type(h).__name__
        raise ProofError(f"{what} must be {HASH_SIZE} bytes, got {got}")


def _check_size(size: object, what: str) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_TREE_SIZE:
        raise ProofError(f"{what} must be an integer in [0, 2^63), got {size!r}")


def _check_index(index: object, size: int) -> None:
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < size:
        raise ProofError(f"leaf index {index!r} is not below tree size {size}")


def _check_proof(proof: object, want: int) -> None:
    if not isinstance(proof, list | tuple) or len(proof) != want:
        got = len(proof) if isinstance(proof, list | tuple) else type(proof).__name__
        raise ProofError(f"proof must have exactly {want} hashes for these sizes, got {got}")
    for i, p in enumerate(proof):
        _check_hash(p, f"proof hash {i}")


# ---------------------------------------------------------------------------
# Incremental appending


def right_edge_coords(size: int) -> list[tuple[int, int]]:
    """Coordinates of the complete subtrees whose hashes a CompactRange of ``size`` holds."""
    _check_size(size, "tree size")
    return subtree_coords(0, size) if size else []


class CompactRange:
    """The right edge of a tree: O(log n) append and root, resumable from stored hashes.

    ``hashes`` are the roots of the complete subtrees that make up leaves
    ``[0, size)``, largest first (see :func:`right_edge_coords`).
    """

    __slots__ = ("_hashes", "_size")

    def __init__(self, size: int = 0, hashes: Iterable[bytes] = ()) -> None:
        _check_size(size, "tree size")
        edge = list(hashes)
        if len(edge) != size.bit_count():
            raise ProofError(
                f"a compact range of size {size} needs {size.bit_count()} hashes, got {len(edge)}"
            )
        for h in edge:
            _check_hash(h, "right-edge hash")
        self._size = size
        self._hashes = edge

    @property
    def size(self) -> int:
        return self._size

    @property
    def hashes(self) -> tuple[bytes, ...]:
        """The right-edge hashes, largest subtree first; store these to resume."""
        return tuple(self._hashes)

    def append(self, leaf_hash: bytes) -> list[tuple[int, int, bytes]]:
        """Add one leaf; return ``(level, index, hash)`` of every subtree that became complete."""
        if type(leaf_hash) is not bytes or len(leaf_hash) != HASH_SIZE:
            _check_hash(leaf_hash, "leaf hash")
        size = self._size
        if size >= MAX_TREE_SIZE:
            raise ProofError("tree is full")
        edge = self._hashes
        done = [(0, size, leaf_hash)]
        if size & 1:  # the new leaf completes one or more subtrees: merge them
            h, n, level, sha, prefix = leaf_hash, size, 0, _sha256, NODE_PREFIX
            while n & 1:
                h = sha(prefix + edge.pop() + h).digest()
                n >>= 1
                level += 1
                done.append((level, n, h))
            edge.append(h)
        else:
            edge.append(leaf_hash)
        self._size = size + 1
        return done

    def root(self) -> bytes:
        """The root of the tree of ``size`` leaves."""
        if not self._hashes:
            return EMPTY_ROOT
        return _fold(self._hashes)


class MemoryHashStore:
    """An in-memory :class:`HashReader` that stores every complete subtree hash."""

    def __init__(self) -> None:
        self._levels: list[list[bytes]] = []
        self._range = CompactRange()

    @classmethod
    def from_entries(cls, entries: Iterable[bytes]) -> MemoryHashStore:
        store = cls()
        for e in entries:
            store.append(leaf_hash(e))
        return store

    @property
    def size(self) -> int:
        return self._range.size

    def append(self, leaf_hash: bytes) -> int:
        """Append a leaf hash; return its index."""
        index = self._range.size
        levels = self._levels
        for level, _, h in self._range.append(leaf_hash):
            if level == len(levels):
                levels.append([])
            levels[level].append(h)
        return index

    def root(self) -> bytes:
        return self._range.root()

    def read_hashes(self, coords: Sequence[tuple[int, int]]) -> list[bytes]:
        out: list[bytes] = []
        levels = self._levels
        for level, index in coords:
            if not (0 <= level < len(levels) and 0 <= index < len(levels[level])):
                raise MissingHashError(
                    f"no stored hash at level {level} index {index} (tree size {self.size})"
                )
            out.append(levels[level][index])
        return out
