"""Records and the storage interface shared by the sequencer, the JSON API and the pages."""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from ledger import LedgerError
from ledger.tlog.merkle import EMPTY_ROOT
from ledger.tlog.search import SearchHit
from ledger.tlog.search import SearchPage as Page

#: The fields `search` accepts.
SEARCH_FIELDS = ("digest", "name", "keyid", "predicate_type")
#: Largest page `search` / `recent_entries` return.
MAX_PAGE = 500
#: Largest range `get_entries` returns.
MAX_RANGE = 1000


class StorageError(LedgerError):
    """The log's storage is unusable, inconsistent or was asked something impossible."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise StorageError(f"{what} must be a base64 string")
    return base64.b64decode(text, validate=True)


@dataclass(frozen=True)
class StoredCheckpoint:
    """A signed checkpoint the log produced (every one is kept)."""

    size: int
    root_hash: bytes
    note: bytes
    created: float

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "root_hash": self.root_hash.hex(),
            "note": self.note.decode("utf-8"),
            "created": self.created,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> StoredCheckpoint:
        return cls(
            size=int(obj["size"]),
            root_hash=bytes.fromhex(obj["root_hash"]),
            note=str(obj["note"]).encode("utf-8"),
            created=float(obj["created"]),
        )


@dataclass(frozen=True)
class EntrySummary(SearchHit):
    """What search and listings show about one entry (its first subject): the search row
    the client reads (`SearchHit`) and when it was integrated."""

    integrated_at: float

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "integrated_at": self.integrated_at}

    @classmethod
    def from_json(cls, obj: Any) -> EntrySummary:  # a stored row: trusted, not re-validated
        return cls(
            index=int(obj["index"]),
            leaf_hash=bytes.fromhex(obj["leaf_hash"]),
            subject_name=str(obj["subject_name"]),
            subject_sha256=str(obj["subject_sha256"]),
            predicate_type=str(obj["predicate_type"]),
            keyids=tuple(str(k) for k in obj["keyids"]),
            integrated_at=float(obj["integrated_at"]),
        )


@dataclass(frozen=True)
class EntryFacts:
    """The searchable facts about an entry, extracted when it was verified."""

    predicate_type: str
    subjects: tuple[tuple[str, str], ...]
    keyids: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.subjects:
            raise StorageError("an entry needs at least one subject")

    def to_json(self) -> dict[str, Any]:
        return {"predicate_type": self.predicate_type,
                "subjects": [list(s) for s in self.subjects], "keyids": list(self.keyids)}

    @classmethod
    def from_json(cls, obj: object) -> EntryFacts:
        """Strict: exactly these fields, every name, digest and key id a string."""
        if not isinstance(obj, dict) or set(obj) != {"predicate_type", "subjects", "keyids"}:
            raise StorageError("entry facts are {predicate_type, subjects, keyids}")
        ptype, subjects, keyids = obj["predicate_type"], obj["subjects"], obj["keyids"]
        if not (isinstance(ptype, str) and isinstance(subjects, list) and isinstance(keyids, list)
                and all(isinstance(s, list) and len(s) == 2 and all(isinstance(x, str) for x in s)
                        for s in subjects)
                and all(isinstance(k, str) for k in keyids)):
            raise StorageError("entry facts: predicate_type a string, subjects [name, sha256] "
                               "string pairs, keyids strings")
        return cls(ptype, tuple((s[0], s[1]) for s in subjects), tuple(keyids))


@dataclass(frozen=True)
class StoredEntry:
    """One sequenced entry: its canonical bytes and what it is indexed by."""

    index: int
    leaf_hash: bytes
    data: bytes
    predicate_type: str
    subjects: tuple[tuple[str, str], ...]
    keyids: tuple[str, ...]
    integrated_at: float

    def summary(self) -> EntrySummary:
        name, digest = self.subjects[0]
        return EntrySummary(
            self.index, self.leaf_hash, name, digest, self.predicate_type, self.keyids,
            self.integrated_at,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "leaf_hash": self.leaf_hash.hex(),
            "data": _b64(self.data),
            "predicate_type": self.predicate_type,
            "subjects": [[n, d] for n, d in self.subjects],
            "keyids": list(self.keyids),
            "integrated_at": self.integrated_at,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> StoredEntry:
        return cls(
            index=int(obj["index"]),
            leaf_hash=bytes.fromhex(obj["leaf_hash"]),
            data=_unb64(obj["data"], "data"),
            predicate_type=str(obj["predicate_type"]),
            subjects=tuple((str(n), str(d)) for n, d in obj["subjects"]),
            keyids=tuple(str(k) for k in obj["keyids"]),
            integrated_at=float(obj["integrated_at"]),
        )


SearchPage: TypeAlias = Page[EntrySummary]
"""One page of the storage's search rows and where the next page starts (None at the end):
the search wire type (`ledger.tlog.SearchPage`) with the storage's own rows."""


#: Index rows of one signer `search_signed` looks at per call, at most: a call costs
#: O(limit + SIGNED_SCAN) whatever the key signed; the cursor resumes where it stopped.
SIGNED_SCAN = 2000
#: Most predicate types a digest summary lists (the busiest first).
MAX_SUMMARY_KINDS = 32


@dataclass(frozen=True)
class KindCount:
    """How many entries of one predicate type name a digest, their bytes, the newest."""

    predicate_type: str
    entries: int
    bytes: int
    last_index: int


@dataclass(frozen=True)
class DigestSummary:
    """What the log holds about one subject digest, kept up to date at integration, so a
    page can say what it did not read without reading it (issue 26 row 3)."""

    digest: str
    kinds: tuple[KindCount, ...]
    #: More predicate types than `MAX_SUMMARY_KINDS` name the digest.
    more_kinds: bool = False

    @property
    def entries(self) -> int:
        return sum(k.entries for k in self.kinds)

    def count(self, predicate_type: str) -> int:
        return sum(k.entries for k in self.kinds if k.predicate_type == predicate_type)


def summary_rows(entries: Sequence[StoredEntry]) -> list[tuple[str, str, int, int, int]]:
    """A batch's additions to the digest summaries: (digest, predicate type, entries, bytes,
    last index), each entry counted once per digest it names."""
    out: dict[tuple[str, str], list[int]] = {}
    for e in entries:
        for digest in dict.fromkeys(d for _, d in e.subjects):
            row = out.setdefault((digest, e.predicate_type), [0, 0, -1])
            row[0] += 1
            row[1] += len(e.data)
            row[2] = max(row[2], e.index)
    return [(d, t, n, b, last) for (d, t), (n, b, last) in sorted(out.items())]


def summary_of(digest: str, rows: Sequence[tuple[str, int, int, int]]) -> DigestSummary:
    """A `DigestSummary` from (predicate type, entries, bytes, last index) rows, the busiest
    `MAX_SUMMARY_KINDS` kept."""
    ordered = sorted(rows, key=lambda r: (-r[1], r[0]))
    kinds = tuple(KindCount(str(t), int(n), int(b), int(last))
                  for t, n, b, last in ordered[:MAX_SUMMARY_KINDS])
    return DigestSummary(digest, kinds, len(ordered) > MAX_SUMMARY_KINDS)


@dataclass(frozen=True)
class IntegratedBatch:
    """Everything one integration writes in a single transaction.

    ``tiles`` maps ``(tile_level, tile_index)`` to the tile's complete hash bytes after
    this batch (a growing partial tile is rewritten whole); ``nodes`` holds the interior
    hashes of the tiles this batch completed (see `tile_nodes`); ``checkpoint`` covers
    ``entries[-1].index + 1`` entries.
    """

    entries: tuple[StoredEntry, ...]
    tiles: Mapping[tuple[int, int], bytes]
    checkpoint: StoredCheckpoint
    nodes: Mapping[tuple[int, int], bytes] = field(default_factory=dict)


def check_empty_checkpoint(checkpoint: StoredCheckpoint) -> None:
    """A new log's first checkpoint: size 0 with the RFC 9162 empty-tree root."""

    if checkpoint.size != 0 or checkpoint.root_hash != EMPTY_ROOT:
        raise StorageError("the first checkpoint without entries must be size 0 with the "
                           "empty tree's root")


class LogStorage(Protocol):
    """Where the log keeps entries, hashes, checkpoints, blobs and tile files.

    Reads are safe from any thread. Writes of the tree (`commit_batch`) happen only
    while `integration_lock()` is held, so exactly one integrator extends the tree.
    """

    # ---- reads
    def latest_checkpoint(self) -> StoredCheckpoint | None: ...
    def checkpoints(self, limit: int, before_size: int | None = None) -> list[StoredCheckpoint]: ...
    def entry_count(self) -> int: ...
    def get_entry(self, index: int) -> StoredEntry | None: ...
    def get_entries(self, start: int, end: int) -> list[StoredEntry]: ...
    def find_leaf(self, leaf_hash: bytes) -> int | None: ...
    def find_leaves(self, leaf_hashes: Sequence[bytes]) -> dict[bytes, int]: ...
    def search(self, field: str, value: str, cursor: int = 0, limit: int = 50) -> SearchPage: ...
    def search_newest(self, field: str, value: str, before: int, limit: int = 50
                      ) -> SearchPage:
        """`search` newest first: matches below index `before`, highest index first; the
        page's `next_cursor` is the `before` of the next (older) page, None at the oldest."""
        ...
    def search_signed(self, digest: str, keyid: str, cursor: int = 0, limit: int = 50
                      ) -> SearchPage:
        """Entries naming ``digest`` (any subject) signed by ``keyid``, in index order: what
        strangers' keys cannot pad. One call looks at no more than `SIGNED_SCAN` of the key's
        rows; a page may then hold fewer than ``limit`` results and a ``next_cursor``."""
        ...
    def digest_summary(self, digest: str) -> DigestSummary:
        """Counts per predicate type of the entries naming ``digest`` (kept at integration:
        one row per type read, never the entries)."""
        ...
    def recent_entries(self, limit: int = 20, before: int | None = None) -> list[EntrySummary]: ...
    def read_tile(self, level: int, index: int) -> bytes: ...
    def read_tile_nodes(self, level: int, index: int) -> bytes: ...
    def blob_info(self, digest_hex: str) -> int | None: ...
    def get_blob(self, digest_hex: str) -> bytes | None: ...
    def blob_digests(self, after: str = "", limit: int = MAX_PAGE) -> list[str]:
        """Stored blob digests greater than ``after``, ascending (for copying a log)."""
        ...

    # ---- writes
    def put_blob(self, digest_hex: str, data: bytes) -> bool: ...
    def blobs_before(self, cutoff: float, after: tuple[float, str] | None, limit: int
                     ) -> list[tuple[float, str]]:
        """(created, digest) of blobs created before `cutoff`, ordered by (created, digest),
        strictly after the position `after` (None: from the first); at most `limit`."""
        ...
    def delete_blob(self, digest_hex: str) -> bool:
        """Delete a blob; True if it existed (only for blobs no logged entry references)."""
        ...
    def integration_lock(self) -> AbstractContextManager[None]: ...
    def commit_empty_checkpoint(self, checkpoint: StoredCheckpoint) -> None:
        """Store the size-0 checkpoint of a new log (the caller holds `integration_lock()`);
        `StorageError` unless the log holds no entry and no checkpoint yet."""
        ...
    def latest_cosigned(self) -> StoredCheckpoint | None:
        """The newest checkpoint published with the witness cosignatures that met the quorum
        (`note` carries them); None before the first."""
        ...
    def publish_cosigned(self, checkpoint: StoredCheckpoint) -> bool:
        """Record a cosigned checkpoint of a size the log signed; True if it is now the newest
        (an older or equal size than the newest published is ignored: False)."""
        ...
    def commit_batch(self, batch: IntegratedBatch) -> None:
        """Store a batch atomically. The caller holds `integration_lock()` and has removed
        entries already in the log (`find_leaves`); gaps, rewinds and duplicates within
        the batch are refused with `StorageError`."""
        ...

    # ---- tile files (the static read path; derived from the database)
    def write_files(self, files: Mapping[str, bytes]) -> None: ...
    def read_file(self, path: str) -> bytes | None: ...
    def list_files(self) -> Iterator[str]: ...

    def close(self) -> None: ...


def check_range(start: int, end: int) -> None:
    """Preconditions of `get_entries`."""
    if start < 0 or end < start:
        raise StorageError(f"bad entry range [{start}, {end})")
    if end - start > MAX_RANGE:
        raise StorageError(f"entry range too large: at most {MAX_RANGE} entries at once")


def check_batch_shape(batch: IntegratedBatch) -> tuple[int, int]:
    """Preconditions of `commit_batch` that need no stored state; returns (first index, new size)."""
    if not batch.entries:
        raise StorageError("an integration needs at least one entry")
    first = batch.entries[0].index
    size = batch.entries[-1].index + 1
    if [e.index for e in batch.entries] != list(range(first, size)):
        raise StorageError("batch indexes must be consecutive")
    if batch.checkpoint.size != size:
        raise StorageError("the batch checkpoint must cover exactly the batch")
    if len({e.leaf_hash for e in batch.entries}) != len(batch.entries):
        raise StorageError("duplicate leaf hash in batch")
    return first, size


def signed_page(scanned: Sequence[tuple[int, bool]], limit: int) -> tuple[list[int], int | None]:
    """From a signer's index rows in order (index, names the digest), at most
    `SIGNED_SCAN` + 1 of them: the matching indexes of one page and the next cursor."""
    ids: list[int] = []
    for pos, (idx, match) in enumerate(scanned[:SIGNED_SCAN]):
        if match:
            ids.append(idx)
            if len(ids) == limit:
                return ids, (idx + 1 if pos + 1 < len(scanned) else None)
    if len(scanned) > SIGNED_SCAN:
        return ids, scanned[SIGNED_SCAN - 1][0] + 1
    return ids, None


def check_search(field: str, cursor: int, limit: int) -> int:
    """Preconditions of `search`; returns the effective limit."""
    if field not in SEARCH_FIELDS:
        raise StorageError(f"unknown search field {field!r}: use one of {', '.join(SEARCH_FIELDS)}")
    if cursor < 0:
        raise StorageError("cursor must be >= 0")
    if limit < 1:
        raise StorageError("limit must be >= 1")
    return min(limit, MAX_PAGE)
