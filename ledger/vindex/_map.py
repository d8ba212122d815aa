"""The index map: incremental updates and lookup proofs over a store of trie nodes.

A node is addressed by (depth, path prefix): the first `depth` bits of any key below
it, packed MSB-first into ceil(depth / 8) bytes with the unused low bits zero. A
stored node is a leaf (key hash, value hash) or an inner node (its hash); an absent
node is an empty subtree. Keys are only ever added or given a longer list (the log
is append-only), so an inner node never turns back into a leaf.

An update of k keys touches O(k * depth) nodes; a lookup reads one node per level.
With key hashes uniformly distributed, depth is about log2(number of keys).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol

from ledger.vindex._proof import (
    EMPTY,
    KEY_BITS,
    LIST_START,
    LookupProof,
    bit,
    extend_list_hash,
    leaf_hash,
    node_hash,
)

__all__ = ["Inner", "Leaf", "MemoryNodes", "NewValue", "Node", "NodeStore", "extend_lists",
           "lookup_proof", "prefix", "root_of", "update"]


class Leaf:
    """A key hash and its value hash (the node where a key's path ends)."""

    __slots__ = ("key", "value")

    def __init__(self, key: bytes, value: bytes) -> None:
        self.key = key
        self.value = value

    @property
    def hash(self) -> bytes:
        return leaf_hash(self.key, self.value)

    def __eq__(self, other: object) -> bool:
        return type(other) is Leaf and other.key == self.key and other.value == self.value

    def __hash__(self) -> int:
        return hash((0, self.key, self.value))

    def __repr__(self) -> str:
        return f"Leaf(key={self.key.hex()}, value={self.value.hex()})"


class Inner:
    """An inner node keeps its children's hashes, so an update reads no unchanged sibling
    and a proof reads one node per level. Its own hash is computed when first asked for
    (a node read from storage to walk past it is never hashed), or given by the update
    that made it (which hashed it to make its parent)."""

    __slots__ = ("_hash", "left", "right")

    def __init__(self, left: bytes, right: bytes, hash: bytes | None = None) -> None:
        self.left = left
        self.right = right
        self._hash = hash

    @property
    def hash(self) -> bytes:
        if self._hash is None:
            self._hash = node_hash(self.left, self.right)
        return self._hash

    def __eq__(self, other: object) -> bool:
        return type(other) is Inner and other.left == self.left and other.right == self.right

    def __hash__(self) -> int:
        return hash((1, self.left, self.right))

    def __repr__(self) -> str:
        return f"Inner(left={self.left.hex()}, right={self.right.hex()})"


Node = Leaf | Inner


class NodeStore(Protocol):
    """Where the map's nodes live (a dict in memory; a table in SQLite or PostgreSQL)."""

    def get_node(self, depth: int, path: bytes) -> Node | None: ...

    def put_nodes(self, nodes: Mapping[tuple[int, bytes], Node]) -> None:
        """Write nodes (a leaf pushed down a level is overwritten by an inner node)."""
        ...


class MemoryNodes:
    """A NodeStore in a dict."""

    def __init__(self) -> None:
        self.nodes: dict[tuple[int, bytes], Node] = {}

    def get_node(self, depth: int, path: bytes) -> Node | None:
        return self.nodes.get((depth, path))

    def put_nodes(self, nodes: Mapping[tuple[int, bytes], Node]) -> None:
        self.nodes.update(nodes)


def prefix(key: bytes, depth: int) -> bytes:
    """The first `depth` bits of `key`, packed, unused low bits zero."""
    whole, rest = divmod(depth, 8)
    head = key[:whole]
    if rest:
        head += bytes([key[whole] & (0xFF << (8 - rest)) & 0xFF])
    return head


def root_of(store: NodeStore) -> bytes:
    """The map's root: the hash of the node at depth 0."""
    node = store.get_node(0, b"")
    return EMPTY if node is None else node.hash


NewValue = Callable[[bytes, "bytes | None"], bytes]
"""A key's new value hash given its current one (None: the key is not in the map yet)."""


class _Update:
    """One update: the sorted keys being set, how each gets its value, the nodes read
    and written, the current values met on the way."""

    def __init__(self, store: NodeStore, keys: list[bytes], new_value: NewValue) -> None:
        self.get = store.get_node
        self.keys = keys
        self.new_value = new_value
        self.writes: dict[tuple[int, bytes], Node] = {}
        self.old: dict[bytes, bytes] = {}  # a changed key's current value, from its leaf
        self.kept: dict[bytes, bytes] = {}  # an unchanged leaf pushed down, with its value

    def place(self, depth: int, path: bytes, lo: int, hi: int, existing: Node | None) -> bytes:
        """Write the subtree at (depth, path), now `existing`, with keys[lo:hi] (not empty,
        sharing `path`) set; its new hash. Each position is visited once per update, so
        a node is read at most once and never after it is written."""
        keys = self.keys
        if type(existing) is Leaf:
            at = bisect.bisect_left(keys, existing.key, lo, hi)
            if at == hi or keys[at] != existing.key:  # pushed down beside the changes
                self.kept[existing.key] = existing.value
                self.keys = [*keys[lo:at], existing.key, *keys[at:hi]]  # for this subtree
                try:
                    return self.place(depth, path, 0, hi - lo + 1, None)
                finally:
                    self.keys = keys
            self.old[existing.key] = existing.value
            existing = None
        if existing is None and hi - lo == 1:
            key = keys[lo]
            value = self.kept.get(key)
            if value is None:
                value = self.new_value(key, self.old.get(key))
            self.writes[(depth, path)] = Leaf(key, value)
            return leaf_hash(key, value)
        if depth >= KEY_BITS:
            raise ValueError("two distinct keys cannot share all 256 bits")
        key = keys[lo]
        whole, rest = divmod(depth, 8)
        head, byte = key[:whole], key[whole] & (0xFF00 >> rest) & 0xFF
        pivot = head + bytes((byte | (0x80 >> rest),))  # the least key that goes right
        cut = bisect.bisect_left(keys, pivot, lo, hi)
        below = depth + 1
        if existing is None:
            lhash = rhash = EMPTY
        else:
            assert type(existing) is Inner
            lhash, rhash = existing.left, existing.right
        # a child whose hash is EMPTY holds nothing: nothing to read
        if cut > lo:
            lpath = head + bytes((byte,))
            lhash = self.place(below, lpath, lo, cut,
                               None if lhash == EMPTY else self.get(below, lpath))
        if cut < hi:
            rhash = self.place(below, pivot, cut, hi,
                               None if rhash == EMPTY else self.get(below, pivot))
        digest = node_hash(lhash, rhash)
        self.writes[(depth, path)] = Inner(lhash, rhash, digest)
        return digest


def _apply(store: NodeStore, keys: Collection[bytes], new_value: NewValue) -> bytes:
    ordered = sorted(keys)
    if any(len(k) != 32 for k in ordered):
        raise ValueError("key hashes must be 32 bytes")
    if not ordered:
        return root_of(store)
    run = _Update(store, ordered, new_value)
    root = run.place(0, b"", 0, len(ordered), store.get_node(0, b""))
    store.put_nodes(run.writes)
    return root


def update(store: NodeStore, values: Mapping[bytes, bytes]) -> bytes:
    """Set key hash -> value hash for every item of `values`; write the nodes; the new root."""
    if any(len(v) != 32 for v in values.values()):
        raise ValueError("key and value hashes must be 32 bytes")
    return _apply(store, values, lambda key, _old: values[key])


def extend_lists(store: NodeStore, added: Mapping[bytes, Sequence[int]]) -> bytes:
    """Extend each key's list by `added[key]` (ascending, past its last index): its value
    becomes the list's chain hash extended from the one in its leaf (from LIST_START
    for a new key), read on the update's own way down; write the nodes; the new root."""
    return _apply(store, added, lambda key, old: extend_list_hash(
        LIST_START if old is None else old, added[key]))


def lookup_proof(store: NodeStore, key: bytes) -> tuple[LookupProof, Leaf | None]:
    """The proof for `key`, and its leaf if present (None: absent)."""
    siblings: list[bytes] = []
    node = store.get_node(0, b"")
    depth = 0
    while isinstance(node, Inner):
        siblings.append(node.left if bit(key, depth) else node.right)
        node = store.get_node(depth + 1, prefix(key, depth + 1))
        depth += 1
    if isinstance(node, Leaf):
        proof = LookupProof(tuple(siblings), node.key, node.value)
        return proof, node if node.key == key else None
    return LookupProof(tuple(siblings)), None
