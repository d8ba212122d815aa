"""`verifier.tensors.dtype_slack`: the reference module's own error at the kernel's dtype
widens an element's bound, by DTYPE_SLACK times that error and no more."""

from __future__ import annotations

import numpy as np

from verifier.tensors import DTYPE_SLACK, compare_tensor, dtype_slack


def test_a_long_float32_reduction_is_judged_with_the_references_own_error() -> None:
    rng = np.random.default_rng(3)
    x = rng.random(1 << 16)
    ref = x / np.sqrt(np.sum(x * x))
    # the reference module's float32 answer and an honest one in another summation order:
    # the whole output off by a common factor, about the float32 tolerance (1e-4)
    mine, honest = ref * (1 + 1e-4), ref * (1 - 2.5e-4)
    assert not compare_tensor(honest, ref, "float32").ok
    assert compare_tensor(honest, ref, "float32", dtype_slack(mine, ref)).ok


def test_the_slack_gives_a_loose_kernel_nothing_where_the_dtype_is_exact() -> None:
    rng = np.random.default_rng(4)
    ref = rng.standard_normal(4096)
    mine = ref.astype(np.float32).astype(np.float64)  # half an ulp: the reference exact
    loose = ref * (1 + 3e-4)  # an approximation 3x the float32 tolerance
    slack = dtype_slack(mine, ref)
    assert slack is not None and float(np.max(slack)) <= DTYPE_SLACK * 2.0 ** -24 * \
        float(np.max(np.abs(ref)))
    assert not compare_tensor(loose, ref, "float32", slack).ok


def test_no_slack_where_shapes_differ_or_values_are_not_finite() -> None:
    assert dtype_slack(np.zeros(3), np.zeros(4)) is None
    slack = dtype_slack(np.array([np.inf, 1.0, np.nan]), np.array([1.0, 1.5, 2.0]))
    assert slack is not None and list(slack) == [0.0, DTYPE_SLACK * 0.5, 0.0]
