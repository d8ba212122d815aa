"""What every package knows about a catalogue op's shape: its dimensions in ABI order
and the floating-point operations one call performs.

The verifier's op catalogue (`verifier.ops.OPS`) takes both from here, so there is one
copy: the explorer (which must not import the verifier) shows shapes in this order,
and benchmark predicates are checked against these FLOP counts (a claimed GFLOP/s must
be what the shape's FLOPs over the median time give).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

__all__ = ["CATALOGUE_VERSION", "OP_DIMS", "OP_ELEMENTS", "OP_FLOPS", "op_bytes", "op_flops", "ordered_shape", "shape_key",
           "shape_label"]

CATALOGUE_VERSION = 1
"""The op catalogue's version: raised whenever an op is added or an op's meaning (inputs,
dimensions, reference, FLOP count) changes. Statements record it, so a verifier that does
not know a logged op can say which catalogue it has rather than call the claim wrong."""

Dims = Mapping[str, int]
V = TypeVar("V")


def _matmul(d: Dims) -> float:
    return float(2 * d["M"] * d["N"] * d["K"])


def _attention(d: Dims) -> float:
    scores = d["B"] * d["H"] * d["S"] * d["S"]
    return float(4 * scores * d["D"] + 5 * scores)


_ROWS = ("R", "C")
_ATTENTION = ("B", "H", "S", "D")

OP_DIMS: Mapping[str, tuple[str, ...]] = {
    "matmul": ("M", "N", "K"),
    "softmax": _ROWS,
    "sum": _ROWS,
    "rmsnorm": _ROWS,
    "attention": _ATTENTION,
    "attention_causal": _ATTENTION,
}
"""Each catalogue op's dimension names in ABI order (the order of its `int64_t` arguments)."""

OP_FLOPS: Mapping[str, Callable[[Dims], float]] = {
    "matmul": _matmul,
    "softmax": lambda d: float(5 * d["R"] * d["C"]),
    "sum": lambda d: float(d["R"] * d["C"]),
    "rmsnorm": lambda d: float(4 * d["R"] * d["C"]),
    "attention": _attention,
    # counted like attention, masked half included, as `ktl bench` has always counted it
    "attention_causal": _attention,
}
"""Each catalogue op's floating-point operations per call, given its dimensions."""


OP_ELEMENTS: Mapping[str, Callable[[Dims], int]] = {
    "matmul": lambda d: d["M"] * d["K"] + d["K"] * d["N"] + d["M"] * d["N"],
    "softmax": lambda d: 2 * d["R"] * d["C"],
    "sum": lambda d: d["R"] * d["C"] + d["R"],
    "rmsnorm": lambda d: 2 * d["R"] * d["C"] + d["C"],
    "attention": lambda d: 4 * d["B"] * d["H"] * d["S"] * d["D"],
    "attention_causal": lambda d: 4 * d["B"] * d["H"] * d["S"] * d["D"],
}
"""Each catalogue op's elements moved at least once per call: every input read (the weight
of rmsnorm included) and every output written (the verifier's `Op.nbytes` / 4)."""


def op_bytes(op: str, shape: Dims, itemsize: int = 4) -> float | None:
    """Bytes one call of ``op`` at ``shape`` moves at least (elements of `itemsize` bytes);
    None for an op outside the catalogue or a shape that is not the op's."""
    if op not in OP_DIMS or set(shape) != set(OP_DIMS[op]):
        return None
    return float(OP_ELEMENTS[op](shape) * itemsize)


def op_flops(op: str, shape: Dims) -> float | None:
    """FLOPs of one call of ``op`` at ``shape``; None for an op outside the catalogue or a
    shape whose dimension names are not exactly the op's."""
    if op not in OP_DIMS or set(shape) != set(OP_DIMS[op]):
        return None
    return OP_FLOPS[op](shape)


def ordered_shape(op: str, shape: Mapping[str, V]) -> dict[str, V]:
    """``shape`` with the op's dimensions first, in catalogue order, then any others in
    their given order (canonical JSON sorts keys, so `{"C":..., "R":...}` becomes R, C)."""
    order = OP_DIMS.get(op, ())
    first = {d: shape[d] for d in order if d in shape}
    return {**first, **{k: v for k, v in shape.items() if k not in first}}


def shape_key(op: str, shape: Mapping[str, int]) -> str:
    """``M=256,N=256,K=256``: the op's dimensions in catalogue order, then any others sorted,
    whatever the mapping's order (a logged body's canonical JSON sorts its keys, a fresh
    result keeps the catalogue's), so a claimed and a measured shape compare as text."""
    return ",".join(f"{k}={v}" for k, v in ordered_shape(op, dict(sorted(shape.items()))).items())


def shape_label(op: str, shape: Mapping[str, int]) -> str:
    """``{M=256,N=256,K=256}``: `shape_key` in braces, as notes and details name a shape."""
    return "{" + shape_key(op, shape) + "}"
