"""Issue 43: `proof.memory` (ESBMC) and `proof.overflow` (Frama-C EVA).

The fast tests here run the tools at small bounds (a few seconds each) or not at all (the
harness generator, the report readers, the typed record, the rows where a tool is missing).
The slow ones prove the C examples at their default bounds and refute every flawed kernel with
an out-of-bounds access. Tests that need a tool are skipped where it is missing; the rows'
behaviour without the tools is tested everywhere.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from attest._errors import ValidationError
from attest.predicates import Check, CheckInputs, Environment, ProofRecord, VerificationPredicate
from verifier.kernel import KernelSpec
from verifier.ops import OPS
from verifier.proofs import (
    MEMORY_ROW,
    OVERFLOW_BOUNDS,
    OVERFLOW_ROW,
    PROOF_BOUNDS,
    ProofSettings,
    Tool,
    Tools,
    esbmc,
    frama_c,
    memory_harness,
    origin,
    overflow_harness,
    parse,
    parse_report,
    planted_memory,
    planted_overflow,
    proof_rows,
    reserved_names,
    strip_pragmas,
)

ROOT = Path(__file__).resolve().parent.parent
FLAWED = ROOT / "tests" / "flawed_kernels"
OWN = ROOT / "tests" / "proof_kernels"
EXAMPLES = ROOT / "examples"
ESBMC = esbmc()
FRAMA_C = frama_c()
needs_esbmc = pytest.mark.skipif(isinstance(ESBMC, str), reason=str(ESBMC))
needs_frama_c = pytest.mark.skipif(isinstance(FRAMA_C, str), reason=str(FRAMA_C))
MISSING = Tools("ESBMC is not installed (test)", "Frama-C is not installed (test)")


def rows_of(folder: Path, tmp_path: Path, tools: Tools | None = None,
            settings: ProofSettings | None = None) -> dict[str, Check]:
    spec = KernelSpec.load(folder)
    rows = proof_rows(spec, True, tmp_path, None, settings, tools)
    return {row.name: row for row in rows}


def only_memory(tools: Tools | str) -> Tools:
    assert not isinstance(tools, str)
    return Tools(tools.esbmc, "left out by this test")


# -- the harness, generated from the catalogue -----------------------------------------------


@pytest.mark.parametrize("op", sorted(OPS))
def test_harness_allocates_each_buffer_at_its_catalogue_size(op: str) -> None:
    spec = OPS[op]
    text = memory_harness(spec, "entry_fn", PROOF_BOUNDS[op])
    for d in spec.dims:
        assert f"ktl_{d} >= 0 && ktl_{d} <= {PROOF_BOUNDS[op][d]}" in text
    for i, operand in enumerate((*spec.inputs, *spec.outputs)):
        size = " * ".join(f"ktl_{d}" for d in operand.shape)
        assert f"ktl_b{i} = malloc((size_t)({size}) * sizeof(float))" in text
    assert "entry_fn(" in text and "expf(float a)" in text
    eva = overflow_harness(spec, "entry_fn")
    for d in spec.dims:
        assert f"ktl_{d} = Frama_C_long_long_interval(1, {OVERFLOW_BOUNDS[op][d]})" in eva
    if len(spec.dims) < 4:
        assert set(OVERFLOW_BOUNDS[op].values()) == {2**31 - 1}


@pytest.mark.parametrize("op", sorted(OPS))
def test_planted_kernels_compile_as_c(op: str, tmp_path: Path) -> None:
    for name, text in (("m.c", planted_memory(OPS[op], PROOF_BOUNDS[op])),
                       ("o.c", planted_overflow(OPS[op]))):
        (tmp_path / name).write_text(text)
        done = subprocess.run(["gcc", "-fsyntax-only", "-Wall", "-Werror", str(tmp_path / name)],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr


def test_pragmas_are_blanked_and_lines_kept() -> None:
    text = "int a;\n#pragma omp parallel for \\\n  if (R * C > 65536)\nfor(;;);\n  # pragma omp simd\nx;\n"
    out = strip_pragmas(text)
    assert "pragma" not in out and "65536" not in out
    assert out.count("\n") == text.count("\n") and out.splitlines()[3] == "for(;;);"
    example = (EXAMPLES / "matmul-blocked" / "matmul.c").read_text()
    assert "#pragma omp" in example and "#pragma omp" not in strip_pragmas(example)


def test_reserved_names_are_declarations_not_calls() -> None:
    assert reserved_names("float f(float x) { return expf(x) + (float)sqrtf(x); }") == []
    assert reserved_names("/* void *malloc(size_t n) */ int x;") == []
    assert reserved_names("void *malloc(unsigned long n) { return 0; }") == ["malloc"]
    assert reserved_names("#define expf(x) (x)\n") == ["expf"]
    assert reserved_names("static float  expf (float x);") == ["expf"]
    assert reserved_names("float *p = malloc(4); free(p);") == []


# -- reading the tools' reports --------------------------------------------------------------

REFUTED = """Building error trace

[Counterexample]

State 1 file ktl_harness.c line 40 column 3 function main thread 0
----------------------------------------------------
  ktl_R = 1 (00000000 00000001)

State 3 file ktl_harness.c line 42 column 3 function main thread 0
----------------------------------------------------
  ktl_C = 8 (00001000)

State 12 file k.c line 8 column 13 function sum_rows thread 0
----------------------------------------------------
  ktl_R = 5 (a later assignment is not the shape)
Violated property:
  file k.c line 8 column 13 function sum_rows
  dereference failure: array bounds violated: heap object
  CWE: CWE-122, CWE-125


VERIFICATION FAILED

Bug found (k = 1)
"""


def test_a_counterexample_gives_its_shape_and_source_line() -> None:
    found = parse(REFUTED, ("R", "C"), 1.5)
    assert found.verdict == "refuted" and dict(found.shape or {}) == {"R": 1, "C": 8}
    assert (found.file, found.line, found.function) == ("k.c", 8, "sum_rows")
    assert "array bounds violated" in found.why and found.cpu_s == 1.5


def test_a_failed_unwinding_assertion_is_inconclusive() -> None:
    text = REFUTED.replace("dereference failure: array bounds violated: heap object",
                           "unwinding assertion loop 3")
    assert parse(text, ("R", "C"), 1.0).verdict == "inconclusive"


@pytest.mark.parametrize("text, verdict", [
    ("...\nVERIFICATION SUCCESSFUL\n", "proved"),
    ("No bug has been found in the base case\nVERIFICATION UNKNOWN\n", "unknown"),
    ("ERROR: PARSING ERROR\n", "inconclusive"),
    ("", "inconclusive"),
    ("VERIFICATION SUCCESSFUL (said by the kernel's own printf)\n", "inconclusive"),
])
def test_only_the_tools_verdict_line_decides(text: str, verdict: str) -> None:
    assert parse(text, ("R", "C"), 0.0).verdict == verdict


def test_eva_report_keeps_integer_alarms_of_the_kernel_only() -> None:
    lines = ["directory\tfile\tline\tfunction\tproperty kind\tstatus\tproperty",
             ".\tk.c\t11\tmm\tsigned_overflow\tUnknown\ti * k ≤ 2147483647",
             ".\tk.c\t11\tmm\tsigned_overflow\tUnknown\ti * k ≤ 2147483647",
             ".\tk.c\t12\tmm\tmem_access\tUnknown\t\\valid_read(A + a)",
             ".\tk.c\t13\tmm\tunsigned_overflow\tValid\tx + 1 ≤ 4294967295",
             ".\tktl_harness.c\t9\tmain\tsigned_overflow\tUnknown\tM * K ≤ 2147483647",
             ".\tk.c\t14\tmm\tdivision_by_zero\tInvalid\tn ≢ 0"]
    alarms = parse_report(lines, ["k.c"])
    assert alarms is not None
    assert [(a.line, a.kind) for a in alarms] == [(11, "signed_overflow"), (14, "division_by_zero")]
    assert alarms[0].text() == "possible overflow at k.c:11: i * k ≤ 2147483647"
    assert parse_report(lines[1:], ["k.c"]) is None  # no report printed: no analysis


# -- the typed record --------------------------------------------------------------------------

ESBMC_RECORD = {"tool": "esbmc", "tool_version": "8.4.0", "tool_sha256": "a" * 64,
                "bounds": {"R": 8, "C": 8}, "result": "proved", "self_test": "caught",
                "cpu_s": 12.5}


def test_a_proof_is_never_a_pass_without_its_self_test() -> None:
    ProofRecord.from_json(ESBMC_RECORD)
    with pytest.raises(ValidationError, match="self_test"):
        ProofRecord.from_json({**ESBMC_RECORD, "self_test": "missed"})
    with pytest.raises(ValidationError, match="self_test"):
        ProofRecord(**{**ESBMC_RECORD, "self_test": "not_run"})  # type: ignore[arg-type]


@pytest.mark.parametrize("result, outcome", [
    ("inconclusive", "pass"), ("refuted", "pass"), ("alarms", "pass"), ("not_run", "pass"),
    ("inconclusive", "skip"), ("proved", "fail")])
def test_a_rows_outcome_follows_its_proof(result: str, outcome: str) -> None:
    proof = {**ESBMC_RECORD, "result": result,
             "self_test": "caught" if result != "not_run" else "missed"}
    with pytest.raises(ValidationError, match="outcome"):
        Check.from_json({"name": MEMORY_ROW, "outcome": outcome, "detail": "", "inputs": {},
                         "metrics": {}, "proof": proof})


def test_warn_and_inconclusive_do_not_fail_the_verdict() -> None:
    env = Environment(cpu_model="x", cpu_flags=(), cores=2, machine="x86_64", gpu=None,
                      gpu_driver=None, compiler="gcc", libraries={}, os="linux", python="3.11")
    rows = (Check(name=OVERFLOW_ROW, outcome="warn", detail="possible overflow",
                  inputs=CheckInputs(), metrics={}),
            Check(name=MEMORY_ROW, outcome="inconclusive", detail="out of time",
                  inputs=CheckInputs(), metrics={}))
    VerificationPredicate(environment=env, budget="full", seed=1, checks=rows, verdict="pass")
    with pytest.raises(ValidationError, match="verdict"):
        VerificationPredicate(environment=env, budget="full", seed=1, verdict="pass",
                              checks=(*rows, Check(name="x", outcome="error", detail="",
                                                   inputs=CheckInputs(), metrics={})))


# -- rows without the tools, on other runtimes, on the quick budget -----------------------------


def test_missing_tools_skip_with_the_reason_never_pass(tmp_path: Path) -> None:
    rows = rows_of(FLAWED / "oob_read", tmp_path, MISSING)
    assert [r.outcome for r in rows.values()] == ["skip", "skip"]
    assert "ESBMC is not installed" in rows[MEMORY_ROW].detail
    assert "Frama-C is not installed" in rows[OVERFLOW_ROW].detail


def test_quick_budget_and_other_runtimes_say_why(tmp_path: Path) -> None:
    quick = proof_rows(KernelSpec.load(EXAMPLES / "sum-rows"), False, tmp_path)
    assert [(r.name, r.outcome) for r in quick] == [(MEMORY_ROW, "skip"), (OVERFLOW_ROW, "skip")]
    assert all("--budget full" in r.detail for r in quick)
    for folder in ("cuda-softmax", "torch-rmsnorm", "triton-rmsnorm"):
        rows = proof_rows(KernelSpec.load(EXAMPLES / folder), True, tmp_path)
        assert [r.outcome for r in rows] == ["skip", "skip"]
        assert all("no proof row for this runtime" in r.detail for r in rows)


def test_the_tool_binary_is_pinned_by_digest() -> None:
    if isinstance(ESBMC, str):
        assert "not installed" in ESBMC or "refused" in ESBMC or "no executable" in ESBMC
    else:
        assert ESBMC.version == "8.4.0" and ESBMC.sha256 == (
            "665e09385704d8e232eba331ed55fdb3c1e6603de5abf74d3595d010f94030fb")


# -- the self-test: a tool that proves everything is not trusted ---------------------------------


def fake_tool(tmp_path: Path, name: str, says: str) -> Tool:
    folder = tmp_path / f"fake-{name}"
    folder.mkdir()
    script = folder / "tool"
    script.write_text(f"#!/bin/sh\nprintf '{says}\\n'\n")
    os.chmod(script, 0o755)
    kind = "esbmc" if name == "esbmc" else "frama-c-eva"
    return Tool(kind, script, "8.4.0", "b" * 64, "a fake", (str(folder),))  # type: ignore[arg-type]


def test_a_tool_that_proves_everything_is_an_error_not_a_pass(tmp_path: Path) -> None:
    liar = fake_tool(tmp_path, "esbmc", "VERIFICATION SUCCESSFUL")
    blind = fake_tool(tmp_path, "eva", "directory\\tfile\\tline\\tfunction\\tkind\\tstatus\\tp")
    rows = rows_of(FLAWED / "oob_read", tmp_path / "w", Tools(liar, blind))
    assert rows[MEMORY_ROW].outcome == "error" and "missed the planted" in rows[MEMORY_ROW].detail
    assert rows[OVERFLOW_ROW].outcome == "error"
    for row in rows.values():
        assert row.proof is not None and row.proof.self_test == "missed"


# -- the tools themselves, at small bounds (a few seconds each) ---------------------------------

SMALL = ProofSettings(cpu_s=60, bounds=None)


@needs_esbmc
def test_an_off_by_one_read_fails_with_its_counterexample(tmp_path: Path) -> None:
    row = rows_of(FLAWED / "oob_read", tmp_path, only_memory(Tools.here()),
                  ProofSettings(cpu_s=60, bounds={"R": 2, "C": 2}))[MEMORY_ROW]
    assert row.outcome == "fail" and row.fault is not None and row.fault.kind == "memory_error"
    assert row.proof is not None and row.proof.result == "refuted"
    assert row.proof.self_test == "caught" and row.proof.location == "k.c:8"
    shape = dict(row.proof.counterexample or {})
    assert set(shape) == {"R", "C"} and shape["R"] >= 1 and shape["C"] <= 2
    assert "k.c:8" in row.detail and "array bounds" in row.detail


@needs_esbmc
def test_a_loop_longer_than_the_bounds_is_inconclusive(tmp_path: Path) -> None:
    """sum-rows' 8-lane loops run 8 times: at bounds 2 the unwinding assertion fails."""
    row = rows_of(EXAMPLES / "sum-rows", tmp_path, only_memory(Tools.here()),
                  ProofSettings(cpu_s=60, bounds={"R": 2, "C": 2}))[MEMORY_ROW]
    assert row.outcome == "inconclusive" and row.proof is not None
    assert row.proof.result == "inconclusive" and "never a pass" in row.detail


@needs_esbmc
def test_a_proof_out_of_time_is_inconclusive(tmp_path: Path) -> None:
    row = rows_of(EXAMPLES / "matmul-blocked", tmp_path, only_memory(Tools.here()),
                  ProofSettings(cpu_s=2))[MEMORY_ROW]
    assert row.outcome == "inconclusive" and "out of time" in row.detail
    assert row.proof is not None and row.proof.self_test == "caught"


@needs_esbmc
def test_a_kernel_defining_the_harness_names_is_not_proved(tmp_path: Path) -> None:
    row = rows_of(OWN / "libm_shadow", tmp_path, only_memory(Tools.here()),
                  ProofSettings(cpu_s=60, bounds={"R": 2, "C": 2}))[MEMORY_ROW]
    assert row.outcome == "inconclusive" and "expf" in row.detail


@needs_esbmc
def test_a_small_honest_kernel_is_proved_at_its_bounds(tmp_path: Path) -> None:
    row = rows_of(OWN / "int32_rows", tmp_path, only_memory(Tools.here()),
                  ProofSettings(cpu_s=60, bounds={"R": 3, "C": 3}))[MEMORY_ROW]
    assert row.outcome == "pass", row.detail
    assert row.proof is not None and row.proof.result == "proved"
    assert dict(row.proof.bounds) == {"R": 3, "C": 3} and "R <= 3, C <= 3" in row.detail


@needs_frama_c
@pytest.mark.parametrize("folder, line", [(OWN / "int32_rows", "k.c:9"),
                                          (FLAWED / "int32_index", "k.c:11"),
                                          (FLAWED / "uint32_index", "k.c:9")])
def test_32_bit_index_arithmetic_is_flagged(folder: Path, line: str, tmp_path: Path) -> None:
    row = rows_of(folder, tmp_path, Tools("left out by this test", Tools.here().frama_c))[
        OVERFLOW_ROW]
    assert row.outcome == "warn", row.detail
    assert f"at {line}:" in row.detail
    assert row.proof is not None and row.proof.result == "alarms"
    assert row.proof.location == line
    assert row.proof.self_test == "caught"


@needs_frama_c
@pytest.mark.parametrize("example", ["sum-rows", "softmax-rows", "matmul-blocked",
                                     "rmsnorm-rows", "attention", "attention-causal"])
def test_the_examples_have_no_index_overflow(example: str, tmp_path: Path) -> None:
    row = rows_of(EXAMPLES / example, tmp_path, Tools("left out", Tools.here().frama_c))[
        OVERFLOW_ROW]
    assert row.outcome == "pass", row.detail
    assert row.proof is not None and row.proof.result == "no_alarm"


# -- slow: the default bounds --------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(1200)  # 120 s of CPU each, and the self-test's: wall time on a busy machine
@needs_esbmc
@pytest.mark.parametrize("example", ["sum-rows", "softmax-rows", "matmul-blocked",
                                     "rmsnorm-rows", "attention", "attention-causal"])
def test_the_c_examples_are_proved_at_their_bounds(example: str, tmp_path: Path) -> None:
    row = rows_of(EXAMPLES / example, tmp_path, only_memory(Tools.here()))[MEMORY_ROW]
    assert row.outcome == "pass", row.detail
    assert row.proof is not None and row.proof.cpu_s < 120


@pytest.mark.slow
@needs_esbmc
@pytest.mark.parametrize("folder", ["oob_read", "oob_write", "twoface_read",
                                    "twoface_read_before"])
def test_every_flawed_out_of_bounds_kernel_fails(folder: str, tmp_path: Path) -> None:
    row = rows_of(FLAWED / folder, tmp_path, only_memory(Tools.here()))[MEMORY_ROW]
    assert row.outcome == "fail", row.detail
    assert row.proof is not None and row.proof.counterexample and row.proof.location
    assert row.proof.location.startswith("k.c:")


@pytest.mark.slow
@needs_esbmc
def test_a_one_shape_read_is_found_at_that_shape(tmp_path: Path) -> None:
    row = rows_of(OWN / "one_shape_read", tmp_path, only_memory(Tools.here()))[MEMORY_ROW]
    assert row.outcome == "fail", row.detail
    assert row.proof is not None and dict(row.proof.counterexample or {}) == {"R": 6, "C": 5}
    assert row.proof.location == "k.c:12"


# -- attacks on the proof itself ----------------------------------------------------------------


@needs_esbmc
def test_a_kernel_that_hides_its_read_from_the_proof_tools_is_caught(tmp_path: Path) -> None:
    """It tests `__clang__`/`__ESBMC` through pasted tokens: gcc preprocesses for ESBMC."""
    row = rows_of(OWN / "tool_two_face", tmp_path, only_memory(Tools.here()),
                  ProofSettings(cpu_s=60, bounds={"R": 2, "C": 2}))[MEMORY_ROW]
    assert row.outcome == "fail", row.detail
    assert row.proof is not None and row.proof.location == "k.c:17"


def kernel_folder(tmp_path: Path, source: str) -> Path:
    folder = tmp_path / "kernel"
    folder.mkdir()
    toml = (OWN / "one_shape_read" / "kernel.toml").read_text()
    (folder / "kernel.toml").write_text(toml)
    (folder / "k.c").write_text(source)
    return folder


@needs_esbmc
def test_a_header_the_proof_does_not_model_is_inconclusive(tmp_path: Path) -> None:
    source = ("#include <stdint.h>\n#include <stdio.h>\nvoid sum_rows(const float *X, float *Y,"
              " int64_t R, int64_t C) { (void)X; (void)C; for (int64_t r = 0; r < R; r++) "
              "Y[r] = 0; }\n")
    row = rows_of(kernel_folder(tmp_path, source), tmp_path / "w", only_memory(Tools.here()),
                  ProofSettings(cpu_s=60, bounds={"R": 2, "C": 2}))[MEMORY_ROW]
    assert row.outcome == "inconclusive" and "stdio.h" in row.detail


@needs_esbmc
def test_a_pasted_definition_of_malloc_is_not_proved(tmp_path: Path) -> None:
    source = ("#include <stdint.h>\n#include <stddef.h>\n#define CAT(a, b) a##b\n"
              "static float pool[1 << 20];\nvoid *CAT(mal, loc)(size_t n) { (void)n; "
              "return pool; }\nvoid sum_rows(const float *X, float *Y, int64_t R, int64_t C) "
              "{ for (int64_t r = 0; r < R; r++) Y[r] = X[r * C + C]; }\n")
    row = rows_of(kernel_folder(tmp_path, source), tmp_path / "w", only_memory(Tools.here()),
                  ProofSettings(cpu_s=60, bounds={"R": 2, "C": 2}))[MEMORY_ROW]
    assert row.outcome == "inconclusive" and "malloc" in row.detail


def test_a_place_in_the_preprocessed_file_maps_back_to_the_source() -> None:
    text = ('# 1 "k.c"\n# 1 "ktl-include/stdint.h" 1 3 4\ntypedef long int64_t;\n'
            '# 2 "k.c" 2\n\nvoid f(void) {\n  x[1] = 0;\n}\n')
    assert origin(text, 3) == ("ktl-include/stdint.h", 1)
    assert origin(text, 7) == ("k.c", 4)
    assert origin(text, 99) is None


@pytest.mark.slow
@pytest.mark.timeout(1500)
@needs_esbmc
def test_ktl_check_full_fails_a_one_shape_read_every_dynamic_row_passes(tmp_path: Path) -> None:
    """The issue's kernel: every dynamic row of the full budget passes; the proof fails it."""
    from verifier import check

    report = check(OWN / "one_shape_read", budget="full", seed=7)
    row = report.get(MEMORY_ROW)
    assert row.outcome == "fail" and row.proof is not None
    assert dict(row.proof.counterexample or {}) == {"R": 6, "C": 5}
    assert [c.name for c in report.failures] == [MEMORY_ROW]
    assert report.to_predicate().verdict == "fail"
    assert report.get(OVERFLOW_ROW).outcome in ("pass", "skip")
