"""`ktl bench`: kernel vs NumPy float32 baseline, interleaved, timed from outside.

Method: the kernel runs in ktl's native worker (no interpreter of ours in its
process), the baseline in its own process that never loads the kernel. After a
warm-up, the parent times batches of calls on its own clock, alternating kernel
and baseline batches (which goes first alternates too), and subtracts the round
trip of an empty command measured in the same run. Every call gets freshly
written input contents from a pool of random input sets with one element changed
per call (no two calls see the same contents), until the 95% bootstrap interval
of the speed-up (median baseline / median kernel, per-call batch means) is within
the target or the time budget ends. A sample of timed outputs (the last always),
snapshot by the parent the moment the batch answered, is re-checked against the
float64 reference afterwards, plus one call on inputs never seen before, so a
kernel that drifts or caches results (by pointer or by content) cannot win.
Between batches the parent checks that nothing the kernel started is still
running, that no answer came unasked and that kept outputs did not change later.
Results faster than a roofline floor (FLOPs and bytes against measured peak
compute and bandwidth) are flagged too. Raw samples are kept as a JSON blob
whose digest is in the body.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attest.ops import shape_label
from attest.predicates import (
    BenchmarkResult,
    Environment,
    derived_gflops,
)
from verifier.benchmark._cost import CostRecord, cost_record
from verifier.benchmark._loop import (
    MAX_BATCH_CALLS,
    OUTSIDE_FLOOR_NS,
    LoopSettings,
    Measured,
    Rig,
    ShapePlan,
    bench_layout,
    guard_fault,
    measure_shape,
)
from verifier.benchmark._report import BenchReport, Findings, bootstrap_speedup, machine_peaks
from verifier.benchmark._settings import BenchSettings
from verifier.compare_outputs import compare_output
from verifier.environment import environment_fingerprint
from verifier.errors import BuildError, RuntimeUnavailableError, VerifierError
from verifier.kernel import KernelSpec
from verifier.ops import OPS, OpSpec
from verifier.progress import Progress
from verifier.runtimes import Artifact, get_runtime
from verifier.sandbox import ChildResult, Limits, base_env, filesystem_confinement, scratch_dir
from verifier.worker import (
    QUIET_THREADS,
    UNASKED_ANSWER,
    BaselineWorker,
    Markers,
    NativeWorker,
    SharedArena,
    WorkerGone,
    WorkerHung,
    WorkerMisanswered,
    WorkerOverMemory,
    WorkerSandbox,
)

__all__ = ["host_bench"]

POOL = 4
MAX_POOL_BYTES = 1024 * 2**20
RECHECK_CALLS = 64
"""Timed calls whose outputs are rechecked (a random sample, the last one always)."""
ROOFLINE_MARGIN = 2.0
ARENA_BYTES = 64 * 2**20
"""Shared memory per side for a batch's arenas (a batch is smaller where a shape is big)."""



def _schedule(rng: np.random.Generator, length: int) -> list[int]:
    out = [int(rng.integers(0, POOL))]
    while len(out) < length:
        nxt = int(rng.integers(0, POOL - 1))
        out.append(nxt if nxt < out[-1] else nxt + 1)
    return out


def host_bench(spec: KernelSpec, settings: BenchSettings, progress: Progress) -> BenchReport:
    """One bench run of a C-ABI kernel on the host: the kernel's sandboxed worker against NumPy
    in its own process (see the module docstring); `trusted` is False (with notes) when it
    cannot be believed. Raises VerifierError for bad shapes."""
    op = OPS[spec.op]
    try:
        dims_list = [op.check_dims(s) for s in (settings.shapes or op.bench_shapes)]
    except ValueError as exc:
        raise VerifierError(f"bad --shape for op {op.name}: {exc}") from exc
    pool_total = sum((POOL + 1) * op.nbytes(d) for d in dims_list)
    if pool_total > MAX_POOL_BYTES:
        raise VerifierError(f"shapes need {pool_total / 2**20:.0f} MiB of input sets; the cap is "
                            f"{MAX_POOL_BYTES // 2**20} MiB (give smaller --shape values)")
    if not 1 <= len(dims_list) <= 16:
        raise VerifierError("give between 1 and 16 shapes")
    seed = secrets.randbelow(2**31) if settings.seed is None else int(settings.seed)
    rng = np.random.default_rng(seed)
    env = Environment.from_json(environment_fingerprint(spec.runtime))
    notes = Findings()
    cores = settings.cores
    cost: list[CostRecord] = []

    def report(results: Sequence[BenchmarkResult], trusted: bool,
               samples: Sequence[dict[str, Any]] = (), measured: float = 0.0) -> BenchReport:
        complete = bool(cost) and cost[0].complete
        return BenchReport(spec.name, spec.op, seed, env, tuple(dims_list), settings.warmup,
                           tuple(results), trusted and complete and not notes.faults,
                           tuple(notes.notes), tuple(samples), measured, tuple(notes.faults),
                           cores, cost[0] if cost else None, caveats=tuple(notes.caveats))

    runtime = get_runtime(spec.runtime)
    per_shape_s = settings.time_budget_s / len(dims_list)
    loop = LoopSettings(settings.warmup, settings.min_reps, settings.max_reps, per_shape_s,
                        min(settings.min_time_s, per_shape_s), settings.target)
    with scratch_dir("ktl-bench-") as work:
        progress("building the kernel")
        try:
            artifact = runtime.build(spec, "release", work)
        except (BuildError, RuntimeUnavailableError) as exc:
            notes.fault("build_failed", None, f"build failed: {exc}"[:2000])
            return report([], False)
        plans = [_plan_shape(op, dims, rng, settings.max_reps) for dims in dims_list]
        loop = dataclasses.replace(loop, threads=cores, adjust_waits=not artifact.gpu,
                                   guard_pages=not artifact.gpu)
        measured = _measure(_HostRun(artifact, spec.entry, op, work, rng, notes, progress, cost),
                            plans, loop)
        if cost and not cost[0].complete:
            notes.caveat("cost_incomplete", None, "not trusted: the kernel's CPU accounting was incomplete (no cgroup, and "
                         "seccomp did not deny the processes /proc cannot account)")
        if measured is None:
            return report([], False)
        progress("re-checking the kept outputs")
        judging = _Judging(op, rng, settings.target, settings.max_halfwidth, machine_peaks(),
                           notes)
        results, samples, trusted, seconds = _analyse(judging, plans, measured)
        return report(results, trusted, samples, seconds)


def _plan_shape(op: OpSpec, dims: dict[str, int], rng: np.random.Generator, max_reps: int) -> ShapePlan:
    pool = [op.random_inputs(dims, rng) for _ in range(POOL + 1)]
    first = max(int(pool[0][0].size), 1)
    calls = max_reps * 4
    return ShapePlan(dims, pool, _schedule(rng, 257),
                     rng.integers(0, first, size=min(calls, 1 << 16), dtype=np.int64),
                     rng.standard_normal(min(calls, 1 << 16)).astype(np.float32))


@dataclass(frozen=True)
class _HostRun:
    """What measuring on the host path works with: the built kernel and its entry, the op,
    the scratch folder, the generator, the notes and cost records it adds to, progress."""

    artifact: Artifact
    entry: str
    op: OpSpec
    work: Path
    rng: np.random.Generator
    notes: Findings
    progress: Progress
    cost: list[CostRecord]


def _measure(run: _HostRun, plans: list[ShapePlan], settings: LoopSettings) -> list[Measured] | None:
    """Run every shape through one worker and one baseline process; None if the kernel failed.

    Both get `settings.threads` threads (OpenMP and BLAS). How the kernel's cost was
    accounted is appended to `run.cost`, failed or not."""
    op, notes, artifact = run.op, run.notes, run.artifact
    cores = settings.threads
    biggest = max(bench_layout(op, p.dims, settings.guard_pages).total for p in plans)
    side = max(biggest, min(ARENA_BYTES, biggest * MAX_BATCH_CALLS))
    limits = Limits(cpu_s=int(settings.budget_s * len(plans) * cores * 4 + 120),
                    wall_s=settings.budget_s * len(plans) * 3 + 120,
                    address_space=2 * 1024**3 + side, file_size=64 * 2**20)
    env = base_env({"OPENBLAS_NUM_THREADS": str(cores), "OMP_NUM_THREADS": str(cores),
                    **QUIET_THREADS})
    kmem, bmem = SharedArena(side), SharedArena(side)
    run_dir = run.work / "run"
    run_dir.mkdir()
    worker = NativeWorker(artifact.path, artifact.entry_symbol or run.entry, op, kmem,
                          WorkerSandbox(run_dir, limits, env, readable=[artifact.path.parent],
                                        gpu=artifact.gpu))
    baseline = BaselineWorker(op, bmem, cores)
    rig = Rig(op, worker, baseline, kmem, bmem, Markers.draw())
    out: list[Measured] = []
    try:
        owed = worker.loaded()  # the library's loading: charged to the first timed batch
        for plan in plans:
            run.progress(f"measuring shape {plan.dims} for up to {settings.budget_s:g} s")
            out.append(measure_shape(rig, plan, settings, run.rng, RECHECK_CALLS, owed))
            owed = 0
    except (WorkerGone, WorkerHung, WorkerOverMemory, WorkerMisanswered) as exc:
        result = worker.close()
        run.cost.append(cost_record(worker, result))
        if worker.unasked or isinstance(exc, WorkerMisanswered):
            notes.fault("escaped_work", None, str(UNASKED_ANSWER))
        failed = plans[len(out)]
        touched = guard_fault(exc.result if isinstance(exc, WorkerGone) and exc.result else result,
                              bench_layout(op, failed.dims, settings.guard_pages), kmem.nbytes)
        if touched is not None:
            notes.fault("guard_damage", failed.dims, touched)
        notes.fault("child_failed", None,
                    f"the benchmark child failed: {_failure_text(exc, result, limits)}")
        return None
    finally:
        baseline.close()
        result = worker.close()
        kmem.close()
        bmem.close()
    run.cost.append(cost_record(worker, result))
    _how_timed(run, worker, result, cores)
    return out


def _how_timed(run: _HostRun, worker: NativeWorker, result: ChildResult | None,
               cores: int) -> None:
    """The notes (and the deferred-work fault) a finished host measurement leaves."""
    notes = run.notes
    if result is not None:
        notes.append(
            f"child: wall {result.wall_s:.2f} s, CPU {result.cpu_s:.2f} s, peak RSS "
            f"{result.maxrss_bytes / 2**20:.0f} MiB (from wait4); network "
            + ("isolated" if result.network_isolated else "not isolated")
            + f"; {filesystem_confinement(run.artifact.gpu)}")
    if worker.tail_cpu_ns > OUTSIDE_FLOOR_NS:
        notes.fault("escaped_work", None, f"the kernel's processes used "
                    f"{worker.tail_cpu_ns / 1e6:.0f} ms of CPU after the last answer (work "
                    "deferred past every timed call)")
    notes.append(f"timed by the parent over batches of calls (empty-command round trip and the "
                 "OS-accounted run-queue waits subtracted, never below the CPU of the kernel's "
                 "whole process tree, plus that tree's CPU outside the calls since the previous "
                 "batch and, on the first batch, its CPU before the first call: "
                 f"{(worker.load_cpu_ns or 0) / 1e6:.1f} ms starting up and loading the library"
                 f"); {run.cost[-1].describe()}; baseline: NumPy {np.__version__} float32 in its own process with "
                 f"{cores} BLAS thread(s); kernel OMP_NUM_THREADS={cores}; idle threads sleep "
                 "(OMP_WAIT_POLICY=PASSIVE, OPENBLAS_THREAD_TIMEOUT=4)")


def _failure_text(exc: Exception, result: ChildResult | None, limits: Limits) -> str:
    if isinstance(exc, WorkerGone) and exc.result is not None:
        return exc.result.describe(limits)
    if isinstance(exc, WorkerGone) and result is not None:
        return result.describe(limits)
    return str(exc)


@dataclass(frozen=True)
class _Judging:
    """What every shape's judgement shares: the op, the bootstrap's generator, the interval
    target and limit, the machine's peaks (FLOP/s, bytes/s) and the run's findings."""

    op: OpSpec
    rng: np.random.Generator
    target: float
    max_halfwidth: float
    peaks: tuple[float, float]
    notes: Findings


def _analyse(
    judging: _Judging, plans: list[ShapePlan], measured: list[Measured],
) -> tuple[list[BenchmarkResult], list[dict[str, Any]], bool, float]:
    trusted = True
    results: list[BenchmarkResult] = []
    samples: list[dict[str, Any]] = []
    seconds = 0.0
    for plan, got in zip(plans, measured, strict=True):
        label = shape_label(judging.op.name, plan.dims)
        ok = _judge_shape(judging, plan, got, label, results, samples)
        seconds += got.span_s
        trusted = trusted and ok
    return results, samples, trusted, seconds


def _recheck(op: OpSpec, plan: ShapePlan, got: Measured) -> tuple[list[str], int]:
    checks = [(call, plan.inputs_of_call(call), outs) for call, outs in got.stored]
    total_calls = (got.first_call[-1] + got.batch) if got.first_call else 0
    checks.append((total_calls, plan.pool[POOL], got.final))
    wrong: list[str] = []
    for call, inputs, outs in checks:
        ins64 = [a.astype(np.float64) for a in inputs]
        with np.errstate(all="ignore"):
            refs = op.reference(ins64, plan.dims)
            tols = op.tolerance(ins64, refs, plan.dims)
        if not all(compare_output(o, r, t).ok for o, r, t in zip(outs, refs, tols, strict=True)):
            wrong.append(f"call {call + 1}" if call < total_calls else "the extra call on unseen inputs")
    return wrong, len(checks)


def _judge_shape(
    judging: _Judging, plan: ShapePlan, got: Measured, label: str,
    results: list[BenchmarkResult], samples: list[dict[str, Any]],
) -> bool:
    """Judge one shape; append its result and notes; return whether it can be trusted."""
    op, notes = judging.op, judging.notes
    trusted = True
    n = len(got.kernel_ns)
    if n < 2 or len(got.baseline_ns) != n:
        notes.caveat("too_few_batches", plan.dims, f"{label}: too few batches measured")
        return False
    for finding in got.escaped:
        trusted = False
        notes.fault("escaped_work", plan.dims, f"{label}: work escaping the timed call: {finding}")
    if got.outside_cpu_ns > 500_000:
        notes.append(f"{label}: {got.outside_cpu_ns / 1e6:.1f} ms of the kernel's CPU between the "
                     "timed calls, charged to them")
    wrong, checked = _recheck(op, plan, got)
    if wrong:
        trusted = False
        notes.fault(
            "outputs_wrong", plan.dims, f"{label}: outputs rechecked after timing: {len(wrong)} of {checked} sampled wrong "
            f"(first: {wrong[0]}); the kernel drifts after repeated calls, caches results or "
            "defers its work")
    if got.guard_damage:
        trusted = False
        notes.fault("guard_damage", plan.dims,
                    f"{label}: guard bytes around the buffers were overwritten during timing")
    ks = np.asarray(got.kernel_ns, dtype=np.float64)
    bs = np.asarray(got.baseline_ns, dtype=np.float64)
    speed, lo, hi = bootstrap_speedup(ks, bs, judging.rng)
    med = float(np.median(ks))
    flops = op.flops(plan.dims)
    res = BenchmarkResult(
        shape=dict(plan.dims), n=n, median_ns=med,
        p5_ns=float(np.percentile(ks, 5)), p95_ns=float(np.percentile(ks, 95)),
        baseline_median_ns=float(np.median(bs)), speedup=speed, speedup_ci95=(lo, hi),
        gflops=derived_gflops(flops, med))
    results.append(res)
    samples.append({"shape": dict(plan.dims), "kernel_ns": [float(x) for x in ks],
                    "baseline_ns": [float(x) for x in bs], "batch": got.batch,
                    "first_call": list(got.first_call),
                    "pool_index": [plan.pool_index(c) for c in got.first_call],
                    "overhead_ns": list(got.overhead_ns)})
    return _judge_speed(judging, plan, res, got, label) and trusted


def _judge_speed(judging: _Judging, plan: ShapePlan, res: BenchmarkResult, got: Measured,
                 label: str) -> bool:
    op, notes = judging.op, judging.notes
    target, max_halfwidth = judging.target, judging.max_halfwidth
    peak_flops, peak_bw = judging.peaks
    flops = op.flops(plan.dims)
    trusted = True
    floor_ns = max(flops / (peak_flops * ROOFLINE_MARGIN),
                   op.nbytes(plan.dims) / (peak_bw * ROOFLINE_MARGIN)) * 1e9
    if res.median_ns < floor_ns:
        trusted = False
        notes.fault(
            "roofline", plan.dims, f"{label}: faster than the roofline floor: median {res.median_ns:.0f} ns < {floor_ns:.0f} ns "
            f"({flops:.3g} FLOP at {ROOFLINE_MARGIN:g}x the measured {peak_flops / 1e9:.1f} "
            f"GFLOP/s, {op.nbytes(plan.dims)} bytes at {ROOFLINE_MARGIN:g}x "
            f"{peak_bw / 1e9:.1f} GB/s)")
    n = res.n
    if res.halfwidth > max_halfwidth:
        trusted = False
        notes.caveat("unstable", plan.dims, f"{label}: too unstable: the speed-up interval is +-{100 * res.halfwidth:.1f}% "
                     f"after {n} batches (limit +-{100 * max_halfwidth:.0f}%); "
                     "rerun on a quieter machine or with a longer budget")
    elif res.halfwidth > target:
        notes.append(f"{label}: reached +-{100 * res.halfwidth:.1f}% (target +-{100 * target:.0f}%) "
                     f"in {n} batches of {got.batch} call(s) before the time budget ended")
    else:
        notes.append(f"{label}: speed-up interval +-{100 * res.halfwidth:.1f}% after {n} "
                     f"batches of {got.batch} call(s) in {got.span_s:.2f} s")
    return trusted
