"""The CPU as a `Device`: the same timing path runs on torch's CPU build, so it is tested
here and kernels for the CPU are held to the CPU's floor.

Its properties are the CPU's (cores for SMs, the L2 cache of cpu0, the machine's memory),
its samples the mean cpufreq (or /proc/cpuinfo) clock with no throttle reasons (a CPU
reports none through this interface), its peaks whatever the caller probed
(`verifier.benchmark.machine_peaks` for the CPU).
"""

from __future__ import annotations

import os
from pathlib import Path

from verifier.device._interface import DeviceInfo, Peaks, Sample
from verifier.device._watch import ThreadWatch

__all__ = ["HostDevice", "cpu_mhz"]

_CPU = Path("/sys/devices/system/cpu")


def cpu_mhz() -> float:
    """The mean current CPU clock in MHz (cpufreq, else /proc/cpuinfo), 0 if unreadable."""
    freqs = []
    for path in _CPU.glob("cpu[0-9]*/cpufreq/scaling_cur_freq"):
        try:
            freqs.append(int(path.read_text().strip()) / 1000.0)
        except (OSError, ValueError):
            continue
    if not freqs:
        try:
            text = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            text = ""
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "cpu MHz":
                try:
                    freqs.append(float(value))
                except ValueError:
                    continue
    return sum(freqs) / len(freqs) if freqs else 0.0


def _l2_bytes() -> int:
    for index in sorted(_CPU.glob("cpu0/cache/index*")):
        try:
            if (index / "level").read_text().strip() != "2":
                continue
            size = (index / "size").read_text().strip().upper()
        except OSError:
            continue
        scale = {"K": 1024, "M": 1024**2}.get(size[-1:], 1)
        digits = size.rstrip("KM")
        return int(digits) * scale if digits.isdigit() else 0
    return 0


class HostDevice:
    """The CPU behind the `Device` interface."""

    def __init__(self, peaks: Peaks, model: str, torch_version: str) -> None:
        self._peaks, self.model, self.torch_version = peaks, model, torch_version

    def info(self) -> DeviceInfo:
        try:
            memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (OSError, ValueError):
            memory = 0
        return DeviceInfo(self.model[:256] or "cpu", "0.0", os.cpu_count() or 1, _l2_bytes(),
                          memory, "none", "none", self.torch_version, False)

    def sample(self) -> Sample:
        return Sample(cpu_mhz(), 0.0, 0.0, 0.0, 0)

    def watch(self, every_s: float, cap: int) -> ThreadWatch:
        return ThreadWatch(self.sample, every_s, cap)

    def peaks(self) -> Peaks:
        return self._peaks
