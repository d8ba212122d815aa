"""Round 4 of the torch path's review: each class has an attacker of our own here (or in
the test named beside it), and the honest controls pass.

Unit tests run on the pure parts (the rows, the input stream, the cost rule); the few that
start sandboxed Pythons are marked slow beyond one or two.
"""

from __future__ import annotations

from pathlib import Path

from verifier.checks._torch_rows import INTERPRETER_ONLY, exercised_row
from verifier.runtimes import audit_solution

ROOT = Path(__file__).resolve().parent
FLAWED = ROOT / "kernelbench" / "flawed"
SOLUTIONS = ROOT / "kernelbench" / "solutions"


# -- item 7: say what was not exercised ----------------------------------------------------

def test_device_twoface_names_the_branch_it_did_not_run() -> None:
    findings = audit_solution((FLAWED / "device_twoface.py").read_bytes())
    row = exercised_row(findings, "triton", gpu=False)
    assert row.outcome == "skip"
    assert INTERPRETER_ONLY in row.detail
    assert "ran only their the CPU side" not in row.detail
    assert "line 33 (.is_cuda)" in row.detail
    assert row.metrics == {"device_branches": 1.0, "interpreter_only": 1.0}


def test_a_torch_solution_without_device_branches_exercised_everything() -> None:
    findings = audit_solution((SOLUTIONS / "gelu.py").read_bytes())
    row = exercised_row(findings, "torch", gpu=False)
    assert row.outcome == "pass" and row.metrics["device_branches"] == 0.0


def test_an_honest_triton_solution_on_the_cpu_is_interpreter_only() -> None:
    findings = audit_solution((SOLUTIONS / "gelu_triton.py").read_bytes())
    row = exercised_row(findings, "triton", gpu=False)
    assert row.outcome == "skip" and "interpreter path only" in row.detail
    assert exercised_row(findings, "triton", gpu=True).outcome == "pass"
