"""Which logged reproductions a page reads for its verdicts: bounded, newest first, and
saying when it did not read everything (issue 26 row 5).

Reading the first N entries about a digest by index lets anyone bury a verdict: log
enough junk or sock-puppet confirmations first and the honest refutation is never read.
So a page reads, newest first:

1. each key the log's operator names as a reproducer (`search_newest` by keyid): a
   stranger cannot pad another key's entries, so a named reproducer's newest verdicts
   are always read, however much else names the digest;
2. every signer's entries about the digest (`search_newest` by digest), for the verdicts
   shown as strangers' word.

Each step reads at most a fixed number of index rows and decodes at most
`VERDICT_ENTRIES` entries and `VERDICT_BYTES` bytes, whatever the log holds; when a
bound stops it, or rows remain unread, `complete` is False and the page says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ledger.storage import EntrySummary, LogStorage
from ledger.web._decode import DecodedEntry, decode_for_display, predicate_kind
from ledger.web._verdicts import Verdict, judged_indices, verdicts_by_claim

#: Subject digests one page looks up, named keys it reads, index rows per named key and
#: per digest, and reproduction entries and bytes it decodes, at most.
VERDICT_DIGESTS = 25
NAMED_KEYS = 64
KEY_ROWS = 20
DIGEST_ROWS = 100
VERDICT_ENTRIES = 200
VERDICT_BYTES = 512 * 1024


class VerdictReading(NamedTuple):
    """The verdicts a page shows per claim entry, whether it read every reproduction
    about its digests, and how many index rows it read."""

    verdicts: dict[int, list[Verdict]]
    complete: bool
    rows_read: int


def _reproductions(rows: Sequence[EntrySummary], digests: set[str]) -> list[int]:
    return [r.index for r in rows if r.subject_sha256 in digests
            and predicate_kind(r.predicate_type) == "reproduction"]


def read_verdicts(storage: LogStorage, size: int, claims: Mapping[int, str],
                  digests: Sequence[str], names: Mapping[str, str]) -> VerdictReading:
    """The verdicts about `claims` (claim entry index -> leaf hash hex) among the
    reproductions of `digests` below tree size `size`, read as the module says."""
    decoded, complete, rows = _read_reproductions(storage, size, digests, names)
    return VerdictReading(verdicts_by_claim(decoded.items(), claims, names), complete, rows)


#: Claim entries one kernel page resolves the verdicts it read against, at most.
JUDGED_ENTRIES = 256


def read_digest_verdicts(storage: LogStorage, size: int, digest: str,
                         names: Mapping[str, str]) -> VerdictReading:
    """The verdicts about every claim entry of `digest`, wherever it sits in the log: the
    reproductions read as the module says (newest first, bounded), each verdict checked
    against the leaf hash of the claim entry it names (at most `JUDGED_ENTRIES` of them,
    each an entry of this digest), so a kernel page counts a refutation however much junk
    was logged about the digest before it (issue 42 item 4); `complete` says when the read
    was trimmed."""
    decoded, complete, rows = _read_reproductions(storage, size, [digest], names)
    judged: list[int] = []
    for d in decoded.values():
        judged += judged_indices(d)
    leaves: dict[int, str] = {}
    wanted = list(dict.fromkeys(judged))
    complete = complete and len(wanted) <= JUDGED_ENTRIES
    for index in wanted[:JUDGED_ENTRIES]:
        stored = storage.get_entry(index) if 0 <= index < size else None
        if stored is None:
            continue
        summary = stored.summary()
        if summary.subject_sha256 == digest and predicate_kind(summary.predicate_type) in (
                "benchmark", "verification"):
            leaves[index] = stored.leaf_hash.hex()
    return VerdictReading(verdicts_by_claim(decoded.items(), leaves, names), complete, rows)


def _read_reproductions(storage: LogStorage, size: int, digests: Sequence[str],
                        names: Mapping[str, str]) -> tuple[dict[int, DecodedEntry], bool, int]:
    """The reproduction entries about `digests` a page reads (see the module docstring),
    whether that was all of them, and how many index rows it read."""
    wanted = list(dict.fromkeys(digests))
    complete = len(wanted) <= VERDICT_DIGESTS
    wanted_set = set(wanted[:VERDICT_DIGESTS])
    found: list[int] = []
    rows = 0
    keys = sorted(names)
    complete = complete and len(keys) <= NAMED_KEYS
    for key in keys[:NAMED_KEYS]:
        page = storage.search_newest("keyid", key, size, KEY_ROWS)
        rows += len(page.results)
        found += _reproductions(page.results, wanted_set)
        complete = complete and page.next_cursor is None
    for digest in wanted[:VERDICT_DIGESTS]:
        summary = storage.digest_summary(digest)
        if not summary.more_kinds and not any(
                predicate_kind(k.predicate_type) == "reproduction" for k in summary.kinds):
            continue  # its summary (one row per type) says no reproduction names it
        page = storage.search_newest("digest", digest, size, DIGEST_ROWS)
        rows += len(page.results)
        found += _reproductions(page.results, wanted_set)
        complete = complete and page.next_cursor is None
    decoded: dict[int, DecodedEntry] = {}
    budget = VERDICT_BYTES
    for index in dict.fromkeys(found):  # named keys' first, then the newest
        if len(decoded) >= VERDICT_ENTRIES or budget <= 0:
            complete = False
            break
        stored = storage.get_entry(index)
        if stored is not None:
            budget -= len(stored.data)
            decoded[index] = decode_for_display(stored.data)
    return decoded, complete, rows
