"""Is an NVIDIA GPU usable here, and what must a sandboxed child reach to use it?

The probe runs in a separate Python process (`probe()`), so a broken or missing
driver can fail or crash there and never in `ktl`. Its answer is cached for the
life of the process.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

PROBE_TIMEOUT_S = 60.0
MAX_PROBE_OUTPUT = 64 * 1024

_PROBE = r"""
import ctypes, json, os, sys
def out(**kw):
    print(json.dumps(kw)); sys.exit(0)
try:
    lib = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    out(error="libcuda.so.1 (the NVIDIA driver library) cannot be loaded: " + str(exc))
rc = lib.cuInit(0)
if rc != 0:
    out(error="cuInit failed with CUresult %d (driver present, no usable device)" % rc)
count = ctypes.c_int(0)
rc = lib.cuDeviceGetCount(ctypes.byref(count))
if rc != 0 or count.value < 1:
    out(error="the driver sees no CUDA device (cuDeviceGetCount: CUresult %d, count %d)"
        % (rc, count.value))
name = ctypes.create_string_buffer(256)
lib.cuDeviceGetName(name, 256, 0)
major, minor, drv = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
lib.cuDeviceGetAttribute(ctypes.byref(major), 75, 0)
lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, 0)
lib.cuDriverGetVersion(ctypes.byref(drv))
dirs = set()
with open("/proc/self/maps") as fh:
    for line in fh:
        path = line.split()[-1]
        base = os.path.basename(path)
        if path.startswith("/") and (base.startswith("libcuda") or base.startswith("libnvidia")):
            dirs.add(os.path.dirname(path))
            dirs.add(os.path.dirname(os.path.realpath(path)))
out(count=count.value, name=name.value.decode("ascii", "replace"),
    capability="%d.%d" % (major.value, minor.value), driver=drv.value, lib_dirs=sorted(dirs))
"""


@dataclass(frozen=True)
class GpuInfo:
    """What the probe found: either `error`, or the first device and the driver's folders."""

    error: str | None
    count: int = 0
    name: str = ""
    capability: str = ""
    driver_version: int = 0
    lib_dirs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"error": self.error, "count": self.count, "name": self.name,
                "capability": self.capability, "driver_version": self.driver_version,
                "lib_dirs": list(self.lib_dirs)}

    @classmethod
    def from_json(cls, obj: Any) -> GpuInfo:
        if not isinstance(obj, dict):
            return cls("the GPU probe printed something that is not a JSON object")
        if obj.get("error") is not None:
            return cls(str(obj["error"])[:500])
        try:
            return cls(None, int(obj["count"]), str(obj["name"])[:200], str(obj["capability"])[:16],
                       int(obj.get("driver_version") or obj.get("driver") or 0),
                       tuple(str(d) for d in obj["lib_dirs"])[:32])
        except (KeyError, TypeError, ValueError) as exc:
            return cls(f"the GPU probe's answer is malformed: {exc}")


def parse_probe_output(returncode: int, stdout: str) -> GpuInfo:
    """Turn the probe child's exit status and output into a GpuInfo (pure)."""
    if returncode < 0:
        return GpuInfo(f"the NVIDIA driver crashed the probe process (signal {-returncode})")
    lines = [line for line in stdout[-MAX_PROBE_OUTPUT:].splitlines() if line.startswith("{")]
    if returncode != 0:
        return GpuInfo(f"the GPU probe failed (exit status {returncode})")
    if not lines:
        return GpuInfo("the GPU probe printed no answer")
    try:
        return GpuInfo.from_json(json.loads(lines[-1]))
    except json.JSONDecodeError:
        return GpuInfo("the GPU probe printed malformed JSON")


@lru_cache(maxsize=1)
def probe() -> GpuInfo:
    """Probe the driver in a child Python process (cached)."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    if os.environ.get("LD_LIBRARY_PATH"):  # some GPU containers find libcuda only through it
        env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", _PROBE], capture_output=True,
                              text=True, timeout=PROBE_TIMEOUT_S, check=False, env=env)
    except subprocess.TimeoutExpired:
        return GpuInfo(f"the GPU probe hung for more than {PROBE_TIMEOUT_S:g} s (driver wedged?)")
    except OSError as exc:
        return GpuInfo(f"the GPU probe could not start: {exc}")
    return parse_probe_output(done.returncode, done.stdout)


PROC_SELF = "/proc/self"
"""The child's own /proc folder. Landlock resolves it when the child confines itself
(between fork and exec), so it names that child's /proc/<pid> and no other process's.
The CUDA driver writes there while it creates a context: without it, on an H200 with
Landlock ABI 7, the first cudaMalloc fails with cudaErrorOperatingSystem."""


def sandbox_grants() -> tuple[list[str], list[str]]:
    """(read-only folders, read-write paths) a sandboxed child needs to use the GPU:
    the driver's library folders; the NVIDIA device nodes and the child's own /proc."""
    info = probe()
    devices = sorted(glob.glob("/dev/nvidia*"))
    return list(info.lib_dirs), [*devices, PROC_SELF]
