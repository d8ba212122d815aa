"""Runtimes: how a kernel folder becomes something the sandbox can call.

A `Runtime` builds a kernel for a variant:

- `"release"`: a library the worker loads in the child (`load_entry` there);
- `"asan"` (AddressSanitizer + UBSan) and `"tsan"` (ThreadSanitizer): a stand-alone
  driver program that reads cases from a file and calls the entry, so no
  sanitizer runtime has to be preloaded into Python.

Runtime `c` is implemented with the system gcc, `cuda` with nvcc (verifier._cuda);
`triton` plugs in by implementing the same protocol; until then it reports itself
unavailable.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from verifier._cuda import CudaRuntime
from verifier._errors import BuildError, RuntimeUnavailableError
from verifier.kernel import KernelSpec
from verifier.ops import OPS, OpSpec
from verifier.sandbox import ChildResult, Limits, base_env, run_sandboxed

__all__ = ["BUILD_LIMITS", "RUNTIME_IMPLS", "Artifact", "CRuntime", "Runtime", "build_failure",
           "get_runtime", "write_driver_cases"]

VARIANTS = ("release", "asan", "tsan")
BUILD_LIMITS = Limits(cpu_s=120, wall_s=180.0, address_space=1 << 30, file_size=256 * 2**20,
                      open_files=256, processes=64, stdout_bytes=4 * 2**20,
                      stderr_bytes=4 * 2**20)
"""The compiler's sandbox: 1 GiB of address space (a macro-doubling source then fails
in seconds instead of taking the machine's memory), CPU and wall time, output file
size, processes (gcc's driver, cc1, as, ld), and capped diagnostics."""


def build_failure(result: ChildResult, limits: Limits) -> str:
    """Why a compiler run failed: the limit it hit first, then its diagnostics' tail."""
    cap = limits.address_space or 0
    killed = (result.signal is not None or result.timed_out or result.output_excess is not None
              or result.denied_syscall is not None)
    why = result.describe(limits) if killed else ""
    if cap and result.maxrss_bytes > cap // 2:
        why = (f"the compiler reached its memory limit of {cap // 2**20} MiB "
               f"(peak RSS {result.maxrss_bytes // 2**20} MiB)" + (f"; {why}" if why else ""))
    tail = result.stderr.strip()[-1500:]
    return "; ".join(part for part in (why, tail) if part) or result.describe(limits)


@dataclass(frozen=True)
class Artifact:
    """A built kernel: the file to load or run, and how it was built."""

    runtime: str
    variant: str
    path: Path
    argv: tuple[str, ...]
    log: str
    entry_symbol: str | None = None
    """The symbol the worker calls (None: the spec's entry); cuda exports a host wrapper."""
    gpu: bool = False
    """Its children need the GPU (device nodes, driver, no address-space limit)."""


class Runtime(Protocol):
    """What a runtime provides to check and bench."""

    name: str

    def unavailable_reason(self) -> str | None:
        """None if the runtime works here, else why not."""
        ...

    def compiler(self) -> tuple[str, str]:
        """(compiler name, version) recorded in predicates."""
        ...

    def build(self, spec: KernelSpec, variant: str, workdir: Path) -> Artifact:
        """Build `spec` for `variant` inside `workdir`; raise BuildError with diagnostics."""
        ...


def _driver_source(op: OpSpec, entry: str) -> str:
    """A C driver that feeds cases from a file to `entry` (a validated C identifier)."""
    ni, no, nd = len(op.inputs), len(op.outputs), len(op.dims)
    nb = ni + no
    params = ", ".join(["const float*"] * ni + ["float*"] * no + ["int64_t"] * nd)
    args = ", ".join([f"b[{i}]" for i in range(nb)] + [f"d[{i}]" for i in range(nd)])
    return f"""#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
extern void {entry}({params});
static int rd(FILE* f, void* p, size_t n) {{ return n == 0 || fread(p, 1, n, f) == n; }}
int main(int argc, char** argv) {{
  if (argc != 2) return 2;
  FILE* f = fopen(argv[1], "rb");
  if (!f) return 2;
  int64_t ncases;
  if (!rd(f, &ncases, 8) || ncases < 0 || ncases > 10000) return 2;
  for (int64_t c = 0; c < ncases; c++) {{
    int64_t d[{nd}], n[{nb}];
    float* b[{nb}];
    float* keep[{ni}];
    if (!rd(f, d, sizeof d) || !rd(f, n, sizeof n)) return 2;
    for (int i = 0; i < {nb}; i++) {{
      if (n[i] < 0 || n[i] > (1LL << 28)) return 2;
      b[i] = malloc((size_t)n[i] * 4 + (n[i] == 0));
      if (!b[i]) return 3;
    }}
    for (int i = 0; i < {ni}; i++) {{
      if (!rd(f, b[i], (size_t)n[i] * 4)) return 2;
      keep[i] = malloc((size_t)n[i] * 4 + 1);
      if (n[i]) memcpy(keep[i], b[i], (size_t)n[i] * 4);
    }}
    for (int i = {ni}; i < {nb}; i++)
      for (int64_t j = 0; j < n[i]; j++) {{ uint32_t p = 0x7FC0DEADu; memcpy(&b[i][j], &p, 4); }}
    printf("KTL-CASE %lld\\n", (long long)c);
    fflush(stdout);
    {entry}({args});
    for (int i = 0; i < {ni}; i++) {{
      if (n[i] && memcmp(keep[i], b[i], (size_t)n[i] * 4))
        fprintf(stderr, "KTL-INPUT-MUTATED %d\\n", i);
      free(keep[i]);
    }}
    for (int i = 0; i < {nb}; i++) free(b[i]);
  }}
  printf("KTL-DONE\\n");
  return 0;
}}
"""


def write_driver_cases(
    path: Path, op: OpSpec, cases: Sequence[tuple[Mapping[str, int], Sequence[NDArray[np.float32]]]]
) -> None:
    """Write cases in the driver's format: count, then per case dims, sizes, inputs."""
    with open(path, "wb") as fh:
        fh.write(np.int64(len(cases)).tobytes())
        for dims, inputs in cases:
            fh.write(np.asarray([dims[d] for d in op.dims], dtype=np.int64).tobytes())
            sizes = [int(np.prod(s, dtype=np.int64)) for s in op.shapes(dims)]
            fh.write(np.asarray(sizes, dtype=np.int64).tobytes())
            for arr in inputs:
                fh.write(np.ascontiguousarray(arr, dtype=np.float32).tobytes())


@lru_cache(maxsize=4)
def _gcc_version(gcc: str) -> str:
    out = subprocess.run([gcc, "-dumpfullversion"], capture_output=True, text=True, timeout=30,
                         check=False, env=base_env())
    return out.stdout.strip() or "unknown"


class CRuntime:
    """Runtime `c`: gcc into a shared library (release) or a sanitizer driver program."""

    name = "c"

    def __init__(self, gcc: str | None = None) -> None:
        self.gcc = gcc or shutil.which("gcc", path="/usr/bin:/bin:/usr/local/bin") or "gcc"

    def unavailable_reason(self) -> str | None:
        if shutil.which(self.gcc) is None:
            return f"no C compiler: {self.gcc} not found on PATH"
        return None

    def compiler(self) -> tuple[str, str]:
        return "gcc", _gcc_version(self.gcc)

    def build(self, spec: KernelSpec, variant: str, workdir: Path) -> Artifact:
        if variant not in VARIANTS:
            raise BuildError(f"unknown build variant {variant!r}; one of {VARIANTS}")
        reason = self.unavailable_reason()
        if reason:
            raise RuntimeUnavailableError(reason)
        src_dir = workdir / f"src-{variant}"
        src_dir.mkdir(parents=True, exist_ok=True)
        for rel, data in spec.read_sources().items():
            dest = src_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        c_files = [rel for rel in spec.sources if rel.endswith(".c")]
        if not c_files:
            raise BuildError("sources list no .c file to compile")
        flags = list(spec.flags)
        if variant == "release":
            out = src_dir / "kernel.so"
            # the linker itself refuses a library without the entry (never dlopen it here)
            argv = [self.gcc, *flags, "-shared", "-fPIC", f"-Wl,--require-defined={spec.entry}",
                    "-o", str(out), *c_files, "-lm"]
        else:
            (src_dir / "ktl_driver.c").write_text(_driver_source(OPS[spec.op], spec.entry))
            sanitize = "address,undefined" if variant == "asan" else "thread"
            kept = [f for f in flags if not f.startswith("-O")]
            out = src_dir / f"driver-{variant}"
            argv = [self.gcc, *kept, "-O1", "-g", "-fno-omit-frame-pointer",
                    f"-fsanitize={sanitize}", "-fno-sanitize-recover=all",
                    "-o", str(out), "ktl_driver.c", *c_files, "-lm"]
        result = run_sandboxed(argv, src_dir, BUILD_LIMITS)
        if not result.ok and f"required symbol `{spec.entry}' not defined" in result.stderr:
            raise BuildError(f"entry symbol {spec.entry!r} not found in the built library: "
                             "kernel.toml's entry must name a non-static function of the sources")
        if not result.ok or not out.is_file():
            why = build_failure(result, BUILD_LIMITS)
            raise BuildError(f"{' '.join(argv[:1] + flags)} failed for {variant}: {why}")
        return Artifact(self.name, variant, out, tuple(argv), result.stderr[-2000:])


class UnavailableRuntime:
    """A planned runtime that cannot run here yet (e.g. `cuda`, `triton`)."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self._reason = reason

    def unavailable_reason(self) -> str | None:
        return self._reason

    def compiler(self) -> tuple[str, str]:
        return self.name, "unavailable"

    def build(self, spec: KernelSpec, variant: str, workdir: Path) -> Artifact:
        raise RuntimeUnavailableError(f"runtime {self.name!r}: {self._reason}")


RUNTIME_IMPLS: dict[str, Runtime] = {
    "c": CRuntime(),
    "cuda": CudaRuntime(),
    "triton": UnavailableRuntime("triton", "the triton runtime is planned; this verifier build runs C only"),
}


def get_runtime(name: str) -> Runtime:
    try:
        return RUNTIME_IMPLS[name]
    except KeyError:
        raise RuntimeUnavailableError(f"unknown runtime {name!r}") from None
