"""`LogStorage` in memory: the fake the sequencer and server tests run against."""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from ledger.storage._files import check_file_path
from ledger.storage._types import (
    MAX_PAGE,
    MAX_RANGE,
    SIGNED_SCAN,
    DigestSummary,
    EntrySummary,
    IntegratedBatch,
    SearchPage,
    StorageError,
    StoredCheckpoint,
    StoredEntry,
    check_batch_shape,
    check_empty_checkpoint,
    check_range,
    check_search,
    signed_page,
    summary_of,
    summary_rows,
)


class MemoryStorage:
    """Everything in dictionaries and lists, guarded by one lock."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._integration = threading.Lock()
        self._entries: list[StoredEntry] = []
        self._by_leaf: dict[bytes, int] = {}
        self._tiles: dict[tuple[int, int], bytes] = {}
        self._nodes: dict[tuple[int, int], bytes] = {}
        self._checkpoints: list[StoredCheckpoint] = []
        self._cosigned: StoredCheckpoint | None = None
        self._blobs: dict[str, tuple[bytes, float]] = {}
        self._files: dict[str, bytes] = {}
        #: digest -> predicate type -> [entries, bytes, last index]
        self._summaries: dict[str, dict[str, list[int]]] = {}

    def latest_checkpoint(self) -> StoredCheckpoint | None:
        with self._lock:
            return self._checkpoints[-1] if self._checkpoints else None

    def checkpoints(self, limit: int, before_size: int | None = None) -> list[StoredCheckpoint]:
        limit = max(1, min(limit, 500))
        with self._lock:
            got = [c for c in self._checkpoints if before_size is None or c.size < before_size]
        return list(reversed(got))[:limit]

    def entry_count(self) -> int:
        with self._lock:
            return len(self._entries)

    def get_entry(self, index: int) -> StoredEntry | None:
        with self._lock:
            return self._entries[index] if 0 <= index < len(self._entries) else None

    def get_entries(self, start: int, end: int) -> list[StoredEntry]:
        check_range(start, end)
        with self._lock:
            return self._entries[start:end]

    def find_leaf(self, leaf_hash: bytes) -> int | None:
        with self._lock:
            return self._by_leaf.get(leaf_hash)

    def find_leaves(self, leaf_hashes: Sequence[bytes]) -> dict[bytes, int]:
        with self._lock:
            return {h: self._by_leaf[h] for h in leaf_hashes if h in self._by_leaf}

    @staticmethod
    def _matches(entry: StoredEntry, field: str, value: str) -> bool:
        if field == "digest":
            return any(d == value for _, d in entry.subjects)
        if field == "name":
            return any(n == value for n, _ in entry.subjects)
        if field == "keyid":
            return value in entry.keyids
        return entry.predicate_type == value

    def search(self, field: str, value: str, cursor: int = 0, limit: int = 50) -> SearchPage:
        limit = check_search(field, cursor, limit)
        with self._lock:
            found = [e for e in self._entries[cursor:] if self._matches(e, field, value)]
        page = found[:limit]
        more = len(found) > limit
        return SearchPage(
            tuple(e.summary() for e in page), page[-1].index + 1 if more and page else None
        )

    def search_newest(self, field: str, value: str, before: int, limit: int = 50
                      ) -> SearchPage:
        limit = check_search(field, max(0, before), limit)
        found: list[StoredEntry] = []
        with self._lock:
            for e in reversed(self._entries[:max(0, before)]):
                if self._matches(e, field, value):
                    found.append(e)
                    if len(found) > limit:
                        break
        page = found[:limit]
        more = len(found) > limit
        return SearchPage(tuple(e.summary() for e in page),
                          page[-1].index if more and page else None)

    def search_signed(self, digest: str, keyid: str, cursor: int = 0, limit: int = 50
                      ) -> SearchPage:
        limit = check_search("digest", cursor, limit)
        with self._lock:
            mine = [e for e in self._entries[cursor:] if keyid in e.keyids][: SIGNED_SCAN + 1]
        ids, next_cursor = signed_page(
            [(e.index, any(d == digest for _, d in e.subjects)) for e in mine], limit)
        with self._lock:
            return SearchPage(tuple(self._entries[i].summary() for i in ids), next_cursor)

    def digest_summary(self, digest: str) -> DigestSummary:
        with self._lock:
            kinds = self._summaries.get(digest, {})
            return summary_of(digest, [(t, n, b, last) for t, (n, b, last) in kinds.items()])

    def recent_entries(self, limit: int = 20, before: int | None = None) -> list[EntrySummary]:
        limit = max(1, min(limit, 500))
        with self._lock:
            end = len(self._entries) if before is None else max(0, min(before, len(self._entries)))
            return [e.summary() for e in reversed(self._entries[max(0, end - limit) : end])]

    def read_tile(self, level: int, index: int) -> bytes:
        with self._lock:
            return self._tiles.get((level, index), b"")

    def read_tile_nodes(self, level: int, index: int) -> bytes:
        with self._lock:
            return self._nodes.get((level, index), b"")

    def blob_info(self, digest_hex: str) -> int | None:
        with self._lock:
            got = self._blobs.get(digest_hex)
        return None if got is None else len(got[0])

    def get_blob(self, digest_hex: str) -> bytes | None:
        with self._lock:
            got = self._blobs.get(digest_hex)
        return None if got is None else got[0]

    def blob_digests(self, after: str = "", limit: int = MAX_PAGE) -> list[str]:
        limit = max(1, min(limit, MAX_PAGE))
        with self._lock:
            return sorted(d for d in self._blobs if d > after)[:limit]

    def put_blob(self, digest_hex: str, data: bytes) -> bool:
        with self._lock:
            if digest_hex in self._blobs:
                return False
            self._blobs[digest_hex] = (bytes(data), time.time())
            return True

    def blobs_before(self, cutoff: float, after: tuple[float, str] | None, limit: int
                     ) -> list[tuple[float, str]]:
        if not 1 <= limit <= MAX_RANGE:
            raise StorageError(f"blob listing limit must be 1 to {MAX_RANGE}")
        with self._lock:
            rows = sorted((created, d) for d, (_, created) in self._blobs.items()
                          if created < cutoff)
        return [r for r in rows if after is None or r > after][:limit]

    def delete_blob(self, digest_hex: str) -> bool:
        with self._lock:
            return self._blobs.pop(digest_hex, None) is not None

    @contextmanager
    def integration_lock(self) -> Iterator[None]:
        with self._integration:
            yield

    def commit_empty_checkpoint(self, checkpoint: StoredCheckpoint) -> None:
        check_empty_checkpoint(checkpoint)
        with self._lock:
            if self._checkpoints or self._entries:
                raise StorageError("the log already has a checkpoint; only a new log gets size 0")
            self._checkpoints.append(checkpoint)

    def latest_cosigned(self) -> StoredCheckpoint | None:
        with self._lock:
            return self._cosigned

    def publish_cosigned(self, checkpoint: StoredCheckpoint) -> bool:
        with self._lock:
            signed = {c.size: c.root_hash for c in self._checkpoints}
            if signed.get(checkpoint.size) != checkpoint.root_hash:
                raise StorageError(f"no checkpoint of size {checkpoint.size} with that root "
                                   "was signed by this log")
            if self._cosigned is not None and self._cosigned.size >= checkpoint.size:
                return False
            self._cosigned = checkpoint
            return True

    def commit_batch(self, batch: IntegratedBatch) -> None:
        first, size = check_batch_shape(batch)
        with self._lock:
            if len(self._entries) != first:
                raise StorageError(
                    f"batch starts at {first} but the log holds {len(self._entries)} entries"
                )
            if self._checkpoints and self._checkpoints[-1].size >= size:
                raise StorageError(
                    f"refusing a checkpoint for size {size} after size {self._checkpoints[-1].size}"
                )
            for e in batch.entries:
                self._entries.append(e)
                self._by_leaf[e.leaf_hash] = e.index
            for digest, ptype, n, nbytes, last in summary_rows(batch.entries):
                row = self._summaries.setdefault(digest, {}).setdefault(ptype, [0, 0, -1])
                row[0] += n
                row[1] += nbytes
                row[2] = max(row[2], last)
            self._tiles.update(batch.tiles)
            self._nodes.update(batch.nodes)
            sizes = [c.size for c in self._checkpoints]
            self._checkpoints.insert(bisect_left(sizes, size), batch.checkpoint)

    def write_files(self, files: Mapping[str, bytes]) -> None:
        with self._lock:
            for path, data in files.items():
                self._files[check_file_path(path)] = bytes(data)
            for path in files:
                if path.startswith("tile/") and ".p/" not in path:
                    for old in [p for p in self._files if p.startswith(f"{path}.p/")]:
                        del self._files[old]

    def read_file(self, path: str) -> bytes | None:
        with self._lock:
            return self._files.get(check_file_path(path))

    def list_files(self) -> Iterator[str]:
        with self._lock:
            return iter(sorted(self._files))

    def close(self) -> None:
        return None
