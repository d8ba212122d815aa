"""The physical floor: no call can be faster than its FLOPs at the device's peak compute
or its bytes at the device's peak bandwidth.

The peaks come from a probe on the same machine (`Peaks`, recorded with the result); a
margin (`FLOOR_MARGIN`) leaves room for a probe that reached less than the true peak.
A measured or claimed time below the floor is refused as impossible before any
statistics are taken (a 0.000 ms score is not a fast kernel, it is a broken timer or
skipped work). Where the data of a whole batch fits in L2 and the calls are not
separated by a flush, the bandwidth term is left out (L2 is faster than memory) and the
floor says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attest.predicates import FLOOR_MARGIN
from verifier.device._interface import Peaks

__all__ = ["FLOOR_MARGIN", "Floor", "OpCost", "below_floor", "floor_of"]



@dataclass(frozen=True)
class OpCost:
    """One call's work: FLOPs (None: not known for this op) and bytes read and written."""

    flops: float | None
    nbytes: float

    def __post_init__(self) -> None:
        if self.nbytes < 0 or (self.flops is not None and self.flops < 0):
            raise ValueError(f"an op's cost must not be negative: {self}")


@dataclass(frozen=True)
class Floor:
    ns: float
    why: str


def floor_of(cost: OpCost, peaks: Peaks, *, batch_bytes: float, l2_bytes: int, cold: bool,
             margin: float = FLOOR_MARGIN) -> Floor:
    """The least time one call can take, and what bounds it."""
    terms: list[tuple[float, str]] = []
    if cost.flops is not None:
        terms.append((cost.flops / (peaks.flops * margin) * 1e9,
                      f"{cost.flops:.3g} FLOP at {margin:g}x the probed {peaks.flops / 1e12:.1f} "
                      "TFLOP/s"))
    resident = not cold and batch_bytes <= l2_bytes
    if not resident:
        terms.append((cost.nbytes / (peaks.bytes_per_s * margin) * 1e9,
                      f"{cost.nbytes:.3g} bytes at {margin:g}x the probed "
                      f"{peaks.bytes_per_s / 1e9:.0f} GB/s"))
    if not terms:
        return Floor(0.0, "no floor: the FLOPs are unknown and the batch's data fits in L2")
    ns, why = max(terms)
    if resident:
        why += " (bytes not counted: the batch's data fits in L2)"
    return Floor(ns, why)


def below_floor(per_call_ns: Sequence[float], floor: Floor, what: str) -> str | None:
    """Why the median of per-call times (measured or claimed) is impossible, or None."""
    if not per_call_ns or floor.ns <= 0:
        return None
    median = float(np.median(np.asarray(per_call_ns, dtype=np.float64)))
    if median >= floor.ns:
        return None
    return (f"{what}: {median:.0f} ns per call is below the physical floor of {floor.ns:.0f} ns "
            f"({floor.why}): impossible, refused before any statistics")
