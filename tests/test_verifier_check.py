"""`check` on the honest examples and on one deliberately flawed kernel per failure class."""

from __future__ import annotations

from pathlib import Path

import pytest

from attest import predicates
from verifier import (
    BUDGETS,
    CheckReport,
    KernelSpec,
    VerifierError,
    check,
    get_runtime,
)
from verifier.proofs import quick_rows

ROOT = Path(__file__).resolve().parent.parent
FLAWED = ROOT / "tests" / "flawed_kernels"
EXAMPLES = sorted(p.parent for p in (ROOT / "examples").glob("*/kernel.toml")
                  if not KernelSpec.load(p.parent).is_torch)  # torch ones: test_examples_torch

# flawed kernel -> the check meant to catch it (what it found: FAULT_OF, typed)
CAUGHT_BY = {
    "remainder": "correctness.random",
    "oob_read": "sanitizer.asan_ubsan",
    "oob_write": "guards.canaries",
    "race": "sanitizer.tsan",
    "race_pthread": "sanitizer.tsan",
    "overflow": "correctness.large",
    "loose": "correctness.random",
    "zeroed_output": "outputs.poisoned",
    "mutates_input": "inputs.unchanged",
    "stateful": "state.reuse",
    "crash": "correctness.edge",
    "hang": "correctness.edge",
    "unbounded_alloc": "correctness.edge",
    # issue 10: the judge trusts nothing inside the kernel's process
    "poison_marker": "correctness.random",
    "static_scratch": "concurrency",
    "lazy_output": "escape",
    "lazy_fork": "escape",
    "answer_forger": "escape",
    "nondeterministic": "determinism",
    "nan_skipping": "special_values",
    # issue 25: the defect named, not a symptom of it
    "tail_unwritten": "state.reuse",
    "always_crash": "correctness.random",
    # issue 22: reduced precision only where the claim is, or at long reductions
    "bf16_at_scale": "correctness.claimed",
    "bf16_long_rows": "correctness.claimed",
    "fp16_long_rows": "correctness.claimed",
    # issue 40 (round 3 leftovers): bf16 inputs at K >= 4096; specials only in the first input
    "bf16_inputs": "correctness.claimed",
    "zero_skip": "special_values",
}
# flawed kernel -> the typed fault kind its failing row records
FAULT_OF = {
    "remainder": "unaligned_remainder",
    "oob_read": "oob_read",
    "oob_write": "oob_write",
    "race": "race",
    "race_pthread": "race",
    "overflow": "overflow",
    "loose": "loose",
    "zeroed_output": "unwritten",
    "mutates_input": "input_mutated",
    "stateful": "stateful",
    "crash": "crash",
    "hang": "hang",
    "unbounded_alloc": "unbounded_alloc",
    "poison_marker": "loose",
    "static_scratch": "not_reentrant",
    "lazy_output": "escaped",
    "lazy_fork": "escaped",
    "answer_forger": "escaped",
    "nondeterministic": "nondeterministic",
    "nan_skipping": "special_values",
    "tail_unwritten": "unaligned_remainder",
    "always_crash": "crash",
    "bf16_at_scale": "loose",
    "bf16_long_rows": "loose",
    "fp16_long_rows": "wrong",  # on same-sign inputs its running sum passes float16's range
    "bf16_inputs": "loose",
    "zero_skip": "special_values",
}
BENCH_ONLY = {"timer_tamper", "drift", "content_cache", "forged_baseline", "fifo_swap",
              "late_oob"}
FULL_ONLY = {"int32_index", "uint32_index"}
HARMLESS = {"input_marker"}  # tries to be judged by text it prints; must simply pass


def test_every_flaw_class_has_a_kernel() -> None:
    on_disk = {p.parent.name for p in FLAWED.glob("*/kernel.toml")}
    sandbox = {"unix_socket", "prlimit_parent", "ptrace_peek", "long_line", "macro_bomb", "root_device",
               "fork_escape"}  # tests/test_verifier_attacks.py
    harness = {"answer_status", "deep_folder", "include_host"}  # test_verifier_harness_attacks
    harness |= {"twoface_read", "twoface_read_before", "write_restore", "sandbox_detector",
                "race_pasted", "stderr_names"}  # tests/test_verifier_check_attacks.py
    assert set(CAUGHT_BY) | BENCH_ONLY | FULL_ONLY | HARMLESS | sandbox | harness == on_disk


#: Flawed kernels whose check takes ~9 s (the allocation cap reached the slow way): `make slow`.
SLOW_FLAWED = {"unbounded_alloc"}


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=[pytest.mark.slow] if n in SLOW_FLAWED else []) for n in sorted(CAUGHT_BY)])
def test_flawed_kernel_is_caught_by_its_check(name: str) -> None:
    report = check(FLAWED / name, budget="quick", seed=1)
    meant = CAUGHT_BY[name]
    row = report.get(meant)
    assert row.outcome == "fail", (meant, row.detail)
    assert row.fault is not None and row.fault.kind == FAULT_OF[name], row
    assert not report.passed and report.to_predicate().verdict == "fail"


FAST_FULL = {"sum-rows"}  # the rest at full budget (6-50 s each) in `make slow`


@pytest.mark.parametrize("kernel", [
    pytest.param(p, id=p.name, marks=[] if p.name in FAST_FULL else [pytest.mark.slow])
    for p in EXAMPLES])
def test_honest_example_passes_full_budget(kernel: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reason = get_runtime(KernelSpec.load(kernel).runtime).unavailable_reason()
    if reason:
        pytest.skip(f"runtime unavailable here: {reason}")
    # the proof rows (up to 2 CPU minutes each) are tested in tests/test_proofs.py, there with
    # the full suite in `make slow`; here the dynamic rows of the full budget
    monkeypatch.setattr("verifier.checks._suite.proof_rows",
                        lambda spec, full, work, progress: quick_rows())
    report = check(kernel, budget="full", seed=20261129)
    assert report.passed, [(c.name, c.detail) for c in report.failures]
    names = [c.name for c in report.checks]
    for expected in ("correctness.random", "correctness.edge", "correctness.large",
                     "special_values", "inputs.unchanged", "outputs.poisoned", "guards.canaries",
                     "determinism", "state.reuse", "concurrency", "escape", "index.overflow",
                     "sanitizer.asan_ubsan", "sanitizer.tsan"):
        assert expected in names
    if "-fopenmp" in (kernel / "kernel.toml").read_text():
        assert report.get("sanitizer.tsan").outcome == "pass"


def test_int32_index_passes_quick_and_fails_index_overflow(tmp_path: Path) -> None:
    """Attack 4: right at every shape a test allocates; only the lazily mapped huge shapes see it."""
    from verifier.checks._overflow import OVERFLOW_REASON, index_overflow
    from verifier.checks._plan import KernelRun
    from verifier.ops import OPS
    from verifier.worker._arena import Markers

    quick = check(FLAWED / "int32_index", budget="quick", seed=1)
    assert quick.passed, [(c.name, c.detail) for c in quick.failures]
    assert quick.get("index.overflow").outcome == "skip"
    spec = KernelSpec.load(FLAWED / "int32_index")
    art = get_runtime("c").build(spec, "release", tmp_path)
    run = KernelRun.of(art, spec, OPS["matmul"], tmp_path, Markers.draw())
    outcome, detail, _ = index_overflow(run, lambda _m: None)
    assert outcome == "fail" and detail.startswith(OVERFLOW_REASON), detail


def _overflow(kernel: str, op: str, tmp_path: Path) -> tuple[str, str, dict[str, float]]:
    from verifier.checks._overflow import index_overflow
    from verifier.checks._plan import KernelRun
    from verifier.ops import OPS
    from verifier.worker._arena import Markers

    spec = KernelSpec.load(FLAWED / kernel)
    art = get_runtime("c").build(spec, "release", tmp_path)
    return index_overflow(KernelRun.of(art, spec, OPS[op], tmp_path, Markers.draw()),
                          lambda _m: None)


def test_uint32_index_fails_index_overflow_on_its_far_end(tmp_path: Path) -> None:
    """Issue 22: an unsigned 32-bit row offset wraps to the near end past 2^32, where
    all-zero inputs would have given the right (zero) answer; the far end's values differ."""
    from verifier.checks._overflow import OVERFLOW_REASON

    outcome, detail, _ = _overflow("uint32_index", "sum", tmp_path)
    assert outcome == "fail" and detail.startswith(OVERFLOW_REASON), detail
    assert "Y[4]" in detail and "R=5" in detail, detail


@pytest.mark.slow
def test_uint32_index_passes_quick() -> None:
    """The attacker of the test above is right at every shape a quick check allocates."""
    quick = check(FLAWED / "uint32_index", budget="quick", seed=1)
    assert quick.passed, [(c.name, c.detail) for c in quick.failures]


def test_overflow_outputs_are_the_reference_of_inputs_zero_but_at_their_ends() -> None:
    """The exact sparse answer the check expects equals the float64 reference of the same
    inputs written out densely (at shapes small enough to write)."""
    import numpy as np

    from verifier.checks._overflow import _ends, expected
    from verifier.ops import OPS

    rng = np.random.default_rng(3)
    for name, dims in (("sum", {"R": 3, "C": 1500}), ("matmul", {"M": 3, "N": 2, "K": 1100}),
                       ("matmul", {"M": 2, "N": 3, "K": 1400})):
        op = OPS[name]
        ends = [_ends(rng) for _ in op.inputs]
        dense = []
        for o, (head, tail) in zip(op.inputs, ends, strict=True):
            flat = np.zeros(int(np.prod(o.dims_of(dims))), dtype=np.float64)
            flat[:head.size], flat[flat.size - tail.size:] = head, tail
            dense.append(flat.reshape(o.dims_of(dims)))
        (want,) = op.reference(dense, dims)
        (got,) = expected(op, dims, ends)
        assert np.array_equal(got, want.astype(np.float32)) and np.any(got != 0), name


def test_overflow_shapes_are_decided_by_the_machines_room() -> None:
    """Past 2^32 where the page tables fit; past 2^31 only, said why, where they do not;
    skipped with the figures where neither does (computed, never a bare skip)."""
    from verifier.checks._overflow import BIG, index_overflow, room, shapes_to_run
    from verifier.checks._plan import KernelRun
    from verifier.ops import OPS

    big = room("MemAvailable:   22013640 kB\n")
    shapes, left_out = shapes_to_run(OPS["matmul"], big)
    assert shapes[0]["M"] * shapes[0]["K"] > 2**32 and left_out == ""
    small = room(f"MemAvailable: {8 * 40 * 2**10} kB\n")  # 40 MiB of page tables allowed
    shapes, left_out = shapes_to_run(OPS["sum"], small)
    assert shapes == ({"R": 3, "C": BIG},) and "past 2^32" in left_out and "MiB" in left_out
    tiny = room("MemAvailable: 1024 kB\n")
    assert shapes_to_run(OPS["sum"], tiny)[0] == ()
    nowhere = KernelRun(Path("/nonexistent"), "f", OPS["sum"], Path("/"), None)  # type: ignore[arg-type]
    outcome, detail, metrics = index_overflow(nowhere, lambda _m: None, here=tiny)
    assert outcome == "skip" and detail.startswith("not run:") and "page tables" in detail
    assert metrics["page_table_bytes_allowed"] == 1024 * 1024 // 8
    # an op with no shape past 2^32 (softmax, attention, ...) has none to run, on any machine
    assert shapes_to_run(OPS["softmax"], big) == (
        (), "no shape of op softmax passes 2^32 elements with small outputs")


def _docs_check_rows() -> list[str]:
    text = (ROOT / "docs" / "checks.md").read_text()
    table = text.split("\n## What `ktl check` checks", 1)[1].split("\n\n", 2)[1]
    return [line.split("`")[1] for line in table.splitlines() if line.startswith("| `")]


def test_docs_check_table_is_the_report_and_each_row_has_a_kernel() -> None:
    """Every row of docs/checks.md's table is a row of the report, caught by a kernel of ours."""
    rows = _docs_check_rows()
    report = check(ROOT / "examples" / "sum-rows", budget="quick", seed=6)
    assert sorted(rows) == sorted(c.name for c in report.checks)
    tied = set(CAUGHT_BY.values()) | {
        "index.overflow",  # int32_index, test_int32_index_passes_quick_and_fails_index_overflow
        "build",  # test_verifier_sandbox.py::test_build_failure_is_a_failed_check
        "sandbox",  # records what confinement was in force; tests in test_verifier_sandbox.py
        "audit.library",  # sandbox_detector, tests/test_verifier_check_attacks.py
        "proof.memory",  # the out-of-bounds flawed kernels and one_shape_read, tests/test_proofs.py
        "proof.overflow",  # an int32-index kernel of ours, tests/test_proofs.py
    }
    assert set(rows) <= tied, set(rows) - tied


def test_report_round_trip_and_predicate_shape() -> None:
    report = check(ROOT / "examples" / "sum-rows", budget="quick", seed=4)
    assert CheckReport.from_json(report.to_json()) == report
    pred = report.to_predicate().to_json()
    assert pred["seed"] == 4 and pred["budget"] == "quick" and pred["verdict"] == "pass"
    assert {"cpu_model", "cores", "compiler"} <= set(pred["environment"])
    edge = report.get("correctness.edge")
    assert any(0 in s.values() for s in edge.inputs.shapes or ())  # an empty shape ran
    assert edge.metrics["max_err_over_tol"] <= 1.0


def test_verification_body_validates_with_attest() -> None:
    for kernel in (ROOT / "examples" / "matmul-blocked", FLAWED / "crash"):
        body = check(kernel, budget="quick", seed=2).to_predicate().to_json()
        predicates.parse_predicate(predicates.VERIFICATION_V1, body)


def test_seed_is_recorded_and_replays_inputs() -> None:
    a = check(FLAWED / "remainder", budget="quick", seed=77)
    b = check(FLAWED / "remainder", budget="quick", seed=77)
    assert a.get("correctness.random").detail == b.get("correctness.random").detail
    assert a.seed == 77


def test_bad_arguments() -> None:
    with pytest.raises(VerifierError, match="budget"):
        check(ROOT / "examples" / "sum-rows", budget="huge")
    with pytest.raises(VerifierError, match="not a folder"):
        check(ROOT / "no-such-kernel")
    assert set(BUDGETS) == {"quick", "full"}


def test_detail_is_cleaned_and_capped() -> None:
    from verifier.checks._report import check_row

    row = check_row("x", "fail", "a\tb\x00c" + "z" * 5000)
    assert "\t" not in row.detail and "\x00" not in row.detail and len(row.detail) <= 1500


def test_text_from_the_kernels_process_decides_nothing() -> None:
    """The sanitizer driver runs in the kernel's process: whether inputs changed is judged
    in the parent from shared memory. A kernel printing the old marker loses nothing; a
    kernel that mutates its inputs is failed by the parent's row, not by the driver's text."""
    marker = check(FLAWED / "input_marker", budget="quick", seed=3)
    assert marker.passed, [(c.name, c.detail) for c in marker.failures]
    assert marker.get("sanitizer.asan_ubsan").outcome == "pass"
    mutating = check(FLAWED / "mutates_input", budget="quick", seed=3)
    row = mutating.get("inputs.unchanged")
    assert row.outcome == "fail" and row.fault is not None and row.fault.kind == "input_mutated"
    asan = mutating.get("sanitizer.asan_ubsan")
    assert asan.fault is None or asan.fault.kind != "input_mutated", asan


def test_unwritten_tail_is_named_a_remainder_wherever_it_shows() -> None:
    """Issue 25 row 7: a kernel that never writes its C % 8 tail columns is a remainder
    defect on every row that sees it, never 'must not cache by pointer' or 'a race'."""
    report = check(FLAWED / "tail_unwritten", budget="quick", seed=5)
    for name in ("correctness.large", "outputs.poisoned", "state.reuse", "determinism"):
        row = report.get(name)
        assert row.outcome == "fail", (name, row.detail)
        assert row.fault is not None and row.fault.kind == "unaligned_remainder", (name, row)
        assert "remainder after whole blocks" in row.detail, row.detail
        assert "cache by pointer" not in row.detail and "race" not in row.detail


def test_state_is_blamed_only_where_a_fresh_buffer_answers_right() -> None:
    """Issue 42: a kernel that is merely wrong (loose everywhere) is wrong at a fresh buffer
    too: state.reuse names it so, never "cache by pointer" (the pointer cache, answered
    right at a fresh buffer, is still stateful: CAUGHT_BY and FAULT_OF above)."""
    wrong = check(FLAWED / "loose", budget="quick", seed=5).get("state.reuse")
    assert wrong.outcome == "fail" and wrong.fault is not None, wrong
    assert wrong.fault.kind in ("loose", "wrong"), wrong
    assert "fresh buffer too" in wrong.detail and "cache by pointer" not in wrong.detail


def test_rows_that_made_no_calls_are_not_run_never_pass() -> None:
    """Issue 25 row 8: a kernel killed on every call leaves the per-call rows nothing to
    judge; they say `not run (why)` (outcome skip), never `pass ... after 0 calls`."""
    report = check(FLAWED / "always_crash", budget="quick", seed=5)
    for name in ("inputs.unchanged", "outputs.poisoned", "guards.canaries", "escape"):
        row = report.get(name)
        assert row.outcome == "skip", (name, row.detail)
        assert row.detail.startswith("not run (crash: killed by SIGILL"), row.detail
        assert row.metrics.get("calls") == 0.0
    assert not report.passed


def test_remainder_blocks_against_a_naive_reading() -> None:
    from hypothesis import given
    from hypothesis import strategies as st

    from verifier.compare_outputs import REMAINDER_BLOCKS, remainder_blocks

    @given(st.integers(1, 600), st.integers(0, 600))
    def prop(extent: int, first_bad: int) -> None:
        first_bad = min(first_bad, extent - 1)
        got = remainder_blocks(first_bad, extent)
        for b in REMAINDER_BLOCKS:
            whole = extent // b * b  # columns in whole blocks
            tail = list(range(whole, extent))
            assert (b in got) == (bool(tail) and whole > 0 and first_bad in tail)

    prop()
    assert remainder_blocks(None, 13) == frozenset()
