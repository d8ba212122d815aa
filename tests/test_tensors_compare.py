"""`verifier.tensors.compare_tensor` against a naive reference written element by element
from its documented rule, on arrays with and without NaN, infinities and zeros: the
all-finite fast path (`_judged_finite`) and the general path must judge alike."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.tensors import TOLERANCES, compare_tensor, elements_off

SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0]


def _naive(out: list[float], ref: list[float], dtype: str, slack: list[float] | None
           ) -> tuple[int, int, float, float, float]:
    """(bad, kind mismatches, worst err/tol over finite ones, max abs err, max rel err)."""
    tol = TOLERANCES[dtype]
    finite = [r for r in ref if math.isfinite(r)]
    rms = math.sqrt(sum(r * r for r in finite) / len(finite)) if finite else 1.0
    scale = rms if rms > 0 else 1.0
    bad = kinds = 0
    worst = max_err = max_rel = 0.0
    for i, (o, r) in enumerate(zip(out, ref, strict=True)):
        if math.isnan(r):
            kind = not math.isnan(o)
        elif math.isinf(r):
            kind = o != r
        else:
            kind = not math.isfinite(o)
        bound = tol.atol * scale + tol.rtol * (abs(r) if math.isfinite(r) else 0.0)
        bound += slack[i] if slack is not None else 0.0
        err = abs(o - r) if math.isfinite(r) and math.isfinite(o) else 0.0
        ratio = err / bound if bound > 0 else (math.inf if err > 0 else 0.0)
        kinds += kind
        bad += kind or ratio > 1.0
        worst = max(worst, ratio) if math.isfinite(ratio) else worst
        max_err = max(max_err, err)
        rel = err / abs(r) if r != 0 and math.isfinite(r) else 0.0
        max_rel = max(max_rel, rel) if math.isfinite(rel) else max_rel  # a subnormal ref
    return bad, kinds, worst, max_err, max_rel


values = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@st.composite
def pairs(draw: st.DrawFn) -> tuple[list[float], list[float], list[float] | None, str]:
    n = draw(st.integers(1, 40))
    ref = draw(st.lists(st.one_of(values, st.sampled_from(SPECIALS)) if draw(st.booleans())
                        else values, min_size=n, max_size=n))
    # outputs near the reference (within and past the tolerance), or anything at all
    noise = draw(st.lists(st.floats(-3e-4, 3e-4), min_size=n, max_size=n))
    near = [r * (1 + e) + e for r, e in zip(ref, noise, strict=True)]
    out = near if draw(st.booleans()) else draw(st.lists(
        st.one_of(values, st.sampled_from(SPECIALS)), min_size=n, max_size=n))
    slack = draw(st.none() | st.lists(st.floats(0, 1e-3), min_size=n, max_size=n))
    return out, ref, slack, draw(st.sampled_from(sorted(TOLERANCES)))


@settings(max_examples=400, deadline=None)
@given(pairs())
def test_compare_tensor_judges_as_the_naive_rule(case: tuple[list[float], list[float],
                                                            list[float] | None, str]) -> None:
    out, ref, slack, dtype = case
    got = compare_tensor(np.array(out), np.array(ref), dtype,
                         None if slack is None else np.array(slack))
    bad, kinds, worst, max_err, max_rel = _naive(out, ref, dtype, slack)
    assert got.nonfinite_mismatches == kinds
    # the fast path sums the scale in another order: an element exactly at its bound may
    # fall either side of it (counted below only where the naive ratio is not within 1e-9)
    near_edge = any(abs(r - 1.0) < 1e-9 for r in _ratios(out, ref, dtype, slack))
    assert got.bad == bad or near_edge
    assert math.isclose(got.max_err_over_tol, worst, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(got.max_abs_err, max_err, rel_tol=1e-12, abs_tol=0.0)
    assert math.isclose(got.max_rel_err, max_rel, rel_tol=1e-12, abs_tol=0.0)
    off = elements_off(np.array(out), np.array(ref), dtype)
    assert int(off.sum()) == got.bad or (slack is not None) or near_edge


def _ratios(out: list[float], ref: list[float], dtype: str, slack: list[float] | None
            ) -> list[float]:
    tol = TOLERANCES[dtype]
    finite = [r for r in ref if math.isfinite(r)]
    rms = math.sqrt(sum(r * r for r in finite) / len(finite)) if finite else 1.0
    scale = rms if rms > 0 else 1.0
    return [abs(o - r) / (tol.atol * scale + tol.rtol * abs(r) + (slack[i] if slack else 0.0))
            for i, (o, r) in enumerate(zip(out, ref, strict=True))
            if math.isfinite(o) and math.isfinite(r)]


def test_an_all_finite_answer_past_its_bound_is_found_at_its_worst_element() -> None:
    ref = np.linspace(-1.0, 1.0, 1000).reshape(10, 100)
    out = ref.copy()
    out[7, 42] += 0.5
    got = compare_tensor(out, ref, "float32")
    assert got.bad == 1 and got.worst_index == (7, 42) and got.nonfinite_mismatches == 0
    assert got.worst_expected == ref[7, 42] and got.max_err_over_tol > 1000


def test_a_zero_dim_output_is_compared_like_any_other() -> None:
    """A loss returned as a 0-dim tensor (KernelBench's CrossEntropyLoss, a Python float
    made a tensor): the all-finite path works on flat views."""
    ref = np.array(2.98098683)
    assert compare_tensor(ref.copy(), ref, "float32").ok
    got = compare_tensor(np.array(3.5), ref, "float32")
    assert not got.ok and got.bad == 1 and got.worst_index == () and got.worst_value == 3.5
    assert elements_off(np.array(3.5), ref, "float32").shape == ()
    slack = np.array(1.0)
    assert compare_tensor(np.array(3.5), ref, "float32", slack).ok


def test_an_all_zero_reference_takes_the_general_path() -> None:
    ref = np.zeros(16)
    assert compare_tensor(np.zeros(16), ref, "float32").ok
    assert not compare_tensor(np.full(16, 1e-3), ref, "float32").ok
