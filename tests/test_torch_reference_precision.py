"""The reference's answer a torch kernel is judged against is computed in float64 and rounded
to the output's dtype, not computed at the dtype (the reference driver, in this process)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from verifier.tensors import compare_tensor
from verifier.worker._torch_child import _DeviceSync, _Server

torch = pytest.importorskip("torch", reason="torch is installed by `make test`")

NAIVE_NORM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Normalises rows with the one-pass variance E[x^2] - E[x]^2 (cancels in float32)."""

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = (x * x).mean(dim=-1, keepdim=True) - mean * mean
        return (x - mean) / torch.sqrt(var.clamp_min(0.0) + 1e-5)


def get_inputs():
    return [torch.randn(8, 256) * 0.1 + 30.0]


def get_init_inputs():
    return []
'''
SQUARE = '''
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * x / 1e30


def get_inputs():
    return []


def get_init_inputs():
    return []
'''
IN, OUT, ROWS, COLS = 4096, 65536, 8, 256


def _server(tmp: Path, source: str) -> tuple[_Server, bytearray]:
    path = tmp / "reference.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("precision_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    mem = bytearray(1 << 20)
    server = _Server("reference", mem, module, "Model", _DeviceSync(torch))
    server.init({"seed": 0, "init": [], "dtype": "float32", "params_at": 0, "room": IN})
    return server, mem


def _call(server: _Server, mem: bytearray, x: np.ndarray, exact: bool) -> Any:
    np.frombuffer(mem, dtype=np.float32, count=x.size, offset=IN)[:] = x.reshape(-1)
    body = server.calls({"cmd": "call", "exact": exact, "calls": [
        {"in": [{"t": [IN, list(x.shape), "float32"]}], "out": [[OUT, x.size * 4]],
         "as": ["float32"]}]})
    assert body["outs"] == [[[list(x.shape), "float32", True]]]
    return np.frombuffer(mem, dtype=np.float32, count=x.size, offset=OUT).astype(
        np.float64).reshape(x.shape)


def test_an_accurate_kernel_is_judged_against_the_ops_value_not_float32s_errors(
        tmp_path: Path) -> None:
    server, mem = _server(tmp_path, NAIVE_NORM)
    x = (np.random.default_rng(5).standard_normal((ROWS, COLS)) * 0.1 + 30.0).astype(np.float32)
    x64 = x.astype(np.float64)
    centred = x64 - x64.mean(axis=-1, keepdims=True)
    truth = centred / np.sqrt((centred ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    accurate = truth.astype(np.float32).astype(np.float64)  # a stable kernel, correctly rounded
    exact = _call(server, mem, x, exact=True)
    at_dtype = _call(server, mem, x, exact=False)
    # against the float64 reference: the accurate kernel passes, a copy of the float32
    # evaluation (bit for bit the old reference's answer) fails
    assert compare_tensor(accurate, exact, "float32").ok
    assert not compare_tensor(at_dtype, exact, "float32").ok
    # against a float32 reference it was the other way round
    assert not compare_tensor(accurate, at_dtype, "float32").ok
    assert compare_tensor(at_dtype, at_dtype, "float32").ok


def test_the_float64_answer_is_rounded_to_the_dtype_overflow_included(tmp_path: Path) -> None:
    server, mem = _server(tmp_path, SQUARE)
    x = np.asarray([[1e20, 3.0, -2e19, 1e-20]], dtype=np.float32)
    exact = _call(server, mem, x, exact=True)
    want = (x.astype(np.float64) ** 2 / 1e30).astype(np.float32)
    assert np.array_equal(exact, want.astype(np.float64))
    # in float32 x * x overflows before the division: the float64 answer is finite
    assert np.isinf(_call(server, mem, x, exact=False)[0, 0]) and np.isfinite(exact[0, 0])


def test_only_the_reference_computes_in_float64(tmp_path: Path) -> None:
    server, _ = _server(tmp_path, SQUARE)
    server.role = "candidate"
    with pytest.raises(PermissionError):
        server.exact_call({"in": [], "out": []})


STABLE = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Two passes: the mean, then the variance of the centred rows (no cancellation)."""

    def forward(self, x):
        centred = x - x.mean(dim=-1, keepdim=True)
        return centred / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + 1e-5)
'''


@pytest.mark.slow
def test_check_passes_an_accurate_kernel_whose_float32_reference_is_not(tmp_path: Path) -> None:
    from tests.test_torch_check import MANIFEST
    from verifier import check

    folder = tmp_path / "norm"
    folder.mkdir()
    (folder / "reference.py").write_text(NAIVE_NORM)
    (folder / "solution.py").write_text(STABLE)
    (folder / "kernel.toml").write_text(MANIFEST.format(runtime="torch"))
    report = check(folder, seed=7)
    assert "computed in float64" in report.get("reference").detail
    for row in ("correctness.random", "correctness.shapes"):
        assert report.get(row).outcome == "pass", report.get(row).detail


def _session_with(ref: Any) -> Any:
    from types import SimpleNamespace

    from verifier.runtimes import TorchSession

    session = object.__new__(TorchSession)
    session.exact = True
    session.precision = "float64, each output rounded to its dtype"
    session.kernel = SimpleNamespace(dtype="float32")  # type: ignore[assignment]
    session._ref = ref  # type: ignore[method-assign]
    return session


def test_a_module_that_cannot_run_in_float64_is_judged_at_its_dtype_and_says_so() -> None:
    from verifier.runtimes import ReferenceError_
    from verifier.worker import KernelRaised

    asked: list[bool] = []

    def ref(body: dict[str, Any]) -> dict[str, Any]:
        asked.append(bool(body.get("exact")))
        if body.get("exact"):
            raise ReferenceError_("the reference module failed") from KernelRaised(
                "RuntimeError: expected scalar type Float but found Double")
        return {"outs": [[[[2], "float32", True]]]}

    session = _session_with(ref)
    spec = {"in": [], "out": [[0, 8]]}
    assert session._reference_outputs(spec, [((2,), "float32")])["outs"]
    assert session._reference_outputs(spec, [((2,), "float32")])["outs"]
    assert asked == [True, False, False]  # tried once, then at the dtype
    assert session.precision.startswith("float32: its forward does not run in float64")


def test_a_reference_that_dies_in_float64_is_not_retried_at_its_dtype() -> None:
    from verifier.runtimes import ReferenceError_
    from verifier.worker import WorkerGone

    def ref(body: dict[str, Any]) -> dict[str, Any]:
        raise ReferenceError_("the reference module failed") from WorkerGone(None, True)

    with pytest.raises(ReferenceError_):
        _session_with(ref)._reference_outputs({"in": [], "out": []}, [((2,), "float32")])


WHERE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    """Answers 1 where its input is on its own weight's device, 0 where it is not."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        same = x.device == self.w.device
        return torch.full((1,), 1.0 if same else 0.0, dtype=x.dtype, device="cpu")


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("exact", [False, True])
def test_a_module_moved_to_a_device_gets_its_calls_inputs_there(tmp_path: Path,
                                                                  exact: bool) -> None:
    """The device bench moves both modules to the device (`init` with "device"), then asks the
    reference for its output shapes with a plain call: the arena's host views must follow the
    module there (on the H200 every torch bench failed with "Expected all tensors to be on the
    same device" before). The "meta" device stands in for "cuda" on a machine without one."""
    server, mem = _server(tmp_path, WHERE)
    # what `init` with "device" does, to a device that needs no hardware (its weights are
    # not copied back to the arena, which a "meta" tensor cannot do)
    server.device = "meta"
    server.model = server.model.to("meta")
    server.exact = server.exact.to("meta")
    x = np.arange(4, dtype=np.float32)
    np.frombuffer(mem, dtype=np.float32, count=x.size, offset=IN)[:] = x
    body = server.calls({"cmd": "call", "exact": exact, "calls": [
        {"in": [{"t": [IN, [4], "float32"]}], "out": [[OUT, 4]], "as": ["float32"]}]})
    assert body["outs"] == [[[[1], "float32", True]]]
    assert np.frombuffer(mem, dtype=np.float32, count=1, offset=OUT)[0] == 1.0
