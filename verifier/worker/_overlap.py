"""How many pairs of calls of a two-thread command overlapped in time.

The worker writes each call's start and end (CLOCK_MONOTONIC ns) into the shared
arena. Those words come from the kernel's process, so they are read only in the
direction that cannot help a kernel: a call counts only when its interval is
credible (inside the parent's own window around the command, not ending before it
starts, after its thread's previous call), and a pair (one call of each thread)
counts only when both are credible and their intervals intersect. Zeroed, garbled
or reordered words count as no overlap, and a check that sees too few overlapping
pairs is not established (it never passes). Claiming an overlap that did not
happen needs the kernel to rewrite the worker, which buys nothing a kernel that
takes a lock only inside the harness does not already have.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["TIME_WORDS", "overlapping_pairs"]

TIME_WORDS = 4
"""int64 words per pair of calls (one per thread): each call's start and end."""


def _credible(spans: NDArray[np.int64], lo: int, hi: int) -> NDArray[np.bool_]:
    """Per call: inside [lo, hi], not ending before it starts, not before the previous call's end."""
    starts, ends = spans[:, 0], spans[:, 1]
    ok = (starts >= lo) & (ends >= starts) & (ends <= hi)
    ok[1:] &= starts[1:] >= ends[:-1]
    return ok


def overlapping_pairs(times: NDArray[np.int64], calls: int, window: tuple[int, int]) -> int:
    """How many (call of the first thread, call of the second) pairs provably ran at once.

    `times` holds `TIME_WORDS * calls` words: the first thread's (start, end) pairs, then
    the second's, `calls` calls each; `window` is the parent's (before sending, after the
    answer) on the same clock."""
    if calls < 0 or times.shape != (TIME_WORDS * calls,):
        raise ValueError(f"expected {TIME_WORDS * calls} timing words, got shape {times.shape}")
    if calls == 0:
        return 0
    first = times[:2 * calls].astype(np.int64).reshape(calls, 2)
    second = times[2 * calls:].astype(np.int64).reshape(calls, 2)
    lo, hi = window
    a = first[_credible(first, lo, hi)]
    b = second[_credible(second, lo, hi)]
    meet = np.maximum(a[:, None, 0], b[None, :, 0]) < np.minimum(a[:, None, 1], b[None, :, 1])
    return int(np.count_nonzero(meet))
