"""`ktl bench` for a kernel defined by a PyTorch module: `ModelNew` against `Model` in PyTorch eager.

Both run in their own sandboxed processes (`verifier.runtimes.TorchSession`), built with
the same weights (one `torch.manual_seed`, recorded). The parent times batches of calls
on its own clock, alternating a candidate batch and a reference batch (which goes first
alternates too), and subtracts the empty-command round trip measured in the same run (the
candidate's never more than the baseline's: its Python answers it). A batch's cost is one
rule with the C path's: the round trip less the OS-accounted run-queue waits, never less
than the CPU of every task in the side's run cgroup (forked children included) over its
threads, plus that tree's CPU between answers. Every call of a batch gets its own input
and output regions, and its own inputs, drawn for it alone at `get_inputs`' shapes and
different from the call before in every element (`_torch_pool`: drawn in bulk ahead, the
drawing time out of the budget). The outputs of one call per batch, chosen by the parent after the batch,
are snapshot on both sides (both computed in the timed batches); a uniform sample of up to
`RECHECKS` batches is kept and compared after the loop, and one last call on inputs never
seen before is judged against the reference too, so a kernel that skips work, drifts or
caches results loses. Between batches the parent checks that nothing the candidate started
is still running and that no answer came unasked.

Both sides pay the same driver costs per call (argument views, the copy of each output
into shared memory), so the ratio is the modules' own. `torch.compile` of the reference
is a second baseline when asked for (`compile_baseline`): it is measured after the eager
one, interleaved the same way, and reported in the notes (or why it could not run).
Runtime triton on a CPU runs through Triton's interpreter: it is not timed.
"""

from __future__ import annotations

import secrets
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attest.predicates import BenchmarkResult
from verifier.benchmark._report import BenchReport, Findings, bootstrap_speedup
from verifier.benchmark._settings import BenchSettings
from verifier.benchmark._torch_pool import FreshInputs
from verifier.benchmark._torch_run import (
    TORCH_BASELINE,
    TorchMeasured,
    TorchRun,
    fresh_inputs,
    shape_record,
    torch_report,
)
from verifier.environment import environment_fingerprint
from verifier.errors import BuildError, RuntimeUnavailableError, VerifierError
from verifier.kernel import KernelSpec
from verifier.progress import Progress, quiet
from verifier.runtimes import (
    Call,
    Footprint,
    ProbeFailed,
    ReferenceError_,
    TorchKernel,
    TorchSession,
    arena_bytes_for,
    bench_budget,
    build_extensions,
    probe_known,
    probe_problem,
    torch_unavailable,
)
from verifier.sandbox import Limits
from verifier.tensors import compare_tensor, decode, nbytes_of
from verifier.worker import (
    CANDIDATE_GRANTS,
    BadAnswer,
    ChildLoadError,
    Escape,
    KernelRaised,
    TorchChild,
    WorkerGone,
    WorkerHung,
    WorkerOverMemory,
    activity,
    busy_ns,
    charged_ns,
    escaped_work,
)

__all__ = ["torch_bench"]

MIN_BATCH_NS = 5_000_000
MAX_BATCH = 64
CALL_TIMEOUT_S = 60.0
COMPILE_TIMEOUT_S = 600.0
RECHECKS = 16
"""Timed calls whose outputs are kept and judged after the loop (one per batch, chosen by
the parent after the batch answered; a uniform sample of the batches)."""
MAX_KEPT_BYTES = 256 * 2**20
_Timed = tuple[Call, list[Any]]
"""A timed call: its Call (shapes, region) and its inputs' bytes."""
_KERNEL_FAULTS = (WorkerGone, WorkerHung, WorkerOverMemory, BadAnswer, KernelRaised)


@dataclass
class _Timing:
    """One measurement's samples (per-call means of batches) and what was seen meanwhile."""

    kernel_ns: list[float] = field(default_factory=list)
    baseline_ns: list[float] = field(default_factory=list)
    batch: int = 1
    wrong: list[str] = field(default_factory=list)
    checked: int = 0
    escaped: list[Escape] = field(default_factory=list)
    span_s: float = 0.0
    kept: list[_Kept] = field(default_factory=list)
    batches: int = 0


@dataclass(frozen=True)
class _Kept:
    """One timed call's outputs, both sides' bytes as they were when each batch answered."""

    label: str
    shapes: list[tuple[tuple[int, ...], str]]
    candidate: list[bytes]
    reference: list[bytes]


def torch_bench(spec: KernelSpec, settings: BenchSettings,
                progress: Progress | None = None) -> BenchReport:
    """One bench run of a torch/triton kernel; `trusted` is False (with notes) when it cannot
    be believed. Raises RuntimeUnavailableError where it cannot be timed here."""
    progress = progress or quiet
    kernel = TorchKernel.from_spec(spec)
    if settings.shapes:
        raise VerifierError("--shape does not apply to op 'torch': the kernel is timed at the "
                            "shapes its reference's get_inputs() returns")
    reason = torch_unavailable(kernel.runtime)
    if reason:
        raise RuntimeUnavailableError(reason)
    if kernel.runtime == "triton":
        raise RuntimeUnavailableError(
            "runtime 'triton' on a CPU runs through Triton's interpreter (TRITON_INTERPRET=1), "
            "which executes the kernel's Python op by op: its time says nothing about the "
            "compiled kernel, so ktl bench does not time it here (ktl check judges it; time it "
            "on a GPU)")
    seed = secrets.randbelow(2**31) if settings.seed is None else int(settings.seed)
    rng = np.random.default_rng(seed)
    notes = Findings()
    run = TorchRun(kernel, seed, rng, environment_fingerprint(kernel.runtime), notes, progress)
    with tempfile.TemporaryDirectory(prefix="ktl-torch-bench-") as tmp:
        work = Path(tmp)
        progress("building the solution's extensions (if any)")
        try:
            build = build_extensions(kernel, work)
        except BuildError as exc:
            notes.fault("build_failed", None, f"build failed: {exc}"[:2000])
            return torch_report(run, None, None)
        notes.append(build.detail)
        limits = Limits(cpu_s=int(settings.time_budget_s * 8 + 600),
                        wall_s=settings.time_budget_s * 4 + 600,
                        address_space=CANDIDATE_GRANTS.address_space,
                        open_files=CANDIDATE_GRANTS.open_files,
                        processes=CANDIDATE_GRANTS.processes)
        footprint = _problem_footprint(kernel.read()[kernel.reference], progress)
        try:
            session = TorchSession(kernel, work, build, limits, threads=settings.cores,
                                   arena_bytes=arena_bytes_for(footprint, 512 * 2**20))
        except (ReferenceError_, *_KERNEL_FAULTS) as exc:
            raise VerifierError(f"the reference module could not run: {exc}") from exc
        try:
            return _measure_all(run, session, settings)
        finally:
            session.close()


def _problem_footprint(reference: bytes, progress: Progress) -> Footprint | None:
    """One call's footprint of the problem `reference` at its own sizes (`probe_problem`,
    asked once per source and budget in a process: every run of a set, and every further look
    of a reproduction, times the same reference at the same sizes, and the probe only sizes
    the shared arena). Raises VerifierError where it cannot be run here at those sizes."""
    budget = bench_budget()
    known = probe_known(reference, budget, scale=False)
    progress("one call of the problem at its own sizes: as measured before in this process"
             if known is not None else "measuring one call of the problem at its own sizes")
    try:
        probed = known or probe_problem(reference, budget, scale=False)
    except ProbeFailed as exc:
        raise VerifierError(f"not benchmarked at the problem's own sizes: {exc}") from exc
    return probed.plan.footprint


def _measure_all(run: TorchRun, session: TorchSession, settings: BenchSettings) -> BenchReport:
    rng, notes, progress = run.rng, run.notes, run.progress
    init_seed = int(rng.integers(0, 2**31))
    dims = shape_record(session)
    try:
        session.start_candidate()
        session.init(init_seed)
        pool = fresh_inputs(session, rng)
        progress(f"timing ModelNew against Model (PyTorch eager) for up to {settings.time_budget_s:g} s")
        assert session.reference is not None
        timing = _measure(session, session.reference, pool, settings, rng)
    except (ChildLoadError, *_KERNEL_FAULTS) as exc:
        notes.fault("child_failed", None, f"the kernel's process failed: {exc}"[:2000])
        return torch_report(run, session, init_seed)
    baselines = [TORCH_BASELINE]
    if settings.compile_baseline:
        baselines += _compiled(session, pool, settings, rng, notes, progress)
    else:
        notes.append("torch.compile baseline not measured (ask for it with --torch-compile)")
    result = _judge(dims, timing, rng, settings, notes)
    trusted = result is not None and result.halfwidth <= settings.max_halfwidth
    samples = {"shape": dims, "kernel_ns": timing.kernel_ns, "baseline_ns": timing.baseline_ns,
               "batch": timing.batch, "baseline": TORCH_BASELINE}
    notes.append(f"timed by the parent over batches of {timing.batch} call(s) (each side's "
                 "empty-command round trip subtracted); baseline: the reference Model in "
                 f"PyTorch {session.torch_version} eager, in its own sandboxed process, "
                 f"{settings.cores} thread(s) each side; weights from torch.manual_seed("
                 f"{init_seed}) on both sides")
    return torch_report(run, session, init_seed, TorchMeasured(
        (result,) if result else (), baselines, trusted, (samples,), timing.span_s))


def calibration_ns(candidate_nop: float, baseline_nop: float) -> float:
    """What is subtracted from each candidate batch for the empty round trip: never more than
    the baseline's own. Both processes run the same driver, but the candidate's answers it
    with the candidate's Python (round 4 wrapped the driver's frame reader to slow only the
    empty command, and 1.38x was trusted for the library's own tanh)."""
    return min(candidate_nop, baseline_nop)


def _nop_ns(child: TorchChild, threads: int) -> float:
    """An empty command's round trip, less scheduling waits as every timed sample is (a raw
    round trip includes a loaded machine's waits, which `_busy` takes out of the samples: it
    made `one` call look free and the batches as large as the arena allows)."""
    return float(np.median([_busy(child, child.request({"cmd": "nop"}, 30.0)[0], threads)
                            for _ in range(9)]))


def _busy(child: TorchChild, elapsed: int, threads: int) -> float:
    """The round trip less the OS-accounted scheduling waits (`verifier.worker.busy_ns`),
    never less than the CPU the child's whole tree used meanwhile (its run cgroup: forked
    work included) over its threads: the C path's rule."""
    return busy_ns(elapsed, child.last_waited_ns, child.last_cpu_ns, threads)


def _charged(child: TorchChild, elapsed: int, threads: int, nop: float) -> float:
    """A timed batch's cost: its busy time less the calibration, plus the tree's CPU since
    the previous answer (work started outside the parent's clock), as `charged_ns`."""
    return charged_ns(max(_busy(child, elapsed, threads) - nop, 0.0), child.last_before_ns,
                      threads)


def _measure(session: TorchSession, baseline: TorchChild, pool: FreshInputs,
             settings: BenchSettings, rng: np.random.Generator) -> _Timing:
    cand = session.candidate
    assert cand is not None
    first = [_call(pool, 0, 0, rng)]
    for _ in range(max(settings.warmup, 1)):
        session.run([Call(pool.example)], CALL_TIMEOUT_S)
    nop_b = _nop_ns(baseline, settings.cores)
    nop_k = calibration_ns(_nop_ns(cand, settings.cores), nop_b)
    one = min(_busy(cand, cand.request(_timed(session, first)[0], CALL_TIMEOUT_S)[0],
                    settings.cores) for _ in range(3)) - nop_k
    batch = max(1, min(MAX_BATCH, session.fit(first[0][0]),
                       int(MIN_BATCH_NS // max(one, 1000.0)) + 1))
    out = _Timing(batch=batch)
    pool.refill()  # a stock ahead; a refill is drawing time, out of the budget
    start, drawn_before = time.perf_counter_ns(), pool.draw_ns
    call = 0
    for i in range(settings.max_reps):
        calls = [_call(pool, call + j, j, rng) for j in range(batch)]
        body, specs = _timed(session, calls)
        keep = int(rng.integers(0, batch))
        sides = (0, 1) if i % 2 == 0 else (1, 0)
        kept: list[bytes] = []
        for side in sides:
            if side == 0:
                ns = cand.request(body, CALL_TIMEOUT_S)[0]
                out.kernel_ns.append(_charged(cand, ns, settings.cores, nop_k) / batch)
                kept = _snapshot(session, session.cand_mem, specs[keep])
                _watch(cand, out)
            else:
                ns = baseline.request(body, CALL_TIMEOUT_S)[0]
                out.baseline_ns.append(_charged(baseline, ns, settings.cores, nop_b) / batch)
        _sample(session, specs[keep], kept, out, f"call {call + keep + 1}", rng)
        call += batch
        if i + 1 >= settings.min_reps and (i + 1) % 10 == 0:
            elapsed = (time.perf_counter_ns() - start - (pool.draw_ns - drawn_before)) / 1e9
            if elapsed > settings.time_budget_s or (elapsed >= settings.min_time_s and _tight(
                    out, rng, settings.target)):
                break
    out.span_s = (time.perf_counter_ns() - start) / 1e9
    _recheck(out)
    final = session.run([Call(pool.unseen)], CALL_TIMEOUT_S, escapes=out.escaped)[0]
    out.checked += 1
    if final.answer.bad or any(o is None or not compare_tensor(o, e, d).ok for o, e, d in
                               zip(final.outputs, final.expected, final.expected_dtypes, strict=True)):
        out.wrong.append("the extra call on unseen inputs")
    return out


def _call(pool: FreshInputs, k: int, region: int, rng: np.random.Generator) -> _Timed:
    """Timed call `k`'s inputs: a set drawn for it alone (`k` and `rng` kept for the order
    of the calls; the stream has its own generator)."""
    args, data = pool.take()
    return Call(args, region), data


def _timed(session: TorchSession, calls: list[_Timed]) -> tuple[dict[str, Any], list[Any]]:
    """A batch command (no per-call answers) with both arenas filled; the calls' regions."""
    specs = []
    for call, data in calls:
        ins, outs, shapes = session.layout(call)
        for mem in (session.cand_mem, session.ref_mem):
            for off, raw in zip(ins, data, strict=True):
                if raw is not None:
                    mem.bytes[off:off + raw.size] = raw
        session.prefill(outs, shapes)
        specs.append({"in": session.wire_args(call.args, ins),
                      "out": [[o, nbytes] for o, nbytes in
                              zip(outs, [_nbytes(s, d) for s, d in shapes], strict=True)],
                      "shapes": shapes})
    wire = [{"in": s["in"], "out": s["out"]} for s in specs]
    return {"cmd": "call", "calls": wire, "threads": 1, "report": False}, specs


def _nbytes(shape: tuple[int, ...], dtype: str) -> int:
    return nbytes_of(shape, dtype)


def _snapshot(session: TorchSession, mem: Any, spec: Mapping[str, Any]) -> list[bytes]:
    return [mem.bytes[o:o + n].tobytes() for o, n in spec["out"]]


def _watch(cand: TorchChild, out: _Timing) -> None:
    """After a candidate batch: threads or processes still at work, unasked answers."""
    pid = cand.pid()
    found = cand.look()
    if pid is not None:
        before = activity(pid)
        t0 = time.perf_counter_ns()
        time.sleep(0.002)
        found += escaped_work(pid, before, activity(pid), time.perf_counter_ns() - t0)
    out.escaped += [f for f in found if f.key not in {e.key for e in out.escaped}]


def _sample(session: TorchSession, spec: Mapping[str, Any], kept: list[bytes], out: _Timing,
            label: str, rng: np.random.Generator) -> None:
    """Keep this batch's chosen call (both sides' outputs) in a uniform sample of the batches
    (reservoir sampling), judged after the loop: comparing a 1M-element output took the parent
    ~0.3 s on a loaded machine, more than the batch, and the budget went to judging."""
    out.batches += 1
    size = sum(n for _, n in spec["out"]) * 2
    room = max(1, min(RECHECKS, MAX_KEPT_BYTES // max(size, 1)))
    slot = len(out.kept) if len(out.kept) < room else int(rng.integers(0, out.batches))
    if slot >= room:
        return
    item = _Kept(label, list(spec["shapes"]), kept,
                 [session.ref_mem.bytes[o:o + n].tobytes() for o, n in spec["out"]])
    if slot < len(out.kept):
        out.kept[slot] = item
    else:
        out.kept.append(item)


def _recheck(out: _Timing) -> None:
    """The kept calls' candidate outputs against the reference's for the same calls."""
    for item in out.kept:
        out.checked += 1
        for (shape, dtype), got_raw, want_raw in zip(item.shapes, item.candidate, item.reference,
                                                     strict=True):
            got = decode(np.frombuffer(got_raw, dtype=np.uint8).copy(), shape, dtype)
            want = decode(np.frombuffer(want_raw, dtype=np.uint8).copy(), shape, dtype)
            if not compare_tensor(got, want, dtype).ok:
                out.wrong.append(item.label)
                break


def _tight(out: _Timing, rng: np.random.Generator, target: float) -> bool:
    speed, lo, hi = bootstrap_speedup(np.asarray(out.kernel_ns), np.asarray(out.baseline_ns), rng,
                                      resamples=400)
    return speed > 0 and max(speed - lo, hi - speed) / speed <= target


def _judge(dims: dict[str, int], t: _Timing, rng: np.random.Generator,
           settings: BenchSettings, notes: Findings) -> BenchmarkResult | None:
    label = "{" + ",".join(f"{k}={v}" for k, v in dims.items()) + "}"
    for finding in t.escaped:
        notes.fault("escaped_work", dims, f"{label}: work escaping the timed call: {finding}")
    if t.wrong:
        notes.fault("outputs_wrong", dims, f"{label}: outputs rechecked against the reference's "
                    f"for the same calls: {len(t.wrong)} of {t.checked} sampled wrong (first: "
                    f"{t.wrong[0]}); the kernel skips work, drifts or caches results")
    if len(t.kernel_ns) < 2:
        notes.caveat("too_few_batches", dims, f"{label}: too few batches measured")
        return None
    ks, bs = np.asarray(t.kernel_ns), np.asarray(t.baseline_ns)
    speed, lo, hi = bootstrap_speedup(ks, bs, rng)
    med = float(np.median(ks))
    res = BenchmarkResult(shape=dict(dims), n=len(ks), median_ns=med,
                          p5_ns=float(np.percentile(ks, 5)), p95_ns=float(np.percentile(ks, 95)),
                          baseline_median_ns=float(np.median(bs)), speedup=speed,
                          speedup_ci95=(lo, hi))  # no FLOP count known: no GFLOP/s
    if res.halfwidth > settings.max_halfwidth:
        notes.caveat("unstable", dims, f"{label}: too unstable: the speed-up interval is +-{100 * res.halfwidth:.1f}% "
                     f"after {res.n} batches (limit +-{100 * settings.max_halfwidth:.0f}%)")
    else:
        notes.append(f"{label}: speed-up interval +-{100 * res.halfwidth:.1f}% after {res.n} "
                     f"batches of {t.batch} call(s) in {t.span_s:.2f} s")
    return res


def _compiled(session: TorchSession, pool: FreshInputs, settings: BenchSettings,
              rng: np.random.Generator, notes: Findings, progress: Progress) -> list[str]:
    """torch.compile of the reference as a second baseline (a note), or why it did not run."""
    assert session.reference is not None
    progress("compiling the reference with torch.compile (a second baseline)")
    try:
        session.reference.request({"cmd": "compile"}, COMPILE_TIMEOUT_S)
        # the first call compiles (minutes on a busy machine): made here, untimed, with time
        # for it, not in the warm-up whose calls must answer within CALL_TIMEOUT_S
        session.reference.request(_timed(session, [_call(pool, 0, 0, rng)])[0], COMPILE_TIMEOUT_S)
        timing = _measure(session, session.reference, pool, settings, rng)
    except (VerifierError, *_KERNEL_FAULTS) as exc:
        notes.append(f"torch.compile baseline skipped: {exc}"[:2000])
        return []
    speed, lo, hi = bootstrap_speedup(np.asarray(timing.kernel_ns), np.asarray(timing.baseline_ns),
                                      rng)
    notes.append(f"against torch.compile of the reference: speed-up {speed:.3f}x "
                 f"[{lo:.3f}, {hi:.3f}] over {len(timing.kernel_ns)} batches")
    if timing.wrong:
        notes.append(f"against torch.compile of the reference: {len(timing.wrong)} of "
                     f"{timing.checked} sampled calls disagree with the compiled reference")
    return ["torch-compile"]
