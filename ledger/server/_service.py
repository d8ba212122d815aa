"""`LogService`: what the JSON API and the pages share (`current_app.extensions["ktl"]`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ledger.queued import QueuedSequencer, queue_key
from ledger.sequencer import Batching, Receipt, Sequencer, SequencerError, Submission
from ledger.server._blobgc import BlobCollector, CollectorThread
from ledger.server._budget import FILE_NAME as BUDGETS_FILE
from ledger.server._budget import Budget, SharedBuckets
from ledger.server._config import ServerConfig
from ledger.server._errors import ApiError
from ledger.server._served import ServedTiles
from ledger.server._witnessing import Witnessing, WitnessingSettings, load_log_policy
from ledger.storage import (
    LogStorage,
    StoredCheckpoint,
    StoredHashReader,
    TileCache,
    open_queue,
)
from ledger.tlog.merkle import MissingHashError, ProofError, consistency_proof, inclusion_proof
from ledger.tlog.note import NoteSigner
from ledger.vindex import (
    IndexKey,
    StoredAnswer,
    StoredIndex,
    TooManyResults,
    WriteBack,
    open_index,
)


class LogService:
    """One log as seen by a server process: storage, key, sequencer, proofs, limits."""

    def __init__(self, storage: LogStorage, signer: NoteSigner, config: ServerConfig) -> None:
        self.storage = storage
        self.signer = signer
        self.config = config
        self.origin = signer.name
        self.verifier_key = signer.verifier_key_string()
        self.max_entry_bytes = config.max_entry_bytes
        self.max_blob_bytes = config.max_blob_bytes
        self.max_batch = config.max_batch
        self.cache = TileCache(1024)
        self.served = ServedTiles(signer.verifier(), self.origin)
        self.budgets = SharedBuckets(
            None if config.data_dir is None else Path(config.data_dir) / BUDGETS_FILE)
        self.entry_budget = Budget("entries", config.rate_per_second, config.rate_burst)
        self.byte_budget = Budget("bytes", config.bytes_per_second, config.bytes_burst)
        self.blob_budget = Budget("blob_bytes", config.blob_bytes_per_hour / 3600.0,
                                  float(config.blob_bytes_per_hour))
        self.blob_collector = BlobCollector(storage, config.blob_grace_seconds)
        self._gc = CollectorThread(self.blob_collector, config.blob_gc_interval)
        self.witnessing: Witnessing | None = None
        if config.witness_policy:
            self.witnessing = Witnessing(
                storage, load_log_policy(config.witness_policy), signer.verifier(), self.cache,
                WitnessingSettings(request_timeout=config.witness_request_timeout,
                                   round_timeout=config.witness_request_timeout))
        self.sequencer = Sequencer(
            storage, signer, self.origin,
            batching=Batching(config.batch_size, config.batch_delay_ms / 1000.0), cache=self.cache,
            on_checkpoint=None if self.witnessing is None else self.witnessing.offer,
            index=open_index(storage, WriteBack()),
        )
        #: The verifiable index the sequencer keeps with the log (docs/vindex.md).
        self.index: StoredIndex = self.sequencer.index  # type: ignore[assignment]
        queue = open_queue(storage)
        #: In process on SQLite/memory; on PostgreSQL through the shared queue, whichever
        #: frontend integrates (`ledger.queued`).
        self.integrator: Sequencer | QueuedSequencer = self.sequencer
        if queue is not None:
            self.integrator = QueuedSequencer(self.sequencer, queue, queue_key(signer))
        latest = self.integrator.ensure_checkpoint()
        self.sequencer.catch_up_index()  # an existing log's entries, before any new batch
        if self.witnessing is not None:
            self.witnessing.offer(latest)  # a checkpoint left unwitnessed before a restart
            self.witnessing.start()
        self.integrator.start()
        self._gc.start()

    def close(self) -> None:
        """Integrate what is queued, then release the storage."""
        self._gc.stop()
        self.integrator.close()
        if self.witnessing is not None:
            self.witnessing.close()
        self.storage.close()
        self.budgets.close()

    # ---- reads
    def latest_checkpoint(self) -> StoredCheckpoint | None:
        """The published checkpoint: with a witness policy, the newest that met its quorum."""
        if self.witnessing is not None:
            return self.storage.latest_cosigned()
        return self.storage.latest_checkpoint()

    def tree_size(self) -> int:
        cp = self.latest_checkpoint()
        return 0 if cp is None else cp.size

    def reader(self, size: int) -> StoredHashReader:
        return StoredHashReader(self.storage, size, self.cache)

    def _check_size(self, size: int, what: str) -> int:
        current = self.tree_size()
        if size > current:
            raise ApiError(
                404, "tree_size_too_large",
                f"{what} {size} is larger than the log's current size {current}: no tree of "
                "that size exists (yet)",
            )
        return current

    def inclusion_proof(self, index: int, tree_size: int) -> list[bytes]:
        self._check_size(tree_size, "tree_size")
        if not 0 <= index < tree_size:
            raise ApiError(422, "index_out_of_range", f"index {index} is not below tree_size {tree_size}")
        try:
            return inclusion_proof(index, tree_size, self.reader(tree_size))
        except (ProofError, MissingHashError) as e:
            raise ApiError(500, "internal_error", f"cannot build the proof: {e}") from None

    def receipt_proof(self, receipt: Receipt) -> list[bytes]:
        """The inclusion proof of a fresh receipt in the checkpoint it came with."""
        size = receipt.checkpoint.size
        try:
            return inclusion_proof(receipt.index, size, self.reader(size))
        except (ProofError, MissingHashError) as e:
            raise ApiError(500, "internal_error", f"cannot build the proof: {e}") from None

    def consistency_proof(self, old_size: int, new_size: int) -> list[bytes]:
        self._check_size(new_size, "new_size")
        if not 0 <= old_size <= new_size:
            raise ApiError(422, "bad_sizes", f"need 0 <= old_size <= new_size, got {old_size} and {new_size}")
        try:
            return consistency_proof(old_size, new_size, self.reader(new_size))
        except (ProofError, MissingHashError) as e:
            raise ApiError(500, "internal_error", f"cannot build the proof: {e}") from None

    def index_lookup(self, key: IndexKey, page: tuple[int | None, int] | None = None
                     ) -> tuple[StoredAnswer, StoredCheckpoint]:
        """`key`'s list and lookup proof at the index's size, with the checkpoint of that
        size (whose extension line commits to the root); 422 for a list too long.
        `page` (after, limit): only the next `limit` indices above `after`."""
        try:
            answer = (self.index.lookup(key) if page is None
                      else self.index.lookup_page(key, *page))
        except TooManyResults as e:
            raise ApiError(422, "too_many_results", str(e)) from None
        cosigned = self.storage.latest_cosigned() if self.witnessing is not None else None
        if cosigned is not None and cosigned.size == answer.size:
            return answer, cosigned  # with the witnesses' cosignatures, where it has them
        found = self.storage.checkpoints(1, before_size=answer.size + 1)
        if not found or found[0].size != answer.size:
            raise ApiError(503, "index_behind", "the index is being caught up; retry shortly",
                           {"Retry-After": "1"})
        return answer, found[0]

    # ---- writes
    def submit(self, submissions: Sequence[Submission]) -> list[Receipt | BaseException]:
        try:
            results = self.integrator.submit(submissions, self.config.submit_timeout)
        except SequencerError as e:  # busy, closing, or the queue unreachable: none queued
            return [e for _ in submissions]
        if self.witnessing is None:
            return results
        return self._witnessed(results)

    def _witnessed(self, results: list[Receipt | BaseException]
                   ) -> list[Receipt | BaseException]:
        """Each receipt with the published (cosigned) checkpoint covering it, or a 503."""
        need = max((r.index + 1 for r in results if isinstance(r, Receipt)), default=0)
        deadline = time.monotonic() + self.config.witness_wait
        published = self.storage.latest_cosigned()
        while (published is None or published.size < need) and time.monotonic() < deadline:
            time.sleep(0.01)
            published = self.storage.latest_cosigned()
        out: list[Receipt | BaseException] = []
        for r in results:
            if not isinstance(r, Receipt):
                out.append(r)
            elif published is not None and published.size > r.index:
                out.append(replace(r, checkpoint=published))
            else:
                out.append(ApiError(
                    503, "not_witnessed",
                    f"the entry is sequenced at index {r.index} but no checkpoint covering it "
                    f"has met the witness quorum within {self.config.witness_wait:g} s; it is "
                    "stored and will be published when the witnesses cosign. Submitting the "
                    "same entry again is safe and returns its receipt then",
                    {"Retry-After": "5"},
                ))
        return out
