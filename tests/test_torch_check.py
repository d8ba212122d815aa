"""`ktl check` on kernels defined by a PyTorch module: an honest solution passes, and each
flawed solution in tests/torch_flawed fails with its typed fault named.

Every check starts two sandboxed Pythons with torch (a few seconds each), so the
flawed solutions beyond a handful are marked slow.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is installed by `make test`")

from attest.predicates import VerificationPredicate
from verifier import check
from verifier.checks import CheckReport
from verifier.sandbox import ChildResult, Limits, run_sandboxed
from verifier.worker import CANDIDATE_GRANTS, torch_child_env

FLAWED = Path(__file__).resolve().parent / "torch_flawed"
MANIFEST = """name = "acme/linear-relu"
version = "0.1.0"
op = "torch"
runtime = "{runtime}"
reference = "reference.py"
solution = "solution.py"
sources = ["reference.py", "solution.py"]
entry = "ModelNew"
flags = []
dtype = "float32"
[generator]
agent = "test"
agent_version = "1"
model = "m"
[target]
hardware_class = "cpu"
"""


def torch_folder(tmp: Path, solution: str, runtime: str = "torch",
                 reference: str = "reference.py") -> Path:
    folder = tmp / solution.removesuffix(".py")
    folder.mkdir()
    shutil.copy(FLAWED / reference, folder / "reference.py")
    shutil.copy(FLAWED / solution, folder / "solution.py")
    (folder / "kernel.toml").write_text(MANIFEST.format(runtime=runtime))
    return folder


def faults(report: CheckReport) -> dict[str, str]:
    """row name -> fault kind, for the failed rows."""
    return {c.name: c.fault.kind for c in report.checks if c.fault is not None}


@pytest.mark.slow
def test_honest_solution_passes_every_row(tmp_path: Path) -> None:
    report = check(torch_folder(tmp_path, "honest.py"), seed=11)
    assert report.passed, [(c.name, c.detail) for c in report.failures]
    names = [c.name for c in report.checks]
    assert report.get("static").detail == "no static findings on the solution's source" or \
        "torch_only" in report.get("static").detail
    for row in ("build", "static", "reference", "correctness.random", "correctness.shapes", "special_values",
                "inputs.unchanged", "outputs.fresh", "determinism", "state.reuse", "concurrency",
                "escape", "sandbox", "exercised"):
        assert row in names
    assert report.get("exercised").outcome == "pass"  # no device branch, not Triton
    reference = report.get("reference")
    assert "sha256" in reference.detail and "torch 2." in reference.detail
    assert reference.metrics["weight_inits"] >= 2 and reference.metrics["rtol"] == 1e-4
    assert report.environment.libraries["torch"].startswith("2.")
    parsed = VerificationPredicate.from_json(report.to_predicate().to_json())
    assert parsed.torch is not None and parsed.torch.reference_sha256 in reference.detail
    assert len(parsed.torch.init_seeds) >= 2 and parsed.torch.dtype == "float32"


@pytest.mark.slow
def test_seeds_are_fresh_and_recorded(tmp_path: Path) -> None:
    folder = torch_folder(tmp_path, "honest.py")
    one, two = check(folder), check(folder)
    assert one.seed != two.seed
    assert one.get("reference").detail != two.get("reference").detail  # other weight seeds


@pytest.mark.slow
def test_stale_output_fails(tmp_path: Path) -> None:
    got = faults(check(torch_folder(tmp_path, "stale.py")))
    assert got["correctness.random"] == "wrong"
    assert got["state.reuse"] == "stateful"


@pytest.mark.slow
def test_a_wrong_kernel_is_not_blamed_on_state(tmp_path: Path) -> None:
    """Issue 42: a solution that returns its input is wrong on fresh buffers too: its
    state.reuse row names it wrong, never "caching by data_ptr"."""
    report = check(torch_folder(tmp_path, "input.py"))
    row = report.get("state.reuse")
    assert row.fault is not None and row.fault.kind == "wrong", row
    assert "fresh buffer too" in row.detail and "data_ptr" not in row.detail


@pytest.mark.slow
def test_try_except_fallback_fails_on_its_static_finding(tmp_path: Path) -> None:
    report = check(torch_folder(tmp_path, "fallback.py"))
    assert faults(report) == {"static": "static_finding"}  # every run-time row passes
    assert report.get("static").metrics["finding_torch_fallback"] >= 1
    assert "torch_fallback" in report.get("static").detail


@pytest.mark.slow
def test_mutated_input_fails(tmp_path: Path) -> None:
    assert faults(check(torch_folder(tmp_path, "mutate.py")))["inputs.unchanged"] == "input_mutated"


@pytest.mark.slow
def test_nan_outputs_fail_as_non_finite(tmp_path: Path) -> None:
    got = faults(check(torch_folder(tmp_path, "nan.py")))
    assert got["correctness.random"] == "non_finite"
    assert got["special_values"] == "non_finite"  # NaN is no wildcard where the reference has NaN


@pytest.mark.slow
@pytest.mark.parametrize(("solution", "row", "kind"), [
    ("input.py", "correctness.random", "wrong"),
    ("ptrcache.py", "state.reuse", "stateful"),
    ("lazy.py", "outputs.fresh", "bad_output"),
    ("thread.py", "escape", "escaped"),
    ("firstn.py", "correctness.shapes", "wrong"),
    ("shape.py", "correctness.shapes", "crash"),
    ("bf16.py", "correctness.random", "loose"),
    ("answers.py", "correctness.random", "bad_answer"),
    ("process.py", "escape", "escaped"),
    ("escape_fs.py", "correctness.random", "crash"),
    ("timer.py", "static", "static_finding"),
])
def test_flawed_solution_fails_with_its_fault(tmp_path: Path, solution: str, row: str,
                                              kind: str) -> None:
    report = check(torch_folder(tmp_path, solution))
    assert not report.passed
    assert faults(report).get(row) == kind, [(c.name, c.outcome, c.detail) for c in report.checks]


@pytest.mark.slow
def test_a_module_drawing_random_numbers_is_judged_seeded_alike(tmp_path: Path) -> None:
    """Dropout in training mode (KernelBench leaves modules so): one-thread calls are seeded
    alike in both processes, so an honest copy passes and one that leaves the dropout out
    fails; two threads share the generator, so that row is skipped, saying why."""
    honest = check(torch_folder(tmp_path, "dropout_honest.py", reference="reference_dropout.py"))
    assert honest.passed, [(c.name, c.detail) for c in honest.failures]
    row = honest.get("concurrency")
    # the threads' calls are not seeded (one generator for both), so their answers differ
    assert row.outcome == "skip" and "random generator" in row.detail, row.detail
    missing = check(torch_folder(tmp_path, "dropout_missing.py",
                                 reference="reference_dropout.py"))
    assert faults(missing).get("correctness.random") == "wrong"


@pytest.mark.slow
def test_a_problem_whose_own_module_is_not_reentrant_does_not_fail_its_honest_copy(
        tmp_path: Path) -> None:
    """KernelBench's VanillaRNN keeps its hidden state in a tensor it writes each call: its
    honest copy differs in two threads as the module itself does, so the row is skipped,
    saying why (a non-reentrant kernel for a reentrant problem still fails: below)."""
    report = check(torch_folder(tmp_path, "stateful_honest.py",
                                reference="reference_stateful.py"))
    assert report.passed, [(c.name, c.detail) for c in report.failures]
    row = report.get("concurrency")
    assert row.outcome == "skip" and "not reentrant" in row.detail, row.detail


@pytest.mark.slow
def test_a_kernel_right_only_at_even_widths_fails_the_shapes_row(tmp_path: Path) -> None:
    """The first shape variant makes every size odd, the innermost one too (a wrong-solution
    sample of the public level 1 passed three random variants that never touched it)."""
    report = check(torch_folder(tmp_path, "even_width_only.py",
                                reference="reference_elementwise.py"), seed=3)
    row = report.get("correctness.shapes")
    assert row.outcome == "fail" and "17x65" in row.detail, row.detail  # 1 % off: "loose"
    assert report.get("correctness.random").outcome == "pass"  # the example's sizes are even


@pytest.mark.slow
def test_an_unused_dropout_member_does_not_excuse_a_kernel_that_is_not_reentrant(
        tmp_path: Path) -> None:
    """The attacker's problem names a Dropout it never calls: its answers do not depend on
    the generator, so the two-thread row is judged and the shared scratch buffer fails it."""
    report = check(torch_folder(tmp_path, "shared_scratch.py",
                                reference="reference_unused_dropout.py"))
    row = report.get("concurrency")
    assert row.outcome == "fail" and faults(report)["concurrency"] == "not_reentrant", (
        row.outcome, row.detail)


@pytest.mark.slow
def test_the_sandbox_denies_a_socket_and_names_it(tmp_path: Path) -> None:
    report = check(torch_folder(tmp_path, "escape_fs.py"))
    assert "socket" in report.get("correctness.random").detail


def _import_torch(tmp: Path, address_space: int) -> ChildResult:
    return run_sandboxed([sys.executable, "-s", "-c", "import torch; print(torch.ones(2).sum())"],
                         tmp, Limits(cpu_s=60, wall_s=120.0, address_space=address_space),
                         torch_child_env(1, False))


def test_torch_needs_its_address_space_grant_and_no_more_syscalls(tmp_path: Path) -> None:
    """The grant's address space is what importing torch needs (a C kernel's 1 GiB-class
    limit of 256 MiB is not enough), and no system call is added to the filter for it."""
    starved = _import_torch(tmp_path, 256 * 2**20)
    assert not starved.ok and starved.denied_syscall is None
    granted = _import_torch(tmp_path, CANDIDATE_GRANTS.address_space)
    assert granted.ok, granted.stderr[-500:]
    assert granted.denied_syscall is None and granted.layers.seccomp != "none"
    assert set(CANDIDATE_GRANTS.env) == {"OMP_NUM_THREADS", "TRITON_INTERPRET"}
    env = torch_child_env(3, True)
    assert env["OMP_NUM_THREADS"] == "3" and env["TRITON_INTERPRET"] == "1"
    assert "TRITON_INTERPRET" not in torch_child_env(1, False)


@pytest.mark.slow
def test_triton_solution_runs_through_the_interpreter(tmp_path: Path) -> None:
    report = check(torch_folder(tmp_path, "honest_triton.py", runtime="triton"))
    assert report.passed, [(c.name, c.detail) for c in report.failures]
    assert report.get("concurrency").outcome == "skip"
    assert "interpreter" in report.get("concurrency").detail
    exercised = report.get("exercised")  # round 4: a CPU pass says what it did not run
    assert exercised.outcome == "skip" and "interpreter path only" in exercised.detail
    assert exercised.metrics["interpreter_only"] == 1.0
    assert report.get("correctness.random").metrics["calls"] >= 6
