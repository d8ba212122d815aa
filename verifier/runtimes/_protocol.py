"""Runtimes: how a kernel folder becomes something the sandbox can call.

A `Runtime` builds a kernel for a variant:

- `"release"`: a library the worker loads in the child (`load_entry` there);
- `"asan"` (AddressSanitizer + UBSan) and `"tsan"` (ThreadSanitizer): a stand-alone
  driver program that reads cases from a file and calls the entry, so no
  sanitizer runtime has to be preloaded into Python.

Runtime `c` is implemented with the system gcc, `cuda` with nvcc (verifier.runtimes._cuda),
`torch` and `triton` (a PyTorch module) by verifier.runtimes._torch.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Protocol

from verifier.environment import find_gcc, gcc_version
from verifier.errors import BuildError, RuntimeUnavailableError
from verifier.kernel import KernelSpec
from verifier.ops import OPS
from verifier.runtimes._build import (
    BUILD_LIMITS,
    COMPILER_READ_ONLY,
    VARIANTS,
    Artifact,
    build_failure,
    driver_source,
    reduce_diagnostics,
    stage_sources,
    write_driver_cases,
)
from verifier.runtimes._cuda import CudaRuntime
from verifier.runtimes._torch import TorchRuntime
from verifier.sandbox import run_sandboxed

__all__ = ["BUILD_LIMITS", "RUNTIME_IMPLS", "VARIANTS", "Artifact", "CRuntime", "Runtime",
           "build_failure", "get_runtime", "write_driver_cases"]

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


class CRuntime:
    """Runtime `c`: gcc into a shared library (release) or a sanitizer driver program."""

    name = "c"

    def __init__(self, gcc: str | None = None) -> None:
        self.gcc = gcc or find_gcc()

    def unavailable_reason(self) -> str | None:
        if shutil.which(self.gcc) is None:
            return f"no C compiler: {self.gcc} not found on PATH"
        return None

    def compiler(self) -> tuple[str, str]:
        return "gcc", gcc_version(self.gcc)

    def build(self, spec: KernelSpec, variant: str, workdir: Path) -> Artifact:
        if variant not in VARIANTS:
            raise BuildError(f"unknown build variant {variant!r}; one of {VARIANTS}")
        reason = self.unavailable_reason()
        if reason:
            raise RuntimeUnavailableError(reason)
        src_dir = workdir / f"src-{variant}"
        c_files = stage_sources(spec, src_dir, ".c")
        flags = list(spec.flags)
        if variant == "release":
            out = src_dir / "kernel.so"
            # the linker itself refuses a library without the entry (never dlopen it here)
            argv = [self.gcc, *flags, "-shared", "-fPIC", f"-Wl,--require-defined={spec.entry}",
                    "-o", str(out), *c_files, "-lm"]
        else:
            (src_dir / "ktl_driver.c").write_text(driver_source(OPS[spec.op], spec.entry))
            sanitize = "address,undefined" if variant == "asan" else "thread"
            kept = [f for f in flags if not f.startswith("-O")]
            out = src_dir / f"driver-{variant}"
            argv = [self.gcc, *kept, "-O1", "-g", "-fno-omit-frame-pointer",
                    f"-fsanitize={sanitize}", "-fno-sanitize-recover=all",
                    "-o", str(out), "ktl_driver.c", *c_files, "-lm"]
        result = run_sandboxed(argv, src_dir, BUILD_LIMITS, system=COMPILER_READ_ONLY)
        if not result.ok and f"required symbol `{spec.entry}' not defined" in result.stderr:
            raise BuildError(f"entry symbol {spec.entry!r} not found in the built library: "
                             "kernel.toml's entry must name a non-static function of the sources")
        if not result.ok or not out.is_file():
            why = build_failure(result, BUILD_LIMITS)
            raise BuildError(f"{' '.join(argv[:1] + flags)} failed for {variant}: {why}")
        return Artifact(self.name, variant, out, tuple(argv), reduce_diagnostics(result.stderr))


RUNTIME_IMPLS: dict[str, Runtime] = {
    "c": CRuntime(),
    "cuda": CudaRuntime(),
    "torch": TorchRuntime("torch"),
    "triton": TorchRuntime("triton"),
}


def get_runtime(name: str) -> Runtime:
    try:
        return RUNTIME_IMPLS[name]
    except KeyError:
        raise RuntimeUnavailableError(f"unknown runtime {name!r}") from None
