"""Whether a kernel page's listing is proven complete by the log's committed index.

The page lists the entries naming a digest from the log's search tables; this checks
that list against the verifiable index (docs/vindex.md) the way a client does: the
lookup proof for `digest:<sha256>` against the root that the log's signed checkpoint
of the index's size commits to, then the page's rows against the proven list. The
page shows the outcome and links the proof (`/api/v1/index/lookup`), which anyone can
check with `ktl search --digest`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ledger import LedgerError
from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.note import NoteVerifier
from ledger.vindex import IndexKey, StoredIndex, TooManyResults, committed_root, verify_lookup
from ledger.web._service import LogServiceView

__all__ = ["STATUS_LIMIT", "IndexStatus", "index_status"]

STATUS_LIMIT = 2_000
"""The longest list a kernel page checks: the lookup proof covers the key's whole list, so
checking a longer one would cost every view O(what was logged about the digest); past
it the page says so and points to `ktl search --digest`, which proves it page by page."""


class IndexStatus(NamedTuple):
    """`complete`: the rows shown are every entry naming `key` in [start, end)."""

    key: str
    complete: bool
    start: int
    end: int
    #: The index's size: the checkpoint whose commitment the proof was checked against.
    size: int
    problem: str = ""


def index_status(svc: LogServiceView, digest: str, listed: Iterable[int], start: int,
                 end: int | None) -> IndexStatus | None:
    """Check the rows `listed` (a page from index `start`, up to `end`; None: to the
    newest entry) against the index; None when the log keeps no index."""
    index = getattr(svc, "index", None)
    if not isinstance(index, StoredIndex):
        return None
    key = IndexKey("digest", digest)
    try:
        answer = index.lookup(key, limit=STATUS_LIMIT)
    except TooManyResults:
        return IndexStatus(key.text(), False, start, start, 0,
                           f"more than {STATUS_LIMIT:,} entries name this digest, more than a "
                           "page checks per view; ktl search --digest proves them page by page")
    bound = answer.size if end is None else min(end, answer.size)
    found = svc.storage.checkpoints(1, before_size=answer.size + 1)
    if not found or found[0].size != answer.size:
        return IndexStatus(key.text(), False, start, bound, answer.size, "the index is being caught up")
    try:
        signed = open_checkpoint(found[0].note, NoteVerifier.from_key_string(svc.verifier_key),
                                 origin=svc.origin)
        root = committed_root(signed.checkpoint)
        if root is None:
            return IndexStatus(key.text(), False, start, bound, answer.size,
                               "the log's checkpoints commit to no index")
        verify_lookup(root, key.hash, answer.indices or None, answer.proof)
    except LedgerError as exc:
        return IndexStatus(key.text(), False, start, bound, answer.size, f"the index proof fails: {exc}")
    want = {i for i in answer.indices if start <= i < bound}
    shown = {i for i in listed if start <= i < bound}
    if want != shown:
        return IndexStatus(key.text(), False, start, bound, answer.size,
                           f"this listing leaves out {len(want - shown)} and adds "
                           f"{len(shown - want)} entries against the committed index")
    return IndexStatus(key.text(), True, start, bound, answer.size)
