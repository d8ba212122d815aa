"""The index map's hashes and the verification of a lookup proof: pure, bounded, no I/O.

The map is a binary trie over 256-bit key hashes (bit 0 is the top bit of byte 0;
0 goes left). A subtree's hash (docs/vindex.md):

- no key:        32 zero bytes (`EMPTY`);
- exactly one:   SHA-256(0x00 || key hash || value hash)   (the leaf, wherever it sits);
- two or more:   SHA-256(0x01 || left || right).

A value is a key's sorted list of entry indices, hashed as a chain so a growing list
is extended in O(what was added): h0 = SHA-256("ktl/vindex/v1 list" 0x00),
h_j = SHA-256(h_{j-1} || uint64 index_j), big-endian; the value hash is h_n. A lookup proof is the siblings
from the root down to where the key's path ends: at the key's own leaf (membership),
at another key's leaf that shares the path so far, or at an empty subtree
(non-membership).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from ledger import LedgerError

__all__ = [
    "EMPTY",
    "INNER",
    "KEY_BITS",
    "LEAF",
    "LIST_START",
    "MAX_LIST",
    "IndexProofError",
    "IndexRootMismatchError",
    "ListHashMismatch",
    "LookupProof",
    "bit",
    "extend_list_hash",
    "leaf_hash",
    "list_hash",
    "node_hash",
    "verify_lookup",
    "verify_lookup_value",
]

HASH_SIZE = 32
KEY_BITS = 256
EMPTY = bytes(HASH_SIZE)
MAX_LIST = 1 << 24
"""Most entry indices one key's list may hold in an answer."""
_LIST_DOMAIN = b"ktl/vindex/v1 list\x00"
_sha256 = hashlib.sha256


class IndexProofError(LedgerError):
    """A lookup proof or its parameters are malformed."""


class IndexRootMismatchError(IndexProofError):
    """A well-formed lookup proof does not lead to the index root it was checked against."""

    def __init__(self, expected_root: bytes, computed_root: bytes) -> None:
        super().__init__(f"lookup proof leads to index root {computed_root.hex()}, "
                         f"not the committed {expected_root.hex()}")
        self.expected_root = expected_root
        self.computed_root = computed_root


class ListHashMismatch(IndexProofError):
    """The proof ends at the key's leaf, but the leaf holds another list than the one shown."""


def bit(key: bytes, depth: int) -> int:
    """Bit `depth` of a 32-byte key hash, most significant first."""
    return (key[depth >> 3] >> (7 - (depth & 7))) & 1


LIST_START = _sha256(_LIST_DOMAIN).digest()
"""The value hash of the empty list: where every key's chain starts."""


def extend_list_hash(head: bytes, indices: Sequence[int]) -> bytes:
    """Extend a list's chain hash `head` by `indices`."""
    for i in indices:
        head = _sha256(head + i.to_bytes(8, "big")).digest()
    return head


def list_hash(indices: Sequence[int]) -> bytes:
    """The value hash of a sorted list of distinct entry indices."""
    return extend_list_hash(LIST_START, indices)


LEAF = b"\x00"
"""The first byte hashed for a leaf (then its key hash and value hash)."""
INNER = b"\x01"
"""The first byte hashed for an inner node (then its children's hashes)."""


def leaf_hash(key: bytes, value: bytes) -> bytes:
    return _sha256(LEAF + key + value).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return _sha256(INNER + left + right).digest()


@dataclass(frozen=True)
class LookupProof:
    """Siblings from the root down, and where the key's path ends.

    `leaf_key`/`leaf_value` are None where the path ends in an empty subtree; otherwise
    they are the key hash and value hash of the leaf it ends at.
    """

    siblings: tuple[bytes, ...]
    leaf_key: bytes | None = None
    leaf_value: bytes | None = None

    def to_json(self) -> dict[str, object]:
        return {"siblings": [s.hex() for s in self.siblings],
                "leaf": None if self.leaf_key is None or self.leaf_value is None
                else {"key": self.leaf_key.hex(), "value": self.leaf_value.hex()}}

    @classmethod
    def from_json(cls, obj: object) -> LookupProof:
        """Parse strictly; IndexProofError says what is wrong."""
        if not isinstance(obj, dict) or set(obj) != {"siblings", "leaf"}:
            raise IndexProofError("lookup proof must be an object with siblings and leaf")
        sibs = obj["siblings"]
        if not isinstance(sibs, list) or len(sibs) > KEY_BITS:
            raise IndexProofError(f"siblings: must be an array of at most {KEY_BITS} hashes")
        leaf = obj["leaf"]
        if leaf is None:
            return cls(tuple(_hex32(s, "siblings[]") for s in sibs))
        if not isinstance(leaf, dict) or set(leaf) != {"key", "value"}:
            raise IndexProofError("leaf: must be null or an object with key and value")
        return cls(tuple(_hex32(s, "siblings[]") for s in sibs), _hex32(leaf["key"], "leaf.key"),
                   _hex32(leaf["value"], "leaf.value"))


def _hex32(value: object, where: str) -> bytes:
    if not isinstance(value, str) or len(value) != 2 * HASH_SIZE:
        raise IndexProofError(f"{where}: must be 64 lowercase hex characters")
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raise IndexProofError(f"{where}: must be 64 lowercase hex characters") from None
    if raw.hex() != value:
        raise IndexProofError(f"{where}: must be 64 lowercase hex characters")
    return raw


def _check_shape(key: bytes, proof: LookupProof, root: bytes) -> None:
    if len(key) != HASH_SIZE or len(root) != HASH_SIZE:
        raise IndexProofError("key hash and index root must be 32 bytes")
    depth = len(proof.siblings)
    if depth > KEY_BITS or any(len(s) != HASH_SIZE for s in proof.siblings):
        raise IndexProofError(f"a lookup proof has at most {KEY_BITS} siblings of 32 bytes")
    if (proof.leaf_key is None) != (proof.leaf_value is None):
        raise IndexProofError("a proof's leaf has both a key and a value, or neither")
    if proof.leaf_key is not None:
        if len(proof.leaf_key) != HASH_SIZE or len(proof.leaf_value or b"") != HASH_SIZE:
            raise IndexProofError("leaf key and value must be 32 bytes")
        if any(bit(proof.leaf_key, d) != bit(key, d) for d in range(depth)):
            raise IndexProofError("the proof's leaf does not lie on the key's path")
        if depth and proof.siblings[-1] == EMPTY:
            raise IndexProofError("a leaf beside an empty subtree would sit one level up")
    elif depth and proof.siblings[-1] == EMPTY:
        raise IndexProofError("two empty subtrees are never split")


def verify_lookup(root: bytes, key: bytes, indices: Sequence[int] | None,
                  proof: LookupProof) -> None:
    """Check that the map with `root` holds `indices` for `key` (None: holds no list for it).

    Preconditions first (sizes, the list sorted, the leaf on the key's path, canonical
    shape), then the fold to the root (`verify_lookup_value`).
    """
    if indices is not None:
        if not 0 < len(indices) <= MAX_LIST:
            raise IndexProofError(f"a key's list holds 1 to {MAX_LIST} entry indices")
        if any(b <= a for a, b in itertools.pairwise(indices)) or indices[0] < 0:
            raise IndexProofError("a key's entry indices must be distinct and ascending")
    verify_lookup_value(root, key, None if indices is None else list_hash(indices), proof)


def verify_lookup_value(root: bytes, key: bytes, value: bytes | None, proof: LookupProof) -> None:
    """Check that the map with `root` holds the list with chain hash `value` for `key`
    (None: holds no list for it).

    Preconditions first, then the fold to the root. Raises IndexProofError,
    ListHashMismatch when the key's leaf holds another list, or IndexRootMismatchError
    when a well-formed proof leads elsewhere.
    """
    _check_shape(key, proof, root)
    if value is not None:
        if len(value) != HASH_SIZE:
            raise IndexProofError("a list's chain hash is 32 bytes")
        if proof.leaf_key != key:
            raise IndexProofError("the proof does not end at this key's leaf with this list")
        if proof.leaf_value != value:
            raise ListHashMismatch("the proof does not end at this key's leaf with this list: "
                                   "the leaf holds another list")
    elif proof.leaf_key == key:
        raise IndexProofError("the proof shows the key present, not absent")
    if proof.leaf_key is None or proof.leaf_value is None:
        node = EMPTY
    else:
        node = leaf_hash(proof.leaf_key, proof.leaf_value)
    for depth in range(len(proof.siblings) - 1, -1, -1):
        sibling = proof.siblings[depth]
        node = node_hash(sibling, node) if bit(key, depth) else node_hash(node, sibling)
    if node != root:
        raise IndexRootMismatchError(root, node)
