"""The environment fingerprint (ENV in CONTRACTS): what machine a measurement came from."""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["INTERESTING_FLAGS", "environment_fingerprint"]

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
    from verifier.runtime import get_runtime

    model, flags = _cpuinfo()
    compiler, version = get_runtime("c").compiler()
    env: dict[str, Any] = {
        "cpu_model": model,
        "cpu_flags": flags,
        "cores": os.cpu_count() or 1,
        "machine": platform.machine() or "unknown",
        "gpu": None,
        "gpu_driver": None,
        "compiler": f"{compiler} {version}",
        "libraries": {"numpy": np.__version__},
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }
    return tuple(env.items())


def environment_fingerprint() -> dict[str, Any]:
    """CPU model and flags, cores, machine, GPU (none for runtime c), compiler, libraries, OS."""
    env = dict(_fingerprint())
    env["cpu_flags"] = list(env["cpu_flags"])
    env["libraries"] = dict(env["libraries"])
    return env
