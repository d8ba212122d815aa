"""A C ABI kernel (runtime `cuda`, or `c` on the CPU) timed on device pointers against
PyTorch's built-in op on the same device.

For each shape ktl writes a KernelBench-format folder of its own: `reference.py`, the
catalogue op in PyTorch (`torch.matmul`, `torch.softmax`, `torch.sum`, RMSNorm as torch
ops, `scaled_dot_product_attention`, causal or not), and `solution.py`, a module that
loads the built library with ctypes and calls the kernel's entry with the data pointers
of device tensors (inputs staged once per shape, each call its own output tensor) and
its dimensions, in the C ABI's order. Both run as `verifier.benchmark._device_bench`
runs any torch kernel: same processes, same clock, same floor (with the op's FLOPs).
The host wrapper of runtime `cuda` (copies in, launch, copies out) is not timed here: it
remains for the correctness rows of `ktl check` that need guards around every buffer.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from attest.ops import op_flops
from attest.predicates import BenchmarkResult, derived_gflops
from verifier.benchmark._device_bench import DeviceBenchSettings, bench_module
from verifier.benchmark._report import BenchReport
from verifier.device import Device
from verifier.errors import BuildError, VerifierError
from verifier.kernel import KernelSpec
from verifier.ops import OPS, RMSNORM_EPS, OpSpec
from verifier.progress import Progress
from verifier.runtimes import TorchKernel, get_runtime

__all__ = ["BUILTIN_BASELINES", "cabi_bench", "reference_source", "solution_source"]

BUILTIN_BASELINES: Mapping[str, str] = {
    "matmul": "torch.matmul(a, b)",
    "softmax": "torch.softmax(a, dim=-1)",
    "sum": "a.sum(dim=-1)",
    "rmsnorm": f"a * torch.rsqrt(a.pow(2).mean(dim=-1, keepdim=True) + {RMSNORM_EPS!r}) * b",
    "attention": "torch.nn.functional.scaled_dot_product_attention(a, b, c)",
    "attention_causal": "torch.nn.functional.scaled_dot_product_attention(a, b, c, is_causal=True)",
}
"""Each catalogue op in PyTorch: the baseline of a C ABI kernel on a device."""
LIBRARY = "kernel.so"


def reference_source(op: OpSpec, dims: Mapping[str, int]) -> str:
    """reference.py for `op` at `dims`: its PyTorch built-in, inputs drawn at that shape."""
    if op.name not in BUILTIN_BASELINES:
        raise VerifierError(f"op {op.name} has no PyTorch baseline")
    names = ", ".join("abc"[i] for i in range(len(op.inputs)))
    shapes = ", ".join(f"torch.randn{tuple(int(dims[d]) for d in o.shape)!r}" for o in op.inputs)
    return f'''"""Written by ktl: op {op.name} in PyTorch, the baseline of a C ABI kernel."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, {names}):
        return {BUILTIN_BASELINES[op.name]}


def get_inputs():
    return [{shapes}]


def get_init_inputs():
    return []
'''


def solution_source(op: OpSpec, entry: str) -> str:
    """solution.py: the kernel's entry called through ctypes on the tensors' data pointers."""
    ins = [list(o.shape) for o in op.inputs]
    outs = [list(o.shape) for o in op.outputs]
    return f'''"""Written by ktl: the C ABI entry {entry} on device pointers (one output tensor per call)."""
import ctypes
import os

import torch
import torch.nn as nn

_LIB = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), "{LIBRARY}"))
_ENTRY = getattr(_LIB, "{entry}")
_ENTRY.restype = None
_ENTRY.argtypes = [ctypes.c_void_p] * {len(ins) + len(outs)} + [ctypes.c_int64] * {len(op.dims)}
_INS = {ins!r}
_OUTS = {outs!r}
_DIMS = {list(op.dims)!r}


class ModelNew(nn.Module):
    def forward(self, *xs):
        dims = {{}}
        for x, names in zip(xs, _INS):
            for size, name in zip(x.shape, names):
                dims[name] = int(size)
        xs = [x.contiguous() for x in xs]
        outs = [torch.empty([dims[n] for n in names], device=xs[0].device) for names in _OUTS]
        _ENTRY(*[x.data_ptr() for x in xs], *[o.data_ptr() for o in outs],
               *[dims[n] for n in _DIMS])
        return outs[0] if len(outs) == 1 else tuple(outs)
'''


def _folder(spec: KernelSpec, op: OpSpec, library: Path, dims: Mapping[str, int],
            root: Path) -> TorchKernel:
    folder = root / ("k-" + "-".join(str(dims[d]) for d in op.dims))
    folder.mkdir()
    (folder / "reference.py").write_text(reference_source(op, dims))
    (folder / "solution.py").write_text(solution_source(op, spec.entry))
    (folder / LIBRARY).write_bytes(library.read_bytes())
    return TorchKernel(spec.name, "torch", folder, "reference.py", "solution.py", "ModelNew",
                       ("reference.py", "solution.py", LIBRARY), (), "float32", "0" * 64)


def cabi_bench(spec: KernelSpec, settings: DeviceBenchSettings, device: Device,
               shapes: Sequence[Mapping[str, int]] | None = None, seed: int | None = None,
               progress: Progress | None = None) -> BenchReport:
    """Bench a catalogue-op kernel of runtime cuda (device "cuda") or c (device "cpu")."""
    op = OPS[spec.op]
    try:
        dims_list = [op.check_dims(s) for s in (shapes or op.bench_shapes)]
    except ValueError as exc:
        raise VerifierError(f"bad --shape for op {op.name}: {exc}") from exc
    with tempfile.TemporaryDirectory(prefix="ktl-cabi-") as tmp:
        root = Path(tmp)
        try:
            artifact = get_runtime(spec.runtime).build(spec, "release", root / "build")
        except BuildError as exc:
            raise VerifierError(f"the kernel does not build: {exc}") from exc
        reports = [bench_module(_folder(spec, op, artifact.path, dims, root), settings, device,
                                seed, progress, flops=op_flops(op.name, dims))
                   for dims in dims_list]
    return _merge(spec, op, dims_list, reports)


def _merge(spec: KernelSpec, op: OpSpec, dims_list: list[dict[str, int]],
           reports: list[BenchReport]) -> BenchReport:
    """One benchmark of the catalogue op from one run per shape (shapes named as the op's)."""
    results, faults, notes, samples = [], [], [], []
    for dims, rep in zip(dims_list, reports, strict=True):
        for r in rep.results:
            flops = op_flops(op.name, dims) or 0.0
            results.append(dataclasses.replace(r, shape=dict(dims),
                                               gflops=derived_gflops(flops, r.median_ns)))
        faults += [dataclasses.replace(f, shape=dict(dims) if f.shape is not None else None)
                   for f in rep.faults]
        notes += list(rep.notes)
        samples += [dict(s, shape=dict(dims)) for s in rep.samples]
    first = reports[0]
    throttled = [r.device_conditions for r in reports
                 if r.device_conditions is not None and r.device_conditions.throttle]
    conditions = throttled[0] if throttled else first.device_conditions
    trusted = all(r.trusted for r in reports) and len(results) == len(dims_list)
    return BenchReport(spec.name, op.name, first.seed, first.environment, tuple(dims_list), 0,
                       tuple(BenchmarkResult.from_json(r.to_json()) for r in results),
                       trusted and not faults, tuple(notes[:64]), tuple(samples),
                       sum(r.measured_s for r in reports), tuple(faults[:64]), 1, None, None,
                       first.device, conditions, baseline=f"torch-{op.name}")
