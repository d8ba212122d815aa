"""The top of `benchmark`: `bench` picks the strategy that times a kernel folder.

On a device where `settings.device` and this machine give one (`on_device`): a torch/triton
kernel against its reference on the same device (`_device_bench`), a cuda kernel's C ABI
against PyTorch's op (`_cabi_bench`); otherwise a torch/triton kernel against its reference
in PyTorch eager on the host (`_torch_bench`), any other kernel in ktl's native worker against
NumPy (`_host_bench`). The strategies never import each other or this module.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from verifier.benchmark._cabi_bench import cabi_bench
from verifier.benchmark._device_bench import (
    DeviceBenchSettings,
    device_bench,
    gpu_device,
    host_device,
)
from verifier.benchmark._host_bench import host_bench
from verifier.benchmark._report import BenchReport
from verifier.benchmark._settings import BenchSettings
from verifier.benchmark._torch_bench import torch_bench
from verifier.device import Device
from verifier.environment import module_runtime_missing
from verifier.errors import RuntimeUnavailableError, VerifierError
from verifier.gpu import probe as gpu_probe
from verifier.kernel import KernelSpec
from verifier.ops import OPS
from verifier.progress import Progress, quiet

__all__ = ["bench", "on_device"]


def bench(directory: str | Path, settings: BenchSettings | None = None,
          progress: Progress | None = None) -> BenchReport:
    """Benchmark the kernel folder; `trusted` is False (with notes) when it cannot be believed.

    A kernel of op 'torch' is timed against its reference module in PyTorch eager
    (`verifier.benchmark._torch_bench`; `settings.compile_baseline` adds torch.compile's);
    where a GPU is usable, on that GPU against PyTorch on it (`on_device`: device buffers,
    the device-wide clock, the physical floor); any other kernel on the host against NumPy
    (`verifier.benchmark._host_bench`).

    Each shape is measured for at least `settings.min_time_s` (and `min_reps` pairs) before
    the interval may stop the loop, so short loops cannot hide a kernel that drifts later.
    `settings.threads` is given to both the kernel (OpenMP) and the baseline (BLAS); the
    default, one, makes ratios comparable across machines with different core counts and
    keeps the interval tight on a shared machine; None means every core.

    None: `BenchSettings()`. Raises KernelSpecError for a malformed folder and VerifierError
    for bad shapes.
    """
    settings = settings or BenchSettings()
    progress = progress or quiet
    spec = KernelSpec.load(directory)
    on_gpu = on_device(spec, settings, progress)
    if on_gpu is not None:
        return on_gpu
    if spec.is_torch:
        return torch_bench(spec, dataclasses.replace(
            settings, threads=settings.threads or 1,
            min_time_s=min(settings.min_time_s, settings.time_budget_s)), progress)
    return host_bench(spec, settings, progress)


def on_device(spec: KernelSpec, settings: BenchSettings, progress: Progress) -> BenchReport | None:
    """`ktl bench` on the device path where `settings.device` and this machine give one: a
    torch/triton kernel against its reference on the same device (on torch's CPU build with
    device cpu), a cuda kernel on device pointers against PyTorch's op (a GPU and torch
    needed). None: the host path (no GPU with device auto, a cuda kernel without torch,
    --shape for op 'torch', which torch_bench refuses, or another runtime). `cold` on the
    host path is refused (it has no L2 flush mode), as are device cuda without a GPU and
    device cpu for a kernel that is not a torch module."""
    report = _device_path(spec, settings, progress)
    if report is None and settings.cold:
        raise VerifierError("--cold flushes the L2 between calls on the device path only, and "
                            "this kernel is timed on the host path (no GPU here, or not a "
                            "torch/triton/cuda kernel; a torch kernel takes --device cpu)")
    if report is not None and settings.compile_baseline:
        report = dataclasses.replace(report, notes=(*report.notes, (
            "torch.compile baseline not measured: the device path times PyTorch eager only")))
    return report


def _device_path(spec: KernelSpec, settings: BenchSettings, progress: Progress
                 ) -> BenchReport | None:
    gpu_error = gpu_probe().error
    if settings.device == "cuda" and gpu_error is not None:
        raise RuntimeUnavailableError(f"--device cuda: no GPU to time on: {gpu_error}")
    if settings.device == "cpu" and not spec.is_torch:
        raise VerifierError(f"--device cpu runs torch/triton kernels on the device path; a "
                            f"{spec.runtime} kernel is timed on the host path without it")
    if (settings.device == "auto" and gpu_error is not None) or \
            not (spec.is_torch or spec.runtime == "cuda") or (spec.is_torch and settings.shapes):
        return None  # for op 'torch', torch_bench says why --shape does not apply
    device = "cpu" if settings.device == "cpu" else "cuda"
    if spec.is_torch:
        dev: Device = host_device() if device == "cpu" else gpu_device()
        return device_bench(spec, DeviceBenchSettings(
            device=device, time_budget_s=settings.time_budget_s,
            max_halfwidth=settings.max_halfwidth, cold=settings.cold), dev, settings.seed, progress)
    if module_runtime_missing("torch") is not None:
        progress("no torch here: the cuda kernel is timed through its host wrapper against NumPy")
        return None
    shapes = len(settings.shapes or OPS[spec.op].bench_shapes)
    per_shape = DeviceBenchSettings(device="cuda", time_budget_s=settings.time_budget_s / max(shapes, 1),
                                    max_halfwidth=settings.max_halfwidth, cold=settings.cold)
    return cabi_bench(spec, per_shape, gpu_device(), settings.shapes, settings.seed, progress)
