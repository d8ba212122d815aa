"""The torch/triton examples: each folder is exactly what `ktl import kernelbench` writes
from its reference and solution, has no static findings, and passes `ktl check`."""

from __future__ import annotations

from pathlib import Path

import pytest

from client.kernelbench import ImportOptions, import_kernelbench
from verifier import KernelSpec, check, get_runtime
from verifier.runtimes import audit_solution

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TORCH_EXAMPLES = {"torch-rmsnorm": "torch", "triton-bias-gelu": "triton", "triton-rmsnorm": "triton"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TORCH_EXAMPLES))
def test_example_is_what_the_importer_writes(tmp_path: Path, name: str) -> None:
    folder = EXAMPLES / name
    spec = KernelSpec.load(folder)
    assert (spec.op, spec.runtime) == ("torch", TORCH_EXAMPLES[name])
    opts = ImportOptions(name=spec.name, version=spec.version, agent=spec.generator.agent,
                         agent_version=spec.generator.agent_version, model=spec.generator.model)
    import_kernelbench(folder / "reference.py", folder / "solution.py", tmp_path / "k", opts)
    assert (tmp_path / "k" / "kernel.toml").read_text() == (folder / "kernel.toml").read_text()


@pytest.mark.parametrize("name", sorted(TORCH_EXAMPLES))
def test_example_has_no_static_findings(name: str) -> None:
    assert audit_solution((EXAMPLES / name / "solution.py").read_bytes()) == ()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TORCH_EXAMPLES))
def test_example_passes_check(name: str) -> None:
    folder = EXAMPLES / name
    reason = get_runtime(KernelSpec.load(folder).runtime).unavailable_reason()
    if reason:
        pytest.skip(f"runtime unavailable here: {reason}")
    report = check(folder, budget="quick")
    assert report.passed, [(c.name, c.detail) for c in report.failures]
