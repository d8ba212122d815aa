"""Running `check`'s cases in the native worker: fill, call, snapshot, watch.

The parent writes each call's inputs and prefilled outputs (this run's random
poison, or zeros, or random garbage: a kernel cannot tell the harness by the
prefill) into the worker's memfd, calls, and copies the whole arena (guards
included) the moment the call answers. It then pauses briefly and looks again:
outputs that changed, threads still using CPU or processes still alive mean work
escaped the call. A crash or hang ends the worker; the remaining cases resume in
a new one, up to `MAX_CHILD_FAILURES`.
"""

from __future__ import annotations

import signal
import time

import numpy as np
from numpy.typing import NDArray

from verifier.checks._plan import Case, CaseFailure, KernelRun, Prefill, Step, case_layout
from verifier.ops import OpSpec
from verifier.progress import Progress
from verifier.sandbox import NO_LAYERS, ChildResult, Limits, SandboxLayers, base_env
from verifier.worker import (
    PAGE,
    PROT_READ_WRITE,
    QUIET_THREADS,
    TIME_WORDS,
    UNASKED_ANSWER,
    Escape,
    Layout,
    Markers,
    NativeWorker,
    SharedArena,
    WorkerGone,
    WorkerHung,
    WorkerMisanswered,
    WorkerOverMemory,
    WorkerSandbox,
    activity,
    escaped_work,
    fill_inputs,
    guard_pattern,
    poison,
)

__all__ = ["MAX_CHILD_FAILURES", "run_cases"]

MAX_CHILD_FAILURES = 3
PAUSE_S = 0.01


def _prefill(region: NDArray[np.uint8], lay: Layout, how: Prefill, markers: Markers,
             rng: np.random.Generator) -> None:
    if how == "poison":
        poison(region, lay, markers.poison)
        return
    for slot in lay.slots:
        if slot.is_output:
            words = region[slot.offset:slot.offset + slot.nbytes].view(np.float32)
            words[:] = 0.0 if how == "zero" else rng.standard_normal(words.size).astype(np.float32)


def _timing_bytes(case: Case) -> int:
    """Room after a paired case's arenas for the worker to write its calls' times."""
    if case.pair_from is None:
        return 0
    return 8 * TIME_WORDS * ((len(case.steps) - case.pair_from) // 2)


def _arena_bytes(op: OpSpec, case: Case) -> int:
    return case_layout(op, case).total * (1 + max(s.arena for s in case.steps)) + _timing_bytes(case)


def _watch(worker: NativeWorker, case: Case, mem: SharedArena, offsets: list[int], total: int) -> list[NDArray[np.uint8]]:
    """Snapshot the arenas at the answer, pause, and record what kept working meanwhile."""
    pid = worker.pid()
    before = activity(pid) if pid is not None else None
    t0 = time.perf_counter_ns()
    snaps = [mem.bytes[o:o + total].copy() for o in offsets]
    time.sleep(PAUSE_S)
    found = worker.look()
    if pid is not None and before is not None:
        found += escaped_work(pid, before, activity(pid), time.perf_counter_ns() - t0)
    for o, snap in zip(offsets, snaps, strict=True):
        if not np.array_equal(mem.bytes[o:o + total], snap):
            found.append(Escape("outputs_changed", 0, "memory changed after the call returned "
                                "(work deferred past the call)"))
    if worker.unasked:
        found.append(UNASKED_ANSWER)
    case.escaped += [f for i, f in enumerate(found) if f not in case.escaped and f not in found[:i]]
    return snaps


def _run_case(worker: NativeWorker, run: KernelRun, case: Case, mem: SharedArena,
              timeout_s: float, rng: np.random.Generator) -> None:
    op, markers = run.op, run.markers
    lay = case_layout(op, case)
    arenas = 1 + max(s.arena for s in case.steps)
    mem.bytes[:arenas * lay.total] = guard_pattern(arenas * lay.total, markers.guard)
    mapped = -(-mem.nbytes // PAGE) * PAGE
    worker.protect([(0, mapped, PROT_READ_WRITE),
                    *[r for a in range(arenas) for r in lay.protections(a * lay.total)]])
    slots = [s.offset for s in lay.slots]
    dims = list(case.dims.values())
    template = case.steps[case.pair_from:] if case.pair_from is not None else []
    dumps: list[NDArray[np.uint8]] = []
    commands = 0
    si = 0
    while si < len(case.steps):
        paired = case.pair_from is not None and si >= case.pair_from
        group = case.steps[si:] if paired else case.steps[si:si + 1]
        for step in group:
            region = mem.bytes[step.arena * lay.total:(step.arena + 1) * lay.total]
            fill_inputs(region, lay, step.inputs)
            _prefill(region, lay, step.prefill, markers, rng)
        offsets = [step.arena * lay.total for step in group]
        if paired:
            case.overlaps += worker.pair(offsets[0::2], offsets[1::2], slots, dims, timeout_s,
                                         arenas * lay.total)
            case.paired_calls += len(offsets)
            commands += 1
        else:
            worker.call(offsets, slots, dims, timeout_s)
        dumps += _watch(worker, case, mem, offsets, lay.total)
        si += len(group)
        if paired and case.overlaps < case.overlaps_needed and commands < case.pair_commands:
            case.steps += [Step(s.inputs, s.arena, s.prefill) for s in template]
    case.dumps = dumps


def _placed_fault(res: ChildResult, op: OpSpec, case: Case) -> tuple[CaseFailure, str] | None:
    """A SIGSEGV/SIGBUS at a protected page of `case`'s arenas, named from its layout: a
    guard page (an out-of-bounds read or write), an input's read-only page (a write to an
    input). The address is the worker's handler's word ("KTL-FAULT ..."): it labels a crash
    the parent saw; it never turns one into a pass."""
    line = res.last("KTL-FAULT ")
    if res.signal not in (signal.SIGSEGV, signal.SIGBUS) or line is None:
        return None
    try:
        _, _sig, at_text, how = line.split()
        at = int(at_text)
    except ValueError:
        return None
    lay = case_layout(op, case)
    arenas = 1 + max(s.arena for s in case.steps)
    if lay.abut is None or not 0 <= at < arenas * lay.total:
        return None
    off = at % lay.total
    where = lay.locate(off)
    if where is None:
        return None
    slot = where.slot
    kind = "output" if slot.is_output else "input"
    beyond = off - slot.offset - slot.nbytes
    past = ((f"{beyond} bytes beyond the end of {kind} {slot.name}" if beyond else
             f"the first byte past the end of {kind} {slot.name}")
            if off >= slot.offset + slot.nbytes else
            f"{slot.offset - off} bytes before the start of {kind} {slot.name}"
            if off < slot.offset else f"{kind} {slot.name} at flat index {(off - slot.offset) // 4}")
    if where.region == "input" and where.side == "inside":
        return "input_mutated", (f"wrote to {past} (inputs are mapped read-only in the kernel's "
                                 "process): a kernel must not write its inputs, even to restore them")
    if where.region == "input":
        return "oob_write", f"out-of-bounds write: {past} (a read-only page of the input)"
    write = how == "w" or (how == "?" and slot.is_output)
    side = "after" if where.side == "after" else "before"
    what = "out-of-bounds write" if write else "out-of-bounds read"
    return ("oob_write" if write else "oob_read",
            f"{what}: {'wrote' if write else 'read'} the guard page {side} {kind} {slot.name}, "
            f"{past} (SIGSEGV in the release build)")


def _describe(exc: Exception, result: ChildResult | None, limits: Limits, op: OpSpec,
              case: Case) -> tuple[CaseFailure, str]:
    if isinstance(exc, WorkerHung):
        return "hang", f"hang: no answer within the per-call limit of {exc.limit_s:g} s"
    if isinstance(exc, WorkerOverMemory):
        return "memory", f"unbounded allocation: {exc}"
    if isinstance(exc, WorkerMisanswered):
        return "bad_answer", str(exc)
    res = exc.result if isinstance(exc, WorkerGone) and exc.result is not None else result
    if res is None:
        return "crash", "crash: the kernel's process could not be started"
    why = res.describe(limits)
    if res.denied_syscall is not None or res.signal == signal.SIGSYS:
        return "sandbox_violation", why  # a call the sandbox denies: the run was killed for it
    if res.output_excess is not None:
        return "output_flood", why
    if res.timed_out or res.step_timed_out or res.signal == signal.SIGXCPU:
        return "hang", why
    if res.memory_limited:  # the run's cgroup: shared memory and private files included
        return "memory", why
    if isinstance(exc, WorkerGone) and not exc.loaded:
        return "load", f"failed before the first call (while loading the library): {why}"
    placed = _placed_fault(res, op, case)
    if placed is not None:
        return placed
    if limits.address_space and res.maxrss_bytes > 0.5 * limits.address_space:
        return "memory", why
    return "crash", why


def run_cases(run: KernelRun, cases: list[Case], limits: Limits, rng: np.random.Generator,
              progress: Progress) -> SandboxLayers:
    """Run every case, resuming after a crash; fill dumps/failures.

    Returns the sandbox layers that were in force (the weakest over every child run)."""
    op = run.op
    if run.gpu:
        for case in cases:
            case.abut = None  # the cuda wrapper copies the canaries around each buffer too
    size = max(_arena_bytes(op, c) for c in cases)
    todo = list(range(len(cases)))
    failures = 0
    layers: SandboxLayers | None = None

    def seen(result: ChildResult | None) -> SandboxLayers:
        nonlocal layers
        if result is not None:
            layers = result.layers if layers is None else layers.weakest(result.layers)
        return layers or NO_LAYERS

    timeout_s = (limits.step_wall_s or limits.wall_s) + 2.0
    env = base_env(QUIET_THREADS)
    child = 0
    while todo:
        child += 1
        job_dir = run.workdir / f"run{child}"
        job_dir.mkdir()
        mem = SharedArena(size)
        progress(f"running {len(todo)} cases in a sandboxed child")
        sandbox = WorkerSandbox(job_dir, limits, env, list(run.readable), run.gpu)
        worker = NativeWorker(run.library, run.entry, op, mem, sandbox)
        done = 0
        try:
            for ci in todo:
                _run_case(worker, run, cases[ci], mem, timeout_s, rng)
                done += 1
        except (WorkerGone, WorkerHung, WorkerOverMemory, WorkerMisanswered) as exc:
            result = worker.close()
            kind, why = _describe(exc, result, limits, op, cases[todo[done]])
            failed = cases[todo[done]]
            if (worker.unasked or kind == "bad_answer") and UNASKED_ANSWER not in failed.escaped:
                failed.escaped.append(UNASKED_ANSWER)  # its answers were written by the kernel
            seen(result)
            if kind == "load":
                for ci in todo:
                    cases[ci].fail(kind, why)
                return seen(None)
            cases[todo[done]].fail(kind, why)
            failures += 1
            todo = todo[done + 1:]
            if failures >= MAX_CHILD_FAILURES or kind == "hang":
                for ci in todo:
                    cases[ci].fail("not_run", f"not run: the kernel already failed ({why})")
                return seen(None)
            continue
        finally:
            worker.close()
            mem.close()
        return seen(worker.result)
    return seen(None)
