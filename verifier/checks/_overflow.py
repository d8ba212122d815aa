"""The `index.overflow` check: shapes whose flat indices pass 2^31, without the memory.

Inputs are mapped lazily inside the worker (private anonymous MAP_NORESERVE pages,
read-only: untouched pages read as zero and cost no RAM); outputs are small and
live in the shared arena, prefilled with this run's poison. Every input is zero,
so every output must be exactly zero. A kernel computing `int` flat indices
(`A[i * k + p]`) crashes, hangs or answers wrong there. Shapes:

- `sum`: R = 2 rows of C = 2^30 + 64 (the second row's flat indices pass 2^31);
- `matmul`: M = 3, N = 1, K = 2^30 + 64 (A's flat index i*K + p passes 2^31) and
  the transposed case M = 1, N = 3 (B's flat index p*N + j passes 2^31).

Ops without a shape whose outputs stay small are skipped, as is the cuda runtime
(its host wrapper would copy the whole lazy input to the device). The worker runs
without an address-space limit (it maps tens of GiB) but under a resident-memory
watchdog in the parent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from attest.predicates import CheckOutcome
from verifier.ops import OpSpec
from verifier.sandbox import Limits, base_env
from verifier.worker import (
    GUARD,
    QUIET_THREADS,
    Markers,
    NativeWorker,
    SharedArena,
    WorkerGone,
    WorkerHung,
    WorkerMisanswered,
    WorkerOverMemory,
)

__all__ = ["HUGE_SHAPES", "OVERFLOW_REASON", "index_overflow"]

BIG = 2**30 + 64
HUGE_SHAPES: dict[str, tuple[dict[str, int], ...]] = {
    "sum": ({"R": 2, "C": BIG},),
    "matmul": ({"M": 3, "N": 1, "K": BIG}, {"M": 1, "N": 3, "K": BIG}),
}
OVERFLOW_REASON = "32-bit index overflow at flat index >= 2^31"
RSS_CAP = 1024 * 2**20
CALL_TIMEOUT_S = 150.0
"""Per huge shape: 2^31+ multiply-adds through page tables of 8-16 GiB, on a loaded machine."""
Outcome = tuple[CheckOutcome, str, dict[str, float]]
"""(outcome, detail, metrics) of the row."""


def _shape_text(dims: dict[str, int]) -> str:
    return "{" + ",".join(f"{k}={v}" for k, v in dims.items()) + "}"


def _run_one(worker: NativeWorker, op: OpSpec, dims: dict[str, int], arena: SharedArena,
             markers: Markers) -> str | None:
    """None if the outputs are exactly zero, else what went wrong."""
    lazy = [4 * int(np.prod(o.dims_of(dims), dtype=np.int64)) for o in op.inputs]
    slots = [0] * len(op.inputs)
    cursor = GUARD
    for o in op.outputs:
        slots.append(cursor)
        cursor += 4 * int(np.prod(o.dims_of(dims), dtype=np.int64)) + GUARD
    arena.bytes[:cursor] = 0
    for o, at in zip(op.outputs, slots[len(op.inputs):], strict=True):
        n = int(np.prod(o.dims_of(dims), dtype=np.int64))
        arena.bytes[at:at + 4 * n].view(np.uint32)[:] = markers.poison
    worker.call([0], slots, list(dims.values()), CALL_TIMEOUT_S, lazy=[*lazy, *[0] * len(op.outputs)])
    for o, at in zip(op.outputs, slots[len(op.inputs):], strict=True):
        n = int(np.prod(o.dims_of(dims), dtype=np.int64))
        out = arena.bytes[at:at + 4 * n].view(np.float32)
        if np.any(out.view(np.uint32) == markers.poison):
            return f"left outputs of {o.name} unwritten"
        if np.any(out != 0.0):
            first = int(np.nonzero(out != 0.0)[0][0])
            return f"answered {o.name}[{first}] = {float(out[first])!r} for all-zero inputs (expected 0)"
    return None


def index_overflow(library: Path, entry: str, op: OpSpec, workdir: Path, markers: Markers,
                   readable: list[Path], gpu: bool, progress: Callable[[str], None]) -> Outcome:
    """Run every huge shape of `op`; the row's (outcome, detail, metrics)."""
    shapes = HUGE_SHAPES.get(op.name, ())
    if not shapes:
        return "skip", f"no shape of op {op.name} passes 2^31 elements with small outputs", {}
    if gpu:
        return "skip", "not run on a GPU runtime (its wrapper copies inputs to the device)", {}
    start = time.monotonic()
    arena = SharedArena(64 * 1024)
    limits = Limits(cpu_s=int(CALL_TIMEOUT_S * 4 * len(shapes)), wall_s=CALL_TIMEOUT_S * 2 * len(shapes),
                    address_space=None, step_wall_s=None)
    folder = workdir / "overflow"
    folder.mkdir()
    worker = NativeWorker(library, entry, op, arena, folder, limits, base_env(QUIET_THREADS),
                          readable=readable, rss_cap=RSS_CAP)
    try:
        for dims in shapes:
            progress(f"index overflow: shape {_shape_text(dims)} (inputs mapped lazily)")
            wrong = _run_one(worker, op, dims, arena, markers)
            if wrong:
                return "fail", f"{OVERFLOW_REASON}: {wrong} on shape {_shape_text(dims)}", {}
    except (WorkerGone, WorkerHung, WorkerOverMemory, WorkerMisanswered) as exc:
        result = worker.close()
        why = str(exc)
        if isinstance(exc, WorkerGone) and result is not None:
            why = result.describe(limits)
        return "fail", f"{OVERFLOW_REASON}: {why} on shape {_shape_text(dims)}", {}
    finally:
        worker.close()
        arena.close()
    seconds = time.monotonic() - start
    return ("pass", f"exactly zero outputs for all-zero inputs on {len(shapes)} shape(s) whose flat "
            f"indices pass 2^31 ({', '.join(_shape_text(s) for s in shapes)}) in {seconds:.1f} s",
            {"seconds": seconds})
