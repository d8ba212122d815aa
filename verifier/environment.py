"""The environment fingerprint (ENV in CONTRACTS): what machine a measurement came from."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from functools import lru_cache
from typing import Any

import numpy as np

from verifier.gpu import GpuInfo
from verifier.gpu import probe as gpu_probe

__all__ = ["INTERESTING_FLAGS", "TORCH_INSTALL_HINT", "environment_fingerprint", "find_gcc",
           "gcc_version", "gpu_fingerprint", "library_version", "module_runtime_missing"]

TOOL_PATH = "/usr/bin:/bin:/usr/local/bin"
"""Where the C compiler is looked up: system folders only, never the caller's PATH."""


def find_gcc() -> str:
    """The system gcc's path ("gcc" if none is found, so a build fails with its name)."""
    return shutil.which("gcc", path=TOOL_PATH) or "gcc"


@lru_cache(maxsize=4)
def gcc_version(gcc: str) -> str:
    """`gcc -dumpfullversion`, run with a scrubbed environment; "unknown" if it says nothing."""
    try:
        out = subprocess.run([gcc, "-dumpfullversion"], capture_output=True, text=True,
                             timeout=30, check=False,
                             env={"PATH": TOOL_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"})
    except OSError:
        return "unknown"
    return out.stdout.strip() or "unknown"

INTERESTING_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl",
                     "avx512_bf16", "avx512_vnni", "amx_tile", "neon", "asimd", "sve")


def _cpuinfo() -> tuple[str, list[str]]:
    model = platform.processor() or "unknown"
    flags: list[str] = []
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model", "cpu model") and model in ("unknown", "", platform.machine()):
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    have = set(value.split())
                    flags = [f for f in INTERESTING_FLAGS if f in have]
    except OSError:
        pass
    return model[:200] or "unknown", flags


@lru_cache(maxsize=1)
def _fingerprint() -> tuple[tuple[str, Any], ...]:
    model, flags = _cpuinfo()
    env: dict[str, Any] = {
        "cpu_model": model,
        "cpu_flags": flags,
        "cores": os.cpu_count() or 1,
        "machine": platform.machine() or "unknown",
        "gpu": None,
        "gpu_driver": None,
        "compiler": f"gcc {gcc_version(find_gcc())}",
        "libraries": {"numpy": np.__version__},
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }
    return tuple(env.items())


TORCH_INSTALL_HINT = ("pip install 'kernel-transparency-log[torch]' (on a CPU-only machine: "
                      "pip install torch==2.13.0 triton)")
"""What to install for runtimes torch and triton."""
_MODULE_NEEDS = {"torch": ("torch",), "triton": ("torch", "triton")}


def _importable(name: str) -> bool:
    """Whether `import name` can succeed in this Python, without importing it."""
    if name in sys.modules:
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def module_runtime_missing(runtime: str) -> str | None:
    """Why runtime `torch`/`triton` cannot run in this Python (what to install), or None."""
    missing = [name for name in _MODULE_NEEDS.get(runtime, ()) if not _importable(name)]
    if not missing:
        return None
    return (f"runtime {runtime!r} needs {' and '.join(missing)}, which this Python "
            f"({sys.executable}) lacks: {TORCH_INSTALL_HINT}")


def library_version(name: str) -> str | None:
    """The installed distribution's version (e.g. torch's '2.13.0+cpu'), without importing it."""
    if not _importable(name):
        return None
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment_fingerprint(runtime: str = "c") -> dict[str, Any]:
    """CPU model and flags, cores, machine, GPU (for runtime cuda; none for c), compiler,
    libraries, OS."""
    env = dict(_fingerprint())
    env["cpu_flags"] = list(env["cpu_flags"])
    env["libraries"] = dict(env["libraries"])
    if runtime == "cuda":
        env["gpu"], env["gpu_driver"] = gpu_fingerprint(gpu_probe())
    for name in _MODULE_NEEDS.get(runtime, ()):
        version = library_version(name)
        if version is not None:
            env["libraries"][name] = version
    return env


def gpu_fingerprint(info: GpuInfo) -> tuple[str | None, str | None]:
    """(GPU, driver) as recorded in predicates, e.g. ("NVIDIA H200 (sm_90) x1", "CUDA 13.0")."""
    if info.error is not None or info.count < 1:
        return None, None
    sm = info.capability.replace(".", "")
    major, minor = divmod(info.driver_version, 1000)
    driver = f"CUDA {major}.{minor // 10}" if info.driver_version > 0 else None
    return f"{info.name} (sm_{sm}) x{info.count}"[:256], driver
