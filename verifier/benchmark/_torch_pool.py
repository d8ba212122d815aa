"""The input sets of a torch bench run, drawn once and encoded once.

Every timed call gets its own inputs: one of `POOL` sets drawn at `get_inputs`' shapes,
with one element of its first floating tensor changed, so no two calls see the same
contents. The sets are encoded to their dtypes once; a call's inputs are a copy of a set's
bytes with that one element re-encoded. Re-encoding whole float64 sets per call took the
parent ~15 ms a call at 256x4096 (more than the call itself), so a run's time budget was
spent mostly between batches and too few batches fit it to judge the interval.

An integer or bool input is never changed (an index moved by a random step could leave
its range and make the reference fail); the extra set (`unseen`) is never timed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from verifier.tensors import FLOAT_DTYPES, encode, nbytes_of

__all__ = ["POOL", "InputPool"]

POOL = 4
Bytes = NDArray[np.uint8]


class InputPool:
    """`POOL` input sets for timed calls and one `unseen` set; `args` are float64 (shaped) or
    plain values, `encoded` their bytes in the call's dtypes (None for a plain value)."""

    def __init__(self, sets: Sequence[list[Any]], dtypes: Sequence[str]) -> None:
        if len(sets) != POOL + 1:
            raise ValueError(f"an input pool holds {POOL + 1} sets, got {len(sets)}")
        self.sets = [list(s) for s in sets]
        self.dtypes = list(dtypes)
        self.encoded = [[encode(a, d) if isinstance(a, np.ndarray) else None
                         for a, d in zip(s, self.dtypes, strict=True)] for s in self.sets]
        first = [i for i, (a, d) in enumerate(zip(self.sets[0], self.dtypes, strict=True))
                 if isinstance(a, np.ndarray) and a.size and d in FLOAT_DTYPES]
        self.changed: int | None = first[0] if first else None
        """The argument changed per call (None: no floating tensor to change)."""

    @property
    def unseen(self) -> list[Any]:
        return self.sets[POOL]

    def call(self, k: int, rng: np.random.Generator) -> tuple[list[Any], list[Bytes | None]]:
        """Call `k`'s inputs: the set's args (for shapes) and this call's own bytes."""
        index = k % POOL
        args = self.sets[index]
        data = [None if e is None else e.copy() for e in self.encoded[index]]
        i = self.changed
        if i is not None:
            flat = args[i].reshape(-1)
            pos = int(rng.integers(0, flat.size))
            width = nbytes_of((1,), self.dtypes[i])
            value = np.asarray([flat[pos] + float(rng.standard_normal())])
            target = data[i]
            assert target is not None
            target[pos * width:(pos + 1) * width] = encode(value, self.dtypes[i])
        return args, data
