"""One shape's measurement: kernel and baseline batches timed on the parent's clock.

The kernel runs in the native worker, the baseline in its own process; each gets
the same fresh inputs per call, written by the parent into its own memfd. A
sample is one batch: the round trip of a command calling the entry `batch` times,
minus the median round trip of an empty command (the parent's overhead, measured
in the same run), divided by `batch`. Batches alternate which side goes first.

A kernel batch's cost is what its whole process tree used (`verifier.worker._account`:
its cgroup, or /proc of every task): the round trip less the run-queue waits of the parent
and of the worker's main thread, never below the tree's CPU during the round trip over the
allowed threads (a helper process's time, which shows as the main thread's wait, counts),
plus the tree's CPU outside the calls since the previous timed batch (work done before the
clock started, e.g. on inputs the parent had already written, or around the untimed warm-up
calls) and, for the run's first batch, its CPU before its first call (start-up and loading
the library: constructors, threads they started). CPU outside the calls past a small share
of the CPU inside them is itself a finding (`cpu_outside_calls`).

Every buffer of every call ends at a page mapped `PROT_NONE` in the kernel's process and
every input is read-only there (`LoopSettings.guard_pages`, off for GPU kernels): a read
or write past a buffer, or a write to an input, during timing is a SIGSEGV the parent
places (`guard_fault`), not only guard bytes found changed after the loop.

Between a kernel batch's answer and its next command the parent looks at the
kernel's process: threads still using CPU or processes still alive mean work
escaped the timed region; answers that arrive unasked mean it answered for the
worker; outputs kept for the re-check must not change after the answer.
"""

from __future__ import annotations

import math
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from verifier.ops import Dims, OpSpec
from verifier.sandbox import ChildResult
from verifier.worker import (
    PAGE,
    PROT_READ_WRITE,
    UNASKED_ANSWER,
    Activity,
    BaselineWorker,
    Escape,
    Layout,
    Markers,
    NativeWorker,
    SharedArena,
    activity,
    busy_ns,
    charged_ns,
    escaped_work,
    fill_inputs,
    guard_pattern,
    layout,
    outputs_of,
    poison,
)

__all__ = ["LoopSettings", "Measured", "Rig", "ShapePlan", "bench_layout", "guard_fault",
           "measure_shape", "outside_calls"]

F32 = NDArray[np.float32]
MIN_BATCH_NS = 1_000_000
"""A batch lasts at least this long, so a pipe round trip (tens of microseconds) is noise."""
OVERHEAD_FACTOR = 20
MAX_BATCH_CALLS = 512
BATCH_CACHE_BYTES = 4 * 2**20
"""A batch's arenas fit in the last-level cache, so every call reads inputs the parent has
just written from cache, as a kernel fed by a previous layer would (and as the baseline
does), not from DRAM."""
FINAL_PAUSE_S = 0.05
OUTSIDE_SHARE = 0.05
OUTSIDE_FLOOR_NS = 20_000_000
"""CPU the kernel's tree may use outside the timed calls (between an answer and the next
command) before that is a finding: this share of its CPU inside them, and at least this."""
CALL_TIMEOUT_FLOOR_S = 30.0


@dataclass
class ShapePlan:
    """The inputs of every timed call of one shape (a pool set with one element changed)."""

    dims: dict[str, int]
    pool: list[list[F32]]
    schedule: list[int]
    tweak_idx: NDArray[np.int64]
    tweak_val: NDArray[np.float32]

    def inputs_of_call(self, call: int) -> list[F32]:
        """The exact inputs of timed call `call`.

        Changing one element per call makes every call's contents new, so a kernel
        that caches results by content (not only by pointer) gains nothing.
        """
        arrays = [a.copy() for a in self.pool[self.schedule[call % len(self.schedule)]]]
        if arrays[0].size:
            flat = arrays[0].reshape(-1)
            flat[int(self.tweak_idx[call % self.tweak_idx.size])] = self.tweak_val[call % self.tweak_val.size]
        return arrays

    def pool_index(self, call: int) -> int:
        return self.schedule[call % len(self.schedule)]


@dataclass(frozen=True)
class LoopSettings:
    warmup: int
    min_reps: int
    max_reps: int
    budget_s: float
    min_s: float
    target: float
    threads: int = 1
    """Threads the kernel and the baseline may use (bounds how much CPU time one call can hide)."""
    adjust_waits: bool = True
    """Subtract OS-accounted scheduling latency from round trips (off for GPU kernels)."""
    guard_pages: bool = True
    """End every buffer at a PROT_NONE page, inputs read-only, in the kernel's process (off
    for GPU kernels, whose wrapper copies every buffer with its canaries)."""


@dataclass(frozen=True)
class Rig:
    """What every shape of one run is timed with: the operation, the kernel's worker and
    the baseline process, the arena each reads its inputs from, and the run's markers."""

    op: OpSpec
    worker: NativeWorker
    baseline: BaselineWorker
    kmem: SharedArena
    bmem: SharedArena
    markers: Markers


PROTECT_RANGES = 1024
"""Page ranges per protect command (each is 3 words of a command)."""


def bench_layout(op: OpSpec, dims: Dims, guard_pages: bool) -> Layout:
    """One timed call's arena: buffers ending at a guard page, or canaries only."""
    return layout(op, dims, "end" if guard_pages else None)


def guard_fault(result: ChildResult | None, lay: Layout, size: int) -> str | None:
    """What a SIGSEGV/SIGBUS of the worker touched, where it is one of `lay`'s protected pages
    in an arena of `size` bytes of such calls; None otherwise. The address is the worker's
    handler's word: it labels a crash the parent saw, it never turns one into a pass."""
    line = None if result is None else result.last("KTL-FAULT ")
    if result is None or line is None or result.signal not in (signal.SIGSEGV, signal.SIGBUS):
        return None
    parts = line.split()
    if len(parts) != 4 or not parts[2].lstrip("-").isdigit() or lay.abut is None:
        return None
    at = int(parts[2])
    where = lay.locate(at % lay.total) if 0 <= at < size else None
    if where is None:
        return None
    kind = "output" if where.slot.is_output else "input"
    if where.region == "input" and where.side == "inside":
        return f"wrote to input {where.slot.name} (inputs are read-only in the kernel's process)"
    what = "write" if parts[3] == "w" else "read" if parts[3] == "r" else "access"
    return (f"out-of-bounds {what} during timing: touched the page {where.side} {kind} "
            f"{where.slot.name} (PROT_NONE in the kernel's process)")


@dataclass
class Measured:
    """What the parent saw for one shape."""

    kernel_ns: list[float] = field(default_factory=list)
    baseline_ns: list[float] = field(default_factory=list)
    first_call: list[int] = field(default_factory=list)
    batch: int = 1
    overhead_ns: tuple[float, float] = (0.0, 0.0)
    stored: list[tuple[int, list[F32]]] = field(default_factory=list)
    final: list[F32] = field(default_factory=list)
    escaped: list[Escape] = field(default_factory=list)
    guard_damage: int = 0
    span_s: float = 0.0
    inside_cpu_ns: int = 0
    """The kernel tree's CPU inside its timed batches' round trips."""
    outside_cpu_ns: int = 0
    """Its CPU outside every call of the shape (between an answer and the next command) and,
    for the run's first shape, before its first call; what came before a timed batch was
    charged to it."""


def _median_ns(fn: Callable[[], float], count: int) -> float:
    return float(np.median([fn() for _ in range(count)]))


def _halfwidth(ks: list[float], bs: list[float], rng: np.random.Generator) -> float:
    k = np.asarray(ks, dtype=np.float64)
    b = np.asarray(bs, dtype=np.float64)
    idx = rng.integers(0, k.size, size=(400, k.size))
    ratio = np.median(b[idx], axis=1) / np.maximum(np.median(k[idx], axis=1), 1.0)
    lo, hi = np.percentile(ratio, [2.5, 97.5])
    mid = float(np.median(b) / max(float(np.median(k)), 1.0))
    return float(max(mid - lo, hi - mid) / mid) if mid else 1.0


class _Watch:
    """The kernel's process between a batch's answer and the next command."""

    def __init__(self, worker: NativeWorker, kmem: SharedArena, lay: Layout) -> None:
        self.worker, self.kmem, self.lay = worker, kmem, lay
        self.since: tuple[int, Activity] | None = None
        self.kept: tuple[int, list[F32]] | None = None
        self.found: list[Escape] = []

    def answered(self, keep_arena: int | None) -> None:
        pid = self.worker.pid()
        if pid is not None:
            self.since = (time.perf_counter_ns(), activity(pid))
        self.kept = None
        if keep_arena is not None:
            region = self.kmem.bytes[keep_arena * self.lay.total:(keep_arena + 1) * self.lay.total]
            self.kept = (keep_arena, outputs_of(region, self.lay))

    def before_next(self) -> None:
        """Judge the pause since the last answer (called before the parent touches the arenas)."""
        ready, _, _ = select.select([self.worker.ans_r], [], [], 0)
        if (ready or self.worker.unasked) and UNASKED_ANSWER not in self.found:
            self.found.append(UNASKED_ANSWER)
        findings = self.worker.look()  # threads the calls started, still running at the answer
        if self.since is not None:
            t0, before = self.since
            pid = self.worker.pid()
            if pid is not None:
                findings += escaped_work(pid, before, activity(pid), time.perf_counter_ns() - t0)
        for finding in findings:
            if finding.key not in {f.key for f in self.found}:
                self.found.append(finding)
        if self.kept is not None:
            where, outs = self.kept
            region = self.kmem.bytes[where * self.lay.total:(where + 1) * self.lay.total]
            now = outputs_of(region, self.lay)
            if any(not np.array_equal(a.view(np.uint32), b.view(np.uint32))
                   for a, b in zip(outs, now, strict=True)) and \
                    not any(f.kind == "outputs_changed" for f in self.found):
                self.found.append(Escape("outputs_changed", 0, "outputs changed after the call "
                                         "returned (work deferred past the timed region)"))
        self.since = None
        self.kept = None


def _write_batch(rig: Rig, plan: ShapePlan, lay: Layout, first: int, batch: int) -> None:
    for j in range(batch):
        inputs = plan.inputs_of_call(first + j)
        for mem in (rig.kmem, rig.bmem):
            region = mem.bytes[j * lay.total:(j + 1) * lay.total]
            fill_inputs(region, lay, inputs)
        poison(rig.kmem.bytes[j * lay.total:(j + 1) * lay.total], lay, rig.markers.poison)


def _busy_ns(side: NativeWorker | BaselineWorker, elapsed: int, threads: int, adjust: bool) -> float:
    """A round trip's time without the scheduling latency the OS accounted to it
    (`verifier.worker.busy_ns`). Off for GPU kernels, whose work is not CPU time."""
    if not adjust:
        return float(elapsed)
    return busy_ns(elapsed, side.last_waited_ns, side.last_cpu_ns, threads)


def _baseline_ns(baseline: BaselineWorker, arenas: list[int], slots: list[int], dims: list[int],
                 timeout_s: float) -> float:
    """A baseline batch's time as the (trusted) baseline process measured its calls."""
    baseline.call(arenas, slots, dims, timeout_s)
    return float(baseline.last_value)


def _batch_size(rig: Rig, plan: ShapePlan, lay: Layout, settings: LoopSettings, cap: int,
                timeout_s: float) -> tuple[int, float, float]:
    """Warm both sides up, measure their overheads; the batch size that makes overhead noise."""
    worker, baseline = rig.worker, rig.baseline
    slots = [s.offset for s in lay.slots]
    dims = list(plan.dims.values())
    _write_batch(rig, plan, lay, 0, 1)
    worker.call([0] * max(settings.warmup, 1), slots, dims, timeout_s)
    baseline.call([0] * max(settings.warmup, 1), slots, dims, timeout_s)
    threads, adjust = settings.threads, settings.adjust_waits
    nop_k = _median_ns(lambda: _busy_ns(worker, worker.nop(), threads, adjust), 9)
    nop_b = 0.0  # the baseline process times its own calls (it is trusted)
    one = min(min(_busy_ns(worker, worker.call([0], slots, dims, timeout_s), threads, adjust)
                  for _ in range(3)) - nop_k,
              min(_baseline_ns(baseline, [0], slots, dims, timeout_s) for _ in range(3)))
    want = max(MIN_BATCH_NS, OVERHEAD_FACTOR * nop_k)
    return max(1, min(cap, math.ceil(want / max(one, 1000.0)))), nop_k, nop_b


@dataclass
class _Charge:
    """CPU the kernel's tree used outside its calls (`owed_ns` since `seen`), charged to the
    next timed batch."""

    worker: NativeWorker
    owed_ns: int
    seen: int

    def charge(self, ns: float, out: Measured, threads: int) -> float:
        """A kernel batch's `ns` with what is owed charged to it, counted in `out`."""
        out.inside_cpu_ns += self.worker.last_cpu_ns
        self.owed_ns += self.worker.outside_total_ns - self.seen
        self.seen = self.worker.outside_total_ns
        out.outside_cpu_ns += self.owed_ns
        ns = charged_ns(ns, self.owed_ns, threads)
        self.owed_ns = 0
        return ns

    def rest(self) -> int:
        """What is owed after the last timed batch: counted, charged to none."""
        return self.owed_ns + self.worker.outside_total_ns - self.seen


def _guard_arenas(rig: Rig, lay: Layout, guard_pages: bool) -> int:
    """How many calls' arenas a batch may use; each filled with the guard pattern and, with
    `guard_pages`, its guard pages protected."""
    kmem, bmem = rig.kmem, rig.bmem
    cap = max(1, min(MAX_BATCH_CALLS, BATCH_CACHE_BYTES // max(lay.total, 1),
                     kmem.nbytes // max(lay.total, 1), bmem.nbytes // max(lay.total, 1)))
    for mem in (kmem, bmem):
        mem.bytes[:cap * lay.total] = guard_pattern(cap * lay.total, rig.markers.guard)
    if guard_pages:
        ranges = [(0, -(-kmem.nbytes // PAGE) * PAGE, PROT_READ_WRITE),
                  *[r for j in range(cap) for r in lay.protections(j * lay.total)]]
        for k in range(0, len(ranges), PROTECT_RANGES):
            rig.worker.protect(ranges[k:k + PROTECT_RANGES])
    return cap


def _enough(settings: LoopSettings, reps: int, start: int, out: Measured,
            rng: np.random.Generator) -> bool:
    """Whether to stop after `reps` batches (looked at every tenth): the budget is spent, or
    the minimum time is and the speed-up interval is within target."""
    if reps < settings.min_reps or reps % 10:
        return False
    elapsed = time.perf_counter_ns() - start
    return elapsed > settings.budget_s * 1e9 or (
        elapsed >= settings.min_s * 1e9
        and _halfwidth(out.kernel_ns, out.baseline_ns, rng) <= settings.target)


def _stored(kept: list[tuple[int, list[F32]]],
            latest: tuple[int, list[F32]] | None) -> list[tuple[int, list[F32]]]:
    """The kept outputs and the latest batch's, by call number."""
    chosen = dict(kept)
    if latest is not None:
        chosen[latest[0]] = latest[1]
    return sorted(chosen.items(), key=lambda item: item[0])


def _final_call(rig: Rig, plan: ShapePlan, lay: Layout, watch: _Watch, batch: int,
                args: tuple[list[int], list[int], float]) -> list[F32]:
    """The outputs of one more call on the latest call's buffers, refilled and poisoned
    (`args`: the slots, the dims, the timeout)."""
    arena = (batch - 1) * lay.total
    last = rig.kmem.bytes[arena:arena + lay.total]  # the buffers of the latest call
    fill_inputs(last, lay, plan.pool[-1])
    poison(last, lay, rig.markers.poison)
    rig.worker.call([arena], *args)
    watch.answered(batch - 1)
    time.sleep(FINAL_PAUSE_S)
    return outputs_of(last, lay)


def measure_shape(rig: Rig, plan: ShapePlan, settings: LoopSettings, rng: np.random.Generator,
                  recheck: int, owed_ns: int = 0) -> Measured:
    """Time one shape until the speed-up interval is within target or its budget ends.

    `owed_ns`: CPU the kernel's tree used before this shape that no batch was charged (the
    library's loading, for the first shape): charged to the first timed batch."""
    worker, kmem = rig.worker, rig.kmem
    lay = bench_layout(rig.op, plan.dims, settings.guard_pages)
    charge = _Charge(worker, owed_ns, worker.outside_total_ns)
    cap = _guard_arenas(rig, lay, settings.guard_pages)
    timeout_s = max(CALL_TIMEOUT_FLOOR_S, settings.budget_s)
    batch, nop_k, nop_b = _batch_size(rig, plan, lay, settings, cap, timeout_s)
    out = Measured(batch=batch, overhead_ns=(nop_k, nop_b))
    slots = [s.offset for s in lay.slots]
    dims = list(plan.dims.values())
    arenas = [j * lay.total for j in range(batch)]
    watch = _Watch(worker, kmem, lay)
    kept: list[tuple[int, list[F32]]] = []
    latest: tuple[int, list[F32]] | None = None
    start = time.perf_counter_ns()
    call = i = 0
    while i < settings.max_reps:
        watch.before_next()
        _write_batch(rig, plan, lay, call, batch)
        keep = int(rng.integers(0, batch))
        for side in ((0, 1) if i % 2 == 0 else (1, 0)):
            if side == 0:
                ns = _busy_ns(worker, worker.call(arenas, slots, dims, timeout_s),
                              settings.threads, settings.adjust_waits)
                if settings.adjust_waits:  # CPU: a GPU kernel's work is not CPU time
                    ns = charge.charge(ns, out, settings.threads)
                watch.answered(keep)
                assert watch.kept is not None
                latest = (call + keep, watch.kept[1])
                _reservoir(kept, latest, i, recheck - 1, rng)
                out.kernel_ns.append(max(ns - nop_k, 0.0) / batch)
            else:
                out.baseline_ns.append(
                    _baseline_ns(rig.baseline, arenas, slots, dims, timeout_s) / batch)
        out.first_call.append(call)
        call += batch
        i += 1
        if worker.unasked and i >= 2:
            break  # the measurement is void; no need to spend the budget
        if _enough(settings, i, start, out, rng):
            break
    out.span_s = (time.perf_counter_ns() - start) / 1e9
    time.sleep(FINAL_PAUSE_S)
    watch.before_next()
    out.stored = _stored(kept, latest)
    out.guard_damage = _guard_damage(kmem, lay, batch, rig.markers)
    out.final = _final_call(rig, plan, lay, watch, batch, (slots, dims, timeout_s))
    watch.before_next()
    out.escaped = watch.found
    if settings.adjust_waits:  # after the last timed batch: counted, charged to none
        out.outside_cpu_ns += charge.rest()
    if out.outside_cpu_ns > max(OUTSIDE_SHARE * out.inside_cpu_ns, OUTSIDE_FLOOR_NS):
        out.escaped.append(outside_calls(out.outside_cpu_ns, out.inside_cpu_ns))
    return out


def outside_calls(outside_ns: int, inside_ns: int) -> Escape:
    """The finding for CPU used between the calls (it was charged to them as well)."""
    return Escape("cpu_outside_calls", 0, f"the kernel's processes used {outside_ns / 1e6:.0f} ms "
                  f"of CPU outside the timed calls ({outside_ns / max(inside_ns, 1):.0%} of the "
                  f"{inside_ns / 1e6:.0f} ms inside them): work started before the clock, e.g. "
                  "on inputs seen before the command, or while its library loaded; charged to "
                  "the calls")


def _reservoir(sample: list[tuple[int, list[F32]]], item: tuple[int, list[F32]], seen: int,
               size: int, rng: np.random.Generator) -> None:
    """Keep a uniform sample of `size` batches' kept outputs (algorithm R)."""
    if len(sample) < size:
        sample.append(item)
        return
    slot = int(rng.integers(0, seen + 1))
    if slot < size:
        sample[slot] = item


def _guard_damage(kmem: SharedArena, lay: Layout, batch: int, markers: Markers) -> int:
    mask = lay.guard_mask()
    expected = guard_pattern(lay.total, markers.guard)
    damaged = 0
    for j in range(batch):
        region = kmem.bytes[j * lay.total:(j + 1) * lay.total]
        damaged += int(np.count_nonzero(mask & (region != expected)))
    return damaged
