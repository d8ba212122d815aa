"""What one view may read from storage: a page of a digest's entries, bounded in rows and
bytes, with the digest's summary to say what the page did not read (issue 26 row 3).

However much is logged about a digest (thousands of padding entries, 64 KB reproductions),
a kernel page reads the digest's summary (one row per predicate type, kept at
integration), at most `KERNEL_PAGE` index rows and at most `PAGE_BYTES` of entry bytes;
the rest is one "next page" link away.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, NamedTuple, TypeVar

from ledger.storage import DigestSummary, LogStorage
from ledger.web._decode import DecodedEntry, decode_for_display

#: Index rows (entries) one kernel page reads, at most.
KERNEL_PAGE = 50
#: Entry bytes one kernel page decodes, at most (one entry more when the first alone is
#: larger: a page always shows at least one entry).
PAGE_BYTES = 512 * 1024

T = TypeVar("T")


class DigestPage(NamedTuple):
    """One page of the entries naming a digest, in index order from `cursor`."""

    summary: DigestSummary
    entries: tuple[tuple[int, DecodedEntry], ...]
    #: entry index -> leaf hash hex, for the entries on this page
    leaves: dict[int, str]
    cursor: int
    #: Where the next page starts (None: this page reaches the newest entry).
    next_cursor: int | None

    @property
    def complete(self) -> bool:
        """This page holds every entry about the digest."""
        return self.cursor == 0 and self.next_cursor is None


def read_digest_page(storage: LogStorage, digest: str, size: int, cursor: int) -> DigestPage:
    """The entries naming `digest` below tree size `size` from index `cursor`, as many as
    fit in `KERNEL_PAGE` rows and `PAGE_BYTES` bytes."""
    summary = storage.digest_summary(digest)
    hits = storage.search("digest", digest, cursor, KERNEL_PAGE)
    next_cursor = hits.next_cursor
    entries: list[tuple[int, DecodedEntry]] = []
    leaves: dict[int, str] = {}
    used = 0
    for hit in hits.results:
        if hit.index >= size:
            next_cursor = None
            break
        stored = storage.get_entry(hit.index)
        if stored is None:
            continue
        if entries and used + len(stored.data) > PAGE_BYTES:
            next_cursor = hit.index
            break
        used += len(stored.data)
        entries.append((hit.index, decode_for_display(stored.data)))
        leaves[hit.index] = stored.leaf_hash.hex()
    if next_cursor is not None and next_cursor >= size:
        next_cursor = None
    return DigestPage(summary, tuple(entries), leaves, cursor, next_cursor)


class PerCheckpoint(Generic[T]):
    """One value per signed tree head: computed once per checkpoint (size, root), kept
    until the log grows, so a busy page costs its computation once per checkpoint, not
    once per visitor."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[int, bytes] | None = None
        self._value: T | None = None

    def get(self, size: int, root: bytes, compute: Callable[[], T]) -> T:
        with self._lock:
            if self._key == (size, root) and self._value is not None:
                return self._value
        value = compute()
        with self._lock:
            self._key, self._value = (size, root), value
        return value
