"""An in-memory log behind the same `LogAPI` interface as `client.LogClient`, for client tests.

It sequences entries immediately, signs a checkpoint per append with a real
note signer and serves real RFC 9162 proofs from `ledger.tlog.merkle`, so the client
code under test verifies exactly what it would verify against a server.
Tampering hooks (`lie_*`) let tests make it misbehave.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from attest.entry import decode_entry, verify_entry
from attest.keys import generate_private_key
from client.errors import ServerError
from client.models import EntryRecord, LogInfo, SearchHit, SearchPage, SubmitResult
from client.session import Session
from client.state import TrustedState
from client.trust import KeyChoice, load_verifier
from ledger.tlog.checkpoint import Checkpoint, sign_checkpoint
from ledger.tlog.merkle import (
    MemoryHashStore,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    tree_root,
)
from ledger.tlog.note import NoteSigner
from ledger.tlog.tiles import encode_bundle, parse_tile_path, tile_bytes


class MemoryLog:
    def __init__(self, origin: str = "test.example/log", signer: NoteSigner | None = None) -> None:
        self.origin = origin
        self.signer = signer or NoteSigner(origin, generate_private_key())
        self.store = MemoryHashStore()
        self.entries: list[bytes] = []
        self.blobs: dict[str, bytes] = {}
        self.lie_checkpoint: bytes | None = None
        self.lie_grow_after_proof = False
        self.tamper_tile: Callable[[str, bytes], bytes] | None = None

    @property
    def verifier_key(self) -> str:
        return self.signer.verifier_key_string()

    def fork(self) -> MemoryLog:
        """A copy with the same key and history; appending to each makes them diverge."""
        twin = MemoryLog(self.origin, self.signer)
        for e in self.entries:
            twin._append(e)
        twin.blobs = dict(self.blobs)
        return twin

    def _append(self, data: bytes) -> int:
        self.entries.append(data)
        return self.store.append(leaf_hash(data))

    def note_at(self, size: int) -> bytes:
        root = tree_root(size, self.store)
        return sign_checkpoint(Checkpoint(self.origin, size, root), self.signer)

    # -- LogAPI ------------------------------------------------------------------------

    def info(self) -> LogInfo:
        return LogInfo(self.origin, self.verifier_key, len(self.entries), 65535, 1 << 24, 100,
                       self.checkpoint())

    def checkpoint(self) -> bytes:
        return self.lie_checkpoint or self.note_at(len(self.entries))

    def tile(self, path: str) -> bytes:
        ref = parse_tile_path(path)
        size = len(self.entries)
        if ref.end > size:
            raise ServerError(f"{path} is beyond the tree (size {size})", 404, "tile_not_found")
        if ref.entries:
            data = encode_bundle(self.entries[ref.start : ref.end])
        else:
            data = tile_bytes(ref, self.store)
        return self.tamper_tile(path, data) if self.tamper_tile else data

    def submit(self, entry_bytes: bytes) -> SubmitResult:
        verify_entry(decode_entry(entry_bytes))
        dup = entry_bytes in self.entries
        index = self.entries.index(entry_bytes) if dup else self._append(entry_bytes)
        size = len(self.entries)
        proof = tuple(inclusion_proof(index, size, self.store))
        if self.lie_grow_after_proof:  # the proof is for `size`, the checkpoint for size + 1
            self._append(b"late-%d" % size)
            size += 1
        return SubmitResult(index, leaf_hash(entry_bytes), size, proof, self.checkpoint(), dup)

    def entry(self, index: int) -> EntryRecord:
        if index >= len(self.entries):
            raise ServerError(f"no entry {index}", 404, "not_found")
        size = len(self.entries)
        data = self.entries[index]
        return EntryRecord(index, leaf_hash(data), data, size,
                           tuple(inclusion_proof(index, size, self.store)), self.checkpoint())

    def inclusion_proof(self, index: int, tree_size: int) -> tuple[bytes, ...]:
        return tuple(inclusion_proof(index, tree_size, self.store))

    def consistency_proof(self, old_size: int, new_size: int) -> tuple[bytes, ...]:
        return tuple(consistency_proof(old_size, new_size, self.store))

    def search(self, *, digest: str | None = None, name: str | None = None,
               keyid: str | None = None, predicate_type: str | None = None,
               cursor: int | None = None, limit: int | None = None) -> SearchPage:
        hits: list[SearchHit] = []
        for i, data in enumerate(self.entries):
            if i < (cursor or 0):
                continue
            v = verify_entry(decode_entry(data))
            s = v.statement
            row: dict[str, Any] = {"digest": s.subject_sha256, "name": s.subject_name,
                                   "predicate_type": s.predicate_type}
            digests = {sub.sha256 for sub in s.subjects}  # like the server: any subject
            names = {sub.name for sub in s.subjects}
            if (digest and digest not in digests) or (name and name not in names) or (
                    predicate_type and row["predicate_type"] != predicate_type) or (
                    keyid and keyid not in v.signer_keyids):
                continue
            hits.append(SearchHit(i, leaf_hash(data), s.subject_name, s.subject_sha256,
                                  s.predicate_type, v.signer_keyids))
        n = limit or 50
        return SearchPage(tuple(hits[:n]), hits[n].index if len(hits) > n else None)

    def put_blob(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        self.blobs[digest] = data
        return digest

    def get_blob(self, sha256_hex: str) -> bytes:
        if sha256_hex not in self.blobs:
            raise ServerError(f"no blob {sha256_hex}", 404, "not_found")
        return self.blobs[sha256_hex]


class IndexedMemoryLog(MemoryLog):
    """The in-memory log whose checkpoints commit to the verifiable index (docs/vindex.md)
    and which answers index lookups with proofs; `lie_skip` leaves those entries out of the
    committed index (a log whose commitment disagrees with its entries)."""

    def __init__(self, origin: str = "test.example/log", signer: NoteSigner | None = None) -> None:
        super().__init__(origin, signer)
        self.lie_skip: set[int] = set()

    def _index(self, size: int) -> Any:
        from ledger.vindex import VerifiableIndex

        index = VerifiableIndex()
        index.extend(0, [b"{}" if i in self.lie_skip else e
                         for i, e in enumerate(self.entries[:size])])
        return index

    def note_at(self, size: int) -> bytes:
        from ledger.vindex import commitment_line

        root = tree_root(size, self.store)
        return sign_checkpoint(Checkpoint(self.origin, size, root,
                                          (commitment_line(self._index(size).root),)),
                               self.signer)

    def index_lookup(self, key: str, *, after: int | None = None, limit: int | None = None
                     ) -> Any:
        from ledger.vindex import IndexKey, ListPage

        size = len(self.entries)
        answer = self._index(size).lookup(IndexKey.parse(key))
        note = self.note_at(size).decode()
        if limit is None:
            return {"key": key, "size": size, "indices": answer.indices,
                    "proof": answer.proof.to_json(), "checkpoint": note}
        rest = [i for i in answer.indices if after is None or i > after]
        return ListPage(key, size, after, rest[:limit], len(rest) > limit, answer.proof,
                        note).to_json()


def session_of(log: Any, trusted: TrustedState, key_string: str | None = None) -> Session:
    """A session with `log` (a MemoryLog or any LogAPI) under `key_string` (default: the log's
    own key), built without asking the log anything: a lying log lies only where tested."""
    key = key_string or log.verifier_key
    return Session(log, LogInfo(log.origin, key, 0, 65535, 1 << 24, 100, None), log.origin,
                   load_verifier(key), KeyChoice(key, "given"), trusted, "http://memory.test")


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A local HTTP server answering with `handler` (another server, a lying log) in a
    thread; yields its base URL and stops it on exit."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
