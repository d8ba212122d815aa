"""A deterministic fake device for the tests: a virtual clock, injectable timings,
conditions and faults.

`FakeDevice` holds the clock (`now`, advanced only by the fake's own work) and two scripts
of condition samples: read outside the batches, and read while a timed batch runs. `FakeSide` is one process on it, behaving as its `Behaviour` says:
honest, or one of the ways a kernel tries to move work out of the timed region (a share
of each call finished after the answer, which a fetch either waits for or not), to cache
answers (keyed on the buffer, like a `data_ptr` cache, or replayed after warm-up), or to
report in-process events that are not what happened (a patched `Event.elapsed_time`).
Outputs are computed for real (`op`, NumPy), so the output checks see what a kernel did.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from verifier.device._interface import BatchAnswer, DeviceInfo, Fetched, Inputs, Peaks, Sample

__all__ = ["STEADY", "Behaviour", "FakeDevice", "FakeSide", "ScriptedWatch", "double_plus_one"]

F64 = NDArray[np.float64]


def double_plus_one(inputs: Inputs) -> list[F64]:
    """The fake op: one output, 2x + 1 of the first input."""
    return [np.asarray(inputs[0], dtype=np.float64) * 2.0 + 1.0]


@dataclass(frozen=True)
class Behaviour:
    """How a fake process behaves (ns are virtual)."""

    kernel_ns: float = 10_000.0
    launch_ns: float = 2_000.0
    round_trip_ns: float = 40_000.0
    fetch_ns: float = 5_000.0
    flush_ns: float = 3_000.0
    late_share: float = 0.0
    """Share of each call's work that finishes only after the batch answered."""
    fetch_waits: bool = True
    """Whether a fetch waits for that late work (else it reads unfinished outputs: NaN)."""
    cache: Literal["none", "buffer", "warmup"] = "none"
    events_scale: float | None = 1.0
    """In-process events report kernel_ns times this (None: no events offered)."""
    jitter: float = 0.0
    """Relative noise of each batch's time (deterministic, from the side's seed)."""
    fetch_spikes_ns: tuple[float, ...] = ()
    """Extra time of successive fetches (a busy machine's pipe and scheduler), cycled."""
    fetch_waited_ns: tuple[float, ...] = ()
    """Extra time of successive fetches spent waiting for a CPU, which the OS accounts as
    run-queue waits (a busy machine the kernel shares), cycled."""
    side_share: float = 0.0
    """Share of each call's work left on a side stream when the batch's own stream finished
    (the device-wide synchronise waits for it: timed, and reported as the stream gap)."""
    stage_share: float = 0.0
    """Share of each call's work done while its inputs are staged (a hook on the copy that
    computes the answer ahead of the timed batch)."""
    empty_extra_ns: float = 0.0
    """Extra time of each call of an empty batch (a process slowing its own calibration)."""
    stale: Literal["none", "previous", "zeros"] = "none"
    """Outputs not computed: every other call answers the previous call's output (its
    `torch.empty` handed that memory back), or every call answers zeros."""
    late_on_cpu: bool = False
    """The late work runs on a host thread of the side's own (its CPU time is the side's,
    and on the side's one CPU its main thread waits for it on the run queue: late work
    dressed as a busy machine)."""
    op: Callable[[Inputs], list[F64]] = double_plus_one


STEADY = Sample(1980.0, 3201.0, 350.0, 45.0, 0)


class ScriptedWatch:
    """The fake's `Watch`: each batch it is entered around reads the next of the device's
    `during` samples (the last one repeats; `cap` in all, as a real watch)."""

    def __init__(self, device: FakeDevice, cap: int) -> None:
        self.device, self.cap = device, cap
        self.samples: list[Sample] = []
        self.failed = False

    def __enter__(self) -> ScriptedWatch:
        d = self.device
        if not d.during:
            self.failed = True
        elif len(self.samples) < self.cap:
            self.samples.append(d.during[min(d.during_taken, len(d.during) - 1)])
            d.during_taken += 1
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None


@dataclass
class FakeDevice:
    """The virtual clock and the condition samples: `samples` read outside the batches,
    `during` read while each timed batch runs (none: a watch that cannot read); in both
    the last one repeats."""

    samples: Sequence[Sample] = (STEADY,)
    device_peaks: Peaks = field(default_factory=lambda: Peaks(1e15, 4.8e12, "fake"))
    now: int = 0
    taken: int = 0
    during: Sequence[Sample] = (STEADY,)
    during_taken: int = 0

    def clock(self) -> int:
        return self.now

    def advance(self, ns: float) -> None:
        self.now += max(int(ns), 0)

    def info(self) -> DeviceInfo:
        return DeviceInfo("Fake H200", "9.0", 132, 50 * 2**20, 141 * 2**30, "580.159.04",
                          "13.0", "2.11.0+cu130", False)

    def sample(self) -> Sample:
        s = self.samples[min(self.taken, len(self.samples) - 1)]
        self.taken += 1
        return s

    def watch(self, every_s: float, cap: int) -> ScriptedWatch:
        return ScriptedWatch(self, cap)

    def peaks(self) -> Peaks:
        return self.device_peaks


class FakeSide:
    """One fake process on a `FakeDevice`; implements `DeviceSide`."""

    def __init__(self, device: FakeDevice, behaviour: Behaviour, seed: int = 0) -> None:
        self.device, self.b = device, behaviour
        self.rng = np.random.default_rng(seed)
        self.staged: list[list[F64]] = []
        self.outputs: list[list[F64]] = []
        self.first: dict[int, list[F64]] = {}
        self.pending_ns = 0.0
        self.done = 0
        self.allocations = 0
        self.fetches = 0

    def stage(self, calls: Sequence[Inputs]) -> float | None:
        if len(calls) > len(self.staged):
            self.allocations += len(calls) - len(self.staged)
            self.staged += [[] for _ in range(len(calls) - len(self.staged))]
        for i, inputs in enumerate(calls):
            self.staged[i] = [np.array(x, dtype=np.float64) for x in inputs]
        self.device.advance(self.b.round_trip_ns + len(calls) * self.b.stage_share * self.b.kernel_ns)
        return None

    def _answer(self, slot: int) -> list[F64]:
        fresh = self.b.op(self.staged[slot])
        if self.b.stale == "zeros":
            return [np.zeros_like(o) for o in fresh]
        if self.b.stale == "previous" and slot % 2 == 1:  # every other call skipped
            return [o.copy() for o in self.outputs[slot - 1]]
        if self.b.cache == "buffer":
            return self.first.setdefault(slot, fresh)
        if self.b.cache == "warmup":
            return self.first.setdefault(0, fresh)
        return fresh

    def run(self, count: int, cold: bool, empty: bool = False) -> BatchAnswer:
        b = self.b
        per_call = b.launch_ns + (b.flush_ns if cold else 0.0) + (b.empty_extra_ns if empty else 0.0)
        work = 0.0 if empty else b.kernel_ns
        noise = 1.0 + b.jitter * float(self.rng.standard_normal()) if b.jitter else 1.0
        ahead = 1.0 - b.late_share - b.stage_share
        self.device.advance((b.round_trip_ns + count * (per_call + ahead * work)) * noise)
        if empty:
            return BatchAnswer(None)
        if len(self.outputs) != count:
            self.outputs = [[] for _ in range(count)]
        for i in range(count):  # in order: a stale call reads what the call before it left
            self.outputs[i] = self._answer(i)
        self.pending_ns = count * b.late_share * work
        self.done += count
        events = None if b.events_scale is None else tuple([work * b.events_scale] * count)
        gap = 0.0 if not b.side_share else b.side_share * work * count
        return BatchAnswer(events, gap)

    def fetch(self, calls: Sequence[int]) -> Fetched:
        b = self.b
        unfinished = self.pending_ns > 0 and not b.fetch_waits
        late = self.pending_ns if b.fetch_waits else 0.0
        self.pending_ns = 0.0
        spike = _cycled(b.fetch_spikes_ns, self.fetches)
        waited = _cycled(b.fetch_waited_ns, self.fetches)
        self.fetches += 1
        own = b.round_trip_ns + b.fetch_ns * len(calls)
        self.device.advance(late + own + spike + waited)
        got: list[list[Any]] = []
        for c in calls:
            outs = [o.copy() for o in self.outputs[c]]
            if unfinished:
                outs = [np.full_like(o, np.nan) for o in outs]
            got.append(outs)
        on_cpu = late if b.late_on_cpu else 0.0
        return Fetched(got, waited + on_cpu, b.fetch_ns * len(calls) + on_cpu)


def _cycled(values: tuple[float, ...], i: int) -> float:
    return values[i % len(values)] if values else 0.0
