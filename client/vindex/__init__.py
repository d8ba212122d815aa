"""Complete search: check a log's index answers against its signed checkpoints.

`verified_lookup` asks the log for every entry naming a key, page by page (`Paging`:
the page size, a limit on pages, progress), and returns the list only
once the lookup proof leads to the index root the checkpoint commits to and the
checkpoint is trusted (signature, consistency with the trusted state, witnesses as
the session requires); `check_listing` holds a search's rows against that list, so a
log that leaves an entry out of its answer is caught. `RecomputedIndex` is the
monitor's: the index recomputed from the entries it reads, compared with every
checkpoint's commitment. Docs: docs/vindex.md.

Holds the lookup verification (`_verify`), `ktl search`'s listing held against it
(`_search`) and the monitor's recomputation (`_audit`).
May import: `client.api`, `client.errors`, `client.models`, `client.output`,
`client.session`, `client.state`, `client.trust`, `attest` (keys, predicate types) and
`ledger` (its pure `vindex` verification, its checkpoints, the index rows in SQLite);
`client.cli` and `client.monitor` import it.
"""

from __future__ import annotations

from client.vindex._audit import IndexMismatch, RecomputedIndex
from client.vindex._search import (
    TYPE_ALIASES,
    Found,
    SearchOptions,
    keyid_arg,
    search_log,
    search_type,
)
from client.vindex._verify import (
    DEFAULT_MAX_PAGES,
    ChainMismatch,
    CompleteList,
    IncompleteAnswer,
    IndexNotCommitted,
    PageOutOfOrder,
    Paging,
    SearchOmitted,
    TooManyPages,
    check_listing,
    index_key_for,
    verified_lookup,
)

__all__ = ["DEFAULT_MAX_PAGES", "TYPE_ALIASES", "ChainMismatch", "CompleteList", "Found",
           "IncompleteAnswer", "IndexMismatch", "IndexNotCommitted", "PageOutOfOrder", "Paging",
           "RecomputedIndex", "SearchOmitted", "SearchOptions", "TooManyPages", "check_listing",
           "index_key_for", "keyid_arg", "search_log", "search_type", "verified_lookup"]
