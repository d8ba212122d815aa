"""The index map: incremental updates and lookup proofs over a store of trie nodes.

A node is addressed by (depth, path prefix): the first `depth` bits of any key below
it, packed MSB-first into ceil(depth / 8) bytes with the unused low bits zero. A
stored node is the 65 bytes its hash is the SHA-256 of: 0x00 key hash value hash (a
leaf) or 0x01 left right (an inner node, its children's hashes); an absent node is
an empty subtree. Nodes are plain bytes, so an update allocates nothing the garbage
collector has to follow. Keys are only ever added or given a longer list (the log
is append-only), so an inner node never turns back into a leaf.

An update of k keys touches O(k * depth) nodes; a lookup reads one node per level.
With key hashes uniformly distributed, depth is about log2(number of keys).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol

from ledger.vindex._proof import (
    EMPTY,
    INNER,
    KEY_BITS,
    LEAF,
    LIST_START,
    LookupProof,
    bit,
    extend_list_hash,
)

__all__ = ["MemoryNodes", "NewValue", "Node", "NodeStore", "extend_lists", "inner_node", "is_leaf",
           "leaf_node", "lookup_proof", "node_digest", "prefix", "root_of", "update"]

_sha256 = hashlib.sha256


Node = bytes
"""A stored node: LEAF key value, or INNER left right (65 bytes); its hash is SHA-256 of it."""


def leaf_node(key: bytes, value: bytes) -> Node:
    return LEAF + key + value


def inner_node(left: bytes, right: bytes) -> Node:
    return INNER + left + right


def is_leaf(node: Node) -> bool:
    return node[0] == LEAF[0]


def node_digest(node: Node) -> bytes:
    """The node's hash: `leaf_hash(key, value)` or `node_hash(left, right)`."""
    return _sha256(node).digest()


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
    return EMPTY if node is None else node_digest(node)


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
        if existing is not None and existing[0] == LEAF[0]:
            here = existing[1:33]
            at = bisect.bisect_left(keys, here, lo, hi)
            if at == hi or keys[at] != here:  # pushed down beside the changes
                self.kept[here] = existing[33:]
                self.keys = [*keys[lo:at], here, *keys[at:hi]]  # for this subtree
                try:
                    return self.place(depth, path, 0, hi - lo + 1, None)
                finally:
                    self.keys = keys
            self.old[here] = existing[33:]
            existing = None
        if existing is None and hi - lo == 1:
            key = keys[lo]
            value = self.kept.get(key)
            if value is None:
                value = self.new_value(key, self.old.get(key))
            node = LEAF + key + value
            self.writes[(depth, path)] = node
            return _sha256(node).digest()
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
            lhash, rhash = existing[1:33], existing[33:]
        # a child whose hash is EMPTY holds nothing: nothing to read
        if cut > lo:
            lpath = head + bytes((byte,))
            lhash = self.place(below, lpath, lo, cut,
                               None if lhash == EMPTY else self.get(below, lpath))
        if cut < hi:
            rhash = self.place(below, pivot, cut, hi,
                               None if rhash == EMPTY else self.get(below, pivot))
        node = INNER + lhash + rhash
        self.writes[(depth, path)] = node
        return _sha256(node).digest()


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


def lookup_proof(store: NodeStore, key: bytes) -> tuple[LookupProof, Node | None]:
    """The proof for `key`, and its leaf if present (None: absent)."""
    siblings: list[bytes] = []
    node = store.get_node(0, b"")
    depth = 0
    while node is not None and not is_leaf(node):
        siblings.append(node[1:33] if bit(key, depth) else node[33:])
        node = store.get_node(depth + 1, prefix(key, depth + 1))
        depth += 1
    if node is not None:
        proof = LookupProof(tuple(siblings), node[1:33], node[33:])
        return proof, node if node[1:33] == key else None
    return LookupProof(tuple(siblings)), None
