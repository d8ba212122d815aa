"""Issue 40 item 3 and 6, the torch path's leftovers: every size constant varied on its own
(`correctness.shapes`), a `correctness.large` row, and the dtype second judge on every
correctness row. Pure parts here (fast); the sandboxed attackers and controls are slow.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from verifier.checks._torch_gathered import Gathered
from verifier.checks._torch_rows import correctness_row, large_row
from verifier.runtimes import (
    PAST_BLOCKS,
    CallOutcome,
    dimension_variants,
    size_constants,
)
from verifier.tensors import draw_large, encode
from verifier.worker import CallAnswer

ROOT = Path(__file__).resolve().parent
R4 = ROOT / "torch_round4"


# -- every dimension varied on its own ----------------------------------------------------------

def _first(n: int) -> int:
    return 0


def test_each_constant_is_varied_on_its_own_past_4608() -> None:
    """M, K and N are all 64: each gets its own variant (non-square), the one past 4,608
    first; the others are +1, -1 and an odd prime (no multiple of 8/16/64)."""
    consts = size_constants((R4 / "matmul3_problem.py").read_bytes())
    quick, held = dimension_variants(consts, {}, _first, 1)
    assert held == []
    assert [(v.name, v.value, v.why) for v in quick] == [
        ("M", PAST_BLOCKS, "past 4,608"), ("K", PAST_BLOCKS, "past 4,608"),
        ("N", PAST_BLOCKS, "past 4,608")]
    full, _ = dimension_variants(consts, {}, _first, 4)
    assert sorted(v.value for v in full if v.name == "K") == [47, 63, 65, PAST_BLOCKS]
    for v in full:
        assert v.value % 8 and v.base == 64
        assert v.label().startswith(f"{v.name}={v.value:,} (")


def test_variants_start_from_the_values_run_at_and_name_what_is_held() -> None:
    source = (b"batch_size = 16\ndim = 16384\nkernel_size = 3\nshape = (32, 48)\n"
              b"width = 100\nwidth = 200\nalias = dim\n")
    consts = size_constants(source)
    got, held = dimension_variants(consts, {"dim": 4096}, _first, 2)
    names = {v.name for v in got}
    assert names == {"batch_size", "dim"}  # kernel_size is not a size; alias follows dim
    assert {v.base for v in got if v.name == "dim"} == {4096}
    assert any(v.value == PAST_BLOCKS for v in got if v.name == "dim")
    assert "shape held at (32, 48): a tuple of sizes" in held
    assert "width held at 200: assigned more than once" in held
    big, _ = dimension_variants(size_constants(b"dim = 8192\n"), {}, _first, 4)
    assert PAST_BLOCKS not in [v.value for v in big]  # already past: +1, -1, a prime
    assert big[0].value == 8193 and len(big) == 3


def test_a_dimension_past_the_checks_budget_is_held_in_numbers() -> None:
    """The probe's footprints with one constant past 4,608 decide, without starting
    anything: too large is held with its bytes and FLOPs, None (the reference rejects it)
    held with why, a fit goes on to run."""
    from verifier.checks._torch_dims import _measured
    from verifier.runtimes import DimensionVariant, Footprint, ScalePlan

    var = DimensionVariant("dim", PAST_BLOCKS, 2048, "past 4,608")
    huge = Footprint(2**34, 0, 10**12)
    recipe = SimpleNamespace(past={"dim": huge})
    got = _measured(recipe, var, ScalePlan())  # type: ignore[arg-type]
    assert isinstance(got, str) and got.startswith("dim held at 2,048 for 4,611: one call")
    assert "16,384.0 MiB" in got and "GFLOP" in got
    got = _measured(SimpleNamespace(past={"dim": None}), var, ScalePlan())  # type: ignore[arg-type]
    assert got == "dim held at 2,048: the reference does not run at dim=4,611"
    small = Footprint(2**20, 0, 10**6)
    assert _measured(SimpleNamespace(past={"dim": small}), var, ScalePlan()) == small  # type: ignore[arg-type]


def test_the_shapes_row_names_the_dimensions_it_held() -> None:
    want = np.linspace(-1.0, 1.0, 16)
    run = _run("correctness.shapes", [_outcome(want.copy(), want, want.copy())])
    run.notes["correctness.shapes"] = ["width held at (3, 5): a tuple of sizes"]
    row = correctness_row("correctness.shapes", run, "float32", ["correctness.shapes"])
    assert row.outcome == "pass"
    assert "not varied: width held at (3, 5): a tuple of sizes" in row.detail
    assert row.metrics["dimensions_held"] == 1.0


# -- the second judge at the kernel's dtype, element by element ------------------------------

def _outcome(got: np.ndarray, want: np.ndarray, mine: np.ndarray | None) -> CallOutcome:
    return CallOutcome(CallAnswer(((tuple(got.shape), "float32", True),)), [got], [want],
                       ["float32"], [encode(got, "float32").tobytes()], [],
                       None if mine is None else [mine])


def _run(group: str, outcomes: list[CallOutcome]) -> Gathered:
    run = Gathered(session=SimpleNamespace(), rng=np.random.default_rng(0))  # type: ignore[arg-type]
    run.outcomes[group] = [("weights seed 1", o) for o in outcomes]
    return run


def test_correctness_random_reports_a_difference_only_the_float64_reference_shows() -> None:
    want = np.linspace(-1.0, 1.0, 64)
    want[5] = np.inf
    mine = want.copy()
    mine[5] = np.nan  # the module itself at float32 (GELU's NaN at +inf)
    got = mine.copy()
    row = correctness_row("correctness.random", _run("correctness.random",
                                                      [_outcome(got, want, mine)]),
                          "float32", ["correctness.random"])
    assert row.outcome == "pass", row.detail
    assert row.metrics["dtype_reference_only"] == 1.0 and "reported, not failed" in row.detail
    # without the second judge the same call fails
    row = correctness_row("correctness.random", _run("correctness.random",
                                                      [_outcome(got, want, None)]),
                          "float32", ["correctness.random"])
    assert row.outcome == "fail" and row.fault is not None


def test_only_the_elements_the_module_itself_misses_are_set_aside() -> None:
    """A candidate wrong where the reference module at its dtype is right still fails, even
    when that module is off elsewhere in the same call."""
    want = np.linspace(-1.0, 1.0, 64)
    mine = want.copy()
    mine[3] = np.inf  # the module overflows here
    got = mine.copy()
    got[40] += 0.5  # the candidate's own error, where the module is right
    row = correctness_row("correctness.random", _run("correctness.random",
                                                      [_outcome(got, want, mine)]),
                          "float32", ["correctness.random"])
    assert row.outcome == "fail" and row.fault is not None, row.detail
    assert row.fault.kind in ("loose", "wrong")
    assert "[40]" in row.detail


def test_random_calls_ask_the_reference_at_the_kernels_dtype_too() -> None:
    from verifier.checks import _torch_suite as suite
    from verifier.runtimes._torch_session import InputSpec, Problem

    seen: list[Any] = []

    def record(calls: list[Any], timeout: float, threads: int, escapes: object) -> list[Any]:
        seen.extend(calls)
        return []

    session = SimpleNamespace(
        problem=Problem([], (InputSpec("tensor", (4, 4), "float32", {}),)),
        kernel=SimpleNamespace(runtime="torch"), gpu=False, last_overlaps=8,
        regions=SimpleNamespace(next=0), init=lambda seed: {"loaded": 0, "own": 0},
        accepts=lambda args: False,
        run=record)
    run = Gathered(session, np.random.default_rng(1))  # type: ignore[arg-type]
    plan = suite.TORCH_PLANS["quick"]
    suite._gather(run, plan, lambda message: None)
    randoms = seen[:plan.inits * plan.random]
    assert randoms and all(c.at_dtype for c in randoms)


# -- correctness.large ----------------------------------------------------------------------

def test_large_draws_overflow_row_sums_of_squares_but_not_squares() -> None:
    x = draw_large({"std": 1.0}, (4, 256), "float32", np.random.default_rng(2))
    with np.errstate(over="ignore"):
        squares = np.square(x.astype(np.float32))
        sums = squares.sum(axis=1, dtype=np.float32)
    assert np.isfinite(squares).all()
    assert not np.isfinite(sums).any()
    rms = np.sqrt(np.mean(np.square(x), axis=1))  # float64: the result is representable
    assert np.isfinite(rms.astype(np.float32)).all()


def test_a_wrong_answer_on_large_inputs_is_an_overflow_when_normal_inputs_pass() -> None:
    want = np.full(64, 2.0)
    got = want.copy()
    got[7] = np.nan  # a naive sum of squares overflowed
    run = _run("correctness.large", [_outcome(got, want, want.copy())])
    row = large_row(run, "float32", normal_ok=True)
    assert row.outcome == "fail" and row.fault is not None and row.fault.kind == "overflow"
    assert row.detail.startswith("overflow or lost range on large inputs")
    # PyTorch's own module overflowing there too: reported, not failed
    mine = got.copy()
    row = large_row(_run("correctness.large", [_outcome(got, want, mine)]), "float32", True)
    assert row.outcome == "pass" and row.metrics["dtype_reference_only"] == 1.0


# -- the attackers and the honest controls, in sandboxes --------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize(("problem", "solution", "row", "kind"), [
    ("matmul3_problem", "matmul_square", "correctness.shapes", None),
    ("rowscale_problem", "rowscale_4608", "correctness.shapes", "wrong"),
    ("rownorm_problem", "rownorm_naive", "correctness.large", "overflow"),
])
def test_shapes_and_magnitudes_only_like_the_example_are_not_enough(
        tmp_path: Path, problem: str, solution: str, row: str, kind: str | None) -> None:
    pytest.importorskip("torch")
    from tests.test_torch_round4 import kb_folder
    from verifier import check

    report = check(kb_folder(tmp_path, R4 / f"{problem}.py", R4 / f"{solution}.py"), seed=3)
    got = report.get(row)
    assert got.outcome == "fail", [(c.name, c.outcome, c.detail) for c in report.checks]
    assert kind is None or (got.fault is not None and got.fault.kind == kind), got.detail
    assert report.get("correctness.random").outcome == "pass"


@pytest.mark.slow
@pytest.mark.parametrize("problem", ["matmul3_problem", "rowscale_problem", "rownorm_problem"])
def test_the_reference_module_passes_every_dimension(tmp_path: Path, problem: str) -> None:
    pytest.importorskip("torch")
    from tests.test_torch_round4 import kb_folder
    from verifier import check

    source = (R4 / f"{problem}.py").read_text()
    report = check(kb_folder(tmp_path, R4 / f"{problem}.py",
                             source + "\n\nclass ModelNew(Model):\n    pass\n"), seed=3)
    assert report.passed, [(c.name, c.detail) for c in report.failures]
    detail = report.get("correctness.shapes").detail
    assert f"={PAST_BLOCKS:,} (past 4,608" in detail
