"""The op catalogue: references, tolerances, comparison."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.compare_outputs import compare_output, ulp_distance
from verifier.ops import OPS
from verifier.worker._arena import Markers


@pytest.mark.parametrize("name", sorted(OPS))
def test_float32_baseline_within_tolerance_on_every_shape(name: str) -> None:
    """A straightforward float32 implementation (the NumPy baseline) passes every edge shape."""
    op = OPS[name]
    rng = np.random.default_rng(7)
    for dims in [*op.edge_shapes, *op.random_shapes(rng, 4)]:
        for scale in (1.0, op.large_scale if name not in ("rmsnorm", "softmax") else 1.0):
            ins = op.random_inputs(dims, rng, scale)
            outs = [np.full(o.dims_of(dims), np.nan, dtype=np.float32) for o in op.outputs]
            op.baseline(ins, outs, dims)
            ins64 = [a.astype(np.float64) for a in ins]
            refs = op.reference(ins64, dims)
            tols = op.tolerance(ins64, refs, dims)
            for out, ref, tol in zip(outs, refs, tols, strict=True):
                if out.size:
                    comp = compare_output(out, ref, tol)
                    assert comp.ok, (dims, comp)


@pytest.mark.parametrize("name", sorted(OPS))
def test_tolerance_catches_a_visible_error(name: str) -> None:
    op = OPS[name]
    rng = np.random.default_rng(3)
    dims = dict(op.edge_shapes[4])
    ins = op.random_inputs(dims, rng)
    ins64 = [a.astype(np.float64) for a in ins]
    ref = op.reference(ins64, dims)[0]
    tol = op.tolerance(ins64, [ref], dims)[0]
    out = ref.astype(np.float32)
    assert compare_output(out, ref, tol).ok
    bad = out.copy()
    bad.reshape(-1)[0] = bad.reshape(-1)[0] * np.float32(1.001) + np.float32(1e-3)
    comp = compare_output(bad, ref, tol)
    assert not comp.ok and comp.bad == 1 and comp.worst_index == (0,) * out.ndim


def test_reference_known_answers() -> None:
    x = np.array([[0.0, np.log(3.0)]])
    assert np.allclose(OPS["softmax"].reference([x], {"R": 1, "C": 2})[0], [[0.25, 0.75]])
    assert OPS["sum"].reference([np.array([[1.0, 2.0, 3.5]])], {"R": 1, "C": 3})[0][0] == 6.5
    y = OPS["rmsnorm"].reference([np.array([[3.0, 4.0]]), np.array([1.0, 2.0])], {"R": 1, "C": 2})[0]
    rms = np.sqrt(12.5 + 1e-6)
    assert np.allclose(y, [[3 / rms, 8 / rms]])
    q = np.zeros((1, 1, 2, 1))
    v = np.array([1.0, 3.0]).reshape(1, 1, 2, 1)
    o = OPS["attention"].reference([q, q, v], {"B": 1, "H": 1, "S": 2, "D": 1})[0]
    assert np.allclose(o.reshape(-1), [2.0, 2.0])
    oc = OPS["attention_causal"].reference([q, q, v], {"B": 1, "H": 1, "S": 2, "D": 1})[0]
    assert np.allclose(oc.reshape(-1), [1.0, 2.0])
    assert np.array_equal(OPS["matmul"].reference([np.ones((2, 0)), np.ones((0, 3))],
                                                  {"M": 2, "N": 3, "K": 0})[0], np.zeros((2, 3)))


def test_special_values_must_match_in_kind() -> None:
    ref = np.array([np.nan, np.inf, -np.inf, 1.0])
    tol = np.full(4, 1e-6)
    good = np.array([np.nan, np.inf, -np.inf, 1.0], dtype=np.float32)
    assert compare_output(good, ref, tol).ok
    for i, wrong in enumerate([0.0, -np.inf, np.nan, np.inf]):
        bad = good.copy()
        bad[i] = wrong
        comp = compare_output(bad, ref, tol)
        assert comp.bad == 1 and comp.nonfinite_mismatches == 1


def test_poison_counted() -> None:
    word = Markers.draw().poison
    out = np.zeros(4, dtype=np.float32)
    out.view(np.uint32)[1] = word
    comp = compare_output(out, np.zeros(4), np.full(4, 1e-9), poison=word)
    assert comp.poisoned == 1 and comp.bad == 1
    assert compare_output(out, np.zeros(4), np.full(4, 1e-9)).poisoned == 0


def test_markers_are_random_quiet_nans_never_the_published_ones() -> None:
    seen = {Markers.draw() for _ in range(50)}
    assert len(seen) > 45
    for m in seen:
        assert m.guard != m.poison
        for word in (m.guard, m.poison):
            assert word & 0x7FC00000 == 0x7FC00000 and word & 0x7FFFFFFF != 0x7FC0DEAD


@settings(max_examples=100, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False), st.integers(0, 50))
def test_ulp_distance_counts_steps(x: float, steps: int) -> None:
    a = np.array([x], dtype=np.float32)
    b = a.copy()
    with np.errstate(over="ignore"):
        for _ in range(steps):
            b = np.nextafter(b, np.float32(np.inf), dtype=np.float32)
    if np.isfinite(b[0]):
        assert int(ulp_distance(a, b)[0]) == steps


def test_check_dims_rejects_bad() -> None:
    with pytest.raises(ValueError, match="takes dims"):
        OPS["matmul"].check_dims({"M": 1, "N": 2})
    with pytest.raises(ValueError, match="outside"):
        OPS["sum"].check_dims({"R": -1, "C": 2})
    with pytest.raises(ValueError, match="cap"):
        OPS["matmul"].check_dims({"M": 100000, "N": 100000, "K": 100})


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1e30, 1e30, allow_nan=False), min_size=1, max_size=40),
       st.integers(0, 39), st.floats(2.0, 1e6))
def test_compare_rounding_passes_and_outside_tolerance_fails(values: list[float], pick: int,
                                                             factor: float) -> None:
    ref = np.asarray(values, dtype=np.float64)
    tol = np.abs(ref) * 2.0**-23 + 1e-30
    assert compare_output(ref.astype(np.float32), ref, tol).ok
    bad = ref.astype(np.float32)
    i = pick % ref.size
    bad[i] = np.float32(ref[i] + factor * tol[i] + np.sign(ref[i] or 1.0) * 1e-29)
    if abs(float(bad[i]) - ref[i]) > tol[i]:
        comp = compare_output(bad, ref, tol)
        assert not comp.ok and comp.worst_index == (i,)


def test_the_catalogue_takes_dims_and_flops_from_attest() -> None:
    """One copy: the explorer orders shapes and attest checks GFLOP/s with what bench uses."""
    from attest.ops import OP_DIMS, OP_FLOPS

    assert set(OPS) == set(OP_DIMS)
    for name, op in OPS.items():
        assert op.dims == OP_DIMS[name] and op.flops is OP_FLOPS[name], name
        # every operand's dimensions are ones the op declares
        assert {d for o in (*op.inputs, *op.outputs) for d in o.shape} == set(op.dims), name


def _accumulate(x: np.ndarray, keep_bits: int) -> np.ndarray:
    """Row sums of float32 `x` in column order, the running sum rounded to `keep_bits`
    significant bits after every add (24: float32 itself; 8: bfloat16)."""
    drop = 24 - keep_bits
    acc = np.zeros(x.shape[0], dtype=np.float32)
    for j in range(x.shape[1]):
        acc = (acc + x[:, j]).astype(np.float32)
        if drop:
            bits = acc.view(np.uint32).astype(np.uint64)
            half = (1 << (drop - 1)) - 1
            bits = ((bits + half + ((bits >> drop) & 1)) >> drop) << drop
            acc = bits.astype(np.uint32).view(np.float32)
    return acc


def test_tolerance_is_what_float32_reaches_at_long_reductions() -> None:
    """Issue 22, on injected sums: at C = 131072 a bfloat16 running sum stays inside the
    worst-case float32 bound 2 (C + 1) U sum|x| (so that bound would pass it) but not inside
    the op's tolerance, while float32 summed in the worst order for it (largest terms
    first, all of one sign before the other) stays far inside."""
    from verifier.ops import LAMBDA, U, growth

    assert growth(50) == 50 and growth(10_000) == LAMBDA * 100
    op = OPS["sum"]
    rng = np.random.default_rng(22)
    dims = {"R": 16, "C": 131072}
    x = rng.standard_normal((dims["R"], dims["C"])).astype(np.float32)
    (ref,) = op.reference([x.astype(np.float64)], dims)
    (tol,) = op.tolerance([x.astype(np.float64)], [ref], dims)
    worst_case = 2 * (dims["C"] + 1) * U * np.abs(x.astype(np.float64)).sum(axis=1)
    bf16 = np.abs(_accumulate(x, 8) - ref)
    assert np.all(bf16 < worst_case) and np.any(bf16 > tol)
    ordered = np.ascontiguousarray(-np.sort(-x, axis=1))
    f32 = np.abs(_accumulate(ordered, 24) - ref)
    assert np.all(f32 < tol / 10)
