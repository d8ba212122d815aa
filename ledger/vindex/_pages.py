"""A key's list read page by page: the page's wire form and the pure check of the chain.

A lookup with `after`/`limit` (docs/vindex.md, "Lookup answers in pages") answers the
key's next `limit` entry indices above `after`, whether more follow (`more`), and, like
a whole-list answer, the lookup proof and checkpoint at the answer's size. A list only grows at its end (new
entries have higher indices), so the pages of one list read at growing sizes line up:
`ListChain` folds each page into the chain hash from where the last one stopped (a
reader from the start knows the chain state at every page start), and at the page
that ends the list holds the folded hash against the leaf the map proof shows. Each
answer costs O(page + depth); the reader's work is O(list).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ledger.vindex._proof import (
    LIST_START,
    MAX_LIST,
    IndexProofError,
    LookupProof,
    extend_list_hash,
    verify_lookup_value,
)

__all__ = ["MAX_PAGE", "ListChain", "ListPage", "PageOrderError"]

MAX_PAGE = 10_000
"""Most entry indices one page answers with."""
_FIELDS = {"key", "size", "after", "indices", "more", "proof", "checkpoint"}


class PageOrderError(IndexProofError):
    """A page that does not continue the list where the last one stopped: it starts
    elsewhere, repeats or reorders an index, is short without ending the list, or is
    for a smaller index than the page before."""


@dataclass(frozen=True)
class ListPage:
    """One page of a key's list: the indices above `after` (None: from the start)."""

    key: str
    size: int
    after: int | None
    indices: Sequence[int]
    more: bool
    proof: LookupProof
    checkpoint: str

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "size": self.size, "after": self.after,
                "indices": list(self.indices), "more": self.more,
                "proof": self.proof.to_json(), "checkpoint": self.checkpoint}

    @classmethod
    def from_json(cls, obj: object, limit: int) -> ListPage:
        """Parse strictly (at most `limit` indices); IndexProofError says what is wrong."""
        if not isinstance(obj, dict) or set(obj) != _FIELDS:
            raise IndexProofError("a page must be an object with key, size, after, indices, "
                                  "more, proof and checkpoint")
        key, size, after, indices = obj["key"], obj["size"], obj["after"], obj["indices"]
        if not isinstance(key, str) or not _count(size):
            raise IndexProofError("key must be a string and size a non-negative integer")
        if after is not None and not _count(after):
            raise IndexProofError("after must be null or a non-negative integer")
        if not isinstance(indices, list) or len(indices) > limit or not all(map(_count, indices)):
            raise IndexProofError(f"indices must be at most {limit} non-negative integers")
        if not isinstance(obj["more"], bool) or not isinstance(obj["checkpoint"], str):
            raise IndexProofError("more must be a boolean and checkpoint a signed note")
        return cls(key, size, after, indices, obj["more"], LookupProof.from_json(obj["proof"]),
                   obj["checkpoint"])


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class ListChain:
    """The chain hash of a list read page by page from its start (pure, O(page) a page)."""

    def __init__(self, limit: int = MAX_PAGE) -> None:
        if not 1 <= limit <= MAX_PAGE:
            raise ValueError(f"a page holds 1 to {MAX_PAGE} indices")
        self.limit = limit
        self.head = LIST_START
        self.count = 0
        self.last: int | None = None
        self.size = 0
        self.pages = 0

    def add(self, page: ListPage) -> None:
        """Fold `page` in; PageOrderError unless it continues the list exactly."""
        if page.after != self.last:
            raise PageOrderError(f"asked for the indices after {self.last}, the page starts "
                                 f"after {page.after}")
        if page.size < self.size:
            raise PageOrderError(f"a page for size {page.size} after one for {self.size}")
        got = page.indices
        if got and (got[0] <= (-1 if self.last is None else self.last)
                    or any(b <= a for a, b in itertools.pairwise(got))):
            raise PageOrderError(f"page {self.pages + 1} repeats or reorders an index, or "
                                 f"goes back before {self.last}")
        if got and got[-1] >= page.size:
            raise PageOrderError(f"an index at or past the page's size {page.size}")
        if page.more and len(got) != self.limit:
            raise PageOrderError(f"a page of {len(got)} indices, not {self.limit}, that "
                                 "says more follow")
        if self.count + len(got) > MAX_LIST:
            raise IndexProofError(f"a key's list holds at most {MAX_LIST} entry indices")
        self.head = extend_list_hash(self.head, got)
        self.count += len(got)
        self.last = got[-1] if got else self.last
        self.size = page.size
        self.pages += 1

    def finish(self, root: bytes, key: bytes, proof: LookupProof) -> None:
        """After the page that ends the list: the map with `root` holds this chain for
        `key` (or no list, where no index was read). IndexProofError otherwise;
        `ListHashMismatch` where the key's leaf holds another list."""
        verify_lookup_value(root, key, self.head if self.count else None, proof)
