"""Serve only what verifies: tiles and entry bundles checked before they leave the server.

A full tile or entry bundle is served as immutable for a year, so a CDN keeps whatever
bytes it got. Before the first answer for a path, its bytes are folded to the root of
the subtree they span and that root is proven (from the stored hashes) to lead to the
root of the newest checkpoint this log signed, whose signature is verified with the
log's own key. The result is cached per path as the SHA-256 of the bytes that passed,
so a later read costs one hash; bytes that differ from those are checked again. A
partial tile (served for seconds) is compared with the stored hashes. A mismatch is
logged and answered 500 ``corrupt_storage``; the bad bytes are never served.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict

from ledger import LedgerError
from ledger.server._errors import ApiError
from ledger.storage import StoredCheckpoint, StoredHashReader
from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.merkle import (
    HASH_SIZE,
    MissingHashError,
    ProofError,
    leaf_hash,
    root_of,
    subtree_proof,
    verify_subtree,
)
from ledger.tlog.note import Verifier
from ledger.tlog.tiles import TILE_HEIGHT, TILE_WIDTH, TileRef, decode_bundle

log = logging.getLogger("ledger.server")

#: Paths whose verified digest is remembered (one 32-byte digest and a path each).
MAX_VERIFIED = 65_536


class ServedTiles:
    """Checks tile and bundle bytes against the log's signed root before they are served."""

    def __init__(self, verifier: Verifier, origin: str) -> None:
        self._verifier = verifier
        self._origin = origin
        self._ok: OrderedDict[str, bytes] = OrderedDict()
        self._root: tuple[bytes, int, bytes] | None = None  # (note, size, root) verified
        self._lock = threading.Lock()

    def check(self, path: str, ref: TileRef, data: bytes, cp: StoredCheckpoint,
              reader: StoredHashReader) -> None:
        """Return if ``data`` is the log's tile/bundle at ``ref``; else raise a 500."""
        digest = hashlib.sha256(data).digest()
        with self._lock:
            if self._ok.get(path) == digest:
                self._ok.move_to_end(path)
                return
        try:
            self._verify(ref, data, cp, reader)
        except (LedgerError, ValueError) as exc:
            log.error("refusing to serve %s: its stored bytes do not verify: %s", path, exc)
            raise ApiError(500, "corrupt_storage",
                           f"{path}: the stored bytes do not verify against the log's signed "
                           "tree; not served (the operator is told in the server log)") from None
        with self._lock:
            self._ok[path] = digest
            while len(self._ok) > MAX_VERIFIED:
                self._ok.popitem(last=False)

    def _verify(self, ref: TileRef, data: bytes, cp: StoredCheckpoint,
                reader: StoredHashReader) -> None:
        width = ref.width
        if ref.entries:
            hashes = [leaf_hash(e) for e in decode_bundle(data, width)]
            level = 0
        else:
            if len(data) != width * HASH_SIZE:
                raise ProofError(f"a tile of width {width} has {width * HASH_SIZE} bytes, "
                                 f"not {len(data)}")
            hashes = [data[i:i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]
            level = TILE_HEIGHT * ref.level
        if width < TILE_WIDTH:
            # Served for seconds only: the stored hashes are what it must equal.
            stored = reader.read_hashes([(level, ref.index * TILE_WIDTH + i)
                                         for i in range(width)])
            if stored != hashes:
                raise ProofError("the partial tile differs from the stored hashes")
            return
        size, root = self._signed_root(cp)
        top = level + TILE_HEIGHT
        try:
            proof = subtree_proof(top, ref.index, size, reader)
        except MissingHashError as exc:
            raise ProofError(f"stored hashes are missing: {exc}") from None
        verify_subtree(root_of(hashes), top, ref.index, size, proof, root)

    def _signed_root(self, cp: StoredCheckpoint) -> tuple[int, bytes]:
        with self._lock:
            if self._root is not None and self._root[0] == cp.note:
                return self._root[1], self._root[2]
        signed = open_checkpoint(cp.note, self._verifier, self._origin)
        size, root = signed.checkpoint.size, signed.checkpoint.root_hash
        with self._lock:
            self._root = (cp.note, size, root)
        return size, root
