"""The verifiable index over a log: per-key lists of entry indices, committed by the map.

`VerifiableIndex` holds a node store and a list store; `extend` integrates the next
entries of the log in order (a batch at a time: the map is updated once per batch)
and returns the new root. The index at log size N is a function of entries
[0, N) alone (docs/vindex.md), so anyone holding the entries recomputes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from ledger.vindex._keys import IndexKey, entry_keys
from ledger.vindex._map import MemoryNodes, NodeStore, lookup_proof, root_of, update
from ledger.vindex._proof import LIST_START, LookupProof, extend_list_hash

__all__ = ["IndexAnswer", "ListStore", "MemoryLists", "VerifiableIndex"]


class ListStore(Protocol):
    """Each key hash's sorted list of entry indices with its chain hash, and the index's size."""

    def get_list(self, key: bytes) -> list[int]: ...

    def get_heads(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """The chain hash of each key's list (keys without a list are left out)."""
        ...

    def append_lists(self, added: Mapping[bytes, tuple[Sequence[int], bytes]], size: int) -> None:
        """Append indices to these keys' lists with their new chain hashes; record that
        entries [0, size) are in."""
        ...

    def indexed_size(self) -> int: ...


class MemoryLists:
    def __init__(self) -> None:
        self.lists: dict[bytes, list[int]] = {}
        self.heads: dict[bytes, bytes] = {}
        self.size = 0

    def get_list(self, key: bytes) -> list[int]:
        return list(self.lists.get(key, ()))

    def get_heads(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        return {k: self.heads[k] for k in keys if k in self.heads}

    def append_lists(self, added: Mapping[bytes, tuple[Sequence[int], bytes]], size: int) -> None:
        for key, (indices, head) in added.items():
            self.lists.setdefault(key, []).extend(indices)
            self.heads[key] = head
        self.size = size

    def indexed_size(self) -> int:
        return self.size


class IndexAnswer:
    """One key's list at the index's current size, with its lookup proof."""

    def __init__(self, key: IndexKey, indices: list[int], proof: LookupProof) -> None:
        self.key = key
        self.indices = indices
        self.proof = proof


class VerifiableIndex:
    def __init__(self, nodes: NodeStore | None = None, lists: ListStore | None = None) -> None:
        self.nodes: NodeStore = nodes if nodes is not None else MemoryNodes()
        self.lists: ListStore = lists if lists is not None else MemoryLists()

    @property
    def size(self) -> int:
        """How many entries of the log are in the index (entries [0, size))."""
        return self.lists.indexed_size()

    @property
    def root(self) -> bytes:
        return root_of(self.nodes)

    def extend(self, start: int, entries: Iterable[bytes]) -> bytes:
        """Integrate entries start, start+1, ... (start must be the index's size); new root."""
        if start != self.size:
            raise ValueError(f"the index holds entries [0, {self.size}); cannot add from {start}")
        added: dict[bytes, list[int]] = {}
        size = start
        for entry in entries:
            for key in entry_keys(entry):
                added.setdefault(key.hash, []).append(size)
            size += 1
        heads = self.lists.get_heads(list(added))
        new = {key: (more, extend_list_hash(heads.get(key, LIST_START), more))
               for key, more in added.items()}
        root = update(self.nodes, {key: head for key, (_, head) in new.items()})
        self.lists.append_lists(new, size)
        return root

    def lookup(self, key: IndexKey) -> IndexAnswer:
        proof, leaf = lookup_proof(self.nodes, key.hash)
        indices = self.lists.get_list(key.hash) if leaf is not None else []
        return IndexAnswer(key, indices, proof)
