"""A device's conditions judged, its record built, and two devices compared.

`summarize` turns the samples taken before, between repetitions, while the timed batches
ran (`_watch`) and after a shape into attest's `DeviceConditions`: every throttle reason
seen (typed, `DEVICE_THROTTLES`), the SM clock moving more than `CLOCK_SPREAD` between
samples (`clocks_varied`), or no sample at all or a read that failed (`unreadable`); the
reasons seen while a batch ran are also named apart (`during_throttle`), so a throttle
that only a mid-batch sample caught says so. Any of them makes the result not trusted;
`combine` takes the worst of several runs' conditions. `record` is the environment
of a device result (`DeviceRecord`); `device_diff` names each way a claim's device
differs from this one, hardware fields first, so a reproduction on another GPU model is
inconclusive and says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from attest.predicates import (
    DEVICE_THROTTLES,
    DeviceConditions,
    DeviceRecord,
    DeviceThrottle,
    EnvironmentDiff,
)
from verifier.device._interface import DeviceInfo, Peaks, Sample

__all__ = ["CLOCK_SPREAD", "DEVICE_HARDWARE", "DEVICE_SOFTWARE", "combine", "device_diff",
           "record", "summarize"]

CLOCK_SPREAD = 0.10
DEVICE_HARDWARE = ("model", "capability", "sm_count", "l2_bytes", "memory_bytes")
DEVICE_SOFTWARE = ("driver", "cuda", "torch", "clocks_locked")


def summarize(samples: Sequence[Sample], during: Sequence[Sample] = (),
              watch_failed: bool = False) -> DeviceConditions:
    """The conditions over a shape's samples (`samples` read outside the batches, `during`
    read while they ran; `watch_failed`: a read then failed), with every reason not to
    trust it; the reasons seen during the batches are named apart."""
    every = [*samples, *during]
    if not every:
        return DeviceConditions(samples=1, sm_clock_min_mhz=0.0, sm_clock_max_mhz=0.0,
                                mem_clock_min_mhz=0.0, mem_clock_max_mhz=0.0, power_max_w=0.0,
                                temperature_max_c=0.0, throttle=("unreadable",))
    seen = _reasons(every)
    mid = _reasons(during) if during else set()
    if watch_failed:
        seen.add("unreadable")
        mid.add("unreadable")
    sm, mem = [s.sm_clock_mhz for s in every], [s.mem_clock_mhz for s in every]
    return DeviceConditions(samples=len(every), sm_clock_min_mhz=min(sm), sm_clock_max_mhz=max(sm),
                            mem_clock_min_mhz=min(mem), mem_clock_max_mhz=max(mem),
                            power_max_w=max(s.power_w for s in every),
                            temperature_max_c=max(s.temperature_c for s in every),
                            throttle=_ordered(seen), during_samples=len(during),
                            during_throttle=_ordered(mid))


def combine(conditions: Sequence[DeviceConditions]) -> DeviceConditions | None:
    """The conditions over several runs of one claim: every sample counted, the widest clock
    range, the highest power and temperature, every reason any run saw (None: no run had a
    device)."""
    if not conditions:
        return None
    c = conditions
    return DeviceConditions(
        samples=min(sum(x.samples for x in c), 1_000_000),
        sm_clock_min_mhz=min(x.sm_clock_min_mhz for x in c),
        sm_clock_max_mhz=max(x.sm_clock_max_mhz for x in c),
        mem_clock_min_mhz=min(x.mem_clock_min_mhz for x in c),
        mem_clock_max_mhz=max(x.mem_clock_max_mhz for x in c),
        power_max_w=max(x.power_max_w for x in c),
        temperature_max_c=max(x.temperature_max_c for x in c),
        throttle=_ordered({t for x in c for t in x.throttle}),
        during_samples=min(sum(x.during_samples for x in c), 1_000_000),
        during_throttle=_ordered({t for x in c for t in x.during_throttle}))


def _reasons(samples: Sequence[Sample]) -> set[str]:
    """The throttle reasons of some samples, the SM clock spread and unreadable clocks."""
    seen: set[str] = set()
    for s in samples:
        seen |= s.throttle
    sm = [s.sm_clock_mhz for s in samples]
    if max(sm) > 0 and (max(sm) - min(sm)) / max(sm) > CLOCK_SPREAD:
        seen.add("clocks_varied")
    if max(sm) <= 0:
        seen.add("unreadable")
    return seen


def _ordered(seen: set[str]) -> tuple[DeviceThrottle, ...]:
    return tuple(t for t in DEVICE_THROTTLES if t in seen)


def record(info: DeviceInfo, first: Sample, peaks: Peaks, baseline: str, timer: str,
           cold: bool) -> DeviceRecord:
    return DeviceRecord(model=info.model[:256], capability=info.capability, sm_count=info.sm_count,
                        l2_bytes=info.l2_bytes, memory_bytes=info.memory_bytes,
                        driver=info.driver[:64], cuda=info.cuda[:64], torch=info.torch[:64],
                        sm_clock_mhz=first.sm_clock_mhz, mem_clock_mhz=first.mem_clock_mhz,
                        clocks_locked=info.clocks_locked, baseline=baseline[:128],
                        peak_flops=peaks.flops, peak_bytes_per_s=peaks.bytes_per_s,
                        timer=timer, cold=cold)


def _as_map(device: DeviceRecord | Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if device is None or isinstance(device, Mapping):
        return device
    return device.to_json()


def device_diff(claimed: DeviceRecord | Mapping[str, Any] | None,
                here: DeviceRecord | Mapping[str, Any] | None) -> list[EnvironmentDiff]:
    """Each field in which the claim's device and this one differ (`device.<field>`); a
    device on one side only is a hardware difference."""
    a, b = _as_map(claimed), _as_map(here)
    if a is None and b is None:
        return []
    if a is None or b is None:
        return [EnvironmentDiff(field="device", hardware=True,
                                claimed="none" if a is None else str(a.get("model", "?"))[:512],
                                measured="none" if b is None else str(b.get("model", "?"))[:512])]
    out = []
    for name in (*DEVICE_HARDWARE, *DEVICE_SOFTWARE):
        if a.get(name) != b.get(name):
            out.append(EnvironmentDiff(field=f"device.{name}", hardware=name in DEVICE_HARDWARE,
                                       claimed=str(a.get(name))[:512], measured=str(b.get(name))[:512]))
    return out
