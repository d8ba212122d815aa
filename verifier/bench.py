"""`ktl bench`: kernel vs NumPy float32 baseline, interleaved, in one sandboxed child.

Method: warm-up, then repetitions alternating kernel and baseline (which goes
first alternates too), each call on freshly copied input contents from a pool of
random input sets with one element changed per call (no two calls see the same
contents), until the 95% bootstrap interval of the speed-up (median baseline /
median kernel) is within the target or the time budget ends. Every kernel output
of the timed loop is kept; a random sample of them (the last always) is
re-checked against the float64 reference afterwards, plus one call on inputs
never seen before, so a kernel that drifts or caches results (by pointer or by
content) cannot win. The parent distrusts the child's clock: it timestamps the child's start and
end markers with its own clock and rejects samples that do not add up (a library
can patch the timer of the process that loads it). Results faster than a
roofline floor (FLOPs and bytes against measured peak compute and bandwidth) are
flagged too. Raw samples are kept as a JSON blob whose digest is in the body.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from verifier._arena import guard_pattern, layout
from verifier._errors import BuildError, RuntimeUnavailableError, VerifierError
from verifier.compare import compare_output
from verifier.environment import environment_fingerprint
from verifier.kernel import KernelSpec
from verifier.ops import OPS, OpSpec
from verifier.sandbox import (
    Limits,
    base_env,
    filesystem_confinement,
    run_sandboxed,
    worker_argv,
)

__all__ = ["BenchReport", "ShapeResult", "bench", "bootstrap_speedup", "machine_peaks"]

POOL = 4
MAX_POOL_BYTES = 1024 * 2**20
RECHECK_CALLS = 64
"""Timed calls whose outputs are rechecked (a random sample, the last one always)."""
ROOFLINE_MARGIN = 2.0
SPAN_TOLERANCE = 0.05
SPAN_SLACK_S = 0.1
Progress = Callable[[str], None]
QUIET_THREADS = {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "4"}
"""Idle OpenMP and OpenBLAS threads sleep instead of spinning: the kernel's and the
baseline's thread pools share one process, and a pool spinning while the other
works halves the other's speed on a small machine."""


@dataclass(frozen=True)
class ShapeResult:
    """Statistics of one shape (the `results[]` item of benchmark/v1)."""

    shape: dict[str, int]
    n: int
    median_ns: float
    p5_ns: float
    p95_ns: float
    baseline_median_ns: float
    speedup: float
    speedup_ci95: tuple[float, float]
    gflops: float

    def to_json(self) -> dict[str, Any]:
        return {"shape": dict(self.shape), "n": self.n, "median_ns": self.median_ns,
                "p5_ns": self.p5_ns, "p95_ns": self.p95_ns,
                "baseline_median_ns": self.baseline_median_ns, "speedup": self.speedup,
                "speedup_ci95": list(self.speedup_ci95), "gflops": self.gflops}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ShapeResult:
        lo, hi = obj["speedup_ci95"]
        return cls(dict(obj["shape"]), int(obj["n"]), float(obj["median_ns"]),
                   float(obj["p5_ns"]), float(obj["p95_ns"]), float(obj["baseline_median_ns"]),
                   float(obj["speedup"]), (float(lo), float(hi)), float(obj["gflops"]))

    @property
    def halfwidth(self) -> float:
        """Relative half-width of the speed-up interval."""
        lo, hi = self.speedup_ci95
        return max(self.speedup - lo, hi - self.speedup) / self.speedup if self.speedup else 1.0


@dataclass(frozen=True)
class BenchReport:
    """The outcome of `bench`; `to_predicate()` is the benchmark/v1 body."""

    kernel: str
    op: str
    seed: int
    environment: dict[str, Any]
    shapes: tuple[dict[str, int], ...]
    warmup: int
    results: tuple[ShapeResult, ...]
    trusted: bool
    notes: tuple[str, ...]
    samples: tuple[dict[str, Any], ...] = field(default=(), repr=False)
    measured_s: float = 0.0

    def samples_blob(self) -> bytes:
        """The raw samples as canonical JSON (sorted keys, no spaces)."""
        doc = {"kernel": self.kernel, "op": self.op, "seed": self.seed,
               "order": "kernel first on even repetitions, baseline first on odd",
               "shapes": list(self.samples)}
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    def to_predicate(self) -> dict[str, Any]:
        blob = self.samples_blob()
        return {
            "environment": self.environment,
            "workload": {"op": self.op, "dtype": "float32", "seed": self.seed,
                         "shapes": [dict(s) for s in self.shapes]},
            "method": {"warmup": self.warmup,
                       "repetitions": max(1, min((r.n for r in self.results), default=1)),
                       "timer": "perf_counter_ns", "interleaved": True,
                       "baseline": "numpy-float32", "fresh_inputs": True,
                       "outputs_rechecked": True},
            "results": [r.to_json() for r in self.results],
            "samples": {"sha256": hashlib.sha256(blob).hexdigest(), "size": len(blob),
                        "media_type": "application/json"},
            "trusted": self.trusted,
            "notes": [n[:2000] for n in self.notes],
        }

    def to_json(self) -> dict[str, Any]:
        return {"kernel": self.kernel, "op": self.op, "seed": self.seed,
                "environment": self.environment, "shapes": [dict(s) for s in self.shapes],
                "warmup": self.warmup, "results": [r.to_json() for r in self.results],
                "trusted": self.trusted, "notes": list(self.notes),
                "samples": list(self.samples), "measured_s": self.measured_s}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> BenchReport:
        return cls(str(obj["kernel"]), str(obj["op"]), int(obj["seed"]), dict(obj["environment"]),
                   tuple(dict(s) for s in obj["shapes"]), int(obj["warmup"]),
                   tuple(ShapeResult.from_json(r) for r in obj["results"]), bool(obj["trusted"]),
                   tuple(str(n) for n in obj["notes"]), tuple(dict(s) for s in obj["samples"]),
                   float(obj["measured_s"]))


def bootstrap_speedup(
    kernel_ns: NDArray[np.int64], baseline_ns: NDArray[np.int64], rng: np.random.Generator,
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
    peak) per CPU-second of this process, times the core count. Bandwidth: best copy
    rate of a cache-resident and a DRAM-sized buffer per CPU-second. CPU time, not
    wall time: on a loaded machine the wall clock counts time other processes held
    the cores, which made the peak look 10x lower and honest kernels "faster than
    the roofline" (seen at load 15-20 on 2 cores: 6 GFLOP/s by wall clock, 85 by CPU time).
    """
    a = np.random.default_rng(0).standard_normal((768, 768)).astype(np.float32)
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        np.matmul(a, a)
        best = min(best, max(time.process_time() - t0, 1e-6))
    flops = 2 * 768**3 / best * (os.cpu_count() or 1)
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


def _schedule(rng: np.random.Generator, length: int) -> list[int]:
    out = [int(rng.integers(0, POOL))]
    while len(out) < length:
        nxt = int(rng.integers(0, POOL - 1))
        out.append(nxt if nxt < out[-1] else nxt + 1)
    return out


@dataclass
class _ShapeJob:
    dims: dict[str, int]
    pool: list[list[NDArray[np.float32]]]
    result_path: Path
    schedule: list[int]
    tweak_idx: NDArray[np.int64]
    tweak_val: NDArray[np.float32]

    def inputs_of_call(self, call: int) -> list[NDArray[np.float32]]:
        """The exact inputs of timed call `call`: a pool set with one element changed.

        Changing one element per call makes every call's contents new, so a kernel
        that caches results by content (not only by pointer) gains nothing.
        """
        arrays = [a.copy() for a in self.pool[self.schedule[call % len(self.schedule)]]]
        if arrays[0].size:
            flat = arrays[0].reshape(-1)
            flat[int(self.tweak_idx[call % self.tweak_idx.size])] = self.tweak_val[call % self.tweak_val.size]
        return arrays


def bench(
    directory: str | Path,
    shapes: Sequence[Mapping[str, int]] | None = None,
    seed: int | None = None,
    time_budget_s: float = 20.0,
    target: float = 0.05,
    max_halfwidth: float = 0.15,
    min_reps: int = 20,
    max_reps: int = 5000,
    warmup: int = 5,
    min_time_s: float = 1.0,
    threads: int | None = 1,
    progress: Progress | None = None,
) -> BenchReport:
    """Benchmark the kernel folder; `trusted` is False (with notes) when it cannot be believed.

    Each shape is measured for at least `min_time_s` (and `min_reps` pairs) before the
    interval may stop the loop, so short loops cannot hide a kernel that drifts later.
    `threads` is given to both the kernel (OpenMP) and the baseline (BLAS); the default,
    one, makes ratios comparable across machines with different core counts and keeps
    the interval tight on a shared machine; None means every core.

    Raises KernelSpecError for a malformed folder and VerifierError for bad arguments.
    """
    say: Progress = progress or (lambda _msg: None)
    spec = KernelSpec.load(directory)
    op = OPS[spec.op]
    try:
        dims_list = [op.check_dims(s) for s in (shapes or op.bench_shapes)]
    except ValueError as exc:
        raise VerifierError(f"bad --shape for op {op.name}: {exc}") from exc
    pool_total = sum((POOL + 1) * op.nbytes(d) for d in dims_list)
    if pool_total > MAX_POOL_BYTES:
        raise VerifierError(f"shapes need {pool_total / 2**20:.0f} MiB of input sets; the cap is "
                            f"{MAX_POOL_BYTES // 2**20} MiB (give smaller --shape values)")
    if threads is not None and not 1 <= threads <= 1024:
        raise VerifierError("threads must be between 1 and 1024")
    if not 1 <= len(dims_list) <= 16:
        raise VerifierError("give between 1 and 16 shapes")
    if not (0 < target < 1 and 0 < time_budget_s <= 3600 and 2 <= min_reps <= max_reps <= 10**6
            and 0 <= warmup <= 1000):
        raise VerifierError("bench parameters out of range")
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    rng = np.random.default_rng(seed)
    env = environment_fingerprint(spec.runtime)
    notes: list[str] = []

    def report(results: Sequence[ShapeResult], trusted: bool, samples: Sequence[dict[str, Any]] = (),
               measured: float = 0.0) -> BenchReport:
        return BenchReport(spec.name, spec.op, seed, env, tuple(dims_list), warmup, tuple(results),
                           trusted, tuple(notes), tuple(samples), measured)

    from verifier.runtime import get_runtime

    runtime = get_runtime(spec.runtime)
    with tempfile.TemporaryDirectory(prefix="ktl-bench-") as tmp:
        work = Path(tmp)
        say("building the kernel")
        try:
            artifact = runtime.build(spec, "release", work)
        except (BuildError, RuntimeUnavailableError) as exc:
            notes.append(f"build failed: {exc}"[:2000])
            return report([], False)
        jobs: list[_ShapeJob] = []
        shape_json = []
        per_shape = time_budget_s / len(dims_list)
        pool_bytes = 0
        for si, dims in enumerate(dims_list):
            pool = [op.random_inputs(dims, rng) for _ in range(POOL + 1)]
            files = []
            for pi, arrays in enumerate(pool):
                names = []
                for ii, arr in enumerate(arrays):
                    path = work / f"s{si}p{pi}i{ii}.npy"
                    np.save(path, arr)
                    names.append(str(path))
                    pool_bytes += arr.nbytes
                files.append(names)
            first = max(int(pool[0][0].size), 1)
            job = _ShapeJob(dims, pool, work / f"result{si}.npz", _schedule(rng, 257),
                            rng.integers(0, first, size=max_reps, dtype=np.int64),
                            rng.standard_normal(max_reps).astype(np.float32))
            jobs.append(job)
            np.save(work / f"s{si}tweak_idx.npy", job.tweak_idx)
            np.save(work / f"s{si}tweak_val.npy", job.tweak_val)
            shape_json.append({
                "dims": dims, "pool": files, "schedule": job.schedule,
                "tweak_idx": str(work / f"s{si}tweak_idx.npy"),
                "tweak_val": str(work / f"s{si}tweak_val.npy"),
                "warmup": warmup, "min_reps": min_reps, "max_reps": max_reps,
                "budget_s": per_shape, "min_s": min(min_time_s, per_shape), "target": target,
                "result": str(job.result_path)})
        (work / "job.json").write_text(json.dumps({
            "mode": "bench", "library": str(artifact.path), "entry": artifact.entry_symbol or spec.entry,
            "op": op.name,
            "shapes": shape_json}))
        cores = threads or os.cpu_count() or 1
        limits = Limits(cpu_s=int(time_budget_s * cores * 2 + 120), wall_s=time_budget_s * 2 + 60,
                        address_space=2 * 1024**3 + 8 * pool_bytes + 512 * 2**20,
                        file_size=1024**3)
        env_vars = base_env({"OPENBLAS_NUM_THREADS": str(cores), "OMP_NUM_THREADS": str(cores),
                             **QUIET_THREADS})
        say(f"measuring {len(dims_list)} shape(s) for up to {time_budget_s:g} s in a sandboxed child")
        result = run_sandboxed([*worker_argv(), str(work)], work, limits, env_vars, gpu=artifact.gpu)
        if not result.ok or not result.last("DONE"):
            notes.append(f"the benchmark child failed: {result.describe(limits)}")
            return report([], False)
        notes.append(
            f"child: wall {result.wall_s:.2f} s, CPU {result.cpu_s:.2f} s, peak RSS "
            f"{result.maxrss_bytes / 2**20:.0f} MiB (from wait4); network "
            + ("isolated" if result.network_isolated else "not isolated")
            + f"; {filesystem_confinement()}")
        notes.append(f"baseline: NumPy {np.__version__} float32 with {cores} BLAS thread(s); "
                     f"kernel OMP_NUM_THREADS={cores}; idle threads sleep "
                     "(OMP_WAIT_POLICY=PASSIVE, OPENBLAS_THREAD_TIMEOUT=4)")
        say("re-checking every timed output and the clocks")
        results, samples, trusted, measured = _analyse(op, jobs, result.lines, rng, target,
                                                        max_halfwidth, notes)
        cpu_ok = _cpu_accounting(result.lines, result.wall_s, result.cpu_s, cores, notes)
        return report(results, trusted and cpu_ok, samples, measured)


def _cpu_accounting(lines: Sequence[tuple[float, str]], wall_s: float, cpu_s: float,
                    threads: int, notes: list[str]) -> bool:
    """The OS's CPU time for the child must fit in the time its own clock accounts for.

    Outside the timed loops the parent's clock is the only one that counts; inside,
    the child's. With T threads the child cannot have used more than
    T x (its loop time + the parent-observed time outside the loops) of CPU. A
    library that hides its own run time from the process's clock uses CPU that
    this budget cannot hold.
    """
    t0s, t1s = _markers(lines, "T0"), _markers(lines, "T1")
    child_loops = sum((t1s[i][1] - t0s[i][1]) / 1e9 for i in t0s if i in t1s)
    parent_loops = sum(t1s[i][0] - t0s[i][0] for i in t0s if i in t1s)
    budget = threads * (child_loops + max(wall_s - parent_loops, 0.0))
    if cpu_s > 1.1 * budget + 0.3:
        notes.append(f"CPU accounting: the OS charged the child {cpu_s:.2f} s of CPU but its own "
                     f"clock accounts for at most {budget:.2f} s; its timer was tampered with")
        return False
    return True


def _markers(lines: Sequence[tuple[float, str]], tag: str) -> dict[int, tuple[float, int]]:
    out: dict[int, tuple[float, int]] = {}
    for when, line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[0] == tag and parts[1].isdigit() and parts[2].lstrip("-").isdigit():
            out[int(parts[1])] = (when, int(parts[2]))
    return out


def _analyse(
    op: OpSpec, jobs: list[_ShapeJob], lines: Sequence[tuple[float, str]], rng: np.random.Generator,
    target: float, max_halfwidth: float, notes: list[str],
) -> tuple[list[ShapeResult], list[dict[str, Any]], bool, float]:
    trusted = True
    results: list[ShapeResult] = []
    samples: list[dict[str, Any]] = []
    measured = 0.0
    t0s, t1s = _markers(lines, "T0"), _markers(lines, "T1")
    peaks = machine_peaks()
    for si, job in enumerate(jobs):
        label = "{" + ",".join(f"{k}={v}" for k, v in job.dims.items()) + "}"
        try:
            ok, seconds = _analyse_shape(op, si, job, label, t0s, t1s, rng, target, max_halfwidth,
                                         peaks, notes, results, samples)
        except (ValueError, IndexError, TypeError) as exc:
            notes.append(f"{label}: malformed results from the child: {exc}")
            return results, samples, False, measured
        measured += seconds
        trusted = trusted and ok
    return results, samples, trusted, measured


def _analyse_shape(
    op: OpSpec, si: int, job: _ShapeJob, label: str, t0s: Mapping[int, tuple[float, int]],
    t1s: Mapping[int, tuple[float, int]], rng: np.random.Generator, target: float,
    max_halfwidth: float, peaks: tuple[float, float], notes: list[str],
    results: list[ShapeResult], samples: list[dict[str, Any]],
) -> tuple[bool, float]:
    """Judge one shape; append its result and notes; return (trusted, seconds measured)."""
    trusted = True
    measured = 0.0
    peak_flops, peak_bw = peaks
    try:
        with np.load(job.result_path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in ("kernel_ns", "baseline_ns", "used", "stored",
                                           "stored_idx", "final", "arena")}
    except (OSError, ValueError, KeyError) as exc:
        notes.append(f"{label}: the child's results are unreadable: {exc}")
        return False, measured
    ks, bs, used = arrays["kernel_ns"], arrays["baseline_ns"], arrays["used"]
    n = int(ks.size)
    expected = np.asarray([job.schedule[i % len(job.schedule)] for i in range(n)], dtype=np.int64)
    if n < 2 or bs.size != n or used.size != n or np.any(ks < 0) or np.any(bs < 0) \
            or not np.array_equal(used, expected):
        notes.append(f"{label}: malformed samples from the child")
        return False, measured
    # -- clocks: the child's span must match the span the parent saw ---------------
    if si not in t0s or si not in t1s:
        notes.append(f"{label}: timing markers missing")
        return False, measured
    parent_span = t1s[si][0] - t0s[si][0]
    child_span = (t1s[si][1] - t0s[si][1]) / 1e9
    total = float(ks.sum() + bs.sum()) / 1e9
    measured += parent_span
    if abs(child_span - parent_span) > SPAN_TOLERANCE * parent_span + SPAN_SLACK_S:
        trusted = False
        notes.append(
            f"{label}: timer tampering: the child's clock says the timed loop took "
            f"{child_span:.3f} s but the parent's clock saw {parent_span:.3f} s; the loaded "
            "library may have patched the process's timer")
    if total > child_span * 1.01 + 0.01:
        trusted = False
        notes.append(f"{label}: samples add up to {total:.3f} s, more than the loop's "
                     f"{child_span:.3f} s")
    # -- outputs rechecked ------------------------------------------------------------
    stored, stored_idx = arrays["stored"], arrays["stored_idx"]
    rows = [r for r in range(min(stored.shape[0], stored_idx.size)) if 0 <= int(stored_idx[r]) < n]
    if len(rows) > RECHECK_CALLS:
        picked = rng.choice(rows[:-1], size=RECHECK_CALLS - 1, replace=False).tolist()
        rows = sorted({*(int(x) for x in picked), rows[-1]})
    checks = [(int(stored_idx[r]), job.inputs_of_call(int(stored_idx[r])), stored[r]) for r in rows]
    checks.append((n, job.pool[POOL], arrays["final"]))
    wrong: list[str] = []
    out_shape = op.outputs[0].dims_of(job.dims)
    for call, inputs, flat in checks:
        ins64 = [a.astype(np.float64) for a in inputs]
        with np.errstate(all="ignore"):
            ref = op.reference(ins64, job.dims)
            tol = op.tolerance(ins64, ref, job.dims)
        out = np.asarray(flat, dtype=np.float32).reshape(out_shape)
        if not compare_output(out, ref[0], tol[0]).ok:
            wrong.append(f"call {call + 1}" if call < n else "the extra call on unseen inputs")
    if wrong:
        trusted = False
        notes.append(
            f"{label}: outputs rechecked after timing: {len(wrong)} of {len(checks)} sampled wrong "
            f"(first: {wrong[0]}); the kernel drifts after repeated calls or caches results")
    lay = layout(op, job.dims)
    arena = arrays["arena"].view(np.uint8)
    if arena.size != lay.total or np.any(lay.guard_mask() & (arena != guard_pattern(lay.total))):
        trusted = False
        notes.append(f"{label}: guard bytes around the buffers were overwritten during timing")
    # -- statistics -----------------------------------------------------------------------
    speed, lo, hi = bootstrap_speedup(ks, bs, rng)
    med = float(np.median(ks))
    flops = op.flops(job.dims)
    res = ShapeResult(
        shape=dict(job.dims), n=n, median_ns=med,
        p5_ns=float(np.percentile(ks, 5)), p95_ns=float(np.percentile(ks, 95)),
        baseline_median_ns=float(np.median(bs)), speedup=speed, speedup_ci95=(lo, hi),
        gflops=flops / med if med > 0 else 0.0)
    results.append(res)
    samples.append({"shape": dict(job.dims), "kernel_ns": [int(x) for x in ks],
                    "baseline_ns": [int(x) for x in bs], "pool_index": [int(x) for x in used]})
    floor_ns = max(flops / (peak_flops * ROOFLINE_MARGIN),
                   op.nbytes(job.dims) / (peak_bw * ROOFLINE_MARGIN)) * 1e9
    if med < floor_ns:
        trusted = False
        notes.append(
            f"{label}: faster than the roofline floor: median {med:.0f} ns < {floor_ns:.0f} ns "
            f"({flops:.3g} FLOP at {ROOFLINE_MARGIN:g}x the measured {peak_flops / 1e9:.1f} "
            f"GFLOP/s, {op.nbytes(job.dims)} bytes at {ROOFLINE_MARGIN:g}x "
            f"{peak_bw / 1e9:.1f} GB/s)")
    if res.halfwidth > max_halfwidth:
        trusted = False
        notes.append(f"{label}: too unstable: the speed-up interval is +-{100 * res.halfwidth:.1f}% "
                     f"after {n} repetitions (limit +-{100 * max_halfwidth:.0f}%); "
                     "rerun on a quieter machine or with a longer budget")
    elif res.halfwidth > target:
        notes.append(f"{label}: reached +-{100 * res.halfwidth:.1f}% (target +-{100 * target:.0f}%) "
                     f"in {n} repetitions before the time budget ended")
    else:
        notes.append(f"{label}: speed-up interval +-{100 * res.halfwidth:.1f}% after {n} "
                     f"repetitions in {parent_span:.2f} s")
    return trusted, measured
