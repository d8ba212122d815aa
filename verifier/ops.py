"""The op catalogue: ABI order, float64 references, input generators and tolerances.

Every op works on float32, row-major, contiguous buffers. The C ABI of an entry is
`void f(const float* in..., float* out..., int64_t dim...)` with inputs, outputs
and dimensions in the order listed here (see DESIGN.md "Kernels").

Tolerances are bounds on the rounding error of a correct float32 implementation,
with a safety factor of 2, written in units of the float32 unit roundoff
`U = 2**-24`:

- reductions and matmul are norm-aware: a reduction of `n` terms in any order is
  off by at most `growth(n) * U * sum(|terms|)`, so the bound scales with the reduction
  length and the magnitudes summed, never with the (possibly cancelled) result.
  `growth` is the one place a reduction's length enters a tolerance: the worst case
  `n` (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., 3.1) or,
  past n = 100, the probabilistic `LAMBDA * sqrt(n)` (Higham & Mary, "A New Approach
  to Probabilistic Rounding Error Analysis", SISC 41(5), 2019), which holds for the
  random inputs every check draws. It is what float32 can actually reach at long
  reductions: reduced-precision accumulation (bf16, fp16), which the worst case
  would let pass at K = 2^16, fails there;
- elementwise results (softmax, rmsnorm) are bounded relative to the element
  itself, i.e. a number of ULPs that grows with the row length only through the
  row-wide sum in the denominator (its `growth`);
- an absolute floor of `2**-122` absorbs denormal results, which a kernel may
  flush to zero.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from attest.ops import OP_DIMS, OP_FLOPS

U = float(np.finfo(np.float32).eps) / 2
"""float32 unit roundoff (2^-24): every op's arithmetic is float32."""
LAMBDA = 10.0
"""Higham & Mary's lambda: with rounding errors independent and of mean zero (as for
random inputs), a reduction of n terms exceeds `LAMBDA sqrt(n) U sum(|terms|)` with
probability at most 2 n exp(-LAMBDA^2 / 2), below 1e-15 per element at n = 2^20."""
ABS_FLOOR = 2.0**-122
"""Absolute error allowed everywhere: a few denormal ULPs and flush-to-zero."""
RMSNORM_EPS = 1e-6

F64 = NDArray[np.float64]
F32 = NDArray[np.float32]
Dims = Mapping[str, int]

__all__ = [
    "ABS_FLOOR",
    "LAMBDA",
    "OPS",
    "RMSNORM_EPS",
    "OpSpec",
    "Operand",
    "U",
    "growth",
]


def growth(n: float) -> float:
    """How many unit roundoffs a float32 reduction of `n` terms may lose, relative to the
    sum of its terms' magnitudes: min(n, LAMBDA sqrt(n)) (see the module's documentation)."""
    return float(min(n, LAMBDA * np.sqrt(max(n, 0.0))))


@dataclass(frozen=True)
class Operand:
    """One buffer of an op: its name and its shape as dimension names."""

    name: str
    shape: tuple[str, ...]

    def dims_of(self, dims: Dims) -> tuple[int, ...]:
        return tuple(int(dims[d]) for d in self.shape)


@dataclass(frozen=True)
class OpSpec:
    """One op of the catalogue.

    `reference` computes the outputs in float64 from float64 copies of the float32
    inputs; `tolerance` gives a per-element bound (same shape as each output) on
    |kernel - reference|; `baseline` computes the same op in float32 NumPy and is
    the speed baseline of `ktl bench`.
    """

    name: str
    inputs: tuple[Operand, ...]
    outputs: tuple[Operand, ...]
    dims: tuple[str, ...]
    reference: Callable[[Sequence[F64], Dims], list[F64]]
    tolerance: Callable[[Sequence[F64], Sequence[F64], Dims], list[F64]]
    baseline: Callable[[Sequence[F32], Sequence[F32], Dims], None]
    flops: Callable[[Dims], float]
    random_shapes: Callable[[np.random.Generator, int], list[dict[str, int]]]
    edge_shapes: tuple[dict[str, int], ...]
    bench_shapes: tuple[dict[str, int], ...]
    large_scale: float
    """Magnitude of the "large inputs" check: big enough to overflow a naive float32
    intermediate (exp without max subtraction, sum of squares) while the true result
    stays representable."""
    long_shapes: tuple[dict[str, int], ...] = ()
    """Shapes with reductions far longer than the random ones (K, C or S in the tens of
    thousands): where reduced-precision accumulation shows (`correctness.claimed`)."""

    def shapes(self, dims: Dims) -> list[tuple[int, ...]]:
        """Shapes of every buffer, inputs then outputs."""
        return [op.dims_of(dims) for op in (*self.inputs, *self.outputs)]

    def nbytes(self, dims: Dims) -> int:
        """Bytes moved at least once: every input read and every output written."""
        return sum(4 * int(np.prod(s, dtype=np.int64)) for s in self.shapes(dims))

    def check_dims(self, dims: Dims) -> dict[str, int]:
        """Return the dims in catalogue order, or raise ValueError naming the problem."""
        if set(dims) != set(self.dims):
            raise ValueError(f"op {self.name} takes dims {list(self.dims)}, got {sorted(dims)}")
        out = {d: int(dims[d]) for d in self.dims}
        for d, v in out.items():
            if v < 0 or v > 1 << 20:
                raise ValueError(f"dim {d}={v} is outside 0..{1 << 20}")
        total = sum(int(np.prod(s, dtype=np.int64)) for s in self.shapes(out))
        if total > 1 << 28:
            raise ValueError(f"shape {out} needs {total} floats; the cap is {1 << 28}")
        return out

    def random_inputs(self, dims: Dims, rng: np.random.Generator, scale: float = 1.0) -> list[F32]:
        """Standard-normal inputs times `scale` (the rmsnorm weight is kept near 1)."""
        out: list[F32] = []
        for operand in self.inputs:
            shape = operand.dims_of(dims)
            if self.name == "rmsnorm" and operand.name == "W":
                arr = rng.uniform(0.5, 1.5, size=shape)
            else:
                arr = rng.standard_normal(size=shape) * scale
            out.append(np.ascontiguousarray(arr, dtype=np.float32))
        return out

    def special_inputs(self, dims: Dims, rng: np.random.Generator,
                       planted: Sequence[int] = (0,)) -> list[F32]:
        """Random inputs with NaN, +-Inf, denormals and +-0 planted in the inputs `planted`
        (by index; the check plants in each alone and in all together: round 3's matmul
        skipping A == 0 lost 0 * Inf in B while specials went into A only).

        A sixteenth of each planted input's elements, so the rest stays finite and still
        exercises the arithmetic.
        """
        arrays = self.random_inputs(dims, rng)
        specials = np.array(
            [np.nan, np.inf, -np.inf, 1e-40, -1e-42, 0.0, -0.0, 3e-39], dtype=np.float32
        )
        for index in planted:
            flat = arrays[index].reshape(-1)
            if flat.size:
                count = max(1, flat.size // 16)
                where = rng.choice(flat.size, size=min(count, flat.size), replace=False)
                flat[where] = specials[rng.integers(0, specials.size, size=where.size)]
        return arrays


def _f(x: F64) -> F64:
    return np.asarray(x, dtype=np.float64)


# -- matmul ---------------------------------------------------------------------------


def _matmul_ref(x: Sequence[F64], d: Dims) -> list[F64]:
    a, b = x
    return [_f(a @ b) if d["K"] else np.zeros((d["M"], d["N"]))]


REACH_K = 1024
"""From this reduction length on, a matmul's bound is also tied to what float32 reaches."""
REACH_FACTOR = 32.0
"""How many times the spread of a sequential float32 sum's rounding error an element may be
off by, from REACH_K on (an honest float32 kernel's error is about 1/sqrt(3) of it)."""


def _matmul_tol(x: Sequence[F64], ref: Sequence[F64], d: Dims) -> list[F64]:
    """Norm-aware: |C - C*| <= 2 g(K + 2) U (|A| |B|), g(n) = min(n, 10 sqrt(n)).

    From K = REACH_K on, also at most REACH_FACTOR times what float32 reaches
    (`_matmul_reach`)."""
    a, b = x
    with np.errstate(invalid="ignore", over="ignore"):
        mag = np.abs(a) @ np.abs(b) if d["K"] else np.zeros((d["M"], d["N"]))
        bound = 2.0 * growth(d["K"] + 2) * U * mag
        if d["K"] >= REACH_K:
            bound = np.minimum(bound, REACH_FACTOR * _matmul_reach(a, b, ref[0], d["K"]))
    return [bound + ABS_FLOOR]


def _matmul_reach(a: F64, b: F64, c: F64, k: int) -> F64:
    """The spread of a sequential float32 sum's rounding error per element, U sqrt(sum_k
    S_k^2 + sum_k p_k^2) over its partial sums S_k and products p_k, estimated without the
    partial sums: a mean part (C/K per term) and a random part (the products' mean square m):
    sum S_k^2 ~ C^2 K/3 + m K^2/2. At K = 4096 the norm-aware bound allowed ~1280 units of
    roundoff relative to |A||B|, where float32 reaches about one: a kernel rounding A and B
    to bfloat16 passed (round 3); it is off by ~18 times this bound there."""
    with np.errstate(invalid="ignore", over="ignore"):
        m = (np.square(a) @ np.square(b)) / k
        spread = np.square(c) * (k / 3.0) + m * (k * k / 2.0 + k)
    return U * np.sqrt(np.where(np.isfinite(spread), spread, np.inf))


def _matmul_base(x: Sequence[F32], y: Sequence[F32], d: Dims) -> None:
    np.matmul(x[0], x[1], out=y[0])


def _matmul_shapes(rng: np.random.Generator, n: int) -> list[dict[str, int]]:
    return [
        {"M": int(rng.integers(1, 80)), "N": int(rng.integers(1, 80)), "K": int(rng.integers(1, 160))}
        for _ in range(n)
    ]


# -- softmax (rows) -------------------------------------------------------------------


def _softmax_ref(x: Sequence[F64], d: Dims) -> list[F64]:
    (v,) = x
    if v.size == 0:
        return [np.zeros_like(v)]
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.max(v, axis=1, keepdims=True)
        e = np.exp(v - m)
        return [e / np.sum(e, axis=1, keepdims=True)]


def _softmax_tol(x: Sequence[F64], ref: Sequence[F64], d: Dims) -> list[F64]:
    """Elementwise relative: 2 (g(C) + 110) U |y|, g(n) = min(n, 10 sqrt(n)).

    `x - max` rounds with relative error U, i.e. absolute error up to 104 U in the
    exponent of any term that does not underflow; expf adds a few ULPs; the row sum
    of C positive terms adds g(C) U; the division one more.
    """
    del x
    (y,) = ref
    with np.errstate(invalid="ignore"):
        return [2.0 * (growth(d["C"]) + 110) * U * np.abs(y) + ABS_FLOOR]


def _softmax_base(x: Sequence[F32], y: Sequence[F32], d: Dims) -> None:
    (v,) = x
    (out,) = y
    if v.size == 0:
        return
    np.subtract(v, v.max(axis=1, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=1, keepdims=True)


def _rows_shapes(rng: np.random.Generator, n: int) -> list[dict[str, int]]:
    return [{"R": int(rng.integers(1, 70)), "C": int(rng.integers(1, 300))} for _ in range(n)]


# -- sum (rows) -----------------------------------------------------------------------


def _sum_ref(x: Sequence[F64], d: Dims) -> list[F64]:
    (v,) = x
    return [np.sum(v, axis=1) if d["C"] else np.zeros(d["R"])]


def _sum_tol(x: Sequence[F64], ref: Sequence[F64], d: Dims) -> list[F64]:
    """Norm-aware: |y - y*| <= 2 g(C + 1) U sum(|x|), any order, g(n) = min(n, 10 sqrt(n))."""
    del ref
    (v,) = x
    with np.errstate(invalid="ignore", over="ignore"):
        mag = np.sum(np.abs(v), axis=1) if d["C"] else np.zeros(d["R"])
    return [2.0 * growth(d["C"] + 1) * U * mag + ABS_FLOOR]


def _sum_base(x: Sequence[F32], y: Sequence[F32], d: Dims) -> None:
    np.sum(x[0], axis=1, out=y[0])


# -- rmsnorm (rows, weight) -----------------------------------------------------------


def _rmsnorm_ref(x: Sequence[F64], d: Dims) -> list[F64]:
    v, w = x
    if v.size == 0:
        return [np.zeros_like(v)]
    with np.errstate(invalid="ignore", over="ignore"):
        ms = np.mean(v * v, axis=1, keepdims=True)
        return [v / np.sqrt(ms + RMSNORM_EPS) * w[None, :]]


def _rmsnorm_tol(x: Sequence[F64], ref: Sequence[F64], d: Dims) -> list[F64]:
    """Elementwise relative: 2 (g(C) / 2 + 10) U |y|, g(n) = min(n, 10 sqrt(n)).

    The sum of C squares (positive terms) is off by at most g(C) U relative, the square
    root halves that, and the divide, multiply and eps add a few roundings. No
    cancellation happens, so the bound is relative to each output element.
    """
    del x
    (y,) = ref
    with np.errstate(invalid="ignore"):
        return [2.0 * (growth(d["C"]) / 2.0 + 10) * U * np.abs(y) + ABS_FLOOR]


def _rmsnorm_base(x: Sequence[F32], y: Sequence[F32], d: Dims) -> None:
    v, w = x
    (out,) = y
    if v.size == 0:
        return
    np.multiply(v, v, out=out)
    inv = np.float32(1.0) / np.sqrt(out.mean(axis=1, keepdims=True) + np.float32(RMSNORM_EPS))
    np.multiply(v, inv, out=out)
    out *= w[None, :]


# -- attention [B,H,S,D] ----------------------------------------------------------------


def _attention_ref(causal: bool) -> Callable[[Sequence[F64], Dims], list[F64]]:
    def ref(x: Sequence[F64], d: Dims) -> list[F64]:
        q, k, v = x
        if q.size == 0 or d["S"] == 0:
            return [np.zeros_like(q)]
        scale = 1.0 / np.sqrt(d["D"]) if d["D"] else 1.0
        with np.errstate(invalid="ignore", over="ignore"):
            s = np.einsum("bhid,bhjd->bhij", q, k) * scale
            if causal:
                mask = np.triu(np.ones((d["S"], d["S"]), dtype=bool), 1)
                s = np.where(mask, -np.inf, s)
            p = np.exp(s - np.max(s, axis=-1, keepdims=True))
            p = p / np.sum(p, axis=-1, keepdims=True)
            if causal:
                return [_masked_pv(p, v, mask)]
            return [np.einsum("bhij,bhjd->bhid", p, v)]

    return ref


def _masked_pv(p: F64, v: F64, mask: NDArray[np.bool_]) -> F64:
    """P V where a masked key contributes nothing at all: its weight is exactly 0, and a
    NaN or Inf planted in its value row must not turn into 0 * Inf = NaN (a causal kernel
    never reads it). Attended keys keep IEEE arithmetic (0 * Inf is NaN there too)."""
    bad = ~np.isfinite(v)
    out: F64 = np.einsum("bhij,bhjd->bhid", p, np.where(bad, 0.0, v))
    if not bad.any():
        return out
    allowed = ~mask[None, None, :, :, None]
    terms = np.where(allowed & bad[:, :, None, :, :], p[..., None] * v[:, :, None, :, :], 0.0)
    masked: F64 = out + terms.sum(axis=3)
    return masked


def _attention_tol(causal: bool) -> Callable[[Sequence[F64], Sequence[F64], Dims], list[F64]]:
    def tol(x: Sequence[F64], ref: Sequence[F64], d: Dims) -> list[F64]:
        """Norm-aware: 2 U (g(S) + 110 + g(D) scale max_j |q_i|.|k_j|) (P |V|), g as in sum.

        A score error e becomes a relative error e in the probabilities, so the
        score bound g(D) U scale (|q|.|k|) multiplies the weighted magnitudes P |V|;
        the softmax adds the softmax bound and the P V product g(S) U.
        """
        del ref
        q, k, v = x
        if q.size == 0 or d["S"] == 0:
            return [np.zeros_like(q) + ABS_FLOOR]
        scale = 1.0 / np.sqrt(d["D"]) if d["D"] else 1.0
        with np.errstate(invalid="ignore", over="ignore"):
            s = np.einsum("bhid,bhjd->bhij", q, k) * scale
            qk = np.einsum("bhid,bhjd->bhij", np.abs(q), np.abs(k)) * scale
            if causal:
                mask = np.triu(np.ones((d["S"], d["S"]), dtype=bool), 1)
                s = np.where(mask, -np.inf, s)
                qk = np.where(mask, 0.0, qk)
            p = np.exp(s - np.max(s, axis=-1, keepdims=True))
            p = p / np.sum(p, axis=-1, keepdims=True)
            pv = np.einsum("bhij,bhjd->bhid", p, np.abs(v))
            lost = growth(d["S"]) + 110 + growth(d["D"]) * np.max(qk, axis=-1, keepdims=True)
            return [2.0 * U * lost * pv + ABS_FLOOR]

    return tol


def _attention_base(causal: bool) -> Callable[[Sequence[F32], Sequence[F32], Dims], None]:
    def base(x: Sequence[F32], y: Sequence[F32], d: Dims) -> None:
        q, k, v = x
        (out,) = y
        if q.size == 0 or d["S"] == 0:
            return
        scale = np.float32(1.0 / np.sqrt(d["D"])) if d["D"] else np.float32(1.0)
        s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
        if causal:
            s[..., np.triu(np.ones((d["S"], d["S"]), dtype=bool), 1)] = -np.inf
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        np.matmul(s, v, out=out)

    return base


def _attention_shapes(rng: np.random.Generator, n: int) -> list[dict[str, int]]:
    return [
        {
            "B": int(rng.integers(1, 3)),
            "H": int(rng.integers(1, 4)),
            "S": int(rng.integers(1, 40)),
            "D": int(rng.integers(1, 40)),
        }
        for _ in range(n)
    ]


_ROW_EDGES: tuple[dict[str, int], ...] = (
    {"R": 1, "C": 1},
    {"R": 1, "C": 7},
    {"R": 3, "C": 1},
    {"R": 5, "C": 13},
    {"R": 17, "C": 31},
    {"R": 2, "C": 63},
    {"R": 3, "C": 65},
    {"R": 7, "C": 127},
    {"R": 4, "C": 257},
    {"R": 31, "C": 97},
    {"R": 1, "C": 1031},
    {"R": 0, "C": 8},
)
_ATT_EDGES: tuple[dict[str, int], ...] = (
    {"B": 1, "H": 1, "S": 1, "D": 1},
    {"B": 1, "H": 1, "S": 7, "D": 3},
    {"B": 2, "H": 3, "S": 5, "D": 13},
    {"B": 1, "H": 2, "S": 17, "D": 31},
    {"B": 1, "H": 1, "S": 33, "D": 65},
    {"B": 1, "H": 2, "S": 65, "D": 16},
    {"B": 1, "H": 1, "S": 129, "D": 7},
    {"B": 0, "H": 2, "S": 4, "D": 8},
    {"B": 1, "H": 1, "S": 0, "D": 8},
)


def _attention_op(name: str, causal: bool) -> OpSpec:
    return OpSpec(
        name=name,
        inputs=(Operand("Q", ("B", "H", "S", "D")), Operand("K", ("B", "H", "S", "D")),
                Operand("V", ("B", "H", "S", "D"))),
        outputs=(Operand("O", ("B", "H", "S", "D")),),
        dims=OP_DIMS[name],
        reference=_attention_ref(causal),
        tolerance=_attention_tol(causal),
        baseline=_attention_base(causal),
        flops=OP_FLOPS[name],
        random_shapes=_attention_shapes,
        edge_shapes=_ATT_EDGES,
        bench_shapes=({"B": 1, "H": 4, "S": 128, "D": 64},),
        large_scale=30.0,
        long_shapes=({"B": 1, "H": 1, "S": 1024, "D": 64},),
    )


OPS: Mapping[str, OpSpec] = {
    "matmul": OpSpec(
        name="matmul",
        inputs=(Operand("A", ("M", "K")), Operand("B", ("K", "N"))),
        outputs=(Operand("C", ("M", "N")),),
        dims=OP_DIMS["matmul"],
        reference=_matmul_ref,
        tolerance=_matmul_tol,
        baseline=_matmul_base,
        flops=OP_FLOPS["matmul"],
        random_shapes=_matmul_shapes,
        edge_shapes=(
            {"M": 1, "N": 1, "K": 1},
            {"M": 1, "N": 7, "K": 13},
            {"M": 17, "N": 1, "K": 31},
            {"M": 3, "N": 5, "K": 7},
            {"M": 33, "N": 65, "K": 17},
            {"M": 67, "N": 31, "K": 129},
            {"M": 63, "N": 97, "K": 65},
            {"M": 129, "N": 127, "K": 33},
            {"M": 5, "N": 257, "K": 3},
            {"M": 0, "N": 4, "K": 5},
            {"M": 4, "N": 0, "K": 5},
            {"M": 4, "N": 5, "K": 0},
        ),
        bench_shapes=({"M": 256, "N": 256, "K": 256},),
        large_scale=1e15,
        long_shapes=({"M": 4, "N": 8, "K": 65536}, {"M": 16, "N": 24, "K": 4096}),
    ),
    "softmax": OpSpec(
        name="softmax",
        inputs=(Operand("X", ("R", "C")),),
        outputs=(Operand("Y", ("R", "C")),),
        dims=OP_DIMS["softmax"],
        reference=_softmax_ref,
        tolerance=_softmax_tol,
        baseline=_softmax_base,
        flops=OP_FLOPS["softmax"],
        random_shapes=_rows_shapes,
        edge_shapes=(*_ROW_EDGES, {"R": 3, "C": 0}),
        bench_shapes=({"R": 512, "C": 1024},),
        large_scale=1e3,
        long_shapes=({"R": 16, "C": 131072},),
    ),
    "sum": OpSpec(
        name="sum",
        inputs=(Operand("X", ("R", "C")),),
        outputs=(Operand("Y", ("R",)),),
        dims=OP_DIMS["sum"],
        reference=_sum_ref,
        tolerance=_sum_tol,
        baseline=_sum_base,
        flops=OP_FLOPS["sum"],
        random_shapes=_rows_shapes,
        edge_shapes=(*_ROW_EDGES, {"R": 3, "C": 0}),
        bench_shapes=({"R": 1024, "C": 1024},),
        large_scale=1e30,
        long_shapes=({"R": 16, "C": 131072},),
    ),
    "rmsnorm": OpSpec(
        name="rmsnorm",
        inputs=(Operand("X", ("R", "C")), Operand("W", ("C",))),
        outputs=(Operand("Y", ("R", "C")),),
        dims=OP_DIMS["rmsnorm"],
        reference=_rmsnorm_ref,
        tolerance=_rmsnorm_tol,
        baseline=_rmsnorm_base,
        flops=OP_FLOPS["rmsnorm"],
        random_shapes=_rows_shapes,
        edge_shapes=_ROW_EDGES,
        bench_shapes=({"R": 512, "C": 1024},),
        large_scale=1e20,
        long_shapes=({"R": 16, "C": 131072},),
    ),
    "attention": _attention_op("attention", causal=False),
    "attention_causal": _attention_op("attention_causal", causal=True),
}
