"""The device's conditions read while a timed batch runs: a bounded sampler.

A `Watch` is entered around each timed batch of a shape (the empty one included) and
left when it answered. `ThreadWatch` reads the device (`Device.sample`) from a thread of
the parent: once as the batch starts, then every `every_s` until it answers, and never
more than `cap` samples over the whole shape (past the cap, the samples between
repetitions and after the shape still cover the later batches). A read that fails stops
the watch and marks it `failed` (the conditions are then partly unreadable). The fake
device scripts its own watch (`verifier.device._fake`), so a test decides what a batch saw.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from verifier.device._interface import Sample

__all__ = ["WATCH_CAP", "ThreadWatch"]

WATCH_CAP = 100_000
"""The most samples any watch may keep (a plan's cap is at most this)."""


class ThreadWatch:
    """A thread reading `read` every `every_s` while entered, `cap` samples at most in all."""

    def __init__(self, read: Callable[[], Sample], every_s: float, cap: int) -> None:
        if not (0 < every_s <= 60 and 1 <= cap <= WATCH_CAP):
            raise ValueError(f"a watch needs 0 < every_s <= 60 and 1..{WATCH_CAP} samples, "
                             f"got {every_s} s and {cap}")
        self.read, self.every_s, self.cap = read, every_s, cap
        self.samples: list[Sample] = []
        self.failed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        while len(self.samples) < self.cap and not self.failed:
            try:
                self.samples.append(self.read())
            except Exception:  # any failed read, NVML's own errors included
                self.failed = True
                return
            if self._stop.wait(self.every_s):
                return

    def __enter__(self) -> ThreadWatch:
        if self._thread is None and len(self.samples) < self.cap and not self.failed:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="ktl-device-watch",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
