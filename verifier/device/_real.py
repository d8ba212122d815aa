"""The real device: properties and peaks from a probe process, conditions from NVML.

`probe_device()` runs `PROBE` in a separate Python process of ours (never a kernel's):
torch reads the device's properties, times a bf16 matmul and a device-to-device copy on
its own clock across `torch.cuda.synchronize()`, and prints one JSON line; a missing
driver, torch without CUDA or a crash there is an error here, never a crash of `ktl`.
`NvmlDevice` samples clocks, power, temperature and throttle reasons through
`pynvml` (nvidia-ml-py), imported only when a device is used. Neither is exercised
without a GPU: `parse_probe` (pure) is, and `benchmarks/gpu_check.sh` runs the rest.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifier.device._interface import DeviceInfo, Peaks, Sample
from verifier.device._watch import ThreadWatch

__all__ = ["PROBE", "PROBE_FILE", "NvmlDevice", "ProbeResult", "cached_probe", "parse_probe",
           "probe_device"]

PROBE_TIMEOUT_S = 120.0
PROBE = r"""
import json, sys, time
try:
    import torch
except ImportError as exc:
    print(json.dumps({"error": "torch cannot be imported: %s" % exc})); sys.exit(0)
if not torch.cuda.is_available():
    print(json.dumps({"error": "torch sees no CUDA device (torch %s)" % torch.__version__})); sys.exit(0)
p = torch.cuda.get_device_properties(0)
def timed(fn, reps):
    fn(); torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
mm = timed(lambda: a @ a, 20)
x = torch.empty(2**28, device="cuda", dtype=torch.float32)
y = torch.empty_like(x)
cp = timed(lambda: y.copy_(x), 20)
print(json.dumps({"model": p.name, "capability": "%d.%d" % (p.major, p.minor),
                  "sm_count": p.multi_processor_count, "l2_bytes": int(getattr(p, "L2_cache_size", 0)),
                  "memory_bytes": int(p.total_memory), "cuda": str(torch.version.cuda),
                  "torch": torch.__version__, "flops": 2 * n**3 / mm,
                  "bytes_per_s": 2 * x.numel() * 4 / cp}))
"""


@dataclass(frozen=True)
class ProbeResult:
    error: str | None
    info: dict[str, Any]
    peaks: Peaks | None


def parse_probe(returncode: int, stdout: str) -> ProbeResult:
    """The probe's answer, checked (pure): properties and peaks, or why there are none."""
    lines = [line for line in stdout[-65536:].splitlines() if line.startswith("{")]
    if returncode != 0 or not lines:
        return ProbeResult(f"the device probe failed (exit status {returncode}, "
                           f"{'no answer' if not lines else 'an answer'})", {}, None)
    try:
        body = json.loads(lines[-1])
    except json.JSONDecodeError:
        return ProbeResult("the device probe printed malformed JSON", {}, None)
    if not isinstance(body, dict):
        return ProbeResult("the device probe printed something that is not an object", {}, None)
    if body.get("error") is not None:
        return ProbeResult(str(body["error"])[:500], {}, None)
    try:
        info = {"model": str(body["model"])[:256], "capability": str(body["capability"])[:16],
                "sm_count": int(body["sm_count"]), "l2_bytes": int(body["l2_bytes"]),
                "memory_bytes": int(body["memory_bytes"]), "cuda": str(body["cuda"])[:64],
                "torch": str(body["torch"])[:64]}
        peaks = Peaks(float(body["flops"]), float(body["bytes_per_s"]), "probe: bf16 matmul "
                      "8192^3 and a 1 GiB device copy, on the probe's clock")
    except (KeyError, TypeError, ValueError) as exc:
        return ProbeResult(f"the device probe's answer is malformed: {exc}", {}, None)
    return ProbeResult(None, info, peaks)


def probe_device(python: str = sys.executable) -> ProbeResult:
    """Run the probe in its own process (the answer is the probe's, not a kernel's)."""
    try:
        done = subprocess.run([python, "-I", "-c", PROBE], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return ProbeResult(f"the device probe hung for more than {PROBE_TIMEOUT_S:g} s", {}, None)
    except OSError as exc:
        return ProbeResult(f"the device probe could not start: {exc}", {}, None)
    return parse_probe(done.returncode, done.stdout)


PROBE_FILE = "device-probe.json"


def cached_probe(cache_dir: Path, key: str,
                 run: Callable[[], ProbeResult] = probe_device) -> ProbeResult:
    """The probe measured once per machine: the answer stored in `cache_dir` for `key` (the
    GPU's name, driver and torch), else a fresh probe, stored when it found a device."""
    path = cache_dir / PROBE_FILE
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(stored, dict) and stored.get("key") == key:
            hit = parse_probe(0, json.dumps(stored.get("answer")))
            if hit.error is None:
                return hit
    except (OSError, ValueError):
        pass
    fresh = run()
    if fresh.error is None and fresh.peaks is not None:
        answer = {**fresh.info, "flops": fresh.peaks.flops, "bytes_per_s": fresh.peaks.bytes_per_s}
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"key": key, "answer": answer}), encoding="utf-8")
            tmp.replace(path)
        except OSError:
            pass  # not recorded: measured again next time
    return fresh


class NvmlDevice:
    """A real device: `probe` for properties and peaks, NVML for condition samples."""

    def __init__(self, probed: ProbeResult, index: int = 0) -> None:
        if probed.error is not None or probed.peaks is None:
            raise RuntimeError(f"no device to measure on: {probed.error}")
        pynvml: Any = importlib.import_module("pynvml")  # nvidia-ml-py: only with a device
        self.nvml = pynvml
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.probed = probed
        self._peaks = probed.peaks

    def _locked(self) -> bool:
        nv = self.nvml
        try:
            now = nv.nvmlDeviceGetApplicationsClock(self.handle, nv.NVML_CLOCK_SM)
            default = nv.nvmlDeviceGetDefaultApplicationsClock(self.handle, nv.NVML_CLOCK_SM)
        except nv.NVMLError:
            return False
        return bool(now != default)

    def info(self) -> DeviceInfo:
        nv, p = self.nvml, self.probed.info
        driver = nv.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        return DeviceInfo(p["model"], p["capability"], p["sm_count"], p["l2_bytes"],
                          p["memory_bytes"], driver, p["cuda"], p["torch"], self._locked())

    def sample(self) -> Sample:
        nv, h = self.nvml, self.handle
        reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            nv.nvmlDeviceGetCurrentClocksThrottleReasons
        return Sample(float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                      float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
                      nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
                      float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
                      int(reasons(h)))

    def watch(self, every_s: float, cap: int) -> ThreadWatch:
        return ThreadWatch(self.sample, every_s, cap)

    def peaks(self) -> Peaks:
        return self._peaks
