"""A C ABI kernel on device pointers against PyTorch's built-in op (runtime c on the CPU
device here; runtime cuda on a GPU in benchmarks/gpu_check.sh)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="torch is installed by `make test`")

from attest.predicates import BenchmarkPredicate
from verifier.benchmark._cabi_bench import (
    BUILTIN_BASELINES,
    cabi_bench,
    reference_source,
    solution_source,
)
from verifier.benchmark._device_bench import DeviceBenchSettings
from verifier.device import HostDevice, Peaks
from verifier.kernel import KernelSpec
from verifier.ops import OPS

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_catalogue_op_has_a_pytorch_baseline_and_a_ctypes_module(name: str) -> None:
    op = OPS[name]
    assert name in BUILTIN_BASELINES
    dims = {d: 3 for d in op.dims}
    ast.parse(reference_source(op, dims))
    ast.parse(solution_source(op, "entry_fn"))


def test_the_baseline_modules_compute_the_catalogue_reference() -> None:
    """Each generated reference, run in torch here, matches the float64 catalogue reference."""
    import numpy as np
    import torch

    rng = np.random.default_rng(0)
    for name, op in OPS.items():
        dims = {d: 4 for d in op.dims}
        scope: dict[str, object] = {}
        exec(compile(reference_source(op, dims), name, "exec"), scope)  # our own source
        inputs = op.random_inputs(dims, rng)
        got = scope["Model"]()(*[torch.from_numpy(x) for x in inputs])  # type: ignore[operator]
        want = op.reference([x.astype(np.float64) for x in inputs], dims)[0]
        assert np.allclose(got.numpy(), want, rtol=1e-4, atol=1e-5), name


@pytest.mark.slow
def test_a_c_kernel_on_the_cpu_device_is_timed_against_torch_and_validates(tmp_path: Path) -> None:
    # batches of up to 4096 calls (20 ms of work): with 8 calls (0.2 ms) the empty batches'
    # noise on a loaded machine exceeded the work and the estimate fell to 0 ns a call
    settings = DeviceBenchSettings(device="cpu", time_budget_s=1.0, min_reps=4, max_reps=6,
                                   min_batch_ns=2e7, max_batch=4096)
    host = HostDevice(Peaks(1e12, 1e11, "injected"), "test cpu", "2")
    report = cabi_bench(KernelSpec.load(EXAMPLES / "softmax-rows"), settings, host,
                        shapes=[{"R": 64, "C": 512}], seed=5)
    assert not report.faults, report.notes
    body = report.to_predicate()
    assert BenchmarkPredicate.from_json(body.to_json()) == body
    assert body.method.baseline == "torch-softmax" and body.workload.op == "softmax"
    assert body.results[0].shape == {"R": 64, "C": 512} and body.device is not None
