"""Tensors of a torch kernel as the parent sees them: bytes in shared memory, in float64.

Pure: NumPy arrays in, arrays or a `Comparison` out. The parent never imports torch:
a tensor crosses the shared memory as its raw bytes (bfloat16 as its 16-bit pattern),
is drawn here from the distribution `get_inputs` showed, and is judged here in float64.

Tolerances (`TOLERANCES`): an element passes when ``|out - ref| <= atol * s + rtol * |ref|``
(the formula of `torch.testing.assert_close`), where `s` is the root mean square of the
reference output's finite values (1 where they are all zero), so `atol` is relative to
the output's own scale: a softmax's outputs of 1e-3 are held to the same relative
standard as a matmul's of 1e2. The values:

- float32: rtol = atol = 1e-4. `assert_close`'s defaults (1.3e-6, 1e-5) fail honest
  kernels that sum in another order over long reductions; KernelBench's 1e-2 passes a
  kernel that computes in bfloat16 (relative error ~4e-3) and calls it float32.
- float16: rtol = atol = 1e-2 (KernelBench's; ten float16 ulps at 1.0).
- bfloat16: rtol = atol = 1.6e-2 (`assert_close`'s bfloat16 rtol; two bfloat16 ulps).

Integer and bool outputs must be equal. NaN and infinities are never wildcards: where
the reference is NaN the output must be NaN, where it is an infinity the same infinity,
and where it is finite the output must be finite and within tolerance.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from verifier.compare_outputs import Comparison

__all__ = [
    "DISTRIBUTIONS",
    "DTYPE_SLACK",
    "FLOAT_DTYPES",
    "LARGE_WHAT",
    "STORAGE",
    "TOLERANCES",
    "Tolerance",
    "compare_tensor",
    "decode",
    "draw_input",
    "draw_large",
    "draw_spread",
    "dtype_slack",
    "elements_off",
    "encode",
    "held",
    "nbytes_of",
    "special_fill",
]

STORAGE: Mapping[str, Any] = {
    "float32": np.float32, "float16": np.float16, "bfloat16": np.uint16, "float64": np.float64,
    "int64": np.int64, "int32": np.int32, "int16": np.int16, "int8": np.int8, "uint8": np.uint8,
    "bool": np.bool_,
}
"""How each dtype's bytes are held in NumPy (bfloat16: its bit pattern)."""
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
F64 = NDArray[np.float64]


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float

    def to_json(self) -> dict[str, Any]:
        return {"rtol": self.rtol, "atol": self.atol, "atol_scale": "rms of the reference output"}


TOLERANCES: Mapping[str, Tolerance] = {
    "float32": Tolerance(1e-4, 1e-4),
    "float16": Tolerance(1e-2, 1e-2),
    "bfloat16": Tolerance(1.6e-2, 1.6e-2),
    "float64": Tolerance(1e-7, 1e-7),
}


def nbytes_of(shape: tuple[int, ...] | list[int], dtype: str) -> int:
    count = 1
    for d in shape:
        count *= int(d)
    return count * int(np.dtype(STORAGE[dtype]).itemsize)


def decode(raw: NDArray[np.uint8], shape: tuple[int, ...], dtype: str) -> F64:
    """The float64 values of a tensor's bytes (bfloat16 widened exactly)."""
    values = raw.view(STORAGE[dtype]).reshape(shape)
    if dtype == "bfloat16":
        widened = values.astype(np.uint32) << 16
        out: F64 = widened.view(np.float32).astype(np.float64)
        return out
    wide: F64 = values.astype(np.float64)
    return wide


def held(data: bytes, shape: tuple[int, ...], dtype: str) -> F64:
    """A tensor's values as kept between a call and its judging: a read-only view of its bytes
    where NumPy holds the dtype exactly (float32, float16, float64, integers), bfloat16 widened
    to float32 (exact), bool as uint8: every value as `decode` gives it, in the tensor's own
    width, not float64's (a quick check keeps each call's outputs and the reference's until
    its rows are judged). Arithmetic on them widens to float64 (`compare_tensor` does)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if dtype == "bfloat16":
        widened = raw.view(np.uint16).astype(np.uint32) << 16
        return cast(F64, widened.view(np.float32).reshape(shape))
    if dtype == "bool":
        return cast(F64, raw.reshape(shape))
    return cast(F64, raw.view(STORAGE[dtype]).reshape(shape))


def encode(values: F64, dtype: str) -> NDArray[np.uint8]:
    """A tensor's bytes from float64 values, rounded to `dtype` (to nearest, ties to even)."""
    if dtype == "bfloat16":
        bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
        nan = np.isnan(values.astype(np.float32))
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
        rounded = np.where(nan, np.uint16(0x7FC0), rounded)
        return np.ascontiguousarray(rounded).reshape(-1).view(np.uint8)
    with np.errstate(over="ignore", invalid="ignore"):
        cast = values.astype(STORAGE[dtype])
    return np.ascontiguousarray(cast).reshape(-1).view(np.uint8)


def draw_input(desc: Mapping[str, Any], shape: tuple[int, ...], dtype: str,
               rng: np.random.Generator) -> F64:
    """Fresh values shaped `shape`, drawn like the sample `get_inputs` returned (`desc`:
    its min, max, mean, std and whether it held only whole numbers)."""
    lo, hi = float(desc.get("min", -1.0)), float(desc.get("max", 1.0))
    size = int(np.prod(shape, dtype=np.int64))
    if dtype == "bool":
        return rng.integers(0, 2, size=size).astype(np.float64).reshape(shape)
    if dtype not in FLOAT_DTYPES or desc.get("integral"):
        return rng.integers(int(np.floor(lo)), int(np.floor(hi)) + 1, size=size).astype(
            np.float64).reshape(shape)
    std = float(desc.get("std", 1.0)) or 1.0
    mean = float(desc.get("mean", 0.0))
    if lo >= 0.0 and hi <= 1.0:
        values = rng.random(size)
    elif lo >= 0.0:
        values = np.abs(rng.standard_normal(size)) * std + lo
    else:
        values = rng.standard_normal(size) * std + mean
    return values.reshape(shape)


DISTRIBUTIONS = ("wide", "large", "offset", "signs", "tiny")
"""Ways of drawing inputs beyond the example's (`draw_spread`): a wide normal (100x the
example's spread: logits past 88 overflow a float32 exp without the max subtracted), large
finite magnitudes (the dtype's largest value to the 1/4, so products and sums of thousands
stay finite), a large offset (1000x the spread off the mean), both signs (uniform in
[-1, 1) times the spread: a problem drawing `torch.rand` gets negatives), tiny values (the
square root of the dtype's smallest normal: squares stay representable)."""
_RANGE: Mapping[str, tuple[float, float]] = {
    d: (float(np.finfo(t).max), float(np.finfo(t).tiny))
    for d, t in (("float32", np.float32), ("float16", np.float16), ("float64", np.float64),
                 ("bfloat16", np.float32))}
"""Largest and smallest normal value per floating dtype (bfloat16 has float32's range)."""


def draw_spread(desc: Mapping[str, Any], shape: tuple[int, ...], dtype: str, kind: str,
                rng: np.random.Generator) -> F64:
    """Values shaped `shape` from distribution `kind` (one of DISTRIBUTIONS), scaled from the
    example's statistics `desc`; integral and non-floating inputs are drawn as the example."""
    if dtype not in FLOAT_DTYPES or desc.get("integral"):
        return draw_input(desc, shape, dtype, rng)
    if kind not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {kind!r}")
    size = int(np.prod(shape, dtype=np.int64))
    spread = max(float(desc.get("std", 1.0)) or 1.0, abs(float(desc.get("mean", 0.0))), 1e-3)
    largest, smallest = _RANGE[dtype]
    big, small = largest ** 0.25, smallest ** 0.5
    normal = rng.standard_normal(size)
    if kind == "wide":
        values = normal * 100.0 * spread
    elif kind == "large":
        values = normal * big
    elif kind == "offset":
        sign = 1.0 if rng.random() < 0.5 else -1.0
        values = sign * 1000.0 * spread + normal * spread
    elif kind == "signs":
        values = rng.uniform(-1.0, 1.0, size) * spread
    else:
        values = normal * small
    return values.reshape(shape)


LARGE_WHAT = "squares near the dtype's largest value: sums of 64 of them overflow it"


def draw_large(desc: Mapping[str, Any], shape: tuple[int, ...], dtype: str,
               rng: np.random.Generator) -> F64:
    """Values whose squares are representable at `dtype` but whose sums of squares over a row
    of 64 or more are not (a normal draw times the square root of the largest value, over 8):
    a norm or variance computed naively overflows though its result is representable
    (the C path's `correctness.large`); integral and non-floating inputs as the example."""
    if dtype not in FLOAT_DTYPES or desc.get("integral"):
        return draw_input(desc, shape, dtype, rng)
    size = int(np.prod(shape, dtype=np.int64))
    values: F64 = rng.standard_normal(size) * (_RANGE[dtype][0] ** 0.5 / 8.0)
    return values.reshape(shape)


def special_fill(values: F64, rng: np.random.Generator) -> F64:
    """`values` with NaN, +-Inf, +-0 and a subnormal planted at random places (a few each)."""
    out = values.copy().reshape(-1)
    if out.size == 0:
        return values
    plants = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40]
    places = rng.choice(out.size, size=min(out.size, 2 * len(plants)), replace=False)
    for i, where in enumerate(places):
        out[where] = plants[i % len(plants)]
    return out.reshape(values.shape)


def _scale(ref: F64) -> float:
    finite = ref[np.isfinite(ref)]
    if finite.size == 0:
        return 1.0
    rms = float(np.sqrt(np.mean(np.square(finite))))
    return rms if rms > 0 else 1.0


def _judged(out: F64, ref: F64, dtype: str, slack: F64 | None = None
            ) -> tuple[Any, Any, Any, Any, Any]:
    """(kind_bad, bound, err, ratio, rel) element by element: the one definition of what
    `compare_tensor` and `elements_off` call out of tolerance. `slack`, where given, is added
    to each element's bound (`dtype_slack`). Outputs and references with no NaN or infinity
    (nearly every call) take `_judged_finite`, the same arithmetic in fewer passes."""
    tol = TOLERANCES.get(dtype, Tolerance(0.0, 0.0))
    if tol.atol > 0 and bool(np.isfinite(ref).all()) and bool(np.isfinite(out).all()):
        finite = _judged_finite(out, ref, tol, slack)
        if finite is not None:
            return finite
    ref_nan, ref_inf = np.isnan(ref), np.isinf(ref)
    ref_fin = ~(ref_nan | ref_inf)
    with np.errstate(invalid="ignore", over="ignore"):
        kind_bad = (ref_nan & ~np.isnan(out)) | (ref_inf & (out != ref)) | (ref_fin & ~np.isfinite(out))
        bound = tol.atol * _scale(ref) + tol.rtol * np.abs(np.where(ref_fin, ref, 0.0))
        if slack is not None:
            bound = bound + slack
        err = np.where(ref_fin & np.isfinite(out), np.abs(out - ref), 0.0)
        ratio = np.where(bound > 0, err / np.where(bound > 0, bound, 1.0),
                         np.where(err > 0, np.inf, 0.0))
        rel = np.where(np.abs(ref) > 0, err / np.where(np.abs(ref) > 0, np.abs(ref), 1.0), 0.0)
    return kind_bad, bound, err, ratio, rel


def _judged_finite(out: F64, ref: F64, tol: Tolerance, slack: F64 | None
                   ) -> tuple[Any, Any, Any, Any, Any] | None:
    """`_judged` where every element of both is finite and atol > 0: no element is bad in
    kind, and every bound is positive (atol times a positive scale), so each quotient is
    taken directly, in place. None where the scale is not a positive finite number (the
    general path then decides, as before). Computed on flat views (a 0-dim output's
    arithmetic would give NumPy scalars, which take no `out=`), shaped back at the end."""
    shape = ref.shape
    out, ref = out.reshape(-1), ref.reshape(-1)
    scale = float(np.sqrt(np.dot(ref, ref) / ref.size))  # `_scale` of an all-finite ref
    if not 0.0 < scale < np.inf:
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        abs_ref = np.abs(ref)
        bound = np.multiply(abs_ref, tol.rtol)
        bound += tol.atol * scale
        if slack is not None:
            bound += slack.reshape(-1)
        err = np.subtract(out, ref)
        np.abs(err, out=err)
        ratio = np.divide(err, bound)
        rel = np.divide(err, abs_ref, out=np.zeros_like(err), where=abs_ref > 0)
    return (np.zeros(shape, dtype=bool), bound.reshape(shape), err.reshape(shape),
            ratio.reshape(shape), rel.reshape(shape))


def elements_off(out: F64, ref: F64, dtype: str) -> NDArray[np.bool_]:
    """Which elements of `out` `compare_tensor` calls out of tolerance of `ref` (all of them
    where the shapes differ)."""
    if out.shape != ref.shape:
        return np.ones(ref.shape, dtype=bool)
    kind_bad, _, _, ratio, _ = _judged(_wide(out), _wide(ref), dtype)
    return np.asarray(kind_bad | (ratio > 1.0), dtype=bool)


DTYPE_SLACK = 4.0
"""How many times the reference module's own error at the kernel's dtype (against its float64
answer) an output may add to its bound (`dtype_slack`): two honest float32 computations of
one long reduction (a norm over 9 million elements) differ by the same order, in another
summation order; where the dtype reference is exact to half an ulp (element-wise ops), the
slack is about 2e-7 of the value, nothing a loose approximation can use."""


def dtype_slack(mine: F64, ref: F64) -> F64 | None:
    """DTYPE_SLACK times how far the reference module's own output at the kernel's dtype
    (`mine`) is from the float64 answer (`ref`), element by element (0 where either is not
    finite); None where the shapes differ."""
    if mine.shape != ref.shape:
        return None
    mine, ref = _wide(mine), _wide(ref)
    with np.errstate(invalid="ignore", over="ignore"):
        both = np.isfinite(mine) & np.isfinite(ref)
        return np.asarray(DTYPE_SLACK * np.where(both, np.abs(mine - ref), 0.0), dtype=np.float64)


def compare_tensor(out: F64, ref: F64, dtype: str, slack: F64 | None = None) -> Comparison:
    """Compare an output with the reference's, both in float64 (see the module docstring);
    `slack` (`dtype_slack`) widens each element's bound."""
    if out.shape != ref.shape:
        raise ValueError(f"shape mismatch: out {out.shape}, ref {ref.shape}")
    n = int(out.size)
    if n == 0:
        return Comparison(0, 0, 0, 0, 0.0, 0.0, 0, 0.0, 0.0, None, None, None)
    out, ref = _wide(out), _wide(ref)
    kind_bad, bound, err, ratio, rel = _judged(out, ref, dtype, slack)
    odd = bool(kind_bad.any())
    bad_mask = (kind_bad | (ratio > 1.0)) if odd else ratio > 1.0
    bad = int(np.count_nonzero(bad_mask))
    if bad:
        score = np.where(kind_bad, np.inf, ratio) if odd else ratio
        flat = int(np.argmax(np.where(bad_mask, score, -1.0)))
    else:
        flat = int(np.argmax(ratio))
    return Comparison(
        elements=n, bad=bad, nonfinite_mismatches=int(np.count_nonzero(kind_bad)) if odd else 0,
        poisoned=0, max_abs_err=float(np.max(err)), max_rel_err=_finite_max(rel),
        max_ulp=0, max_err_over_tol=_finite_max(ratio),
        tolerance=float(bound.reshape(-1)[flat]),
        worst_index=tuple(int(i) for i in np.unravel_index(flat, out.shape)),
        worst_value=float(out.reshape(-1)[flat]), worst_expected=float(ref.reshape(-1)[flat]))


def _wide(values: F64) -> F64:
    """float64 values of an array kept in its own width (`held`); float64 ones as they are."""
    return np.asarray(values, dtype=np.float64)


def _finite_max(values: F64) -> float:
    """The largest finite element (0.0 where there is none), in one pass where all are."""
    top = float(np.max(values))
    if np.isfinite(top):
        return top
    finite = values[np.isfinite(values)]
    return float(np.max(finite)) if finite.size else 0.0
