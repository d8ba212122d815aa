"""`LogService`: what the JSON API and the pages share (`current_app.extensions["ktl"]`)."""

from __future__ import annotations

from collections.abc import Sequence

from ledger.merkle import MissingHashError, ProofError, consistency_proof, inclusion_proof
from ledger.note import NoteSigner
from ledger.sequencer import Receipt, Sequencer, Submission
from ledger.server._blobgc import BlobCollector, CollectorThread
from ledger.server._config import ServerConfig
from ledger.server._errors import ApiError
from ledger.server._ratelimit import RateLimiter
from ledger.storage import LogStorage, StoredCheckpoint, StoredHashReader, TileCache


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
        self.limiter = RateLimiter(config.rate_per_second, config.rate_burst)
        self.blob_budget = RateLimiter(config.blob_bytes_per_hour / 3600.0,
                                       float(config.blob_bytes_per_hour))
        self.blob_collector = BlobCollector(storage, config.blob_grace_seconds)
        self._gc = CollectorThread(self.blob_collector, config.blob_gc_interval)
        self.sequencer = Sequencer(
            storage, signer, self.origin, max_batch=config.batch_size,
            max_delay=config.batch_delay_ms / 1000.0, cache=self.cache,
        )
        self.sequencer.start()
        self._gc.start()

    def close(self) -> None:
        """Integrate what is queued, then release the storage."""
        self._gc.stop()
        self.sequencer.close()
        self.storage.close()

    # ---- reads
    def latest_checkpoint(self) -> StoredCheckpoint | None:
        return self.storage.latest_checkpoint()

    def tree_size(self) -> int:
        cp = self.storage.latest_checkpoint()
        return 0 if cp is None else cp.size

    def reader(self, size: int) -> StoredHashReader:
        return StoredHashReader(self.storage, size, self.cache)

    def _check_size(self, size: int, what: str) -> int:
        current = self.tree_size()
        if size > current:
            raise ApiError(
                400, "tree_size_too_large",
                f"{what} {size} is larger than the log's current size {current}",
            )
        return current

    def inclusion_proof(self, index: int, tree_size: int) -> list[bytes]:
        self._check_size(tree_size, "tree_size")
        if not 0 <= index < tree_size:
            raise ApiError(400, "index_out_of_range", f"index {index} is not below tree_size {tree_size}")
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
            raise ApiError(400, "bad_sizes", f"need 0 <= old_size <= new_size, got {old_size} and {new_size}")
        try:
            return consistency_proof(old_size, new_size, self.reader(new_size))
        except (ProofError, MissingHashError) as e:
            raise ApiError(500, "internal_error", f"cannot build the proof: {e}") from None

    # ---- writes
    def submit(self, submissions: Sequence[Submission]) -> list[Receipt | BaseException]:
        return self.sequencer.submit(submissions, self.config.submit_timeout)
