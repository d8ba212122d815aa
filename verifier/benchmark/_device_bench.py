"""`ktl bench` of a torch/triton kernel on a device against PyTorch on the same device.

The candidate (`ModelNew`) and the baseline (the folder's `Model` in PyTorch eager, its
own sandboxed process) are both `TorchSide`s on one `Device`. Every call's inputs are its
own, never repeated: drawn on the device by each process from a seed the parent draws per
batch (`device_specs`, `_device_sides.Seeded`), else on the host in bulk ahead
(`fresh_inputs`, staged as drawn bytes). A short
calibration sizes the batch so it lasts `min_batch_ns` (launch and pipe overhead are noise
then); the repetitions follow from the time budget. Both L2 modes are timed, the one
asked for first with most of the budget (its figures are the results), both recorded in
`DeviceRecord.modes`. `verifier.device.measure` times them from outside (see there); this
module judges what it measured:

1. the physical floor first: the median per-call time against the bytes every call
   reads and writes at the probed peak bandwidth (`roofline`, refused before any
   statistics; a torch module's FLOPs are not known here), unless the batches' work could
   not be told from the empty batches' noise (`below_resolution`: too short to judge, a
   caveat, no figures);
2. typed faults from the timing (`late_work`, `timer_disagrees`, `side_stream`), the output checks
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attest.predicates import BenchmarkResult, DeviceMode
from verifier.benchmark._device_sides import Drawn, Seeded, TorchSide, outputs_agree
from verifier.benchmark._report import BenchReport, Findings, bootstrap_speedup, machine_peaks
from verifier.benchmark._torch_pool import FreshInputs
from verifier.benchmark._torch_run import (
    TORCH_BASELINE,
    TorchMeasured,
    TorchRun,
    fresh_inputs,
    shape_record,
    torch_report,
)
from verifier.device import (
    Behaviour,
    Clock,
    Device,
    DeviceInfo,
    DeviceTiming,
    FakeDevice,
    FakeSide,
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
from verifier.worker import CANDIDATE_GRANTS, Escape

__all__ = ["DeviceBenchSettings", "bench_module", "device_bench", "fake_bench", "flush_bytes",
           "gpu_device", "host_device"]



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
    """The mode whose figures are the results (an L2 flush before every call, or not)."""
    picks: int = 2
    both_modes: bool = True
    """Time the other mode too (recorded in `DeviceRecord.modes`), with `other_share` of
    the budget."""
    other_share: float = 0.25

    def __post_init__(self) -> None:
        if not (0 < self.time_budget_s <= 3600 and 2 <= self.min_reps <= self.max_reps <= 100_000
                and 1 <= self.max_batch <= 4096 and self.device in ("cuda", "cpu")
                and 0 < self.other_share < 1):
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


def bench_module(  # noqa: PLR0913 (the route passes the bench's optional parts by name)
        kernel: TorchKernel, settings: DeviceBenchSettings, device: Device,
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


def fake_bench(spec: KernelSpec, settings: DeviceBenchSettings, behaviour: Behaviour,
               seed: int = 1) -> BenchReport:
    """The device path's timing, judging and report on the fake device, with no process
    and no GPU: `benchmarks/gpu_check.sh`'s dry run (`KTL_GPU_CHECK_FAKE=1`) exercises
    every step's plumbing with it. The candidate behaves as `behaviour` says (an attacker's
    `Behaviour` stands in for its kernel); the baseline is honest, at 20 us a call; the
    fake clock is virtual, so the budget is the fake's time."""
    kernel = TorchKernel.from_spec(spec)
    rng = np.random.default_rng(seed)
    run = TorchRun(kernel, seed, rng, environment_fingerprint(kernel.runtime), Findings(), quiet)
    dev = FakeDevice()
    cand = FakeSide(dev, behaviour, seed)
    base = FakeSide(dev, Behaviour(kernel_ns=20_000.0, jitter=behaviour.jitter), seed + 1)
    dims, draws = {"a0_0": 64}, np.random.default_rng(seed + 2)
    modes: list[_Mode] = []
    for cold, share in _modes(settings):
        budget = settings.time_budget_s * share
        plan = TimingPlan(batch=16, reps=settings.max_reps, cold=cold, picks=settings.picks,
                          budget_ns=budget * 1e9, least_reps=min(settings.min_reps, settings.max_reps))
        modes.append(_Mode(cold, plan, measure(
            cand, base, dev, lambda r, c: [draws.standard_normal(64)],
            outputs_agree(["float64"]), plan, rng, dev.clock), not modes))
    cost = OpCost(None, 2 * 64 * 8.0)
    judged = _Judged(dims, [(m, _judge(dims, m, cost, dev, rng, settings, run.notes))
                            for m in modes], cand.allocations)
    return _report(run, None, 0, judged, dev, settings)


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


@dataclass(frozen=True)
class _Mode:
    """One L2 mode's timing of the run's shape, and the plan it ran under."""

    cold: bool
    plan: TimingPlan
    timing: DeviceTiming
    primary: bool = True
    """Its figures are the results. The other mode's are recorded beside them; where its
    batches cannot be resolved it has no figure, said in a note, and the results' trust
    does not rest on it (its faults and doubts of the kernel count all the same)."""


def _modes(settings: DeviceBenchSettings) -> list[tuple[bool, float]]:
    """(cold, share of the budget) of each mode timed: the one asked for first, with the
    larger share (its figures are the results), then the other, unless only one is asked."""
    if not settings.both_modes:
        return [(settings.cold, 1.0)]
    return [(settings.cold, 1.0 - settings.other_share), (not settings.cold, settings.other_share)]


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
        fresh = fresh_inputs(session, rng)
        flush = flush_bytes(info)
        cand = TorchSide(session, session.candidate, session.cand_mem, settings.device, flush, True)
        base = TorchSide(session, session.reference, session.ref_mem, settings.device, flush, False)
        shapes = session.output_shapes(fresh.example)
        agree = outputs_agree([d for _, d in shapes])
        modes: list[_Mode] = []
        for cold, share in _modes(settings):
            plan = _plan(cand, fresh.example, settings, session, clock, (cold, share))
            progress(f"timing ModelNew against Model (PyTorch eager) on {info.model}"
                     f"{' (L2 flushed before every call)' if cold else ''}: {plan.reps} "
                     f"batches of {plan.batch} call(s) per side")
            modes.append(_Mode(cold, plan, measure(cand, base, device, _draws(fresh, rng),
                                                   agree, plan, rng, clock), not modes))
    except VerifierError as exc:
        notes.fault("child_failed", None, f"a process failed on the device: {exc}"[:2000])
        return torch_report(run, session, init_seed)
    cost = OpCost(flops, float(sum(nbytes_of(a.shape, d) for a, d in zip(
        fresh.example, session.arg_dtypes(), strict=True) if isinstance(a, np.ndarray))
        + sum(nbytes_of(s, d) for s, d in shapes)))
    judged = _Judged(dims, [(m, _judge(dims, m, cost, device, rng, settings, notes))
                            for m in modes], cand.allocated)
    _escapes(judged.dims, cand.escapes, notes)
    return _report(run, session, init_seed, judged, device, settings)


def device_specs(fresh: FreshInputs) -> list[list[Any] | None] | None:
    """How each argument is drawn on the device (`_device_sides.Seeded`), as `_torch_pool`
    draws it on the host: [shape, dtype, dist, a, b] for a fresh floating tensor, None for
    one staged as drawn once (integers, plain values). None when some fresh argument is
    float64 or whole numbers (drawn on the host then, every call by `FreshInputs`)."""
    specs: list[list[Any] | None] = []
    for d in fresh.draws:
        if not d.fresh or d.shape is None:
            specs.append(None)
            continue
        if d.dtype == "float64" or d.stats.get("integral"):
            return None
        lo, hi = float(d.stats.get("min", -1.0)), float(d.stats.get("max", 1.0))
        std = float(d.stats.get("std", 1.0)) or 1.0
        dist, a, b = (("uniform", 0.0, 1.0) if lo >= 0.0 and hi <= 1.0 else
                      ("halfnormal", lo, std) if lo >= 0.0 else
                      ("normal", float(d.stats.get("mean", 0.0)), std))
        specs.append([list(d.shape), d.dtype, dist, a, b])
    return specs


def _draws(fresh: FreshInputs, rng: np.random.Generator) -> Callable[[int, int], Any]:
    """Each timed call's inputs: drawn on the device from a seed the parent draws for each
    batch (`device_specs`; no host drawing or copying, the bytes each process's own), else
    drawn on the host in bulk ahead (`FreshInputs`, off the budget). Never repeated."""
    specs = device_specs(fresh)
    if specs is None:
        fresh.refill()  # a stock ahead: drawing is the parent's work, off the budget
        return lambda rep, call: Drawn(*fresh.take())
    seeds: dict[int, int] = {}

    def seeded(rep: int, call: int) -> Seeded:
        seed = seeds.setdefault(rep, int(rng.integers(0, 2**62)))
        return Seeded(fresh.args, specs, fresh.fixed, seed)
    return seeded


def flush_bytes(info: DeviceInfo) -> int:
    """The L2 flush before each cold call: twice the L2 the device reported (the probe's,
    on a GPU), so no byte of the previous call's data is left there."""
    return 2 * max(info.l2_bytes, 1)


@dataclass(frozen=True)
class _Judged:
    """The run's shape, each mode timed with its result (None: no figure), and the buffers
    the candidate's process allocated."""

    dims: dict[str, int]
    modes: list[tuple[_Mode, BenchmarkResult | None]]
    allocated: int


def _report(run: TorchRun, session: TorchSession | None, init_seed: int, judged_modes: _Judged,
            device: Device, settings: DeviceBenchSettings) -> BenchReport:
    """The report of the judged modes: the first mode's figures are the results; each
    mode's are recorded in the device record (`DeviceRecord.modes`)."""
    notes, dims, judged = run.notes, judged_modes.dims, judged_modes.modes
    first, result = judged[0]
    samples_seen = [s for m, _ in judged for s in m.timing.samples]
    during = [s for m, _ in judged for s in m.timing.during]
    conditions = summarize(samples_seen, during, any(m.timing.watch_failed for m, _ in judged))
    if conditions.throttle:
        mid = (f"; while the timed batches ran: {', '.join(conditions.during_throttle)}"
               if conditions.during_throttle else "")
        notes.caveat("device_throttled", None, "not trusted: the device was throttled or "
                     f"unsteady ({', '.join(conditions.throttle)}{mid})")
    # a caveat (throttled, late work unproven, too short) is a reason not to trust: typed
    trusted = result is not None and result.halfwidth <= settings.max_halfwidth and \
        not notes.caveats
    samples = tuple({"shape": dims, "kernel_ns": m.timing.kernel.per_call_ns,
                     "baseline_ns": m.timing.baseline.per_call_ns, "batch": m.plan.batch,
                     "baseline": TORCH_BASELINE, "events_ns": m.timing.kernel.events_ns[:4096],
                     "stream_gap_ns": m.timing.kernel.gap_ns[:4096],
                     "allocated": judged_modes.allocated, "cold": m.cold} for m, _ in judged)
    base_report = torch_report(run, session, init_seed, TorchMeasured(
        (result,) if result else (), (TORCH_BASELINE,), trusted, samples, 0.0))
    version = session.torch_version if session is not None else "unknown"
    rec = record(device.info(), first.timing.samples[0], device.peaks(),
                 f"{TORCH_BASELINE} (torch {version}, own process, same device)",
                 first.timing.timer, first.cold)
    modes = tuple(DeviceMode(shape=dict(dims), cold=m.cold, n=r.n, median_ns=r.median_ns,
                             baseline_median_ns=r.baseline_median_ns, speedup=r.speedup,
                             speedup_ci95=r.speedup_ci95) for m, r in judged if r is not None)
    rec = dataclasses.replace(rec, modes=modes or None)
    return dataclasses.replace(base_report, device=rec, device_conditions=conditions)


def _plan(cand: TorchSide, example: list[Any], settings: DeviceBenchSettings,
          session: TorchSession, clock: Clock, mode: tuple[bool, float]) -> TimingPlan:
    """A batch whose calls' work (the round trip excluded) lasts about `min_batch_ns`, and as
    many repetitions as `share` of the budget allows. One call's work is the fastest of
    three one-call batches less the fastest of three one-call empty batches: sized on the
    whole round trip, a batch of calls far shorter than the pipe's answer stayed within the
    overhead's noise (`below_resolution`), and sized on one slow sample it stayed short too.
    In the cold mode a call's flush (the cold empty call less the warm one) counts toward
    the batch's length too: a batch of thousands of tiny calls, each after a flush of
    twice the L2, would last seconds. The warm-up runs the example set (never timed).
    `mode`: (cold, the share of the budget)."""
    cold, share = mode
    cand.stage([example])
    cand.run(1, cold)  # warm-up (and a first compile for Triton)
    cand.run(1, cold, empty=True)

    def fastest(empty: bool, flushed: bool = cold) -> float:  # of three: a hiccup sizes nothing
        times = []
        for _ in range(3):
            t0 = clock()
            cand.run(1, flushed, empty=empty)
            times.append(float(clock() - t0))
        return min(times)

    empty = fastest(True)
    one = max(fastest(False) - empty, 1000.0)
    flush = max(empty - fastest(True, False), 0.0) if cold else 0.0
    batch = int(max(1, min(settings.max_batch, session.fit(Call(example)) // 2,
                           settings.min_batch_ns // (one + flush) + 1)))
    budget_s = settings.time_budget_s * share
    per_rep_s = 2 * (batch * (one + flush) + empty) / 1e9 + 0.01
    reps = int(min(settings.max_reps, max(settings.min_reps, budget_s / per_rep_s)))
    return TimingPlan(batch=batch, reps=reps, cold=cold, picks=settings.picks,
                      budget_ns=budget_s * 1e9, least_reps=min(settings.min_reps, reps))


def _escapes(dims: dict[str, int], escapes: Sequence[Escape], notes: Findings) -> None:
    """The escape watch's findings over the whole run (both modes), once each."""
    for finding in escapes:
        notes.fault("escaped_work", dims, f"work escaping the timed batch: {finding}")


def _faults(label: str, dims: dict[str, int], t: DeviceTiming, notes: Findings) -> None:
    """The typed faults one mode's timing and output checks exposed."""
    for kind, detail in t.faults:
        notes.fault(kind, dims, f"{label}: {detail}")
    if t.late_unproven is not None:
        notes.caveat("late_unproven", dims, f"{label}: not trusted: {t.late_unproven}")
    if t.wrong:
        notes.fault("outputs_wrong", dims, f"{label}: outputs of calls picked after each batch, "
                    f"against the baseline's: {len(t.wrong)} of {t.checked} wrong (first: "
                    f"{t.wrong[0]}); the kernel skips work, finishes late or caches results")


def _judge(  # noqa: PLR0913 (one shape's verdict from its measurement's parts)
        dims: dict[str, int], mode: _Mode, cost: OpCost, device: Device,
        rng: np.random.Generator, settings: DeviceBenchSettings,
        notes: Findings) -> BenchmarkResult | None:
    t, plan = mode.timing, mode.plan
    label = "{" + ",".join(f"{k}={v}" for k, v in dims.items()) + "}" + (
        " cold" if mode.cold else " warm")
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
        if mode.primary:
            notes.caveat("below_resolution", dims, f"{label}: not trusted: {t.unresolved}")
        else:
            notes.append(f"{label}: no figure in this mode: {t.unresolved}")
        _faults(label, dims, t, notes)  # what the timing and checks caught still counts
        return None
    impossible = below_floor(t.kernel.per_call_ns, floor, label)
    if impossible:
        notes.fault("roofline", dims, impossible)
        return None
    _faults(label, dims, t, notes)
    for note in t.notes:
        notes.append(f"{label}: {note}")
    ks, bs = np.asarray(t.kernel.per_call_ns), np.asarray(t.baseline.per_call_ns)
    speed, lo, hi = bootstrap_speedup(ks, bs, rng)
    med = float(np.median(ks))
    res = BenchmarkResult(shape=dict(dims), n=len(ks), median_ns=med,
                          p5_ns=float(np.percentile(ks, 5)), p95_ns=float(np.percentile(ks, 95)),
                          baseline_median_ns=float(np.median(bs)), speedup=speed,
                          speedup_ci95=(lo, hi))  # no FLOP count known: no GFLOP/s
    notes.append(f"{label}: on {info.model}, timed by the parent over {res.n} batches of "
                 f"{plan.batch} call(s) per side{' (L2 flushed between calls)' if plan.cold else ''}, "
                 f"empty-kernel batches subtracted (never more than the baseline's own); "
                 f"every call's inputs drawn afresh; speed-up {res.speedup:.3g}x, interval "
                 f"+-{100 * res.halfwidth:.1f}% (limit +-{100 * settings.max_halfwidth:.0f}%); "
                 f"floor {floor.ns:.0f} ns per call")
    return res
