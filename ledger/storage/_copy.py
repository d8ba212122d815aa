"""Copy a whole log from one storage into another, empty one (`ktl migrate`).

Batch by batch, in the order the log grew: each stored checkpoint becomes one
`commit_batch` of the entries it added and the tile rows as they were at its size, so
the copy holds every checkpoint the source handed out. Blobs are re-hashed on the way.
Nothing from the source is believed: the copy is then checked in full (`check_log` deep:
every entry re-hashed, the root recomputed from the copied hashes and compared with the
last signed checkpoint, every earlier checkpoint a prefix, tile and bundle files
written), and its last checkpoint must be the source's, byte for byte.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from ledger.storage._check import check_log
from ledger.storage._hashes import tile_nodes
from ledger.storage._types import (
    MAX_RANGE,
    IntegratedBatch,
    LogStorage,
    StorageError,
    StoredCheckpoint,
)
from ledger.tlog.merkle import HASH_SIZE
from ledger.tlog.note import NoteVerifier

_TILE_HEIGHT = 8
_TILE_WIDTH = 1 << _TILE_HEIGHT

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class CopyResult:
    """What was copied, and the checkpoint both logs now end with."""

    size: int
    checkpoints: int
    blobs: int
    checkpoint: StoredCheckpoint | None

    def to_json(self) -> dict[str, object]:
        return {
            "size": self.size, "checkpoints": self.checkpoints, "blobs": self.blobs,
            "root_hash": None if self.checkpoint is None else self.checkpoint.root_hash.hex(),
        }


def _all_checkpoints(src: LogStorage) -> list[StoredCheckpoint]:
    out: list[StoredCheckpoint] = []
    before: int | None = None
    while True:
        page = src.checkpoints(500, before)
        if not page:
            break
        out.extend(page)
        before = page[-1].size
    out.reverse()
    return [c for c in out if c.size > 0]


def _tiles_between(
    src: LogStorage, old: int, new: int
) -> tuple[dict[tuple[int, int], bytes], dict[tuple[int, int], bytes]]:
    """The tile rows that growing from ``old`` to ``new`` leaves changed, as they were at ``new``."""
    tiles: dict[tuple[int, int], bytes] = {}
    nodes: dict[tuple[int, int], bytes] = {}
    level = 0
    while new >> (_TILE_HEIGHT * level):
        n_old, n_new = old >> (_TILE_HEIGHT * level), new >> (_TILE_HEIGHT * level)
        if n_new > n_old:
            for index in range(n_old // _TILE_WIDTH, (n_new - 1) // _TILE_WIDTH + 1):
                width = min(_TILE_WIDTH, n_new - index * _TILE_WIDTH)
                data = src.read_tile(level, index)[: width * HASH_SIZE]
                if len(data) != width * HASH_SIZE:
                    raise StorageError(f"the source lacks hashes of tile {level}/{index}")
                tiles[(level, index)] = data
                if width == _TILE_WIDTH:
                    nodes[(level, index)] = tile_nodes(data)
        level += 1
    return tiles, nodes


def copy_log(
    src: LogStorage, dst: LogStorage, verifier: NoteVerifier, origin: str | None = None,
    progress: Progress | None = None,
) -> CopyResult:
    """Copy ``src`` into the empty ``dst`` and prove the copy; `StorageError` if anything disagrees."""
    if dst.latest_checkpoint() is not None or dst.entry_count():
        raise StorageError("the destination already holds a log: migrate only into an empty one")
    latest = src.latest_checkpoint()
    checkpoints = _all_checkpoints(src)
    total = 0 if latest is None else latest.size
    done = 0
    for cp in checkpoints:
        if cp.size == 0:
            # A new log signs its size-0 checkpoint at creation (no entries to commit).
            with dst.integration_lock():
                dst.commit_empty_checkpoint(cp)
            continue
        entries = []
        for lo in range(done, cp.size, MAX_RANGE):
            entries.extend(src.get_entries(lo, min(cp.size, lo + MAX_RANGE)))
        if [e.index for e in entries] != list(range(done, cp.size)):
            raise StorageError(f"the source is missing entries below its checkpoint at {cp.size}")
        tiles, nodes = _tiles_between(src, done, cp.size)
        with dst.integration_lock():
            dst.commit_batch(IntegratedBatch(tuple(entries), tiles, cp, nodes))
        done = cp.size
        if progress is not None:
            progress("entries", done, total)
    blobs = _copy_blobs(src, dst, progress)
    with dst.integration_lock():
        check = check_log(dst, verifier, origin, repair=True, deep=True)
    copied = dst.latest_checkpoint()
    if copied != latest or check.size != total:
        raise StorageError("the copy's last checkpoint differs from the source's")
    return CopyResult(check.size, check.checkpoints, blobs, copied)


def _copy_blobs(src: LogStorage, dst: LogStorage, progress: Progress | None) -> int:
    count = 0
    after = ""
    while True:
        digests = src.blob_digests(after)
        if not digests:
            return count
        for digest in digests:
            data = src.get_blob(digest)
            if data is None or hashlib.sha256(data).hexdigest() != digest:
                raise StorageError(f"the source's blob sha256:{digest} does not hash to its name")
            dst.put_blob(digest, data)
            count += 1
        after = digests[-1]
        if progress is not None:
            progress("blobs", count, 0)
