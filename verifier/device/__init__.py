"""device: an accelerator behind a small interface, and the timing that no kernel can move.

Holds the interface (`_interface`: `Device` for the machine's side, read by the parent
only; `DeviceSide` for one process on it, staged, run and fetched by the parent), the
outside-the-process timing of a shape's batches (`_timing`), the physical floor from
FLOP and byte counts at the probed peaks (`_floor`), the conditions judged and the
device compared (`_conditions`), the real device (`_real`: a probe process and NVML,
imported only where a GPU exists), the CPU as a device (`_host`, so the same path runs
on torch's CPU build) and a deterministic fake for the tests (`_fake`).

May import: the pure model, `sandbox` and `worker`. Not `runtimes` or anything above
(`checks`, `benchmark` and `reproduce` import it).
"""

from __future__ import annotations

from verifier.device._conditions import CLOCK_SPREAD, combine, device_diff, record, summarize
from verifier.device._fake import Behaviour, FakeDevice, FakeSide, ScriptedWatch, double_plus_one
from verifier.device._floor import FLOOR_MARGIN, Floor, OpCost, below_floor, floor_of
from verifier.device._host import HostDevice, cpu_mhz
from verifier.device._interface import (
    BatchAnswer,
    Clock,
    Device,
    DeviceInfo,
    DeviceSide,
    Fetched,
    Inputs,
    Peaks,
    Sample,
    Watch,
    throttle_names,
)
from verifier.device._real import (
    NvmlDevice,
    ProbeResult,
    cached_probe,
    parse_probe,
    probe_device,
)
from verifier.device._timing import DeviceTiming, SideTiming, TimingPlan, calibration, measure
from verifier.device._watch import WATCH_CAP, ThreadWatch

__all__ = ["CLOCK_SPREAD", "FLOOR_MARGIN", "WATCH_CAP", "BatchAnswer", "Behaviour", "Clock", "Device",
           "DeviceInfo", "DeviceSide", "DeviceTiming", "FakeDevice", "FakeSide", "Fetched", "Floor", "HostDevice",
           "Inputs", "NvmlDevice", "OpCost", "Peaks", "ProbeResult", "Sample", "ScriptedWatch",
           "SideTiming", "ThreadWatch", "TimingPlan", "Watch", "below_floor", "cached_probe", "calibration",
           "combine", "cpu_mhz",
           "device_diff", "double_plus_one", "floor_of", "measure", "parse_probe", "probe_device",
           "record", "summarize", "throttle_names"]
