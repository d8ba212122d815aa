"""Compare a kernel's float32 outputs with a float64 reference under a per-element bound.

Pure: arrays in, a `Comparison` out. Special values must match the reference
exactly in kind (NaN where the reference is NaN, the same infinity where the
reference rounds to an infinity); finite elements must be finite and within the
tolerance.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["REMAINDER_BLOCKS", "Comparison", "RemainderDefect", "common_remainder",
           "common_tail", "compare_output", "remainder_blocks", "remainder_defect", "ulp_distance"]


@dataclass(frozen=True)
class Comparison:
    """How far one output is from its reference."""

    elements: int
    bad: int
    nonfinite_mismatches: int
    poisoned: int
    max_abs_err: float
    max_rel_err: float
    max_ulp: int
    max_err_over_tol: float
    tolerance: float
    worst_index: tuple[int, ...] | None
    worst_value: float | None
    worst_expected: float | None
    bad_last_from: int | None = None
    """The smallest last-axis index of a bad element (None: none bad, or a 0-d output): with
    the output's last extent it says whether only a tail of columns is wrong."""
    last_extent: int = 0

    @property
    def ok(self) -> bool:
        return self.bad == 0


def ulp_distance(a: NDArray[np.float32], b: NDArray[np.float32]) -> NDArray[np.int64]:
    """Number of float32 values between `a` and `b` (finite inputs)."""
    ia = a.astype(np.float32).view(np.int32).astype(np.int64)
    ib = b.astype(np.float32).view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    dist: NDArray[np.int64] = np.abs(ia - ib)
    return dist


def _finite_float(x: float) -> float:
    if not np.isfinite(x):
        return float(np.finfo(np.float64).max)
    return float(x)


def _worst_flat(bad_mask: NDArray[np.bool_], kind_bad: NDArray[np.bool_],
                ratio: NDArray[np.float64]) -> int:
    """The flat index of the worst element: among the bad ones, a wrong kind (NaN, Inf)
    first, then the largest error over tolerance; with none bad, the largest ratio."""
    if bad_mask.any():
        score = np.where(kind_bad, np.inf, ratio)
        return int(np.argmax(np.where(bad_mask, score, -1.0)))
    return int(np.argmax(ratio))


def _bad_last_from(bad_mask: NDArray[np.bool_]) -> int:
    """The first index along the last axis where any element is bad."""
    cols = np.nonzero(bad_mask.reshape(-1, bad_mask.shape[-1]).any(axis=0))[0]
    return int(cols.min())


def compare_output(
    out: NDArray[np.float32], ref: NDArray[np.float64], tol: NDArray[np.float64],
    poison: int | None = None,
) -> Comparison:
    """Compare one output buffer; shapes must agree.

    `poison` is the word the outputs were prefilled with (None: not poisoned);
    elements still holding it are counted in `poisoned`.
    """
    if out.shape != ref.shape or ref.shape != tol.shape:
        raise ValueError(f"shape mismatch: out {out.shape}, ref {ref.shape}, tol {tol.shape}")
    n = int(out.size)
    if n == 0:
        return Comparison(0, 0, 0, 0, 0.0, 0.0, 0, 0.0, 0.0, None, None, None)
    out64 = out.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        expected32 = ref.astype(np.float32)
    poisoned = 0 if poison is None else int(np.count_nonzero(out.view(np.uint32) == poison))
    ref_nan = np.isnan(ref)
    ref_inf = np.isinf(expected32) & ~ref_nan
    ref_fin = ~(ref_nan | ref_inf)
    kind_bad = (ref_nan & ~np.isnan(out)) | (ref_inf & (out64 != expected32.astype(np.float64)))
    kind_bad |= ref_fin & ~np.isfinite(out)
    tol_clean = np.where(np.isnan(tol), np.inf, tol)
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.where(ref_fin & np.isfinite(out), np.abs(out64 - ref), 0.0)
        ratio = np.where(tol_clean > 0, err / tol_clean, np.where(err > 0, np.inf, 0.0))
        big = np.abs(ref) >= np.finfo(np.float32).tiny
        rel = np.where(big, err / np.where(big, np.abs(ref), 1.0), 0.0)
    value_bad = ratio > 1.0
    bad_mask = kind_bad | value_bad
    bad = int(np.count_nonzero(bad_mask))
    fin_both = ref_fin & np.isfinite(out)
    ulps = ulp_distance(np.where(fin_both, out, 0).astype(np.float32),
                        np.where(fin_both, expected32, 0).astype(np.float32))
    flat = _worst_flat(bad_mask, kind_bad, ratio)
    worst = tuple(int(i) for i in np.unravel_index(flat, out.shape))
    last_from = _bad_last_from(bad_mask) if bad and out.ndim else None
    return Comparison(
        elements=n,
        bad=bad,
        nonfinite_mismatches=int(np.count_nonzero(kind_bad)),
        poisoned=poisoned,
        max_abs_err=_finite_float(float(np.max(err))),
        max_rel_err=_finite_float(float(np.max(rel))),
        max_ulp=int(np.max(ulps)),
        max_err_over_tol=_finite_float(float(np.max(np.where(np.isfinite(ratio), ratio, 0.0)))),
        tolerance=_finite_float(float(tol_clean.reshape(-1)[flat])),
        worst_index=worst,
        worst_value=float(out.reshape(-1)[flat]),
        worst_expected=float(ref.reshape(-1)[flat]),
        bad_last_from=last_from,
        last_extent=int(out.shape[-1]) if out.ndim else 0,
    )


REMAINDER_BLOCKS = (4, 8, 16, 32, 64)


@dataclass(frozen=True)
class RemainderDefect:
    """Only the last `remainder` of `extent` columns are wrong: `extent % block` is the tail
    after whole blocks of `block`, which the kernel never computes (or never writes)."""

    block: int
    extent: int

    @property
    def remainder(self) -> int:
        return self.extent % self.block

    def describe(self) -> str:
        return (f"only the last {self.remainder} of {self.extent} columns are wrong "
                f"({self.extent} % {self.block} = {self.remainder}): a remainder after whole "
                f"blocks (of {self.block} or a multiple of it) that is never computed or written")


def remainder_blocks(first_bad: int | None, extent: int) -> frozenset[int]:
    """The blocks whose tail (`extent % block` last columns) holds every bad column.

    Empty when nothing is bad, the extent is a multiple of every block tried, or the bad
    columns reach into the whole blocks."""
    if first_bad is None or extent <= 0:
        return frozenset()
    return frozenset(b for b in REMAINDER_BLOCKS
                     if extent % b and extent - extent % b > 0 and first_bad >= extent - extent % b)


def remainder_defect(first_bad: int | None, extent: int) -> RemainderDefect | None:
    """The smallest block of `remainder_blocks`, as a defect (None when there is none)."""
    blocks = remainder_blocks(first_bad, extent)
    return RemainderDefect(min(blocks), extent) if blocks else None


def common_tail(tails: Iterable[tuple[int | None, int]]) -> RemainderDefect | None:
    """One block whose tail explains every tail-shaped mismatch among (first bad column,
    extent) pairs.

    Each pair whose wrong columns are a tail names the blocks that explain it; the
    smallest block common to all of them is the diagnosis (shown on the first such pair).
    None when no mismatch is tail-shaped or no block explains them all."""
    common: frozenset[int] | None = None
    extent = 0
    for first_bad, size in tails:
        blocks = remainder_blocks(first_bad, size)
        if not blocks:
            continue
        common = blocks if common is None else common & blocks
        extent = extent or size
    if not common:
        return None
    return RemainderDefect(min(common), extent)


def common_remainder(comps: Iterable[Comparison]) -> RemainderDefect | None:
    """`common_tail` of comparisons' bad columns."""
    return common_tail((c.bad_last_from, c.last_extent) for c in comps)
