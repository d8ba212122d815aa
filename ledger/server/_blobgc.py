"""Blob collection: blobs that no logged entry references are deleted after a grace period.

Anyone with write access can upload blobs; only those a logged entry refers to
(a subject's source archive, or a `{sha256, size, media_type}` reference in a
predicate, such as a benchmark's raw samples) are worth keeping. Each blob is
examined once, when it becomes older than the grace period: kept if referenced
by then, else deleted. The references are gathered incrementally from the log's
entries (each read once per process), so a pass costs the new entries and the
blobs that just came of age.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from attest import AttestError
from attest.entry import decode_entry
from attest.statement import parse_statement_payload, referenced_blobs
from ledger.storage import LogStorage

PAGE = 500
_log = logging.getLogger("ktl.blobs")


@dataclass(frozen=True)
class CollectionReport:
    """One collection pass: blobs examined, kept (referenced) and deleted."""

    examined: int
    kept: int
    deleted: int
    entries_scanned: int


class BlobCollector:
    """Deletes blobs older than `grace_seconds` that no logged entry references."""

    def __init__(self, storage: LogStorage, grace_seconds: float,
                 clock: Callable[[], float] = time.time) -> None:
        if grace_seconds <= 0:
            raise ValueError("the blob grace period must be positive")
        self.storage = storage
        self.grace_seconds = grace_seconds
        self.clock = clock
        self._refs: set[str] = set()
        self._scanned = 0
        self._position: tuple[float, str] | None = None
        self._lock = threading.Lock()

    def _scan_entries(self) -> int:
        """Add the blob references of entries not yet read; return how many were read."""
        end = self.storage.entry_count()
        start = self._scanned
        while self._scanned < end:
            stop = min(end, self._scanned + PAGE)
            for e in self.storage.get_entries(self._scanned, stop):
                try:
                    stmt = parse_statement_payload(decode_entry(e.data).envelope.payload)
                except AttestError:  # admitted entries always parse; keep their subjects
                    self._refs.update(d for _, d in e.subjects)
                    continue
                self._refs.update(referenced_blobs(stmt))
            self._scanned = stop
        return self._scanned - start

    def collect(self) -> CollectionReport:
        """One pass: examine every blob that came of age since the last pass."""
        with self._lock:
            scanned = self._scan_entries()
            cutoff = self.clock() - self.grace_seconds
            examined = kept = deleted = 0
            while True:
                page = self.storage.blobs_before(cutoff, self._position, PAGE)
                if not page:
                    break
                for created, digest in page:
                    examined += 1
                    if digest in self._refs:
                        kept += 1
                    elif self.storage.delete_blob(digest):
                        deleted += 1
                    self._position = (created, digest)
            return CollectionReport(examined, kept, deleted, scanned)


class CollectorThread:
    """Runs `collector.collect()` every `interval` seconds until `stop()`."""

    def __init__(self, collector: BlobCollector, interval: float) -> None:
        self.collector = collector
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ktl-blob-gc", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                report = self.collector.collect()
            except Exception as exc:  # keep collecting on the next pass; say what failed
                _log.error("blob collection failed: %s", exc)
                continue
            if report.deleted:
                _log.warning("deleted %d unreferenced blob(s) older than %.0f s",
                             report.deleted, self.collector.grace_seconds)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
