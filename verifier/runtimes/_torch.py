"""Runtimes `torch` and `triton`: a KernelBench-format folder, its extension build and cache.

A torch kernel folder names a reference module (`Model`, `get_inputs`, `get_init_inputs`)
and a solution module (`ModelNew`). Nothing is compiled for a solution of plain torch or
Triton code (Triton runs through its interpreter on a CPU, `TRITON_INTERPRET=1`). A
solution that builds C++/CUDA with `torch.utils.cpp_extension.load_inline` (or `load`)
is built once, by a build step of its own in the compiler's sandbox
(`TORCH_BUILD_LIMITS`): the driver (`verifier.worker._torch_child`, role `build`)
imports the solution with those calls building into the build's private folder; the
parent then copies the built files (regular files only) into the build cache,
`<cache>/torch-ext/<key>`, where `key` is the sha256 of the sources, the torch and
Python versions, the compiler's version, the flags and the runtime. The kernel's own
process only reads that entry (read-only in its sandbox) and never compiles. The cache
folder is `$KTL_CACHE_DIR`, else `$XDG_CACHE_HOME/ktl`, else `~/.cache/ktl`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from verifier.environment import find_gcc, gcc_version, library_version, module_runtime_missing
from verifier.errors import BuildError, RuntimeUnavailableError
from verifier.kernel import KernelSpec
from verifier.runtimes._build import Artifact, build_failure
from verifier.sandbox import Limits, run_sandboxed
from verifier.worker import TORCH_DRIVER, SharedArena, torch_child_env

__all__ = ["TORCH_BUILD_LIMITS", "TorchBuild", "TorchKernel", "TorchRuntime", "build_extensions", "build_key",
           "cache_root", "torch_unavailable", "torch_version", "triton_version"]

TORCH_BUILD_LIMITS = Limits(cpu_s=600, wall_s=600.0, address_space=4 * 1024**3,
                            file_size=256 * 2**20, open_files=256, processes=64,
                            stdout_bytes=4 * 2**20, stderr_bytes=4 * 2**20)
"""The extension build's sandbox: the C++ compiler on torch's headers peaks near 1.5 GiB of
resident memory (measured: 1529 MiB for a one-function extension) and takes about a minute."""
MAX_CACHE_ENTRY_BYTES = 512 * 2**20
MAX_CACHE_FILES = 256
EXTENSION_MARKERS = (b"cpp_extension", b"load_inline")
CUDA_MARKERS = (b"cuda_sources", b"CUDAExtension", b"__global__")


@dataclass(frozen=True)
class TorchKernel:
    """The parts of a torch kernel folder the harness runs (from a validated KernelSpec)."""

    name: str
    runtime: str
    directory: Path
    reference: str
    solution: str
    entry: str
    sources: tuple[str, ...]
    flags: tuple[str, ...]
    dtype: str
    reference_digest: str

    @classmethod
    def from_spec(cls, spec: KernelSpec) -> TorchKernel:
        """From a KernelSpec of runtime torch or triton (its folder must be known)."""
        if spec.directory is None or spec.reference is None or spec.solution is None:
            raise RuntimeUnavailableError("a torch kernel needs its folder, reference and solution")
        return cls(spec.name, spec.runtime, Path(spec.directory), spec.reference, spec.solution,
                   spec.entry, tuple(spec.sources), tuple(spec.flags), spec.dtype or "float32",
                   spec.reference_digest)

    def read(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for rel in dict.fromkeys((*self.sources, self.reference, self.solution)):
            path = self.directory / rel
            if path.is_symlink() or not path.is_file():
                raise BuildError(f"{rel} is missing or not a regular file in {self.directory}")
            out[rel] = path.read_bytes()
        return out

    def copy_sources(self, dest: Path, only: tuple[str, ...] | None = None) -> None:
        """Copy the sources (or `only` those) into `dest`, the root of a child's private folder."""
        for rel, data in self.read().items():
            if only is not None and rel not in only:
                continue
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    @property
    def builds_extensions(self) -> bool:
        return any(m in data for data in self.read().values() for m in EXTENSION_MARKERS)

    @property
    def uses_cuda(self) -> bool:
        return any(rel.endswith((".cu", ".cuh")) for rel in self.sources) or any(
            m in data for data in self.read().values() for m in CUDA_MARKERS)


def torch_version() -> str | None:
    """The installed torch's version (from its metadata: torch is never imported here)."""
    return library_version("torch")


def triton_version() -> str | None:
    return library_version("triton")


def torch_unavailable(runtime: str) -> str | None:
    """None when `runtime` can run here, else why not and what to install."""
    return module_runtime_missing(runtime)


def torch_is_cpu_build() -> bool:
    """Whether the installed torch was built without CUDA (its version says `+cpu`)."""
    version = torch_version() or ""
    return version.endswith("+cpu") or not _torch_cuda_version()


@lru_cache(maxsize=1)
def _torch_cuda_version() -> str | None:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        for line in path.read_text().splitlines():
            if line.startswith("cuda"):
                value = line.split("=", 1)[1].split("#")[0].strip().strip("'\"")
                return None if value in ("None", "") else value
    except OSError:
        return None
    return None


def cache_root() -> Path:
    """The folder ktl caches builds in (see the module docstring)."""
    if os.environ.get("KTL_CACHE_DIR"):
        return Path(os.environ["KTL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ktl"


@dataclass(frozen=True)
class TorchBuild:
    """Where a solution's extensions are (None: it builds none), and how they got there."""

    ext_dir: Path | None
    key: str | None
    cached: bool
    seconds: float
    detail: str


def build_key(kernel: TorchKernel) -> str:
    """The cache key of a solution's extensions (see the module docstring)."""
    files = kernel.read()
    doc = {"sources": sorted([rel, hashlib.sha256(data).hexdigest()] for rel, data in files.items()),
           "torch": torch_version(), "python": sys.version, "flags": list(kernel.flags),
           "runtime": kernel.runtime, "compiler": gcc_version(find_gcc()), "driver":
           hashlib.sha256(TORCH_DRIVER.read_bytes()).hexdigest()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def build_extensions(kernel: TorchKernel, workdir: Path) -> TorchBuild:
    """Build the solution's `load_inline` extensions into the cache, or find them there.

    Raises BuildError with the compiler's diagnostics when the build fails."""
    if not kernel.builds_extensions:
        return TorchBuild(None, None, False, 0.0, "no extensions to build (plain torch code)")
    key = build_key(kernel)
    entry = cache_root() / "torch-ext" / key
    if (entry / "COMPLETE").is_file():
        return TorchBuild(entry, key, True, 0.0, f"extensions from the build cache ({key[:12]})")
    start = time.monotonic()
    build_dir = workdir / "build"
    build_dir.mkdir(parents=True)
    kernel.copy_sources(build_dir)
    ext = build_dir / "ext"
    ext.mkdir()
    arena = SharedArena(4096)
    try:
        argv = [sys.executable, "-s", "-B", str(TORCH_DRIVER), "build", "0", "1", str(arena.fd),
                str(arena.nbytes), str(build_dir), str(build_dir / kernel.solution), kernel.entry,
                "1", str(ext)]
        env = torch_child_env(1, kernel.runtime == "triton")
        env["MAX_JOBS"] = "1"
        result = run_sandboxed(argv, build_dir, TORCH_BUILD_LIMITS, env,
                               readable=[TORCH_DRIVER.parent], pass_fds=(arena.fd,))
    finally:
        arena.close()
    if not result.ok:
        raise BuildError(f"building the solution's extensions failed: {_diagnostics(result.stderr)}"
                         f"{build_failure(result, TORCH_BUILD_LIMITS)}")
    _store(ext, entry)
    seconds = time.monotonic() - start
    return TorchBuild(entry, key, False, seconds,
                      f"extensions built in {seconds:.0f} s in the compiler's sandbox and cached "
                      f"({key[:12]})")


def _diagnostics(stderr: str) -> str:
    """The compiler's error lines (they sit above torch's own traceback in the output)."""
    lines = [line.strip() for line in stderr.splitlines() if "error:" in line][:8]
    return ("compiler: " + " | ".join(lines)[:1200] + "; ") if lines else ""


def _store(built: Path, entry: Path) -> None:
    """Copy the build's regular files (never links) into a fresh cache entry, atomically."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{entry.name}.partial-", dir=entry.parent))
    total = files = 0
    try:
        for path in sorted(built.rglob("*")):
            rel = path.relative_to(built)
            if path.is_symlink():
                continue
            if path.is_dir():
                (partial / rel).mkdir(parents=True, exist_ok=True)
                continue
            if not path.is_file():
                continue
            files += 1
            total += path.stat().st_size
            if files > MAX_CACHE_FILES or total > MAX_CACHE_ENTRY_BYTES:
                raise BuildError("the extension build left more files or bytes than the cache "
                                 f"takes ({MAX_CACHE_FILES} files, {MAX_CACHE_ENTRY_BYTES >> 20} MiB)")
            (partial / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, partial / rel)
        (partial / "COMPLETE").write_text("ktl torch extension build\n")
        try:
            partial.rename(entry)
        except OSError:
            if not (entry / "COMPLETE").is_file():
                raise
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)


class TorchRuntime:
    """Runtimes `torch` and `triton` as the runtime registry sees them: available when torch
    (and triton) import here; `build` builds the solution's extensions (if any) into the cache."""

    def __init__(self, name: str) -> None:
        self.name = name

    def unavailable_reason(self) -> str | None:
        return torch_unavailable(self.name)

    def compiler(self) -> tuple[str, str]:
        return "torch", torch_version() or "unavailable"

    def build(self, spec: KernelSpec, variant: str, workdir: Path) -> Artifact:
        if variant != "release":
            raise BuildError(f"runtime {self.name!r} has no {variant!r} build")
        reason = self.unavailable_reason()
        if reason:
            raise RuntimeUnavailableError(reason)
        kernel = TorchKernel.from_spec(spec)
        built = build_extensions(kernel, workdir)
        return Artifact(self.name, variant, built.ext_dir or kernel.directory / kernel.solution,
                        (), built.detail)
