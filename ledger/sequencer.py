"""Group commit: queue verified submissions, integrate them in batches, sign checkpoints.

One integration, under ``storage.integration_lock()`` (exactly one integrator owns
the tree at a time, across threads and processes):

1. reload the right edge of the tree if another process extended it;
2. drop duplicates (within the batch and against the stored leaves);
3. append the new leaves, collect the tile rows that changed, sign a checkpoint
   for the new size with the log key (its tree extends the previous one by
   construction, and storage refuses any size not larger than the last);
4. commit entries, tiles and the checkpoint in one durable transaction: a crash
   before the commit leaves nothing (the unpublished signature dies with the
   process), a crash after it leaves a complete tree;
5. write the changed tiles, entry bundles and ``checkpoint`` as files (derived
   data; a start-up check rewrites any that a crash left missing);
6. only then answer the waiting submitters.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from ledger.storage import (
    MAX_RANGE,
    EntryFacts,
    IntegratedBatch,
    LogStorage,
    StoredCheckpoint,
    StoredEntry,
    StoredHashReader,
    TileCache,
    tile_nodes,
)
from ledger.tlog import LedgerError
from ledger.tlog.checkpoint import Checkpoint, sign_checkpoint
from ledger.tlog.merkle import EMPTY_ROOT, HASH_SIZE, CompactRange, leaf_hash, right_edge_coords
from ledger.tlog.note import NoteSigner
from ledger.tlog.tiles import TILE_HEIGHT, TILE_WIDTH, encode_bundle, entries_path, tile_path
from ledger.vindex import EMPTY as EMPTY_INDEX
from ledger.vindex import PreparedIndex, StoredIndex, commitment_line

_FULL = TILE_WIDTH * HASH_SIZE
#: Beyond this many entries behind, an integrator reloads the right edge instead.
_CATCH_UP_MAX = 50_000
_log = logging.getLogger("ledger.sequencer")


class SequencerError(LedgerError):
    """The sequencer could not integrate a submission (it was not logged)."""


class SequencerClosed(SequencerError):
    """The sequencer is shutting down and takes no more submissions."""


class SequencerBusy(SequencerError):
    """Too many submissions are queued already; the submitter should retry shortly."""


class SequencerTimeout(SequencerError):
    """A submission waited too long; it may still be logged by a later batch."""


@dataclass(frozen=True)
class Submission:
    """A verified entry ready to be logged: canonical bytes and its searchable facts."""

    data: bytes
    facts: EntryFacts
    leaf_hash: bytes = field(default=b"")

    def __post_init__(self) -> None:
        if not self.leaf_hash:
            object.__setattr__(self, "leaf_hash", leaf_hash(self.data))


@dataclass(frozen=True)
class Receipt:
    """Where a submission ended up and the checkpoint that covers it."""

    index: int
    leaf_hash: bytes
    duplicate: bool
    checkpoint: StoredCheckpoint


#: ``commit(batch, receipts)``: store a prepared batch (None: all duplicates) durably.
CommitHook = Callable[[IntegratedBatch | None, Sequence[Receipt]], None]


class _Waiter:
    """One submitter waiting for its receipt (in-process sequencer and shared queue alike)."""

    __slots__ = ("error", "event", "receipt", "submission")

    def __init__(self, submission: Submission) -> None:
        self.submission = submission
        self.event = threading.Event()
        self.receipt: Receipt | None = None
        self.error: BaseException | None = None


class _TreeState:
    """This process's copy of the right edge: compact range, partial tiles, partial bundle."""

    def __init__(self, storage: LogStorage, cache: TileCache) -> None:
        cp = storage.latest_checkpoint()
        size = 0 if cp is None else cp.size
        reader = StoredHashReader(storage, size, cache)
        self.range = CompactRange(size, reader.read_hashes(right_edge_coords(size)))
        if cp is not None and self.range.root() != cp.root_hash:
            raise SequencerError(
                f"stored hashes give a root that differs from the checkpoint at size {size}"
            )
        self.partial: dict[int, tuple[int, bytearray]] = {}
        level = 0
        while (size >> (TILE_HEIGHT * level)) > 0:
            n = size >> (TILE_HEIGHT * level)
            tindex, width = divmod(n, TILE_WIDTH)
            data = storage.read_tile(level, tindex)[: width * HASH_SIZE] if width else b""
            self.partial[level] = (tindex, bytearray(data))
            level += 1
        start = size - size % TILE_WIDTH
        self.bundle: tuple[int, list[bytes]] = (
            size // TILE_WIDTH,
            [e.data for e in storage.get_entries(start, size)],
        )

    def add(self, leaf: bytes, full: dict[tuple[int, int], bytes], touched: set[int]) -> None:
        """Append one leaf: extend the partial tiles, moving each that fills up into ``full``."""
        for level, hindex, h in self.range.append(leaf):
            if level % TILE_HEIGHT:
                continue
            tlevel = level // TILE_HEIGHT
            tindex = hindex >> TILE_HEIGHT
            cur = self.partial.get(tlevel)
            if cur is None or cur[0] != tindex:
                cur = (tindex, bytearray())
                self.partial[tlevel] = cur
            cur[1].extend(h)
            if len(cur[1]) == _FULL:
                full[(tlevel, tindex)] = bytes(cur[1])
                self.partial[tlevel] = (tindex + 1, bytearray())
                touched.discard(tlevel)
            else:
                touched.add(tlevel)

    def add_to_bundle(self, data: bytes) -> tuple[int, list[bytes]] | None:
        """Append one entry to the partial bundle; returns the bundle it completes, if any."""
        bindex, bundle = self.bundle
        bundle.append(data)
        if len(bundle) < TILE_WIDTH:
            return None
        self.bundle = (bindex + 1, [])
        return bindex, bundle

    def catch_up(self, storage: LogStorage, latest: StoredCheckpoint) -> bool:
        """Append what other integrators added since this copy was made.

        Reads only the new entries (a full reload reads the whole partial bundle, up to
        255 entries, every time several processes take turns). False when too far behind
        or when the result does not give the stored checkpoint's root: reload instead.
        """
        start = self.range.size
        if not start < latest.size <= start + _CATCH_UP_MAX:
            return False
        for lo in range(start, latest.size, MAX_RANGE):
            got = storage.get_entries(lo, min(latest.size, lo + MAX_RANGE))
            if [e.index for e in got] != list(range(lo, lo + len(got))) or not got:
                return False
            for e in got:
                self.add(e.leaf_hash, {}, set())
                self.add_to_bundle(e.data)
        return self.range.size == latest.size and self.range.root() == latest.root_hash


def _slots(submissions: Sequence[Submission], known: Mapping[bytes, int],
           size: int) -> tuple[list[Submission], list[tuple[int, bool]]]:
    """Duplicates: against the log (`known`: leaf hash to index), then within the batch.
    The new submissions, and each submission's (index, duplicate) in order."""
    placed: dict[bytes, int] = {}
    fresh: list[Submission] = []
    slots: list[tuple[int, bool]] = []
    for s in submissions:
        h = s.leaf_hash
        if h in known:
            slots.append((known[h], True))
        elif h in placed:
            slots.append((placed[h], True))
        else:
            placed[h] = size + len(fresh)
            slots.append((placed[h], False))
            fresh.append(s)
    return fresh, slots


@dataclass(frozen=True)
class Batching:
    """How a `Sequencer` batches: at most `max_batch` submissions a batch, waiting at most
    `max_delay` seconds after the first for more."""

    max_batch: int = 1000
    max_delay: float = 0.005

    def __post_init__(self) -> None:
        if self.max_batch < 1:
            raise SequencerError("max_batch must be at least 1")


class Sequencer:
    """Batches submissions from many threads and integrates them one batch at a time."""

    def __init__(  # noqa: PLR0913 (the log, its key and origin, and four optional parts)
        self,
        storage: LogStorage,
        signer: NoteSigner,
        origin: str,
        *,
        batching: Batching = Batching(),
        cache: TileCache | None = None,
        on_checkpoint: Callable[[StoredCheckpoint], None] | None = None,
        index: StoredIndex | None = None,
    ) -> None:
        """``on_checkpoint`` is called with each checkpoint this sequencer signs, once it is
        durable (the log asks its witnesses to cosign it); it must not block.

        With ``index``, every checkpoint carries the verifiable index's root for its size
        (docs/vindex.md): each batch updates the index before its checkpoint is signed
        and writes the index rows once the batch is durable."""
        self.storage = storage
        self.signer = signer
        self.origin = origin
        self.max_batch = batching.max_batch
        self.max_delay = batching.max_delay
        self.cache = cache if cache is not None else TileCache()
        self._state: _TreeState | None = None
        #: Full reloads of the right edge (the rest are incremental catch-ups).
        self.reloads = 0
        self._queue: list[_Waiter] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._on_checkpoint = on_checkpoint
        self.index = index

    def ensure_checkpoint(self) -> StoredCheckpoint:
        """The latest checkpoint; a new log signs and stores its size-0 checkpoint first.

        As Tessera does: clients can pin the empty log and witnesses start from 0.
        """
        latest = self.storage.latest_checkpoint()
        if latest is not None:  # checkpoints are never removed: no lock needed to see one
            return latest
        with self.storage.integration_lock():
            latest = self.storage.latest_checkpoint()
            if latest is not None:
                return latest
            ext = () if self.index is None else (commitment_line(EMPTY_INDEX),)
            note = sign_checkpoint(Checkpoint(self.origin, 0, EMPTY_ROOT, ext), self.signer)
            cp = StoredCheckpoint(0, EMPTY_ROOT, note, time.time())
            self.storage.commit_empty_checkpoint(cp)
            try:
                self.storage.write_files({"checkpoint": note})
            except OSError as e:
                _log.error("signed the size-0 checkpoint but could not write its file: %s", e)
        if self._on_checkpoint is not None:
            self._on_checkpoint(cp)
        return cp

    # ---- queueing side
    def start(self) -> None:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ktl-integrator", daemon=True)
                self._thread.start()

    def close(self, timeout: float = 30.0) -> None:
        """Stop taking submissions, integrate what is queued, stop the integrator."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def submit(self, submissions: Sequence[Submission], timeout: float = 30.0) -> list[Receipt | BaseException]:
        """Queue submissions and wait until each is integrated (or failed)."""
        waiters = [_Waiter(s) for s in submissions]
        with self._cond:
            if self._closed:
                raise SequencerClosed("the log is shutting down; retry shortly")
            if self._thread is None:
                raise SequencerError("the sequencer is not running")
            self._queue.extend(waiters)
            self._cond.notify_all()
        deadline = time.monotonic() + timeout
        out: list[Receipt | BaseException] = []
        for w in waiters:
            if not w.event.wait(max(0.0, deadline - time.monotonic())):
                out.append(SequencerTimeout("timed out waiting for the batch to be integrated"))
            elif w.receipt is not None:
                out.append(w.receipt)
            else:
                out.append(w.error or SequencerError("integration failed"))
        return out

    def _wait_for_work(self) -> bool:
        """Block until something is queued, then give the batch up to max_delay to fill.

        Returns False once closed and drained.
        """
        with self._cond:
            while not self._queue:
                if self._closed:
                    return False
                self._cond.wait()
            first = time.monotonic()
            while len(self._queue) < self.max_batch and not self._closed:
                left = first + self.max_delay - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return True

    def _take(self) -> list[_Waiter]:
        with self._cond:
            batch = self._queue[: self.max_batch]
            del self._queue[: self.max_batch]
            return batch

    def _run(self) -> None:
        while self._wait_for_work():
            # Take the batch only once the lock is ours: what queues up while another
            # process integrates joins this batch (bigger batches under contention).
            batch: list[_Waiter] = []
            try:
                with self.storage.integration_lock():
                    batch = self._take()
                    receipts = self._integrate_guarded([w.submission for w in batch])
                    # Another process may integrate next (every frontend on SQLite takes
                    # turns) and would recompute what this one held: nothing is held
                    # past the lock, and lookups see this batch before its receipts.
                    self.flush_index()
            except BaseException as e:  # every waiter learns why; the loop goes on
                for w in batch:
                    w.error = e
                    w.event.set()
                continue
            for w, r in zip(batch, receipts, strict=True):
                w.receipt = r
                w.event.set()

    # ---- integrating side
    def integrate(self, submissions: Sequence[Submission]) -> list[Receipt]:
        """Integrate one batch now (the integrator thread, or direct use in tools)."""
        if not submissions:
            return []
        with self.storage.integration_lock():
            receipts = self._integrate_guarded(submissions)
            self.flush_index()
            return receipts

    def flush_index(self) -> None:
        """Write the index rows held in memory (`ledger.vindex.WriteBack`); the caller
        holds the integration lock. A failure is logged: the next batch catches up."""
        if self.index is None:
            return
        try:
            self.index.flush()
        except Exception as e:  # derived data: the published checkpoints already bind it
            _log.error("could not write the index rows held in memory: %s", e)

    def integrate_held(self, submissions: Sequence[Submission], commit: CommitHook) -> list[Receipt]:
        """Integrate one batch; the caller holds the integration lock and commits it.

        ``commit(batch, receipts)`` must store ``batch`` (None when every submission was a
        duplicate) in one durable transaction, together with whatever the caller records
        about the receipts (the shared queue's outcomes); files and the checkpoint hook
        follow only once it returned.
        """
        if not submissions:
            return []
        return self._integrate_guarded(submissions, commit)

    def _integrate_guarded(
        self, submissions: Sequence[Submission], commit: CommitHook | None = None
    ) -> list[Receipt]:
        if not submissions:
            return []
        try:
            return self._integrate_locked(submissions, commit)
        except BaseException:
            self._state = None  # reload the right edge from storage next time
            raise

    def _integrate_locked(
        self, submissions: Sequence[Submission], commit: CommitHook | None
    ) -> list[Receipt]:
        batch, files, receipts, pending = self._prepare(submissions)
        if commit is not None:
            commit(batch, receipts)
        elif batch is not None:
            self.storage.commit_batch(batch)
        if pending is not None:
            self._commit_index(pending)
        if batch is not None:
            self._publish(batch, files)
        return receipts

    def catch_up_index(self) -> int:
        """Bring the index up to the log (a log that had none, or rows a crash lost), under
        the integration lock, logging progress; how many entries were indexed."""
        if self.index is None:
            return 0
        storage, index = self.storage, self.index
        latest = storage.latest_checkpoint()
        if index.size >= (0 if latest is None else latest.size):
            return 0  # up to date: leave the lock to the integrator (another frontend's)
        with storage.integration_lock():
            latest = storage.latest_checkpoint()
            size = 0 if latest is None else latest.size
            if index.size >= size:
                return 0
            _log.info("indexing entries %d to %d of the log (docs/vindex.md)", index.size, size)
            done = 0
            while index.size < size:
                step = min(size, index.size + 10 * MAX_RANGE)
                done += index.catch_up(
                    lambda lo, hi: [e.data for e in storage.get_entries(lo, hi)], step)
                _log.info("indexed %d of %d entries", index.size, size)
            return done

    def _index_batch(self, size: int, fresh: Sequence[Submission]) -> PreparedIndex | None:
        """The index rows this batch adds (None without an index), after catching the
        index up with entries a crash or another integrator left out of it."""
        if self.index is None:
            return None
        storage = self.storage
        self.index.catch_up(lambda lo, hi: [e.data for e in storage.get_entries(lo, hi)], size)
        return self.index.prepare(size, [s.data for s in fresh])

    def _commit_index(self, pending: PreparedIndex) -> None:
        """Write the index rows of a durable batch; on failure the next batch catches up
        (the index is a function of the log, so it gets the same roots)."""
        assert self.index is not None
        try:
            self.index.commit(pending)
        except Exception as e:  # derived data: the published checkpoint already binds it
            _log.error("integrated up to %d but could not write the index rows: %s",
                       pending.size, e)

    def _prepare(
        self, submissions: Sequence[Submission]
    ) -> tuple[IntegratedBatch | None, dict[str, bytes], list[Receipt], PreparedIndex | None]:
        """The batch to commit (None if nothing is new), its derived files, the receipts,
        the index rows it adds."""
        storage = self.storage
        latest = storage.latest_checkpoint()
        size = 0 if latest is None else latest.size
        state = self._state
        # If another process integrated since, read only what it added, where we can.
        if state is None or (
            state.range.size != size and (latest is None or not state.catch_up(storage, latest))
        ):
            self.reloads += 1
            state = self._state = _TreeState(storage, self.cache)
        known = storage.find_leaves([s.leaf_hash for s in submissions])
        fresh, slots = _slots(submissions, known, size)
        if not fresh:
            assert latest is not None
            return None, {}, [Receipt(i, s.leaf_hash, dup, latest)
                              for s, (i, dup) in zip(submissions, slots, strict=True)], None
        now = time.time()
        entries: list[StoredEntry] = []
        tiles: dict[tuple[int, int], bytes] = {}
        partial_touched: set[int] = set()
        rng = state.range
        for offset, s in enumerate(fresh):
            entries.append(
                StoredEntry(size + offset, s.leaf_hash, s.data, s.facts.predicate_type,
                            s.facts.subjects, s.facts.keyids, now)
            )
            state.add(s.leaf_hash, tiles, partial_touched)
        for tlevel in partial_touched:
            tindex, buf = state.partial[tlevel]
            tiles[(tlevel, tindex)] = bytes(buf)
        new_size = rng.size
        root = rng.root()
        pending = self._index_batch(size, fresh)
        ext = () if pending is None else (commitment_line(pending.root),)
        note = sign_checkpoint(Checkpoint(self.origin, new_size, root, ext), self.signer)
        checkpoint = StoredCheckpoint(new_size, root, note, now)
        files = {
            tile_path(tl, ti, len(data) // HASH_SIZE): data for (tl, ti), data in tiles.items()
        }
        self._bundles(state, entries, files)
        nodes = {k: tile_nodes(v) for k, v in tiles.items() if len(v) == _FULL}
        receipts = [Receipt(i, s.leaf_hash, dup, checkpoint)
                    for s, (i, dup) in zip(submissions, slots, strict=True)]
        return IntegratedBatch(tuple(entries), tiles, checkpoint, nodes), files, receipts, pending

    def _publish(self, batch: IntegratedBatch, files: dict[str, bytes]) -> None:
        """After the commit: cache the new tiles, write the derived files, then the hook."""
        checkpoint = batch.checkpoint
        # Durable now: cache the tiles as of the new size, so the receipts' inclusion
        # proofs (built by every waiting request at once) read nothing from storage.
        for (tl, ti), data in batch.tiles.items():
            self.cache.put_tile(tl, ti, data, batch.nodes.get((tl, ti), b""))
        files["checkpoint"] = checkpoint.note
        try:
            self.storage.write_files(files)
        except OSError as e:
            # The batch is durable and its checkpoint published; the files are derived
            # data (the read path falls back to the database, start-up rewrites them).
            _log.error("integrated up to %d but could not write tile files: %s",
                       checkpoint.size, e)
        if self._on_checkpoint is not None:
            self._on_checkpoint(checkpoint)

    @staticmethod
    def _bundles(state: _TreeState, entries: list[StoredEntry], files: dict[str, bytes]) -> None:
        """Add the entry bundles this batch completes, and the new partial one."""
        for e in entries:
            done = state.add_to_bundle(e.data)
            if done is not None:
                files[entries_path(done[0], TILE_WIDTH)] = encode_bundle(done[1])
        bindex, bundle = state.bundle
        if bundle:
            files[entries_path(bindex, len(bundle))] = encode_bundle(bundle)
