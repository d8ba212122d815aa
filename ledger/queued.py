"""One log, many frontends: submissions go through a shared queue to one long-lived integrator.

Every frontend process runs a `QueuedSequencer` (the same ``ensure_checkpoint`` /
``start`` / ``submit`` / ``close`` as `ledger.sequencer.Sequencer`) with two threads:

* the **integrator** polls for the integration lock; the process that holds it loops:
  take the oldest queued rows (a bounded batch), check each row's MAC and facts (a row
  that does not verify or decode is refused with an error for its ticket, never
  logged), integrate the rest with the `Sequencer` (dedup, tiles, signed checkpoint,
  witness hook) and, in the transaction that commits them, record every ticket's outcome. It keeps the lock until
  its frontend stops, its session dies, or a start-up check or tool waits for the lock.
* the **collector** waits for the integrator's notification (or a bounded poll) and
  answers this process's waiting submitters from their outcomes, whoever integrated.

If the integrator's process dies, its session ends, the lock is free and another
frontend's integrator takes it within ``lock_poll`` seconds, reloads the right edge and
goes on with the queue; a submitter whose own frontend died is not answered (its entry
may still be logged; submitting it again answers 200 duplicate).

The queue is storage, not evidence. A frontend queues an entry only after verifying it,
with its facts and an HMAC over both under a key derived from the log key (which every
frontend holds and the database never sees); the integrator logs only rows whose MAC
verifies, so a row written by anyone else with access to the database is refused. The
integrator does not verify signatures a second time: one integrator for every frontend
must not cost what verification costs.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import replace

from ledger.sequencer import (
    Receipt,
    Sequencer,
    SequencerBusy,
    SequencerClosed,
    SequencerError,
    SequencerTimeout,
    Submission,
    _Waiter,
)
from ledger.storage import (
    MAX_TAKE,
    EntryFacts,
    IntegratedBatch,
    Outcome,
    Queued,
    QueueFull,
    QueueRow,
    SharedQueue,
    StorageError,
    StoredCheckpoint,
    StoredHashReader,
)
from ledger.tlog import LedgerError
from ledger.tlog.checkpoint import open_checkpoint
from ledger.tlog.merkle import MissingHashError, inclusion_proof, verify_inclusion
from ledger.tlog.note import NoteSigner

_log = logging.getLogger("ktl.integrator")
_MAC_CONTEXT = b"ktl shared queue row v1\n"


class QueueRowError(SequencerError):
    """A queued row that no frontend of this log verified (its MAC or facts are wrong)."""


def queue_key(signer: NoteSigner) -> bytes:
    """The key that authenticates queued rows, derived from the log's signing key."""
    return hashlib.sha256(b"ktl shared queue key v1\n" + signer.to_key_string().encode()).digest()


def _mac(key: bytes, data: bytes, facts: str) -> bytes:
    h = hmac.new(key, _MAC_CONTEXT, hashlib.sha256)
    h.update(len(data).to_bytes(8, "big"))
    h.update(data)
    h.update(facts.encode("utf-8"))
    return h.digest()


def seal(key: bytes, sub: Submission) -> QueueRow:
    """The queue row of a verified submission."""
    facts = json.dumps(sub.facts.to_json(), separators=(",", ":"))
    return QueueRow(sub.data, facts, _mac(key, sub.data, facts))


def unseal(key: bytes, row: QueueRow) -> Submission:
    """The submission a frontend queued, or `QueueRowError` if no frontend queued it so."""
    if not hmac.compare_digest(row.mac, _mac(key, row.data, row.facts)):
        raise QueueRowError("its MAC does not verify: no frontend of this log queued these "
                            "bytes and facts")
    try:
        facts = EntryFacts.from_json(json.loads(row.facts))
    except (ValueError, RecursionError, StorageError) as e:
        raise QueueRowError(f"its facts do not decode: {e}") from None
    return Submission(row.data, facts)


class QueuedSequencer:
    """The `Sequencer` interface over a `SharedQueue` (see the module doc)."""

    def __init__(
        self,
        sequencer: Sequencer,
        queue: SharedQueue,
        key: bytes,
        *,
        poll: float = 0.2,
        lock_poll: float = 0.5,
        sweep_after: float = 600.0,
    ) -> None:
        if not (0 < poll <= 5 and 0 < lock_poll <= 10 and sweep_after >= 1):
            raise SequencerError("poll must be in (0, 5] s, lock_poll in (0, 10] s, "
                                 "sweep_after at least 1 s")
        self.sequencer = sequencer
        self.queue = queue
        if len(key) < 32:
            raise SequencerError("the queue key must be at least 32 bytes")
        self._key = key
        self._verifier = sequencer.signer.verifier()
        self.poll = poll
        self.lock_poll = lock_poll
        self.sweep_after = sweep_after
        self.max_batch = min(sequencer.max_batch, MAX_TAKE)
        #: Whether this process holds the lock now; batches and rows it settled so far.
        self.is_integrator = False
        self.batches = 0
        self.settled = 0
        #: Rows dropped unanswered because not even their refusal could be stored.
        self.skipped = 0
        self._pending: dict[int, _Waiter] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def ensure_checkpoint(self) -> StoredCheckpoint:
        return self.sequencer.ensure_checkpoint()

    def start(self) -> None:
        with self._lock:
            if self._threads:
                return
            self._threads = [
                threading.Thread(target=self._integrate_loop, name="ktl-integrator", daemon=True),
                threading.Thread(target=self._collect_loop, name="ktl-collector", daemon=True),
            ]
        for t in self._threads:
            t.start()

    def close(self, timeout: float = 30.0) -> None:
        """Take no more submissions, answer the waiting ones (up to ``timeout``), stop."""
        with self._lock:
            self._closed = True
        deadline = time.monotonic() + timeout
        while self._pending and time.monotonic() < deadline and self._threads:
            time.sleep(0.01)
        self._stop.set()
        for t in self._threads:
            t.join(max(1.0, deadline - time.monotonic()))
        self.queue.close()

    # ---- frontends
    def submit(self, submissions: Sequence[Submission], timeout: float = 30.0
               ) -> list[Receipt | BaseException]:
        """Queue submissions for whichever frontend integrates; wait for their outcomes."""
        if not submissions:
            return []
        with self._lock:
            if self._closed:
                raise SequencerClosed("the log is shutting down; retry shortly")
            if not self._threads:
                raise SequencerError("the sequencer is not running")
        try:
            tickets = self.queue.enqueue([seal(self._key, s) for s in submissions])
        except QueueFull as e:
            raise SequencerBusy(str(e)) from None
        except StorageError as e:
            raise SequencerError(f"could not queue the submission: {e}") from None
        waiting = [_Waiter(s) for s in submissions]
        with self._lock:
            self._pending.update(zip(tickets, waiting, strict=True))
        deadline = time.monotonic() + timeout
        out: list[Receipt | BaseException] = []
        for ticket, w in zip(tickets, waiting, strict=True):
            if not w.event.wait(max(0.0, deadline - time.monotonic())):
                with self._lock:
                    self._pending.pop(ticket, None)
                out.append(SequencerTimeout("timed out waiting for the batch to be integrated"))
            elif w.receipt is not None:
                out.append(w.receipt)
            else:
                out.append(w.error or SequencerError("integration failed"))
        return out

    def _collect_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.queue.wait_done(self.poll)
                with self._lock:
                    tickets = list(self._pending)
                self._answer(self.queue.collect(tickets))
            except StorageError as e:
                _log.error("collecting outcomes: %s; retrying", e)
                self._stop.wait(self.poll)

    def _answer(self, outcomes: Sequence[Outcome]) -> None:
        """Answer waiting submitters; an outcome row is a hint, never the answer.

        Anyone who can write to the database can write an outcome row. A submitter gets
        a receipt only once this frontend proved it from the log itself: the checkpoint
        of the outcome's size verifies under the log's key, and the submission's own leaf
        hash at the outcome's index has an inclusion proof to that checkpoint's root.
        """
        checkpoints: dict[int, StoredCheckpoint] = {}
        for o in outcomes:
            with self._lock:
                w = self._pending.pop(o.ticket, None)
            if w is None:
                continue
            if o.index is None:
                w.error = SequencerError(f"the integrator refused the queued entry: {o.error}")
            else:
                try:
                    cp = checkpoints.get(o.size) or self._signed_checkpoint(o.size)
                    checkpoints[o.size] = cp
                    self._prove(w.submission.leaf_hash, o.index, cp)
                except (StorageError, LedgerError) as e:
                    _log.error("ticket %d: its outcome (index %d, size %d) does not verify "
                               "against the log: %s", o.ticket, o.index, o.size, e)
                    w.error = SequencerError(
                        f"the queue says the entry is logged at index {o.index}, but that does "
                        f"not verify against the log ({e}); not answered as logged")
                else:
                    w.receipt = Receipt(o.index, w.submission.leaf_hash, o.duplicate, cp)
            w.event.set()

    def _signed_checkpoint(self, size: int) -> StoredCheckpoint:
        """The stored checkpoint of ``size``, its signature verified (root taken from it)."""
        got = self.sequencer.storage.checkpoints(1, before_size=size + 1)
        if not got or got[0].size != size:
            raise StorageError(f"no stored checkpoint of size {size} for a settled outcome")
        signed = open_checkpoint(got[0].note, self._verifier, self.sequencer.origin)
        if signed.checkpoint.size != size:
            raise StorageError(f"the stored checkpoint of size {size} signs size "
                               f"{signed.checkpoint.size}")
        return replace(got[0], root_hash=signed.checkpoint.root_hash)

    def _prove(self, leaf: bytes, index: int, cp: StoredCheckpoint) -> None:
        reader = StoredHashReader(self.sequencer.storage, cp.size, self.sequencer.cache)
        try:
            proof = inclusion_proof(index, cp.size, reader)
        except MissingHashError as e:
            raise StorageError(f"stored hashes are missing: {e}") from None
        verify_inclusion(leaf, index, cp.size, proof, cp.root_hash)

    # ---- the integrator
    def _integrate_loop(self) -> None:
        while not self._stop.is_set():
            try:
                with self.queue.hold() as held:
                    if held:
                        self.is_integrator = True
                        _log.warning("frontend pid %d is now the log's integrator", os.getpid())
                        self._lead()
            except StorageError as e:
                _log.error("integrator: %s; retrying in %g s", e, self.lock_poll)
            except Exception:  # a bug must not silently stop this process integrating
                _log.exception("integrator failed; retrying in %g s", self.lock_poll)
            finally:
                if self.is_integrator:
                    self.is_integrator = False
                    _log.warning("frontend pid %d is no longer the log's integrator", os.getpid())
            self._stop.wait(self.lock_poll)

    def _lead(self) -> None:
        """Settle the queue until stopped, or until a start-up check or tool needs the lock
        (the index rows held in memory written first: `ledger.vindex.WriteBack`)."""
        try:
            self._settle_queue()
        finally:
            self.sequencer.flush_index()

    def _settle_queue(self) -> None:
        checked = swept = 0.0
        while not self._stop.is_set():
            rows = self.queue.take(self.max_batch)
            if rows:
                self._settle_or_split(rows)
            if len(rows) < self.max_batch:  # the queue ran empty: write what is held, so
                self.sequencer.flush_index()  # that a lookup finds what has an outcome
            now = time.monotonic()
            if now - checked >= 1.0:
                checked = now
                if now - swept >= min(60.0, self.sweep_after):
                    swept = now
                    self.queue.sweep(time.time() - self.sweep_after)
                if self.queue.lock_waiters():
                    _log.warning("handing the integration lock to a waiting check or tool")
                    return
            if not rows:
                self.queue.wait_queued(self.poll)

    def _settle_or_split(self, rows: Sequence[Queued]) -> None:
        """Settle a batch; if storing it fails, one row at a time, refusing a row that
        fails alone (one unstorable row must not stall the queue). If the database is
        gone, recording the refusal fails too, and the lock is given up."""
        try:
            self._settle(rows)
            return
        except StorageError as e:
            _log.error("integrating %d queued rows failed: %s; trying one at a time", len(rows), e)
        for q in rows:
            try:
                self._settle([q])
            except StorageError as e:
                _log.error("refused queued ticket %d: %s", q.ticket, e)
                try:
                    self.queue.settle(None, [Outcome(q.ticket, None, False, 0,
                                                     f"the log could not store it: {e}")])
                except StorageError as e2:
                    # Not even its refusal can be stored: skip the row (reported here and
                    # in `skipped`) rather than take it again forever. If the database is
                    # gone, this fails too and the lock is given up.
                    _log.error("could not record the refusal of queued ticket %d (%s); "
                               "dropping it from the queue unanswered", q.ticket, e2)
                    self.queue.discard([q.ticket])
                    self.skipped += 1

    def _settle(self, rows: Sequence[Queued]) -> None:
        """Integrate one batch of queued rows and record every ticket's outcome with it."""
        subs: list[Submission] = []
        tickets: list[int] = []
        refused: list[Outcome] = []
        for q in rows:
            try:
                subs.append(unseal(self._key, q.row))
                tickets.append(q.ticket)
            except QueueRowError as e:  # the queue is storage, not evidence
                refused.append(Outcome(q.ticket, None, False, 0, str(e)))
                _log.error("refused queued ticket %d: %s", q.ticket, e)

        def commit(batch: IntegratedBatch | None, receipts: Sequence[Receipt]) -> None:
            done = [Outcome(t, r.index, r.duplicate, r.checkpoint.size)
                    for t, r in zip(tickets, receipts, strict=True)]
            self.queue.settle(batch, [*done, *refused])

        if subs:
            self.sequencer.integrate_held(subs, commit)
        else:
            self.queue.settle(None, refused)
        self.batches += 1
        self.settled += len(rows)


__all__ = ["QueueRowError", "QueuedSequencer", "queue_key", "seal", "unseal"]
