"""Read a child's stdout with caps: bytes per line, bytes in total, lines kept.

`CappedReader` reads the pipe in a thread with `poll` deadlines (it never
blocks on a pipe that an escaped process keeps open: `stop()` ends it), splits
lines, stamps each with the parent's clock, and on a line or a total over its cap
records why and calls `on_excess` (the caller kills the run). The parent's memory
for one child's output is therefore at most `total_bytes` plus the per-line
bookkeeping of `max_lines` lines.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable
from typing import Literal

__all__ = ["CappedReader", "Excess"]

Excess = Literal["line", "total"]
POLL_S = 0.05
CHUNK = 64 * 1024


class CappedReader:
    """Collects `(parent time, line)` pairs from `fd` in a daemon thread."""

    def __init__(self, fd: int, line_bytes: int, total_bytes: int, max_lines: int,
                 on_excess: Callable[[], None]) -> None:
        if line_bytes < 1 or total_bytes < 1 or max_lines < 1:
            raise ValueError("output caps must be positive")
        self.lines: list[tuple[float, str]] = []
        self.excess: Excess | None = None
        self.total = 0
        self._fd, self._line_bytes, self._total_bytes = fd, line_bytes, total_bytes
        self._max_lines, self._on_excess = max_lines, on_excess
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop reading (after draining what is ready) and wait for the thread."""
        self._stop.set()
        self._thread.join(timeout)

    def _exceeded(self, why: Excess) -> None:
        self.excess = why
        self._on_excess()

    def _keep(self, raw: bytes, now: float) -> None:
        if len(self.lines) < self._max_lines:
            self.lines.append((now, raw.decode("utf-8", "replace").rstrip("\r")))

    def _run(self) -> None:
        pending = b""
        poller = select.poll()  # not select(): the parent may hold more than 1024 descriptors
        poller.register(self._fd, select.POLLIN | select.POLLHUP)
        while True:
            if not poller.poll(POLL_S * 1000):
                if self._stop.is_set():
                    break
                continue
            try:
                data = os.read(self._fd, CHUNK)
            except OSError:
                break
            if not data:
                break
            now = time.monotonic()
            self.total += len(data)
            if self.total > self._total_bytes:
                self._exceeded("total")
                return
            pending += data
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                if len(raw) > self._line_bytes:
                    self._exceeded("line")
                    return
                self._keep(raw, now)
            if len(pending) > self._line_bytes:
                self._exceeded("line")
                return
        if pending:
            self._keep(pending, time.monotonic())
