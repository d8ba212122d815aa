"""`ktl search`: a log's search rows, held against the list its committed index proves.

`SearchOptions` is what the command was asked (checked: one of digest, name, key, type);
`search_log` asks the log by one field, filters by the rest here, and (unless
`unverified`) proves the list complete against a trusted checkpoint first and holds the
rows it read against it (`check_listing`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attest import AttestError
from attest.keys import keyid, load_public_key
from attest.predicates import HEX64_PATTERN, PREDICATE_TYPES
from client.api import LogClient
from client.errors import InputError
from client.models import SearchHit
from client.output import Output
from client.session import connect, require_url
from client.state import TrustedState
from client.vindex._verify import (
    DEFAULT_MAX_PAGES,
    CompleteList,
    Paging,
    check_listing,
    index_key_for,
    verified_lookup,
)
from ledger.vindex import MAX_PAGE

_HEX64 = re.compile(HEX64_PATTERN)
_GLOB = re.compile(r"[*?\[\]]")
TYPE_ALIASES = {uri.rsplit("/", 2)[-2]: uri for uri in PREDICATE_TYPES}
"""`--type`'s short names (kernel, benchmark, verification, reproduction) and their URIs."""
#: Search calls one listing makes, at most.
MAX_SEARCH_CALLS = 1000
SEARCH_PAGE = 100


def keyid_arg(value: str) -> str:
    """A signer keyid from `--key`: 64 hex digits, or a public key file."""
    if _HEX64.fullmatch(value):
        return value
    path = Path(value)
    if not path.exists():
        raise InputError(f"--key {value!r} is neither a 64-hex keyid nor a public key file")
    try:
        return keyid(load_public_key(path))
    except AttestError as exc:
        raise InputError(f"--key {value}: not a public key file: {exc}") from exc


def search_type(ptype: str) -> str:
    """A predicate type URI from `--type` (a short name or a URI); InputError if unknown."""
    uri = TYPE_ALIASES.get(ptype, ptype)
    if uri not in PREDICATE_TYPES:
        raise InputError(f"--type {ptype!r} is not a predicate type; use one of "
                         f"{', '.join(TYPE_ALIASES)} or its full URI")
    return uri


@dataclass(frozen=True)
class SearchOptions:
    """`ktl search`: what to find (at least one of digest, name, key, type), how many, how
    the index's list is read (unless `unverified`), and the log."""

    digest: str | None = None
    name: str | None = None
    key: str | None = None
    ptype: str | None = None
    limit: int = 100
    unverified: bool = False
    max_pages: int = DEFAULT_MAX_PAGES
    page_size: int = MAX_PAGE
    log_url: str | None = None
    log_key: str | None = None

    def filters(self) -> dict[str, str]:
        """The given filters by search field, checked (InputError naming a bad one)."""
        if not any((self.digest, self.name, self.key, self.ptype)):
            raise InputError("search needs one of --digest, --name, --key, --type")
        if self.name is not None and _GLOB.search(self.name):
            raise InputError(f"--name {self.name!r}: no globs; the log's index matches exact "
                             "kernel names (to list a vendor's kernels, search by --key with "
                             "its key)")
        digest = self.digest.removeprefix("sha256:") if self.digest else None
        if digest is not None and not _HEX64.fullmatch(digest):
            raise InputError("--digest must be a sha256 digest (64 lowercase hex digits)")
        given = {"digest": digest, "name": self.name,
                 "keyid": keyid_arg(self.key) if self.key else None,
                 "predicate_type": search_type(self.ptype) if self.ptype else None}
        return {k: v for k, v in given.items() if v is not None}


@dataclass(frozen=True)
class Found:
    """The rows found (at most the limit) and, unless unverified, the list that proves
    them complete."""

    rows: tuple[dict[str, Any], ...]
    proved: CompleteList | None

    def to_json(self) -> dict[str, Any]:
        return {"results": list(self.rows),
                "complete": None if self.proved is None else self.proved.to_json()}


def _keeps(hit: SearchHit, rest: dict[str, str]) -> bool:
    """Whether a row meets every filter the log did not search by."""
    return all(
        (k == "digest" and hit.subject_sha256 == v)
        or (k == "name" and hit.subject_name == v)
        or (k == "keyid" and v in hit.keyids)
        or (k == "predicate_type" and hit.predicate_type == v)
        for k, v in rest.items()
    )


def search_log(opts: SearchOptions, out: Output) -> Found:
    """The log searched by the first filter given and filtered by the rest; unless
    `unverified`, every row the index proves is listed, and no other."""
    given = opts.filters()
    field, value = next(iter(given.items()))  # the log searches by one field ...
    rest = {k: v for k, v in given.items() if k != field}  # ... the rest filter here
    proved, published = ((None, 0) if opts.unverified
                         else _proved_list(opts, out, (field, value)))
    rows: list[dict[str, Any]] = []
    listed: list[int] = []
    read_all = False
    with LogClient(require_url(opts.log_url)) as log:
        cursor: int | None = None
        for _ in range(MAX_SEARCH_CALLS):
            page = log.search(**{field: value}, cursor=cursor, limit=SEARCH_PAGE)
            listed.extend(h.index for h in page.results)
            rows.extend(h.to_json() for h in page.results if _keeps(h, rest))
            if page.next_cursor is None or not page.results:
                read_all = True
                break
            if len(rows) >= opts.limit:
                break
            if cursor is not None and page.next_cursor <= cursor:
                raise InputError("the log's search cursor did not advance; stopping")
            cursor = page.next_cursor
    if proved is not None:  # the listing must hold every entry the index proves, no other
        # (below the size the log published before: a witnessed log lists no further)
        reach = published if read_all else min(published, max(listed, default=-1) + 1)
        check_listing(proved, listed, up_to=reach)
    return Found(tuple(rows[:opts.limit]), proved)


def _proved_list(opts: SearchOptions, out: Output, search: tuple[str, str]
                 ) -> tuple[CompleteList, int]:
    """The list of entries naming the search key (field, value), verified against a
    trusted checkpoint page by page (progress on stderr), and the tree size the log
    announced before (its search lists at least that far)."""
    sess = connect(require_url(opts.log_url), TrustedState(), opts.log_key)
    try:
        out.key_note(sess.key.how, sess.key.describe())
        with out.progress("proving the list complete, entries read", None) as advance_to:
            paging = Paging(opts.page_size, opts.max_pages,
                            progress=lambda _pages, n: advance_to(n, None))
            proved = verified_lookup(sess, index_key_for(*search), paging)
        return proved, sess.info.tree_size
    finally:
        sess.close()
