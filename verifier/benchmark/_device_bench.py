"""`ktl bench` of a torch/triton kernel on a device against PyTorch on the same device.

The candidate (`ModelNew`) and the baseline (the folder's `Model` in PyTorch eager, its
own sandboxed process) are both `TorchSide`s on one `Device`. A short calibration sizes
the batch so it lasts `min_batch_ns` (launch and pipe overhead are noise then); the
repetitions follow from the time budget. `verifier.device.measure` times them from
outside (see there); this module judges what it measured:

1. the physical floor first: the median per-call time against the bytes every call
   reads and writes at the probed peak bandwidth (`roofline`, refused before any
   statistics; a torch module's FLOPs are not known here), unless the batches' work could
   not be told from the empty batches' noise (`below_resolution`: too short to judge, a
   caveat, no figures);
2. typed faults from the timing (`late_work`, `timer_disagrees`), the output checks
   (`outputs_wrong`) and the escape watch (`escaped_work`); late fetches without the rank
   test's evidence are a caveat (`late_unproven`: not trusted, no accusation);
3. the device's conditions (`DeviceConditions`, read before, between repetitions, while
   the timed batches ran and after): a throttle reason means not trusted;
4. the speed-up and its bootstrap interval.

The statement names the device, the baseline, torch, CUDA and the driver
(`DeviceRecord`). On the CPU (`HostDevice`, device "cpu") the same path runs on torch's
CPU build, which is how it is tested without a GPU.
"""

from __future__ import annotations

import dataclasses
import secrets
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attest.predicates import BenchmarkResult, DeviceConditions, DeviceRecord
from verifier.benchmark._device_sides import TorchSide, outputs_agree
from verifier.benchmark._report import BenchReport, Findings, bootstrap_speedup, machine_peaks
from verifier.benchmark._torch_run import (
    POOL,
    TORCH_BASELINE,
    TorchMeasured,
    TorchRun,
    call_inputs,
    draw_inputs,
    shape_record,
    torch_report,
)
from verifier.device import (
    Clock,
    Device,
    DeviceTiming,
    HostDevice,
    NvmlDevice,
    OpCost,
    Peaks,
    TimingPlan,
    below_floor,
    cached_probe,
    floor_of,
    measure,
    probe_device,
    record,
    summarize,
)
from verifier.environment import (
    environment_fingerprint,
    gpu_fingerprint,
    library_version,
)
from verifier.errors import BuildError, RuntimeUnavailableError, VerifierError
from verifier.gpu import probe as gpu_probe
from verifier.kernel import KernelSpec
from verifier.progress import Progress, quiet
from verifier.runtimes import (
    Call,
    ReferenceError_,
    TorchKernel,
    TorchSession,
    build_extensions,
    cache_root,
    torch_unavailable,
)
from verifier.sandbox import Limits
from verifier.tensors import nbytes_of
from verifier.worker import CANDIDATE_GRANTS

__all__ = ["DeviceBenchSettings", "bench_module", "device_bench", "gpu_device", "host_device"]



@dataclass(frozen=True)
class DeviceBenchSettings:
    device: str = "cuda"
    time_budget_s: float = 30.0
    max_halfwidth: float = 0.05
    min_reps: int = 10
    max_reps: int = 400
    min_batch_ns: float = 20e6
    max_batch: int = 256
    cold: bool = False
    picks: int = 2

    def __post_init__(self) -> None:
        if not (0 < self.time_budget_s <= 3600 and 2 <= self.min_reps <= self.max_reps <= 100_000
                and 1 <= self.max_batch <= 4096 and self.device in ("cuda", "cpu")):
            raise VerifierError(f"device bench settings out of range: {self}")


def device_bench(spec: KernelSpec, settings: DeviceBenchSettings, device: Device,
                 seed: int | None = None, progress: Progress | None = None,
                 clock: Clock = time.perf_counter_ns) -> BenchReport:
    """One bench run of a torch/triton kernel on `device` (see the module docstring)."""
    kernel = TorchKernel.from_spec(spec)
    if kernel.runtime == "triton" and settings.device == "cpu":
        raise RuntimeUnavailableError("runtime 'triton' on a CPU runs through Triton's "
                                      "interpreter: its time says nothing; time it on a GPU")
    return bench_module(kernel, settings, device, seed, progress, clock)


def bench_module(kernel: TorchKernel, settings: DeviceBenchSettings, device: Device,
                 seed: int | None = None, progress: Progress | None = None,
                 clock: Clock = time.perf_counter_ns, flops: float | None = None) -> BenchReport:
    """`device_bench` of a torch kernel folder (also one ktl writes for a C ABI kernel,
    whose FLOPs per call are then known: `flops`)."""
    progress = progress or quiet
    reason = torch_unavailable(kernel.runtime)
    if reason:
        raise RuntimeUnavailableError(reason)
    seed = secrets.randbelow(2**31) if seed is None else int(seed)
    rng = np.random.default_rng(seed)
    notes, env = Findings(), environment_fingerprint(kernel.runtime)
    if settings.device == "cuda":
        env["gpu"], env["gpu_driver"] = gpu_fingerprint(gpu_probe())
    run = TorchRun(kernel, seed, rng, env, notes, progress)
    with tempfile.TemporaryDirectory(prefix="ktl-device-bench-") as tmp:
        work = Path(tmp)
        try:
            build = build_extensions(kernel, work)
        except BuildError as exc:
            notes.fault("build_failed", None, f"build failed: {exc}"[:2000])
            return torch_report(run, None, None)
        limits = Limits(cpu_s=int(settings.time_budget_s * 8 + 600),
                        wall_s=settings.time_budget_s * 4 + 600,
                        address_space=CANDIDATE_GRANTS.address_space,  # None with a GPU
                        open_files=CANDIDATE_GRANTS.open_files,
                        processes=CANDIDATE_GRANTS.processes)
        try:
            session = TorchSession(kernel, work, build, limits, arena_bytes=512 * 2**20,
                                   gpu=settings.device == "cuda")
        except ReferenceError_ as exc:
            raise VerifierError(f"the reference module could not run: {exc}") from exc
        try:
            return _run(run, session, settings, device, clock, flops)
        finally:
            session.close()


def gpu_device() -> NvmlDevice:
    """This machine's first GPU (properties and peaks probed in a process of ours once per
    GPU, driver and torch, and recorded in the cache folder; conditions read through NVML). Raises RuntimeUnavailableError naming why there is none."""
    info = gpu_probe()
    key = f"{info.name}|{info.driver_version}|{library_version('torch')}"
    probed = cached_probe(cache_root(), key) if info.error is None else probe_device()
    if probed.error is not None:
        raise RuntimeUnavailableError(f"no GPU to time on: {probed.error}")
    try:
        return NvmlDevice(probed)
    except (ImportError, RuntimeError, OSError) as exc:
        raise RuntimeUnavailableError(f"the GPU's conditions cannot be read through NVML "
                                      f"(nvidia-ml-py): {exc}") from exc


def host_device() -> HostDevice:
    """This machine's CPU as the device (`--device cpu`): peaks from `machine_peaks`."""
    flops, bytes_per_s = machine_peaks()
    return HostDevice(Peaks(flops, bytes_per_s, "machine_peaks"),
                      str(environment_fingerprint().get("cpu_model", "cpu")),
                      library_version("torch") or "unknown")


def _run(run: TorchRun, session: TorchSession, settings: DeviceBenchSettings, device: Device,
         clock: Clock, flops: float | None) -> BenchReport:
    rng, notes, progress = run.rng, run.notes, run.progress
    init_seed = int(rng.integers(0, 2**31))
    dims = shape_record(session)
    info = device.info()
    try:
        session.start_candidate()
        session.init(init_seed, device=settings.device)
        assert session.candidate is not None and session.reference is not None
        pool = [draw_inputs(session, rng) for _ in range(POOL)]
        flush = 2 * max(info.l2_bytes, 1)
        cand = TorchSide(session, session.candidate, session.cand_mem, settings.device, flush, True)
        base = TorchSide(session, session.reference, session.ref_mem, settings.device, flush, False)
        plan = _plan(cand, pool, settings, session, rng, clock)
        progress(f"timing ModelNew against Model (PyTorch eager) on {info.model}: {plan.reps} "
            f"batches of {plan.batch} call(s) per side")
        shapes = session.output_shapes(pool[0])
        timing = measure(cand, base, device, lambda r, c: call_inputs(pool, r * plan.batch + c, rng),
                         outputs_agree([d for _, d in shapes]), plan, rng, clock)
    except VerifierError as exc:
        notes.fault("child_failed", None, f"a process failed on the device: {exc}"[:2000])
        return torch_report(run, session, init_seed)
    cost = OpCost(flops, float(sum(nbytes_of(a.shape, d) for a, d in zip(
        pool[0], session.arg_dtypes(), strict=True) if isinstance(a, np.ndarray))
        + sum(nbytes_of(s, d) for s, d in shapes)))
    result = _judge(dims, timing, cost, cand, device, plan, rng, settings, notes)
    conditions = summarize(timing.samples, timing.during, timing.watch_failed)
    if conditions.throttle:
        mid = (f"; while the timed batches ran: {', '.join(conditions.during_throttle)}"
               if conditions.during_throttle else "")
        notes.caveat("device_throttled", None, "not trusted: the device was throttled or "
                     f"unsteady ({', '.join(conditions.throttle)}{mid})")
    # a caveat (throttled, late work unproven, too short) is a reason not to trust: typed
    trusted = result is not None and result.halfwidth <= settings.max_halfwidth and \
        not notes.caveats
    samples = {"shape": dims, "kernel_ns": timing.kernel.per_call_ns,
               "baseline_ns": timing.baseline.per_call_ns, "batch": plan.batch,
               "baseline": TORCH_BASELINE, "events_ns": timing.kernel.events_ns[:4096],
               "allocated": cand.allocated, "cold": plan.cold}
    base_report = torch_report(run, session, init_seed, TorchMeasured(
        (result,) if result else (), (TORCH_BASELINE,), trusted, (samples,), 0.0))
    rec = record(info, timing.samples[0], device.peaks(),
                 f"{TORCH_BASELINE} (torch {session.torch_version}, own process, same device)",
                 timing.timer, plan.cold)
    return _with_device(base_report, rec, conditions)


def _with_device(report: BenchReport, rec: DeviceRecord, conditions: DeviceConditions
                 ) -> BenchReport:
    return dataclasses.replace(report, device=rec, device_conditions=conditions)


def _plan(cand: TorchSide, pool: list[list[Any]], settings: DeviceBenchSettings,
          session: TorchSession, rng: np.random.Generator, clock: Clock) -> TimingPlan:
    """A batch whose calls' work (the round trip excluded) lasts about `min_batch_ns`, and as
    many repetitions as the budget allows. One call's work is the fastest of three one-call
    batches less the fastest of three one-call empty batches: sized on the whole round
    trip, a batch of calls far shorter than the pipe's answer stayed within the overhead's
    noise (`below_resolution`), and sized on one slow sample it stayed short too."""
    first = [call_inputs(pool, 0, rng)]
    cand.stage(first)
    cand.run(1, settings.cold)  # warm-up (and a first compile for Triton)
    cand.run(1, settings.cold, empty=True)

    def fastest(empty: bool) -> float:  # of three: a scheduler's hiccup sizes nothing
        times = []
        for _ in range(3):
            t0 = clock()
            cand.run(1, settings.cold, empty=empty)
            times.append(float(clock() - t0))
        return min(times)

    empty = fastest(True)
    one = max(fastest(False) - empty, 1000.0)
    batch = int(max(1, min(settings.max_batch, session.fit(Call(first[0])) // 2,
                           settings.min_batch_ns // one + 1)))
    per_rep_s = 2 * (batch * one + empty) / 1e9 + 0.01
    reps = int(min(settings.max_reps, max(settings.min_reps, settings.time_budget_s / per_rep_s)))
    return TimingPlan(batch=batch, reps=reps, cold=settings.cold, picks=settings.picks,
                      budget_ns=settings.time_budget_s * 1e9,
                      least_reps=min(settings.min_reps, reps))


def _faults(label: str, dims: dict[str, int], t: DeviceTiming, cand: TorchSide,
            notes: Findings) -> None:
    """The typed faults one shape's timing, escape watch and output checks exposed."""
    for kind, detail in t.faults:
        notes.fault(kind, dims, f"{label}: {detail}")
    if t.late_unproven is not None:
        notes.caveat("late_unproven", dims, f"{label}: not trusted: {t.late_unproven}")
    for finding in cand.escapes:
        notes.fault("escaped_work", dims, f"{label}: work escaping the timed batch: {finding}")
    if t.wrong:
        notes.fault("outputs_wrong", dims, f"{label}: outputs of calls picked after each batch, "
                    f"against the baseline's: {len(t.wrong)} of {t.checked} wrong (first: "
                    f"{t.wrong[0]}); the kernel skips work, finishes late or caches results")


def _judge(dims: dict[str, int], t: DeviceTiming, cost: OpCost, cand: TorchSide, device: Device,
           plan: TimingPlan, rng: np.random.Generator, settings: DeviceBenchSettings,
           notes: Findings) -> BenchmarkResult | None:
    label = "{" + ",".join(f"{k}={v}" for k, v in dims.items()) + "}"
    info = device.info()
    floor = floor_of(cost, device.peaks(), batch_bytes=cost.nbytes * plan.batch,
                     l2_bytes=info.l2_bytes, cold=plan.cold)
    if t.unresolved is not None:  # no figure, nor a speed-up; the floor still holds
        upper = [ns / plan.batch for ns in t.kernel.run_ns]  # overhead kept: >= the call's time
        impossible = below_floor(upper, floor, label)
        if impossible:
            notes.fault("roofline", dims, f"{impossible} (each batch's whole time, overhead "
                        "included, divided by its calls)")
            return None
        notes.caveat("below_resolution", dims, f"{label}: not trusted: {t.unresolved}")
        _faults(label, dims, t, cand, notes)  # what the timing and checks caught still counts
        return None
    impossible = below_floor(t.kernel.per_call_ns, floor, label)
    if impossible:
        notes.fault("roofline", dims, impossible)
        return None
    _faults(label, dims, t, cand, notes)
    for note in t.notes:
        notes.append(note)
    ks, bs = np.asarray(t.kernel.per_call_ns), np.asarray(t.baseline.per_call_ns)
    speed, lo, hi = bootstrap_speedup(ks, bs, rng)
    med = float(np.median(ks))
    res = BenchmarkResult(shape=dict(dims), n=len(ks), median_ns=med,
                          p5_ns=float(np.percentile(ks, 5)), p95_ns=float(np.percentile(ks, 95)),
                          baseline_median_ns=float(np.median(bs)), speedup=speed,
                          speedup_ci95=(lo, hi))  # no FLOP count known: no GFLOP/s
    notes.append(f"{label}: on {info.model}, timed by the parent over {res.n} batches of "
                 f"{plan.batch} call(s) per side{' (L2 flushed between calls)' if plan.cold else ''}, "
                 f"empty-kernel batches subtracted; speed-up interval +-{100 * res.halfwidth:.1f}% "
                 f"(limit +-{100 * settings.max_halfwidth:.0f}%); floor {floor.ns:.0f} ns per call")
    return res
