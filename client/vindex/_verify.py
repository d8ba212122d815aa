"""Verify one index lookup answer, and hold a search listing against it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from client.errors import EXIT_INCONCLUSIVE, ClientError, InputError, VerificationFailed
from client.session import Session
from client.trust import open_signed
from ledger.tlog.checkpoint import SignedCheckpoint
from ledger.vindex import (
    MAX_PAGE,
    IndexKey,
    IndexProofError,
    ListChain,
    ListHashMismatch,
    ListPage,
    PageOrderError,
    committed_root,
)

__all__ = ["DEFAULT_MAX_PAGES", "ChainMismatch", "CompleteList", "IncompleteAnswer",
           "IndexNotCommitted", "PageOutOfOrder", "Paging", "SearchOmitted", "TooManyPages",
           "check_listing", "index_key_for", "verified_lookup"]

#: `LogAPI.search` field -> index key kind.
_KINDS = {"digest": "digest", "name": "name", "keyid": "signer", "predicate_type": "type"}
DEFAULT_MAX_PAGES = 1000
"""Most pages `verified_lookup` reads unless told otherwise (10,000,000 entries at the
default page size)."""


class IncompleteAnswer(VerificationFailed):
    """The log's index answer does not prove its list complete (a bad or tampered proof)."""


class PageOutOfOrder(IncompleteAnswer):
    """A page of the list that does not continue where the last one stopped: it skips
    back, repeats or reorders an index, starts elsewhere, or is short mid-list."""


class ChainMismatch(IncompleteAnswer):
    """The list read (all its pages) is not the one the key's leaf in the committed map
    holds: an index left out, added or changed somewhere, in any page."""


class TooManyPages(ClientError):
    """The list is longer than the pages the user allowed: not proven complete (exit 4)."""

    exit_code = EXIT_INCONCLUSIVE


class IndexNotCommitted(VerificationFailed):
    """The log's checkpoint commits to no index, so no answer of it can be proven complete."""


class SearchOmitted(VerificationFailed):
    """The log's search listing disagrees with the list its own committed index proves."""

    def __init__(self, message: str, missing: tuple[int, ...], extra: tuple[int, ...]) -> None:
        super().__init__(message)
        self.missing = missing
        self.extra = extra


@dataclass(frozen=True)
class CompleteList:
    """Every entry below `size` that names `key`, proven against `checkpoint`."""

    key: IndexKey
    size: int
    indices: tuple[int, ...]
    checkpoint: SignedCheckpoint
    pages: int = 1

    def summary(self) -> str:
        paged = f", read in {self.pages} pages" if self.pages > 1 else ""
        return (f"complete up to index {self.size}: {len(self.indices)} entries name "
                f"{self.key.text()} (proven against the log's checkpoint of size "
                f"{self.size}{paged})")

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key.text(), "size": self.size, "indices": list(self.indices)}


@dataclass(frozen=True)
class Paging:
    """How `verified_lookup` reads a list: `page_size` indices a page (1 to MAX_PAGE),
    at most `max_pages` pages (then TooManyPages), `progress(pages, entries)` after each."""

    page_size: int = MAX_PAGE
    max_pages: int = DEFAULT_MAX_PAGES
    progress: Callable[[int, int], None] | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.page_size <= MAX_PAGE or self.max_pages < 1:
            raise InputError(f"a page holds 1 to {MAX_PAGE} entries and at least one page "
                             "is read")


def index_key_for(field: str, value: str) -> IndexKey:
    """The index key a `search` by `field` = `value` asks about."""
    if field not in _KINDS:
        raise InputError(f"no index key for search field {field!r}")
    try:
        return IndexKey(_KINDS[field], value)
    except ValueError as exc:
        raise InputError(f"{field}: {exc}") from exc


def _read_pages(sess: Session, key: IndexKey, paging: Paging
                ) -> tuple[ListChain, ListPage, list[int]]:
    """Every page of `key`'s list, folded into its chain; the last page and the list."""
    ask = getattr(sess.log, "index_lookup", None)
    if ask is None:
        raise InputError("this log client cannot ask for index proofs")
    chain, got = ListChain(paging.page_size), list[int]()
    while True:
        if chain.pages >= paging.max_pages:
            raise TooManyPages(f"{key.text()} names more than {len(got)} entries, "
                               f"{paging.max_pages} pages of {paging.page_size}: not read to its "
                               "end, so not proven complete (allow more pages)")
        try:
            page = ListPage.from_json(ask(key.text(), after=chain.last, limit=paging.page_size),
                                      paging.page_size)
            if page.key != key.text():
                raise IndexProofError(f"asked about {key.text()!r}, the log answered about "
                                      f"{page.key[:300]!r}")
            chain.add(page)
        except PageOrderError as exc:
            raise PageOutOfOrder(f"index lookup, page {chain.pages + 1}: {exc}") from exc
        except IndexProofError as exc:
            raise IncompleteAnswer(f"index lookup: {exc}") from exc
        got.extend(page.indices)
        if paging.progress is not None:
            paging.progress(chain.pages, len(got))
        if not page.more:
            return chain, page, got


def verified_lookup(sess: Session, key: IndexKey, paging: Paging | None = None) -> CompleteList:
    """Ask the log for `key`'s list, page by page, and verify it all; typed errors say
    what failed.

    Each page must continue the last (PageOutOfOrder). At the page that ends the list:
    its checkpoint's signature, its commitment line, the lookup proof against that
    root for the chain hash of every page read (ChainMismatch where it holds another
    list), and last the trust extension to the checkpoint (consistency with what this
    client trusts; a fork or rollback is `LogMisbehaviour`).
    """
    chain, last, indices = _read_pages(sess, key, paging or Paging())
    cp = open_signed(last.checkpoint.encode("utf-8"), sess.verifier, sess.origin)
    size = last.size
    if cp.checkpoint.size != size:
        raise IncompleteAnswer(f"index lookup: the answer is for size {size} but its "
                               f"checkpoint is of size {cp.checkpoint.size}")
    try:
        root = committed_root(cp.checkpoint)
    except IndexProofError as exc:
        raise IncompleteAnswer(f"index lookup: {exc}") from exc
    if root is None:
        raise IndexNotCommitted(f"the log's checkpoint of size {size} commits to no index: "
                                "its search answers cannot be proven complete")
    try:
        chain.finish(root, key.hash, last.proof)
    except ListHashMismatch as exc:
        raise ChainMismatch(f"the log's list for {key.text()} is not the one its index of "
                            f"size {size} commits to: {exc}") from exc
    except IndexProofError as exc:
        raise IncompleteAnswer(f"the log's list for {key.text()} is not the one its index "
                               f"of size {size} commits to: {exc}") from exc
    sess.extend(cp)
    return CompleteList(key, size, tuple(indices), cp, chain.pages)


def check_listing(proved: CompleteList, listed: Iterable[int], *, up_to: int | None = None
                  ) -> None:
    """Refuse a search listing that leaves out, or adds, an entry below the proven size.

    `up_to`: the listing was read only this far (entries at or past it are not judged).
    """
    bound = proved.size if up_to is None else min(up_to, proved.size)
    seen = {i for i in listed if i < bound}
    want = {i for i in proved.indices if i < bound}
    missing, extra = tuple(sorted(want - seen)), tuple(sorted(seen - want))
    if missing or extra:
        what = []
        if missing:
            what.append(f"left out entries {', '.join(map(str, missing[:10]))}")
        if extra:
            what.append(f"listed entries {', '.join(map(str, extra[:10]))} that do not name it")
        raise SearchOmitted(f"the log's search for {proved.key.text()} {' and '.join(what)}, "
                            f"against the list its index of size {proved.size} proves",
                            missing, extra)
