"""The start-up check: stored leaves, hashes, tiles and checkpoints must agree.

A log that fails it must not serve: `check_log` raises `StorageError` saying what
disagrees. Tile files that a crash left missing (they are written after the
database commit) are rewritten from the database: that completes a half-finished
integration. A file of the wrong length is what a power loss during its write leaves (files are
not fsynced: they are derived data), so it is rewritten too; a file of the right
length with other bytes is damage or tampering, and the log refuses to serve.
"""

from __future__ import annotations

from dataclasses import dataclass

from ledger import LedgerError
from ledger.storage._hashes import StoredHashReader, tile_nodes
from ledger.storage._types import LogStorage, StorageError, StoredCheckpoint
from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.merkle import HASH_SIZE, MissingHashError, leaf_hash, tree_root
from ledger.tlog.note import NoteVerifier
from ledger.tlog.tiles import (
    TILE_WIDTH,
    TileRef,
    encode_bundle,
    entries_path,
    entry_bundles_for_size,
    tile_path,
    tiles_for_size,
)


@dataclass(frozen=True)
class LogCheck:
    """What the check found: the verified size and the files it had to rewrite."""

    size: int
    checkpoints: int
    rewritten: tuple[str, ...]


def _refuse(message: str) -> StorageError:
    return StorageError(f"refusing to serve: {message}")


def check_log(
    storage: LogStorage,
    verifier: NoteVerifier,
    origin: str | None = None,
    *,
    repair: bool = True,
    deep: bool = False,
) -> LogCheck:
    """Check the stored log; ``deep`` re-hashes every entry and compares every bundle file."""
    cp = storage.latest_checkpoint()
    count = storage.entry_count()
    if cp is None:
        if count:
            raise _refuse(f"{count} entries are stored but no checkpoint covers them")
        return LogCheck(0, 0, ())
    size = cp.size
    if count != size:
        raise _refuse(f"the last checkpoint is for {size} entries but {count} are stored")
    try:
        signed = open_checkpoint(cp.note, verifier, origin)
    except LedgerError as e:
        raise _refuse(f"the last stored checkpoint does not verify with the log key: {e}") from None
    if signed.checkpoint.size != size or signed.checkpoint.root_hash != cp.root_hash:
        raise _refuse("the last checkpoint's note disagrees with its stored size or root")
    reader = StoredHashReader(storage, size)
    try:
        root = tree_root(size, reader)
    except MissingHashError as e:
        raise _refuse(f"stored hashes are missing: {e}") from None
    if root != cp.root_hash:
        raise _refuse(
            f"the root recomputed from stored hashes ({root.hex()}) is not the root of the last "
            f"signed checkpoint ({cp.root_hash.hex()}) at size {size}"
        )
    seen = _check_history(storage, verifier, origin, reader)
    # Leaves: the tail always, everything when deep.
    start = 0 if deep else max(0, (size - 1) // TILE_WIDTH * TILE_WIDTH - TILE_WIDTH)
    _check_leaves(storage, reader, start, size)
    rewritten = _check_files(storage, size, start, repair, deep)
    if storage.read_file("checkpoint") != cp.note:
        if not repair:
            raise _refuse("the checkpoint file is not the last stored checkpoint")
        storage.write_files({"checkpoint": cp.note})
        rewritten.append("checkpoint")
    return LogCheck(size, seen, tuple(rewritten))


def _check_history(storage: LogStorage, verifier: NoteVerifier, origin: str | None,
                   reader: StoredHashReader) -> int:
    """Every earlier checkpoint must verify and be a prefix of today's tree; how many."""
    seen = 0
    before: int | None = None
    while True:
        page = storage.checkpoints(500, before)
        if not page:
            return seen
        for old in page:
            seen += 1
            problem = checkpoint_row_problem(old, verifier, origin)
            if problem is not None:
                raise _refuse(f"the stored checkpoint at size {old.size} {problem}")
            if old.size and tree_root(old.size, reader) != old.root_hash:
                raise _refuse(f"the stored checkpoint at size {old.size} is not a prefix of the tree")
        before = page[-1].size


def _check_leaves(storage: LogStorage, reader: StoredHashReader, start: int, size: int) -> None:
    """Entries `start`..`size` hash to their stored leaf hashes."""
    for lo in range(start, size, 1000):
        hi = min(size, lo + 1000)
        level0 = reader.read_hashes([(0, i) for i in range(lo, hi)])
        for ent, stored in zip(storage.get_entries(lo, hi), level0, strict=True):
            if leaf_hash(ent.data) != ent.leaf_hash or ent.leaf_hash != stored:
                raise _refuse(f"entry {ent.index} does not hash to its stored leaf hash")


def checkpoint_row_problem(
    row: StoredCheckpoint, verifier: NoteVerifier, origin: str | None
) -> str | None:
    """Why a stored checkpoint row is not a signed note for its own size and root, or None."""
    try:
        signed = open_checkpoint(row.note, verifier, origin)
    except LedgerError as e:
        return f"does not verify with the log key: {e}"
    if signed.checkpoint.size != row.size or signed.checkpoint.root_hash != row.root_hash:
        return "has a note for another size or root than its row"
    return None


def tile_file_bytes(storage: LogStorage, ref: TileRef) -> bytes:
    """The bytes the tile file for ``ref`` must hold: derived from the stored hashes."""
    return storage.read_tile(ref.level, ref.index)[: ref.width * HASH_SIZE]


def bundle_file_bytes(storage: LogStorage, ref: TileRef) -> bytes:
    """The bytes the entry bundle file for ``ref`` must hold: derived from the stored entries."""
    first = ref.index * TILE_WIDTH
    return encode_bundle([e.data for e in storage.get_entries(first, first + ref.width)])


def _check_files(storage: LogStorage, size: int, tail: int, repair: bool, deep: bool) -> list[str]:
    missing: dict[str, bytes] = {}
    for ref in tiles_for_size(size):
        path = tile_path(ref.level, ref.index, ref.width)
        want = tile_file_bytes(storage, ref)
        have = storage.read_file(path)
        if have is None or len(have) != len(want):
            missing[path] = want
        elif have != want:
            raise _refuse(f"tile file {path} differs from the stored hashes")
        if ref.width == TILE_WIDTH and (deep or (ref.index + 1) << (8 * (ref.level + 1)) > tail):
            nodes = storage.read_tile_nodes(ref.level, ref.index)
            if nodes and nodes != tile_nodes(want):
                raise _refuse(f"the stored interior hashes of {path} do not match the tile")
    for ref in entry_bundles_for_size(size):
        path = entries_path(ref.index, ref.width)
        first = ref.index * TILE_WIDTH
        have = storage.read_file(path)
        if have is not None and not deep and first + ref.width <= tail:
            continue
        want = bundle_file_bytes(storage, ref)
        if have is None or len(have) != len(want):
            missing[path] = want
        elif have != want:
            raise _refuse(f"entry bundle file {path} differs from the stored entries")
    if missing and not repair:
        raise _refuse(f"{len(missing)} tile files are missing or short, e.g. {next(iter(missing))}")
    if missing:
        storage.write_files(missing)
    return sorted(missing)
