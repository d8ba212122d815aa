"""What the parent needs from an accelerator, as a small interface with two implementations.

`Device` is the machine's side, read by the parent only (never by a kernel's process):
its properties (`DeviceInfo`), a condition sample (`Sample`: clocks, power, temperature,
NVML throttle reasons) and the peaks of the physical floor (`Peaks`, probed once per
machine). `DeviceSide` is one process on that device (the candidate, or the PyTorch
baseline in its own process): inputs are staged into buffers allocated once per shape,
each call of a batch with its own inputs and its own output buffer; `run` executes a
batch and answers only after a device-wide synchronise; `fetch` copies the outputs of
calls the parent picks after the batch answered.

A side never times itself: the parent's clock spans `run` and `fetch` (see `_timing`).
What a side reports besides outputs (`BatchAnswer.events_ns`, in-process CUDA events)
is the kernel's word, kept only when it agrees with that clock.

`verifier.device._fake` implements both for the tests; `verifier.device._real` reads a
real GPU through NVML and torch, imported only when a device exists.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

__all__ = ["BENIGN_THROTTLE_BITS", "NVML_THROTTLE_BITS", "BatchAnswer", "Clock", "Device",
           "DeviceInfo", "DeviceSide", "Fetched", "Inputs", "Peaks", "Sample", "Watch",
           "throttle_names"]

Inputs = Sequence[Any]
"""One call's inputs as the parent drew them (host arrays, or plain values; staged on the device)."""
Clock = Callable[[], int]
"""The parent's clock in ns (time.perf_counter_ns; a fake device brings a virtual one)."""

NVML_THROTTLE_BITS = {
    0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal",
    0x40: "hw_thermal", 0x80: "hw_power_brake",
}
"""nvmlClocksEventReasons bits that slow a measurement down, by attest's DeviceThrottle name."""
BENIGN_THROTTLE_BITS = 0x1 | 0x2 | 0x100
"""GPU idle, application clocks set (clocks locked on purpose), display clock setting."""


def throttle_names(bits: int) -> frozenset[str]:
    """The throttle reasons of an NVML bit mask (benign bits ignored; unknown bits too)."""
    return frozenset(name for bit, name in NVML_THROTTLE_BITS.items() if bits & bit)


@dataclass(frozen=True)
class DeviceInfo:
    """The device's fixed properties and versions, as the parent read them."""

    model: str
    capability: str
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    driver: str
    cuda: str
    torch: str
    clocks_locked: bool


@dataclass(frozen=True)
class Sample:
    """One condition sample (NVML-like): clocks in MHz, power in W, temperature in C, and
    the raw throttle-reason bit mask."""

    sm_clock_mhz: float
    mem_clock_mhz: float
    power_w: float
    temperature_c: float
    throttle_bits: int = 0

    @property
    def throttle(self) -> frozenset[str]:
        return throttle_names(self.throttle_bits)


class Watch(Protocol):
    """Samples read while the batches it was entered around ran."""

    samples: list[Sample]
    failed: bool

    def __enter__(self) -> Watch: ...

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...


@dataclass(frozen=True)
class Peaks:
    """Peak compute (FLOP/s) and memory bandwidth (bytes/s), from a probe on this machine."""

    flops: float
    bytes_per_s: float
    source: str

    def __post_init__(self) -> None:
        if not (self.flops > 0 and self.bytes_per_s > 0):
            raise ValueError(f"peaks must be positive, got {self.flops} FLOP/s and "
                             f"{self.bytes_per_s} B/s ({self.source})")


@dataclass(frozen=True)
class BatchAnswer:
    """A side's answer to a batch: per-call in-process event times (None: not offered), and
    how long the device-wide synchronise still waited after the batch's own stream had
    finished (`stream_gap_ns`: work left on another stream; None: not measured, as on a CPU).
    Both are the process's word: a gap it reports is an accusation it makes of itself (it
    could only hide one), never an excuse; the parent's clock sets the figures either way."""

    events_ns: tuple[float, ...] | None = None
    stream_gap_ns: float | None = None


@dataclass(frozen=True)
class Fetched:
    """A fetch's outputs, and what the OS accounted to its command (read by the parent from
    /proc, never from the side): `waited_ns`, the run-queue waits of the parent and of the
    side's main thread (a busy machine's delay), and `cpu_ns`, the CPU time of all the
    side's threads. Both 0 where nothing accounts them."""

    outputs: list[list[NDArray[np.float64]]]
    waited_ns: float = 0.0
    cpu_ns: float = 0.0


class DeviceSide(Protocol):
    """One process on the device: the candidate's, or the baseline's."""

    def stage(self, calls: Sequence[Inputs]) -> float | None:
        """Copy each call's inputs into its own device buffers (allocated at the first
        stage of a shape, reused by the next ones); outside the batches' timed region.
        Answers the parent's clock across the copy command alone (None: the caller's clock
        around this call is that), which is charged where it exceeds the baseline's."""

    def run(self, count: int, cold: bool, empty: bool = False) -> BatchAnswer:
        """Run the staged calls 0..count-1 (each into its own output buffer; an L2 flush
        before each when `cold`; an empty kernel instead when `empty`), synchronise the
        batch's stream, then the whole device (the gap between the two answered), then
        answer."""

    def fetch(self, calls: Sequence[int]) -> Fetched:
        """The outputs of the given calls of the last batch, copied back to the host, with
        the OS's accounting of the command."""


class Device(Protocol):
    """The machine's side: properties, condition samples (one now, or a `Watch` of them
    read while timed batches run: `verifier.device._watch`), peaks."""

    def info(self) -> DeviceInfo: ...

    def sample(self) -> Sample: ...

    def watch(self, every_s: float, cap: int) -> Watch: ...

    def peaks(self) -> Peaks: ...
