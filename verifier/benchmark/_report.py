"""What every strategy of `bench` reports: the findings a run collects (`Findings`, typed
faults and caveats beside the notes), the report itself (`BenchReport`, whose benchmark/v1
body is attest's type), the raw samples' reference, the bootstrap interval of a speed-up
and the machine's peaks (`machine_peaks`, for the roofline floor). The bottom of
`benchmark`: imports nothing of the folder but `_cost`.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from attest.predicates import (
    BenchCaveat,
    BenchCaveatKind,
    BenchFault,
    BenchFaultKind,
    BenchmarkPredicate,
    BenchmarkResult,
    BlobRef,
    DeviceConditions,
    DeviceRecord,
    Environment,
    Method,
    TorchOp,
    Workload,
)
from verifier.benchmark._cost import CostRecord
from verifier.errors import VerifierError
from verifier.runtimes import matmul_rate

__all__ = ["BenchReport", "Findings", "bootstrap_speedup", "machine_peaks", "samples_ref"]


class Findings:
    """What a benchmark run noticed: prose notes, and among them the kernel faults and the
    caveats (why it is not trusted without blaming the kernel), typed.

    `append` adds a note; `fault` adds a typed fault and its note; `caveat` a typed caveat
    and its note. Verdicts and their reasons are taken from `faults` and `caveats`, never
    from the notes' text."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.faults: list[BenchFault] = []
        self.caveats: list[BenchCaveat] = []

    def caveat(self, kind: BenchCaveatKind, shape: Mapping[str, int] | None, note: str) -> None:
        self.caveats.append(BenchCaveat(kind=kind, shape=None if shape is None else dict(shape),
                                        detail=note[:2000]))
        self.notes.append(note)

    def append(self, note: str) -> None:
        self.notes.append(note)

    def fault(self, kind: BenchFaultKind, shape: Mapping[str, int] | None, note: str) -> None:
        self.faults.append(BenchFault(kind=kind, shape=None if shape is None else dict(shape),
                                      detail=note[:2000]))
        self.notes.append(note)


@dataclass(frozen=True)
class BenchReport:
    """The outcome of `bench`; `to_predicate()` is its benchmark/v1 body (attest's type)."""

    kernel: str
    op: str
    seed: int
    environment: Environment
    shapes: tuple[dict[str, int], ...]
    warmup: int
    results: tuple[BenchmarkResult, ...]
    trusted: bool
    notes: tuple[str, ...]
    samples: tuple[dict[str, Any], ...] = field(default=(), repr=False)
    measured_s: float = 0.0
    faults: tuple[BenchFault, ...] = ()
    threads: int = 1
    """Threads the kernel (OpenMP) and the baseline (BLAS) were given."""
    cost: CostRecord | None = None
    """How the kernel's cost was accounted and confined (None: it never ran)."""
    torch: Mapping[str, Any] | None = None
    """For op 'torch': the reference's digest, torch, dtype, tolerance, weight seeds and
    baselines (attest.predicates.TorchOp)."""
    device: DeviceRecord | None = None
    """On a device: what it was, how it was timed, the baseline and versions."""
    device_conditions: DeviceConditions | None = None
    """On a device: clocks, power, temperature and throttle reasons over the run."""
    baseline: str | None = None
    """The baseline's name where it is neither NumPy nor a torch reference module (a C ABI
    kernel on a device: PyTorch's built-in op, e.g. 'torch-softmax')."""
    caveats: tuple[BenchCaveat, ...] = ()
    """Why it is not trusted though no kernel fault was seen (typed; the notes repeat them)."""

    def samples_blob(self) -> bytes:
        """The raw samples as canonical JSON (sorted keys, no spaces)."""
        doc = {"kernel": self.kernel, "op": self.op, "seed": self.seed,
               "order": "batches on the parent's clock, kernel first on even batches, baseline "
                        "first on odd; a sample is a batch's mean per call",
               "shapes": list(self.samples)}
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    def method(self) -> Method:
        return Method(warmup=self.warmup,
                      repetitions=max(1, min((r.n for r in self.results), default=1)),
                      timer="perf_counter_ns", interleaved=True,
                      baseline=self.baseline or (self.torch["baselines"][0] if self.torch
                                                 else "numpy-float32"),
                      fresh_inputs=True, outputs_rechecked=True, threads=self.threads,
                      cpu_accounting=None if self.cost is None else self.cost.cpu_accounting,
                      cpu_pinning=None if self.cost is None else self.cost.cpu_pinning,
                      memory_limit=None if self.cost is None else self.cost.memory_limit)

    def workload(self) -> Workload:
        return Workload(op=self.op, dtype=self.torch["dtype"] if self.torch else "float32",
                        seed=self.seed, shapes=self.shapes)

    def to_predicate(self) -> BenchmarkPredicate:
        return BenchmarkPredicate(
            environment=self.environment, workload=self.workload(), method=self.method(),
            results=self.results, samples=samples_ref(self.samples_blob()),
            trusted=self.trusted, notes=tuple(n[:2000] for n in self.notes), faults=self.faults,
            torch=None if self.torch is None else TorchOp.from_json(dict(self.torch)),
            device=self.device, device_conditions=self.device_conditions, caveats=self.caveats)

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "op": self.op, "seed": self.seed,
                "environment": self.environment.to_json(), "shapes": [dict(s) for s in self.shapes],
                "warmup": self.warmup, "results": [r.to_json() for r in self.results],
                "trusted": self.trusted, "notes": list(self.notes),
                "samples": list(self.samples), "measured_s": self.measured_s,
                "faults": [f.to_json() for f in self.faults], "threads": self.threads,
                **({"cost": self.cost.to_json()} if self.cost is not None else {}),
                **({"torch": dict(self.torch)} if self.torch is not None else {}),
                **({"device": self.device.to_json()} if self.device is not None else {}),
                **({"device_conditions": self.device_conditions.to_json()}
                   if self.device_conditions is not None else {}),
                **({"baseline": self.baseline} if self.baseline is not None else {}),
                "caveats": [c.to_json() for c in self.caveats]}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BenchReport:
        return cls(str(obj["kernel"]), str(obj["op"]), int(obj["seed"]),
                   Environment.from_json(obj["environment"]),
                   tuple(dict(s) for s in obj["shapes"]), int(obj["warmup"]),
                   tuple(BenchmarkResult.from_json(r) for r in obj["results"]),
                   bool(obj["trusted"]), tuple(str(n) for n in obj["notes"]),
                   tuple(dict(s) for s in obj["samples"]), float(obj["measured_s"]),
                   tuple(BenchFault.from_json(f) for f in obj.get("faults", ())),
                   int(obj.get("threads", 1)),
                   CostRecord.from_json(obj["cost"]) if "cost" in obj else None,
                   dict(obj["torch"]) if obj.get("torch") is not None else None,
                   DeviceRecord.from_json(obj["device"]) if "device" in obj else None,
                   DeviceConditions.from_json(obj["device_conditions"])
                   if "device_conditions" in obj else None,
                   str(obj["baseline"])[:128] if obj.get("baseline") is not None else None,
                   tuple(BenchCaveat.from_json(c) for c in obj.get("caveats", ())))


def samples_ref(blob: bytes) -> BlobRef:
    """The benchmark body's reference to its raw samples blob."""
    return BlobRef(sha256=hashlib.sha256(blob).hexdigest(), size=len(blob),
                   media_type="application/json")


def bootstrap_speedup(
    kernel_ns: NDArray[Any], baseline_ns: NDArray[Any], rng: np.random.Generator,
    resamples: int = 2000,
) -> tuple[float, float, float]:
    """(speed-up, lo, hi): ratio of medians and its 95% percentile bootstrap interval."""
    if kernel_ns.size == 0 or baseline_ns.size == 0:
        raise VerifierError("no samples to bootstrap")
    k = kernel_ns.astype(np.float64)
    b = baseline_ns.astype(np.float64)
    ratio = np.empty(resamples)
    chunk = max(1, 4_000_000 // max(k.size, 1))
    for start in range(0, resamples, chunk):
        m = min(chunk, resamples - start)
        ik = rng.integers(0, k.size, size=(m, k.size))
        ib = rng.integers(0, b.size, size=(m, b.size))
        ratio[start:start + m] = np.median(b[ib], axis=1) / np.maximum(np.median(k[ik], axis=1), 1.0)
    lo, hi = np.percentile(ratio, [2.5, 97.5])
    mid = float(np.median(b) / max(float(np.median(k)), 1.0))
    return mid, float(min(lo, mid)), float(max(hi, mid))


@lru_cache(maxsize=1)
def machine_peaks() -> tuple[float, float]:
    """(peak FLOP/s, peak bytes/s) measured once, quickly, in this (trusted) process.

    Compute: best of 3 float32 NumPy matmuls of 768^2 (BLAS is near the machine's
    peak) per CPU-second of this process, with BLAS held to one thread, times the core
    count. Bandwidth: best copy rate of a cache-resident and a DRAM-sized buffer per
    CPU-second. CPU time, not wall time: on a loaded machine the wall clock counts time
    other processes held the cores, which made the peak look 10x lower and honest kernels
    "faster than the roofline" (seen at load 15-20 on 2 cores: 6 GFLOP/s by wall clock, 85
    by CPU time). One BLAS thread: BLAS's threads spin while they wait for each other, and
    under load that spinning is CPU time too (2 threads on 2 loaded cores: 88 to 254
    GFLOP/s from one process to the next; one thread: 316 to 330).
    """
    flops = matmul_rate(np.float32, 768) * (os.cpu_count() or 1)
    bw = 0.0
    for n in (64 * 1024, 8 * 1024 * 1024):
        src = np.ones(n, dtype=np.float32)
        dst = np.empty_like(src)
        reps = max(1, (64 * 1024 * 1024) // (8 * n))
        quickest = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            for _ in range(reps):
                np.copyto(dst, src)
            quickest = min(quickest, max(time.process_time() - t0, 1e-6) / reps)
        bw = max(bw, 8 * n / quickest)
    return flops, bw
