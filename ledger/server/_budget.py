"""Write budgets shared by every worker process of a server: token buckets in one file.

A bucket per (budget, client) lives in a slot of a memory-mapped file in the data
folder (``budgets.bin``); a slot is locked with ``fcntl.lockf`` on its own bytes while
it is read and written, so every worker process on the machine draws from the same
buckets (a per-process bucket let N workers grant N times the budget). Clients are
hashed to slots with a random salt kept in the file, so nobody can choose whose slot
they share; a collision makes two clients share one budget, never exceed it.
"""

from __future__ import annotations

import fcntl
import hashlib
import math
import mmap
import os
import secrets
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SLOTS = 1 << 16
_HEADER = 64  # magic (8), salt (32), padding
_SLOT = struct.Struct("<ddq")  # tokens, last refill (wall clock: shared by processes), used
_MAGIC = b"ktlbud01"
FILE_NAME = "budgets.bin"


@dataclass(frozen=True)
class Budget:
    """``rate`` units a second, at most ``burst`` saved (units: entries or bytes)."""

    name: str
    rate: float
    burst: float

    def __post_init__(self) -> None:
        if not (self.rate > 0 and self.burst >= 1):
            raise ValueError(f"budget {self.name}: rate must be > 0 and burst >= 1")


class SharedBuckets:
    """Token buckets in a file every worker maps (or in memory, for one process)."""

    def __init__(self, path: Path | None) -> None:
        self._thread_lock = threading.Lock()
        size = _HEADER + SLOTS * _SLOT.size
        if path is None:
            self._fd = -1
            self._map = mmap.mmap(-1, size)
            self._map[:8] = _MAGIC
            self._map[8:40] = secrets.token_bytes(32)
        else:
            # A frontend on PostgreSQL given --key elsewhere has no data folder yet.
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            fcntl.lockf(self._fd, fcntl.LOCK_EX, _HEADER, 0)
            try:
                if os.fstat(self._fd).st_size != size:
                    os.ftruncate(self._fd, 0)
                    os.ftruncate(self._fd, size)
                    os.pwrite(self._fd, _MAGIC + secrets.token_bytes(32), 0)
                elif os.pread(self._fd, 8, 0) != _MAGIC:
                    os.pwrite(self._fd, _MAGIC + secrets.token_bytes(32), 0)
            finally:
                fcntl.lockf(self._fd, fcntl.LOCK_UN, _HEADER, 0)
            self._map = mmap.mmap(self._fd, size)
        self._salt = bytes(self._map[8:40])

    def _slot(self, budget: str, client: str) -> int:
        h = hashlib.blake2b(f"{budget}\n{client}".encode(), key=self._salt, digest_size=8)
        return int.from_bytes(h.digest(), "big") % SLOTS

    def take(self, budget: Budget, client: str, cost: float, now: float | None = None) -> float:
        """Take ``cost`` from ``client``'s bucket: 0 if allowed, else seconds to wait
        (``math.inf`` when ``cost`` is more than the bucket ever holds)."""
        if cost > budget.burst:
            return math.inf
        t = time.time() if now is None else now
        off = _HEADER + self._slot(budget.name, client) * _SLOT.size
        with self._thread_lock:
            if self._fd >= 0:
                fcntl.lockf(self._fd, fcntl.LOCK_EX, _SLOT.size, off)
            try:
                raw_tokens, raw_last, used = _SLOT.unpack_from(self._map, off)
                tokens, last = (float(raw_tokens), float(raw_last)) if used else (budget.burst, t)
                tokens = min(budget.burst, tokens + max(0.0, t - last) * budget.rate)
                if tokens >= cost:
                    _SLOT.pack_into(self._map, off, tokens - cost, t, 1)
                    return 0.0
                _SLOT.pack_into(self._map, off, tokens, t, 1)
                return (cost - tokens) / budget.rate
            finally:
                if self._fd >= 0:
                    fcntl.lockf(self._fd, fcntl.LOCK_UN, _SLOT.size, off)

    def close(self) -> None:
        self._map.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
