"""The size-constant rewriter and the scale planner (verifier/runtimes/_sizes.py): pure, no torch."""

from __future__ import annotations

import ast
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifier.runtimes import (
    FLOOR,
    LAST_FLOOR,
    LEAST_FLOOR,
    Footprint,
    ScalePlan,
    SizesError,
    rewrite_constants,
    scale_plan,
    size_constants,
)

PROBLEM = b'''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features, kernel_size):
        super().__init__()
        self.k = kernel_size

    def forward(self, x):
        return x * 2

batch_size = 4096  # rows
dim = 16384
dim2 = dim * 2 + 1
N = 2048 * 2
kernel_size = (3, 5)
stride = 2
features = 48
input_shape = (32768,)
eps = 1e-5
name = "x"

def get_inputs():
    return [torch.rand(batch_size, dim)]

def get_init_inputs():
    return [features, kernel_size]
'''


def test_constants_found_with_values_and_reasons() -> None:
    got = {c.name: c for c in size_constants(PROBLEM)}
    assert got["batch_size"].value == 4096 and got["batch_size"].scalable
    assert got["dim2"].value == 32769 and got["N"].value == 4096
    assert got["input_shape"].value == (32768,) and got["input_shape"].scalable
    assert not got["kernel_size"].scalable and "not a size" in got["kernel_size"].why
    assert not got["stride"].scalable
    assert not got["features"].scalable and str(FLOOR) in got["features"].why
    assert "eps" not in got and "name" not in got


def test_rewrite_changes_only_the_named_assignments() -> None:
    out = rewrite_constants(PROBLEM, {"dim": 4096, "input_shape": (1000,)})
    assert b"dim = 4096\n" in out and b"input_shape = (1000,)\n" in out
    assert b"batch_size = 4096  # rows\n" in out and b"dim2 = dim * 2 + 1\n" in out
    assert out.replace(b"dim = 4096\n", b"dim = 16384\n").replace(
        b"input_shape = (1000,)", b"input_shape = (32768,)") == PROBLEM
    ns: dict[str, object] = {}
    tree = ast.parse(out)
    exec(compile(ast.Module([s for s in tree.body if isinstance(s, ast.Assign)], []), "p", "exec"),
         ns)
    assert ns["dim2"] == 8193  # a dependent constant follows the rewritten one


def test_rewrite_multiline_and_annotated() -> None:
    src = b"size: int = (\n    1024 *\n    4)\nother = size  # keep\n"
    out = rewrite_constants(src, {"size": 100})
    assert out.endswith(b"\nother = size  # keep\n")
    assert {c.name: c.value for c in size_constants(out)} == {"size": 100, "other": 100}


@pytest.mark.parametrize("values, why", [
    ({"nope": 3}, "not a module-level size constant"),
    ({"dim": (3,)}, "not of that form"),
    ({"input_shape": 5}, "not of that form"),
    ({"dim": 0}, "not a positive size"),
    ({"dim": True}, "not a positive size"),
])
def test_rewrite_refuses_what_is_not_a_constant(values: dict[str, object], why: str) -> None:
    with pytest.raises(SizesError, match=why):
        rewrite_constants(PROBLEM, values)  # type: ignore[arg-type]


def test_rebound_constant_is_not_scaled() -> None:
    got = {c.name: c for c in size_constants(b"n = 4096\nn = 8192\nm = 1024\nm += 1\n")}
    assert not got["n"].scalable and "more than once" in got["n"].why
    assert not got["m"].scalable


def test_bad_source_is_a_typed_error() -> None:
    with pytest.raises(SizesError):
        size_constants(b"def (:\n")


def _measure(src: bytes) -> object:
    """A footprint computed from the constants as the problem would: batch_size x dim floats."""
    def measure(values: Mapping[str, object]) -> Footprint | None:
        merged = {c.name: c.value for c in size_constants(src)} | dict(values)
        b, d = merged["batch_size"], merged["dim"]
        assert isinstance(b, int) and isinstance(d, int)
        if d % 2 == 0 and d < 1000:
            return None  # the "reference" rejects an even dim below 1000
        return Footprint(2 * 4 * b * d, 0, 0)
    return measure


def test_plan_keeps_own_sizes_when_they_fit() -> None:
    src = b"batch_size = 128\ndim = 1001\n"
    plan = scale_plan(size_constants(src), _measure(src), Footprint(2**30, 2**20))  # type: ignore[arg-type]
    assert not plan.scaled and plan.describe() == "checked at the problem's own sizes"


def test_plan_halves_the_largest_and_says_so() -> None:
    src = b"batch_size = 4096\ndim = 16385\n"
    budget = Footprint(16 * 2**20, 2**20)
    plan = scale_plan(size_constants(src), _measure(src), budget)  # type: ignore[arg-type]
    assert plan.footprint is not None and plan.footprint.fits(budget)
    assert plan.published_footprint is not None and not plan.published_footprint.fits(budget)
    dim = plan.run_values()["dim"]
    assert isinstance(dim, int) and dim % 2 == 1  # an odd size stays odd
    text = plan.describe()
    assert text.startswith("checked at batch_size=") and "the problem's" in text
    assert "16,385" in text or "4,096" in text


def test_plan_skips_a_constant_the_problem_rejects() -> None:
    src = b"batch_size = 4096\ndim = 2048\n"
    budget = Footprint(2 * 4 * 64 * 2048, 2**20)
    plan = scale_plan(size_constants(src), _measure(src), budget)  # type: ignore[arg-type]
    assert plan.run_values()["dim"] == 1024  # 512 is rejected: dim is left at the last accepted
    assert plan.footprint is not None and plan.footprint.fits(budget)


def test_plan_that_cannot_fit_says_so() -> None:
    src = b"batch_size = 4096\ndim = 16385\n"
    plan = scale_plan(size_constants(src), _measure(src), Footprint(20, 2**20))  # type: ignore[arg-type]
    assert plan.footprint is not None and not plan.footprint.fits(Footprint(20, 2**20))
    assert all(v >= LEAST_FLOOR for v in plan.values.values() if isinstance(v, int))


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.sampled_from(["batch_size", "dim", "N"]),
                       st.integers(1, 10**6), min_size=1))
def test_rewrite_round_trips(values: dict[str, int]) -> None:
    out = rewrite_constants(PROBLEM, values)
    got = {c.name: c.value for c in size_constants(out)}
    for name, v in values.items():
        assert got[name] == v
    assert got["kernel_size"] == (3, 5) and got["stride"] == 2


def test_a_chained_assignment_is_two_constants_each_rewritable() -> None:
    src = b"height = width = 128  # square\nbatch_size = 256\n"
    got = {c.name: c.value for c in size_constants(src)}
    assert got == {"height": 128, "width": 128, "batch_size": 256}
    out = rewrite_constants(src, {"height": 64})
    assert out == b"height = 64; width = 128  # square\nbatch_size = 256\n"
    assert {c.name: c.value for c in size_constants(out)} == {"height": 64, "width": 128,
                                                              "batch_size": 256}
    both = rewrite_constants(src, {"height": 65, "width": 33})
    assert {c.name: c.value for c in size_constants(both)}["width"] == 33


def test_tuple_unpacking_constants() -> None:
    src = b"D, H, W = 32, 48, 100\nx = 1\n"
    got = {c.name: c for c in size_constants(src)}
    assert {n: c.value for n, c in got.items()} == {"D": 32, "H": 48, "W": 100, "x": 1}
    assert got["W"].scalable and not got["D"].scalable and got["D"].shrinkable
    out = rewrite_constants(src, {"W": 51, "D": 16})
    assert out == b"D, H, W = 16, 48, 51\nx = 1\n"


def test_small_sizes_move_only_when_nothing_else_fits() -> None:
    src = b"batch_size = 32\ndim = 4096\n"
    def measure(values: Mapping[str, object]) -> Footprint:
        merged = {"batch_size": 32, "dim": 4096} | dict(values)
        b, d = merged["batch_size"], merged["dim"]
        assert isinstance(b, int) and isinstance(d, int)
        return Footprint(4 * b * d, 0, 0)
    easy = scale_plan(size_constants(src), measure, Footprint(4 * 32 * 1024, 1))
    assert easy.values == {"dim": 1024}
    hard = scale_plan(size_constants(src), measure, Footprint(4 * 16 * 16, 1))
    assert hard.values["dim"] == LAST_FLOOR and hard.values["batch_size"] == LAST_FLOOR
    # past LAST_FLOOR only where that is not enough, and never below LEAST_FLOOR
    harder = scale_plan(size_constants(src), measure, Footprint(4 * 16 * 4, 1))
    assert harder.footprint is not None and harder.footprint.fits(Footprint(4 * 16 * 4, 1))
    assert harder.values == {"dim": 8, "batch_size": 8}
    least = scale_plan(size_constants(src), measure, Footprint(1, 1))
    assert least.values == {"dim": LEAST_FLOOR, "batch_size": LEAST_FLOOR}
    assert least.footprint is not None and not least.footprint.fits(Footprint(1, 1))


def test_lists_and_aliases() -> None:
    src = b"embed_dim = 128\nnum_channels = embed_dim\nlayer_sizes = [16384, 16383]\n"
    got = {c.name: c for c in size_constants(src)}
    assert not got["num_channels"].scalable and got["num_channels"].why == "follows embed_dim"
    assert got["layer_sizes"].value == (16384, 16383) and got["layer_sizes"].is_list
    out = rewrite_constants(src, {"layer_sizes": (1024, 1023), "embed_dim": 100})
    assert out == b"embed_dim = 100\nnum_channels = embed_dim\nlayer_sizes = [1024, 1023]\n"


def test_the_check_ceiling_follows_what_ktls_own_process_can_keep(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from verifier.runtimes import _problem

    gib = 2**30
    monkeypatch.setattr(_problem.resource, "getrlimit",
                        lambda _which: (_problem.resource.RLIM_INFINITY,) * 2)
    # 24 GiB: a sixteenth is 1.5 GiB and the cap 512 MiB, but ktl keeps ~128 calls' worth
    assert _problem.check_ceiling(24 * gib).call_bytes == 24 * gib // 128
    assert _problem.check_ceiling(512 * gib).call_bytes == 512 * 2**20
    # never below the budget itself (a small machine still checks at the budget)
    assert _problem.check_ceiling(gib).call_bytes == _problem.CHECK_BUDGET.call_bytes
    # ktl suite run's --memory-limit (RLIMIT_DATA) lowers it
    monkeypatch.setattr(_problem.resource, "getrlimit", lambda _which: (16 * gib, 16 * gib))
    assert _problem.check_ceiling(24 * gib).call_bytes == 16 * gib // 128


def test_a_refusal_names_the_figure_that_did_not_fit_at_the_smallest_sizes() -> None:
    """VGG16 at batch 2 still needs 62 GFLOP a call: the refusal says so, not only bytes that
    fit (its parameters and inputs are within their limits there)."""
    from verifier.runtimes import _problem

    plan = ScalePlan({"batch_size": 2}, {"batch_size": 10},
                     Footprint(1_150_000, 537_000_000, 61_900_000_000),
                     Footprint(6_000_000, 553_000_000, 309_400_000_000))
    text = str(_problem._too_large(plan, _problem.CHECK_BUDGET, 22 * 2**30,
                                   Footprint(141 * 2**20, 2**30, 20 * 10**9)))
    assert "(309.4 GFLOP)" in text and "(61.9 GFLOP)" in text and "20 GFLOP" in text, text


def test_the_check_ceilings_flops_follow_this_machines_float64_rate() -> None:
    from verifier.runtimes import _problem

    gib = 2**30
    # 27 GFLOP/s (a float64 convolution here): four seconds of it a call
    assert _problem.check_ceiling(24 * gib, rate=27e9).flops == int(27e9 * _problem.CEILING_CALL_S)
    # a slow machine still checks at the budget's FLOPs
    assert _problem.check_ceiling(24 * gib, rate=1e6).flops == _problem.CHECK_BUDGET.flops
    rate = _problem.float64_rate()  # measured once, per CPU-second
    assert 1e8 < rate < 1e13 and _problem.float64_rate() == rate
