"""`bench`: the measurement, and the kernels that try to cheat it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from attest import predicates
from verifier import BenchReport, BenchSettings, VerifierError, bench
from verifier.benchmark._report import bootstrap_speedup

ROOT = Path(__file__).resolve().parent.parent
FLAWED = ROOT / "tests" / "flawed_kernels"
SMALL = [{"R": 128, "C": 512}]


def test_honest_sum_is_measured_and_trusted() -> None:
    report = bench(ROOT / "examples" / "sum-rows",
                   BenchSettings(shapes=SMALL, seed=3, time_budget_s=4, max_halfwidth=0.5))
    assert report.trusted, report.notes
    (res,) = report.results
    assert res.n >= 20 and res.p5_ns <= res.median_ns <= res.p95_ns
    assert res.speedup_ci95[0] <= res.speedup <= res.speedup_ci95[1]
    blob = report.samples_blob()
    pred = report.to_predicate().to_json()
    assert pred["samples"]["sha256"] == hashlib.sha256(blob).hexdigest()
    raw = json.loads(blob)
    assert len(raw["shapes"][0]["kernel_ns"]) == res.n
    assert pred["method"]["interleaved"] and pred["method"]["outputs_rechecked"]
    assert BenchReport.from_json(report.to_json()) == report
    predicates.parse_predicate(predicates.BENCHMARK_V1, pred)


def test_timer_tampering_changes_nothing() -> None:
    """A library patching its process's clock_gettime: the parent never reads that clock.

    The kernel is a naive one-accumulator row sum (slower than NumPy's pairwise
    SIMD sum); with its time hidden from an in-process timer it would look free.
    """
    report = bench(FLAWED / "timer_tamper",
                   BenchSettings(shapes=[{"R": 512, "C": 1024}], seed=1, time_budget_s=3,
                                 max_halfwidth=0.5))
    (res,) = report.results
    assert res.speedup < 1.0 and res.median_ns > 50_000, (res, report.notes)


def test_drift_after_many_calls_is_rejected() -> None:
    report = bench(FLAWED / "drift",
                   BenchSettings(shapes=SMALL, seed=1, time_budget_s=3, min_reps=80))
    assert not report.trusted
    assert "outputs_wrong" in {f.kind for f in report.faults}, report.notes


def test_content_cache_cannot_win() -> None:
    """A kernel caching answers by a hash of part of its input passes `check`, not `bench`."""
    report = bench(FLAWED / "content_cache", BenchSettings(shapes=SMALL, seed=1, time_budget_s=2))
    assert not report.trusted
    assert "outputs_wrong" in {f.kind for f in report.faults}, report.notes


def test_pointer_cache_cannot_win() -> None:
    report = bench(FLAWED / "stateful", BenchSettings(shapes=SMALL, seed=1, time_budget_s=2))
    assert not report.trusted
    assert "outputs_wrong" in {f.kind for f in report.faults}, report.notes


def test_reduced_precision_at_the_claimed_shape_is_refused() -> None:
    """Issue 22: bf16 running sums only at K >= 256, the shape the claim is made at: the
    outputs re-checked after timing are outside the float32 tolerance there."""
    report = bench(FLAWED / "bf16_at_scale",
                   BenchSettings(shapes=[{"M": 16, "N": 16, "K": 512}], seed=1, time_budget_s=1,
                                 min_reps=4, min_time_s=0.1, warmup=1))
    assert not report.trusted
    assert "outputs_wrong" in {f.kind for f in report.faults}, report.notes


def test_an_out_of_bounds_write_during_timing_hits_a_guard_page() -> None:
    """Issue 22: past its 3000th call the kernel reads past its output's end and writes the
    value back (no canary changes); the page after every buffer is PROT_NONE in the bench
    too, so its first access there (the read) is the fault, named by buffer."""
    report = bench(FLAWED / "late_oob",
                   BenchSettings(shapes=[{"R": 8, "C": 16}], seed=1, time_budget_s=2,
                                 min_reps=20, min_time_s=0.5, warmup=1))
    assert not report.trusted and not report.results
    guard = [f for f in report.faults if f.kind == "guard_damage"]
    assert guard and guard[0].shape == {"R": 8, "C": 16}, report.faults
    assert "out-of-bounds read" in guard[0].detail and "after output Y" in guard[0].detail


def test_forged_baseline_finds_no_interpreter_to_patch() -> None:
    """Attack 1: the kernel's constructor patches the baseline if it finds Python in its process.

    The kernel is an honest, slow one-accumulator sum done three times; with the
    baseline in its own process, the speed-up stays what it is.
    """
    report = bench(FLAWED / "forged_baseline",
                   BenchSettings(shapes=SMALL, seed=1, time_budget_s=2, max_halfwidth=0.5))
    (res,) = report.results
    assert res.speedup < 1.0, (res, report.notes)


def test_work_deferred_past_the_call_is_caught() -> None:
    """A call that returns at once and finishes in a background thread cannot win."""
    report = bench(FLAWED / "lazy_output", BenchSettings(shapes=SMALL, seed=1, time_budget_s=2))
    assert not report.trusted
    # every batch after the first leaves a thread it started running at its answer: the
    # typed escaped_work fault, on a loaded machine too (not "too unstable")
    assert "escaped_work" in {f.kind for f in report.faults}, report.notes


@pytest.mark.slow  # over 10 s of make test's CPU; CI runs it in make slow
def test_work_deferred_to_a_forked_process_is_caught() -> None:
    """The same by fork: the process sharing the outputs is alive at each batch's answer."""
    report = bench(FLAWED / "lazy_fork", BenchSettings(shapes=SMALL, seed=1, time_budget_s=1))
    assert not report.trusted
    assert "escaped_work" in {f.kind for f in report.faults}, report.notes


def test_answers_written_by_the_kernel_are_caught() -> None:
    """The kernel writes the worker's "done" answer itself to stop the parent's clock early."""
    report = bench(FLAWED / "answer_forger", BenchSettings(shapes=SMALL, seed=1, time_budget_s=2))
    assert not report.trusted
    assert "escaped_work" in {f.kind for f in report.faults}, report.notes


def test_crashing_kernel_is_a_verdict() -> None:
    report = bench(FLAWED / "crash",
                   BenchSettings(shapes=[{"M": 4, "N": 1, "K": 3}], seed=1, time_budget_s=2))
    assert not report.trusted and report.results == ()
    assert {f.kind for f in report.faults} == {"child_failed"}, report.notes


def test_bad_shapes_rejected() -> None:
    with pytest.raises(VerifierError, match="takes dims"):
        bench(ROOT / "examples" / "sum-rows", BenchSettings(shapes=[{"M": 1}]))
    with pytest.raises(VerifierError, match="cap"):
        bench(ROOT / "examples" / "sum-rows", BenchSettings(shapes=[{"R": 16384, "C": 4096}]))


def test_bootstrap_interval_contains_ratio() -> None:
    rng = np.random.default_rng(0)
    k = rng.normal(100, 5, 200).astype(np.int64)
    b = rng.normal(200, 10, 200).astype(np.int64)
    s, lo, hi = bootstrap_speedup(k, b, rng)
    assert lo <= s <= hi and 1.9 < s < 2.1 and hi - lo < 0.2
