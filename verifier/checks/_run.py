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
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from verifier.checks._plan import Case, FaultKind, Prefill, Step
from verifier.ops import OpSpec
from verifier.sandbox import NO_LAYERS, ChildResult, Limits, SandboxLayers, base_env
from verifier.worker import (
    QUIET_THREADS,
    TIME_WORDS,
    UNASKED_ANSWER,
    Escape,
    Markers,
    NativeWorker,
    SharedArena,
    WorkerGone,
    WorkerHung,
    WorkerMisanswered,
    WorkerOverMemory,
    activity,
    escaped_work,
    fill_inputs,
    guard_pattern,
    layout,
    poison,
)

__all__ = ["MAX_CHILD_FAILURES", "run_cases"]

MAX_CHILD_FAILURES = 3
PAUSE_S = 0.01
Progress = Callable[[str], None]


def _prefill(region: NDArray[np.uint8], op: OpSpec, dims: dict[str, int], how: Prefill,
             markers: Markers, rng: np.random.Generator) -> None:
    lay = layout(op, dims)
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
    return layout(op, case.dims).total * (1 + max(s.arena for s in case.steps)) + _timing_bytes(case)


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


def _run_case(worker: NativeWorker, op: OpSpec, case: Case, mem: SharedArena, markers: Markers,
              timeout_s: float, rng: np.random.Generator) -> None:
    lay = layout(op, case.dims)
    arenas = 1 + max(s.arena for s in case.steps)
    mem.bytes[:arenas * lay.total] = guard_pattern(arenas * lay.total, markers.guard)
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
            _prefill(region, op, case.dims, step.prefill, markers, rng)
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


def _describe(exc: Exception, result: ChildResult | None, limits: Limits) -> tuple[FaultKind, str]:
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
    if res.timed_out or res.step_timed_out or res.signal == signal.SIGXCPU:
        return "hang", why
    if res.memory_limited:  # the run's cgroup: shared memory and private files included
        return "memory", why
    if isinstance(exc, WorkerGone) and not exc.loaded:
        return "load", f"failed before the first call (while loading the library): {why}"
    if limits.address_space and res.maxrss_bytes > 0.5 * limits.address_space:
        return "memory", why
    return "crash", why


def run_cases(library: Path, entry: str, op: OpSpec, cases: list[Case], workdir: Path,
              limits: Limits, markers: Markers, rng: np.random.Generator, progress: Progress,
              readable: list[Path], gpu: bool = False) -> SandboxLayers:
    """Run every case, resuming after a crash; fill dumps/failures.

    Returns the sandbox layers that were in force (the weakest over every child run)."""
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
    run = 0
    while todo:
        run += 1
        job_dir = workdir / f"run{run}"
        job_dir.mkdir()
        mem = SharedArena(size)
        progress(f"running {len(todo)} cases in a sandboxed child")
        worker = NativeWorker(library, entry, op, mem, job_dir, limits, env, readable=readable, gpu=gpu)
        done = 0
        try:
            for ci in todo:
                _run_case(worker, op, cases[ci], mem, markers, timeout_s, rng)
                done += 1
        except (WorkerGone, WorkerHung, WorkerOverMemory, WorkerMisanswered) as exc:
            result = worker.close()
            kind, why = _describe(exc, result, limits)
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
