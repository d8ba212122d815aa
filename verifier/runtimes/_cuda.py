"""Runtime `cuda`: nvcc into a shared library whose generated wrapper has the C host ABI.

A CUDA kernel's entry is a host-callable launcher with the C ABI's parameter list
(inputs, outputs, dims in catalogue order) that takes DEVICE pointers and
launches on the default stream. The build adds a generated wrapper exporting
`ktl_host_<entry>` with the exact C ABI on HOST pointers, so the worker calls it
like a C kernel. Per call the wrapper:

- cudaMallocs every buffer with `GUARD` bytes before and after it, filled with the
  guard word, and copies the inputs and the (already poisoned) outputs to the GPU;
- calls the entry, checks the launch, synchronizes, checks again: any CUDA error
  (bad launch, illegal address, ...) aborts the child with a `KTL-CUDA-ERROR` line,
  which the sandbox reports as a crash verdict;
- copies every buffer back, inputs too (so the input-mutation check sees device
  writes to inputs), and copies each damaged device guard byte over the caller's
  guard byte: the worker's arena has `GUARD` bytes around each buffer with the same
  pattern, so its canary check reports device out-of-bounds writes like host ones.

`ktl_host_checked_<entry>` does the same for callers without guard regions (the
sanitizer driver): it aborts with `KTL-CUDA-GUARD` on damage instead. The "asan"
variant is that driver run under `compute-sanitizer --tool memcheck`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from verifier.errors import BuildError, RuntimeUnavailableError
from verifier.gpu import probe
from verifier.kernel import KernelSpec
from verifier.ops import OPS, OpSpec
from verifier.runtimes._build import (
    BUILD_LIMITS,
    COMPILER_READ_ONLY,
    Artifact,
    build_failure,
    driver_source,
    reduce_diagnostics,
    stage_sources,
)
from verifier.sandbox import Limits, landlock_abi, run_sandboxed
from verifier.worker import GUARD, GUARD_WORD

__all__ = ["CudaRuntime", "arch_flags", "find_tool", "wrapper_source"]

MAX_ELEMENTS = 1 << 34
MEMCHECK_UNDER_LANDLOCK = (
    "compute-sanitizer cannot run inside the sandbox here: its target is a second process "
    "whose CUDA context must write its own /proc entries, and Landlock can grant that only to "
    "the process that confines itself (seen on an H200, Landlock ABI 7); the kernel's device "
    "buffers are still guarded by canaries (guards.canaries)")
"""Why the memcheck build is skipped where Landlock confines the child."""

NVCC_ADDRESS_SPACE = 8 << 30
"""nvcc's front ends reserve more address space than gcc's; still bounded."""
TOOL_DIRS = ("/usr/local/cuda/bin", "/usr/local/cuda/compute-sanitizer", "/usr/local/bin", "/usr/bin")


def find_tool(name: str) -> str | None:
    """`name` (nvcc, compute-sanitizer) in the usual CUDA folders, else on a safe PATH."""
    for folder in TOOL_DIRS:
        path = Path(folder) / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return shutil.which(name, path="/usr/local/bin:/usr/bin:/bin")


def _nvcc_reads(nvcc: str) -> tuple[str, ...]:
    """What nvcc may read besides the kernel's folder: what gcc may (nvcc drives the host
    compiler), plus the toolkit it runs from when that lies outside those folders; not
    /proc, /sys, /etc or /home, so an `#include` of a host file fails as it does for C."""
    toolkit = Path(os.path.realpath(nvcc)).parent.parent
    inside = any(toolkit.is_relative_to(d) for d in COMPILER_READ_ONLY)
    return COMPILER_READ_ONLY if inside else (*COMPILER_READ_ONLY, str(toolkit))


def _count_expr(shape: tuple[str, ...]) -> str:
    return " * ".join(f"d_{d}" for d in shape) or "1"


_HELPERS = """static void ktl_die(const char* what, cudaError_t err) {
  fprintf(stderr, "KTL-CUDA-ERROR %s: %s (%s)\\n", what, cudaGetErrorName(err),
          cudaGetErrorString(err));
  fflush(stderr);
  abort();
}

static void ktl_ok(cudaError_t err, const char* what) {
  if (err != cudaSuccess) ktl_die(what, err);
}

static void ktl_fill(unsigned char* p, size_t n) {
  for (size_t j = 0; j < n; j++) p[j] = ktl_pattern[j & 3];
}

/* Damaged guard bytes of one side; with `host_guard` set they are copied over the caller's. */
static size_t ktl_guard(const unsigned char* dev_copy, unsigned char* host_guard) {
  size_t damaged = 0;
  for (size_t j = 0; j < KTL_GUARD; j++) {
    if (dev_copy[j] != ktl_pattern[j & 3]) {
      damaged++;
      if (host_guard) host_guard[j] = dev_copy[j];
    }
  }
  return damaged;
}

"""
"""The wrapper's C helpers: abort on a CUDA error, fill and check guard bytes."""


def _run_source(op: OpSpec, entry: str) -> str:
    """`ktl_run`: stage every buffer between guard regions on the GPU, call `entry`, copy
    back and count the guard bytes it damaged."""
    ni, nb = len(op.inputs), len(op.inputs) + len(op.outputs)
    dim_params = [f"int64_t d_{d}" for d in op.dims]
    dev_args = ", ".join([f"(const float*)(dev[{i}] + KTL_GUARD)" for i in range(ni)]
                         + [f"(float*)(dev[{i}] + KTL_GUARD)" for i in range(ni, nb)]
                         + [f"d_{d}" for d in op.dims])
    dims_ok = " && ".join(f"d_{d} >= 0" for d in op.dims) or "1"
    return f"""static void ktl_run(unsigned char* const* host, const int64_t* n, int copy_guards, {", ".join(dim_params)}) {{
  unsigned char* dev[KTL_NB];
  unsigned char* stage[KTL_NB];
  size_t total[KTL_NB];
  if (!({dims_ok})) {{
    fprintf(stderr, "KTL-CUDA-ERROR negative dimension\\n");
    abort();
  }}
  for (int i = 0; i < KTL_NB; i++) {{
    if (n[i] < 0 || n[i] > {MAX_ELEMENTS}LL) {{
      fprintf(stderr, "KTL-CUDA-ERROR buffer %s: %lld elements is out of range\\n", ktl_names[i],
              (long long)n[i]);
      abort();
    }}
    size_t bytes = (size_t)n[i] * 4;
    total[i] = bytes + 2 * KTL_GUARD;
    stage[i] = (unsigned char*)malloc(total[i]);
    if (!stage[i]) {{
      fprintf(stderr, "KTL-CUDA-ERROR out of host memory staging %s\\n", ktl_names[i]);
      abort();
    }}
    ktl_fill(stage[i], KTL_GUARD);
    if (bytes) memcpy(stage[i] + KTL_GUARD, host[i], bytes);
    ktl_fill(stage[i] + KTL_GUARD + bytes, KTL_GUARD);
    ktl_ok(cudaMalloc((void**)&dev[i], total[i]), "cudaMalloc");
    ktl_ok(cudaMemcpy(dev[i], stage[i], total[i], cudaMemcpyHostToDevice), "copying to the GPU");
  }}
  {entry}({dev_args});
  ktl_ok(cudaGetLastError(), "launching the kernel");
  ktl_ok(cudaDeviceSynchronize(), "running the kernel");
  ktl_ok(cudaGetLastError(), "after the kernel");
  for (int i = 0; i < KTL_NB; i++) {{
    size_t bytes = total[i] - 2 * KTL_GUARD;
    ktl_ok(cudaMemcpy(stage[i], dev[i], total[i], cudaMemcpyDeviceToHost), "copying from the GPU");
    if (bytes) memcpy(host[i], stage[i] + KTL_GUARD, bytes);
    size_t before = ktl_guard(stage[i], copy_guards ? host[i] - KTL_GUARD : NULL);
    size_t after = ktl_guard(stage[i] + KTL_GUARD + bytes, copy_guards ? host[i] + bytes : NULL);
    if (!copy_guards && (before || after)) {{
      fprintf(stderr, "KTL-CUDA-GUARD out-of-bounds write on the GPU: %zu guard bytes before and "
              "%zu after buffer %s\\n", before, after, ktl_names[i]);
      abort();
    }}
    ktl_ok(cudaFree(dev[i]), "cudaFree");
    free(stage[i]);
  }}
}}

"""


def wrapper_source(op: OpSpec, entry: str) -> str:
    """The host wrapper (CUDA C++) for `entry`, a validated C identifier, of `op`."""
    operands = (*op.inputs, *op.outputs)
    ni, nb = len(op.inputs), len(operands)
    dim_params = [f"int64_t d_{d}" for d in op.dims]
    host_params = ", ".join([f"const float* h{i}" for i in range(ni)]
                            + [f"float* h{i}" for i in range(ni, nb)] + dim_params)
    proto = ", ".join(["const float*"] * ni + ["float*"] * (nb - ni) + ["int64_t"] * len(op.dims))
    counts = ", ".join(_count_expr(o.shape) for o in operands)
    hosts = ", ".join(f"(unsigned char*)h{i}" for i in range(nb))
    names = ", ".join(f'"{o.name}"' for o in operands)
    guard = [(GUARD_WORD >> (8 * k)) & 0xFF for k in range(4)]
    return (f"""// Generated by ktl (verifier.runtimes._cuda): host ABI wrapper for {entry}. Do not edit.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" void {entry}({proto});

#define KTL_GUARD {GUARD}
#define KTL_NB {nb}
static const unsigned char ktl_pattern[4] = {{{guard[0]}, {guard[1]}, {guard[2]}, {guard[3]}}};
static const char* const ktl_names[KTL_NB] = {{{names}}};

"""
            + _HELPERS + _run_source(op, entry) + f"""/* The C host ABI; the caller must own KTL_GUARD bytes before and after each buffer. */
extern "C" void ktl_host_{entry}({host_params}) {{
  unsigned char* host[KTL_NB] = {{{hosts}}};
  const int64_t n[KTL_NB] = {{{counts}}};
  ktl_run(host, n, 1, {", ".join(f"d_{d}" for d in op.dims)});
}}

/* The C host ABI for callers without guard regions: aborts on guard damage. */
extern "C" void ktl_host_checked_{entry}({host_params}) {{
  unsigned char* host[KTL_NB] = {{{hosts}}};
  const int64_t n[KTL_NB] = {{{counts}}};
  ktl_run(host, n, 0, {", ".join(f"d_{d}" for d in op.dims)});
}}
""")


SANITIZER_SCRIPT = """#!/bin/sh
# Generated by ktl: run the driver under compute-sanitizer; last stderr line = first error.
"{tool}" --tool memcheck --error-exitcode 66 --log-file cs.log ./driver-asan-bin "$@"
rc=$?
cat cs.log >&2
grep -m1 -E "Invalid|Out-of-range|Misaligned|Error" cs.log | sed 's/^=* *//' >&2
exit $rc
"""


def arch_flags(flags: list[str], capability: str) -> list[str]:
    """`flags` with the GPU architecture made explicit.

    An explicit `-arch=sm_XX` is kept. `-arch=native`, or no `-arch` at all, becomes
    the probed GPU's `-arch=sm_XY` (SASS for it plus PTX), so the first call does not
    wait for a JIT compile; without a probed GPU it is dropped (nvcc's default).
    `native` is resolved here because the build sandbox does not open the GPU.
    """
    kept = [f for f in flags if f != "-arch=native"]
    if any(f.startswith("-arch=") for f in kept):
        return kept
    major, _, minor = capability.partition(".")
    if major.isdigit() and minor.isdigit():
        kept.append(f"-arch=sm_{major}{minor}")
    return kept


@lru_cache(maxsize=4)
def _nvcc_version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60,
                             check=False, env={"PATH": "/usr/local/bin:/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    for line in out.stdout.splitlines():
        if "release" in line:
            return line.strip()[:120]
    return "unknown"


class CudaRuntime:
    """Runtime `cuda`: nvcc into a shared library (release) or a memcheck driver (asan)."""

    name = "cuda"

    def __init__(self, nvcc: str | None = None, require_gpu: bool = True) -> None:
        self.nvcc = nvcc or find_tool("nvcc") or "nvcc"
        self.require_gpu = require_gpu
        """False: `build` compiles without a GPU here (tests, cross-building)."""

    def build_unavailable_reason(self) -> str | None:
        """None if kernels can be compiled here (a GPU is not needed for that)."""
        if shutil.which(self.nvcc) is None:
            return f"no CUDA compiler: {self.nvcc} not found (install the CUDA toolkit)"
        return None

    def unavailable_reason(self) -> str | None:
        reason = self.build_unavailable_reason()
        if reason:
            return reason
        info = probe()
        if info.error:
            return f"no GPU: {info.error}"
        return None

    def compiler(self) -> tuple[str, str]:
        return "nvcc", _nvcc_version(self.nvcc)

    def build(self, spec: KernelSpec, variant: str, workdir: Path) -> Artifact:
        """Compile `spec`; raise RuntimeUnavailableError without nvcc (or a GPU, if required)."""

        if variant not in ("release", "asan", "tsan"):
            raise BuildError(f"unknown build variant {variant!r}")
        if variant == "tsan":
            raise RuntimeUnavailableError("ThreadSanitizer does not apply to runtime cuda")
        reason = self.unavailable_reason() if self.require_gpu else self.build_unavailable_reason()
        if reason:
            raise RuntimeUnavailableError(f"runtime 'cuda': {reason}")
        sanitizer = find_tool("compute-sanitizer") if variant == "asan" else None
        if variant == "asan" and sanitizer is None:
            raise RuntimeUnavailableError("compute-sanitizer (CUDA memcheck) is not installed here")
        if variant == "asan" and landlock_abi() >= 1:
            raise RuntimeUnavailableError(MEMCHECK_UNDER_LANDLOCK)
        src_dir = workdir / f"src-cuda-{variant}"
        cu_files = stage_sources(spec, src_dir, ".cu")
        op = OPS[spec.op]
        (src_dir / "ktl_wrapper.cu").write_text(wrapper_source(op, spec.entry))
        flags = arch_flags(list(spec.flags), probe().capability)
        symbol = f"ktl_host_{spec.entry}"
        if variant == "release":
            out = src_dir / "kernel.so"
            argv = [self.nvcc, *flags, "-shared", "-Xcompiler", "-fPIC", "-o", str(out),
                    "ktl_wrapper.cu", *cu_files]
        else:
            (src_dir / "ktl_driver.c").write_text(driver_source(op, f"ktl_host_checked_{spec.entry}"))
            kept = [f for f in flags if not f.startswith("-O")]
            out = src_dir / "driver-asan-bin"
            argv = [self.nvcc, *kept, "-O1", "-lineinfo", "-o", str(out), "ktl_driver.c",
                    "ktl_wrapper.cu", *cu_files]
        limits = dataclasses.replace(BUILD_LIMITS, address_space=NVCC_ADDRESS_SPACE)
        result = run_sandboxed(argv, src_dir, limits, system=_nvcc_reads(self.nvcc))
        if not result.ok or not out.is_file():
            why = build_failure(result, limits)
            raise BuildError(f"nvcc {' '.join(flags)} failed for {variant}: {why}")
        audit = self._audit_build(src_dir, flags, cu_files, limits) if variant == "release" else None
        if variant == "asan":
            script = src_dir / "driver-asan"
            script.write_text(SANITIZER_SCRIPT.format(tool=sanitizer))
            script.chmod(0o755)
            out = script
        return Artifact(self.name, variant, out, tuple(argv), reduce_diagnostics(result.stderr),
                        entry_symbol=symbol, gpu=True, audit_path=audit)

    def _audit_build(self, src_dir: Path, flags: list[str], cu_files: list[str],
                     limits: Limits) -> Path:
        """The kernel's sources alone (no wrapper) against the shared CUDA runtime, for the
        static audit: the static runtime's own imports would hide the kernel's."""

        out = src_dir / "kernel-audit.so"
        argv = [self.nvcc, *flags, "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "-o",
                str(out), *cu_files]
        result = run_sandboxed(argv, src_dir, limits, system=_nvcc_reads(self.nvcc))
        if not result.ok or not out.is_file():
            raise BuildError(f"nvcc {' '.join(flags)} failed for the audit build: "
                             f"{build_failure(result, limits)}")
        return out
