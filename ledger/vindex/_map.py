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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from ledger.vindex._proof import (
    EMPTY,
    KEY_BITS,
    LookupProof,
    bit,
    leaf_hash,
    node_hash,
)

__all__ = ["Inner", "Leaf", "MemoryNodes", "Node", "NodeStore", "lookup_proof", "prefix",
           "root_of", "update"]


@dataclass(frozen=True)
class Leaf:
    key: bytes
    value: bytes

    @property
    def hash(self) -> bytes:
        return leaf_hash(self.key, self.value)


@dataclass(frozen=True)
class Inner:
    """An inner node keeps its children's hashes, so an update reads no unchanged sibling
    and a proof reads one node per level. Its own hash is computed when first asked for
    (a node read from storage to walk past it is never hashed)."""

    left: bytes
    right: bytes

    @cached_property
    def hash(self) -> bytes:
        return node_hash(self.left, self.right)


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


def _hash(node: Node | None) -> bytes:
    return EMPTY if node is None else node.hash


def root_of(store: NodeStore) -> bytes:
    """The map's root: the hash of the node at depth 0."""
    return _hash(store.get_node(0, b""))


class _Batch:
    """The nodes one update reads and writes, so a node read twice is read once."""

    def __init__(self, store: NodeStore) -> None:
        self.store = store
        self.writes: dict[tuple[int, bytes], Node] = {}

    def get(self, depth: int, path: bytes) -> Node | None:
        where = (depth, path)
        if where in self.writes:
            return self.writes[where]
        return self.store.get_node(depth, path)

    def put(self, depth: int, path: bytes, node: Node) -> None:
        self.writes[(depth, path)] = node


def _split(changes: Sequence[Leaf], depth: int) -> tuple[Sequence[Leaf], Sequence[Leaf]]:
    """`changes` (sorted by key, sharing their first `depth` bits) by bit `depth`: the keys
    with 0 come first, so one binary search finds the cut."""
    cut = bisect.bisect_left(changes, 1, key=lambda c: bit(c.key, depth))
    return changes[:cut], changes[cut:]


def _place(batch: _Batch, depth: int, path: bytes, changes: Sequence[Leaf],
           existing: Node | None) -> Node:
    """Write the subtree at (depth, path), now `existing`, with `changes` (not empty) applied."""
    if isinstance(existing, Leaf):
        if all(c.key != existing.key for c in changes):
            changes = list(changes)
            bisect.insort(changes, existing, key=lambda c: c.key)  # kept sorted for _split
        existing = None
    if existing is None and len(changes) == 1:
        node: Node = changes[0]
        batch.put(depth, path, node)
        return node
    if depth >= KEY_BITS:
        raise ValueError("two distinct keys cannot share all 256 bits")
    left, right = _split(changes, depth)
    lhash = existing.left if existing is not None else EMPTY
    rhash = existing.right if existing is not None else EMPTY
    if left:
        lpath = prefix(left[0].key, depth + 1)
        lhash = _place(batch, depth + 1, lpath, left,
                       batch.get(depth + 1, lpath) if existing is not None else None).hash
    if right:
        rpath = prefix(right[0].key, depth + 1)
        rhash = _place(batch, depth + 1, rpath, right,
                       batch.get(depth + 1, rpath) if existing is not None else None).hash
    node = Inner(lhash, rhash)
    batch.put(depth, path, node)
    return node


def update(store: NodeStore, values: Mapping[bytes, bytes]) -> bytes:
    """Set key hash -> value hash for every item of `values`; write the nodes; the new root."""
    changes = sorted((Leaf(k, v) for k, v in values.items()), key=lambda leaf: leaf.key)
    if any(len(c.key) != 32 or len(c.value) != 32 for c in changes):
        raise ValueError("key and value hashes must be 32 bytes")
    if not changes:
        return root_of(store)
    batch = _Batch(store)
    root = _place(batch, 0, b"", changes, store.get_node(0, b""))
    store.put_nodes(batch.writes)
    return root.hash


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
