"""The sandboxed child: load the kernel library, call it, write raw results to files.

Run as `python -m verifier._worker JOB_DIR` by verifier.sandbox, already under
resource limits, in a private folder. It judges nothing: it dumps whole arenas
(guards included) and raw timing samples, and the parent does every comparison,
so kernel code sharing this process cannot fake a verdict, only a dump that the
parent then finds wrong.

Progress goes to stdout one line at a time (READY, LOADED, CASE i, T0/T1, DONE)
so the parent can attribute a crash or hang to a case and time the loop itself.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from verifier._arena import Layout, layout, new_arena, poison, view
from verifier.ops import OPS, OpSpec

OUTPUT_CAP_BYTES = 256 * 1024 * 1024


def _say(*parts: object) -> None:
    sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
    sys.stdout.flush()


def _load(job: dict[str, Any], op: OpSpec) -> Callable[..., None]:
    lib = ctypes.CDLL(str(Path(job["library"]).resolve()))
    fn = getattr(lib, job["entry"])
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p] * (len(op.inputs) + len(op.outputs)) + [ctypes.c_int64] * len(
        op.dims
    )
    return fn  # type: ignore[no-any-return]


def _fill(arena: NDArray[np.uint8], lay: Layout, arrays: Sequence[NDArray[np.float32]]) -> None:
    for slot, arr in zip((s for s in lay.slots if not s.is_output), arrays, strict=True):
        view(arena, slot)[...] = arr


def _args(arena: NDArray[np.uint8], lay: Layout, dims: Sequence[int]) -> list[int]:
    base = int(arena.ctypes.data)
    return [base + s.offset for s in lay.slots] + list(dims)


def run_check(job: dict[str, Any], op: OpSpec, fn: Callable[..., None]) -> None:
    for index, case in enumerate(job["cases"]):
        _say("CASE", index)
        dims = {d: int(case["dims"][d]) for d in op.dims}
        lay = layout(op, dims)
        arenas: dict[int, NDArray[np.uint8]] = {}
        for step in case["steps"]:
            arena = arenas.get(step["arena"])
            if arena is None:
                arena = arenas[step["arena"]] = new_arena(lay)
            _fill(arena, lay, [np.load(f, allow_pickle=False) for f in step["inputs"]])
            poison(arena, lay)
            fn(*_args(arena, lay, [dims[d] for d in op.dims]))
            arena.tofile(step["dump"])


def _halfwidth(ks: list[int], bs: list[int], rng: np.random.Generator) -> float:
    k = np.asarray(ks, dtype=np.float64)
    b = np.asarray(bs, dtype=np.float64)
    idx = rng.integers(0, k.size, size=(400, k.size))
    ratio = np.median(b[idx], axis=1) / np.median(k[idx], axis=1)
    lo, hi = np.percentile(ratio, [2.5, 97.5])
    mid = float(np.median(b) / np.median(k))
    return float(max(mid - lo, hi - mid) / mid)


def run_bench(job: dict[str, Any], op: OpSpec, fn: Callable[..., None]) -> None:
    rng = np.random.default_rng(0)
    for index, shape in enumerate(job["shapes"]):
        dims = {d: int(shape["dims"][d]) for d in op.dims}
        dim_list = [dims[d] for d in op.dims]
        lay = layout(op, dims)
        arena = new_arena(lay)
        pool = [[np.load(f, allow_pickle=False) for f in files] for files in shape["pool"]]
        fresh = pool.pop()
        base_in = [np.empty_like(a) for a in pool[0]]
        base_out = [np.empty(o.dims_of(dims), dtype=np.float32) for o in op.outputs]
        outs = [s for s in lay.slots if s.is_output]
        out_elems = sum(int(np.prod(s.shape, dtype=np.int64)) for s in outs)
        cap_calls = max(1, OUTPUT_CAP_BYTES // max(4 * out_elems, 1))
        schedule = shape["schedule"]
        tweak_idx = np.load(shape["tweak_idx"], allow_pickle=False)
        tweak_val = np.load(shape["tweak_val"], allow_pickle=False)
        first_slot = lay.slots[0]
        first_size = int(np.prod(first_slot.shape, dtype=np.int64))
        stored = np.empty((min(cap_calls, int(shape["max_reps"])), out_elems), dtype=np.float32)
        stored_idx: list[int] = []
        args = _args(arena, lay, dim_list)
        for _ in range(int(shape["warmup"])):
            _fill(arena, lay, pool[0])
            fn(*args)
            for dst, src in zip(base_in, pool[0], strict=True):
                np.copyto(dst, src)
            op.baseline(base_in, base_out, dims)
        ks: list[int] = []
        bs: list[int] = []
        used: list[int] = []
        _say("T0", index, time.perf_counter_ns())
        start = time.perf_counter_ns()
        budget_ns = float(shape["budget_s"]) * 1e9
        min_ns = float(shape["min_s"]) * 1e9
        i = 0
        while i < int(shape["max_reps"]):
            p = int(schedule[i % len(schedule)])
            where, value = int(tweak_idx[i % tweak_idx.size]), tweak_val[i % tweak_val.size]
            for which in ((0, 1) if i % 2 == 0 else (1, 0)):
                if which == 0:
                    _fill(arena, lay, pool[p])
                    if first_size:
                        view(arena, first_slot).reshape(-1)[where] = value
                    poison(arena, lay)
                    t0 = time.perf_counter_ns()
                    fn(*args)
                    t1 = time.perf_counter_ns()
                    ks.append(t1 - t0)
                    flat = np.concatenate([view(arena, s).reshape(-1) for s in outs])
                    if len(stored_idx) < stored.shape[0]:
                        stored[len(stored_idx)] = flat
                        stored_idx.append(i)
                    else:
                        stored[-1] = flat
                        stored_idx[-1] = i
                else:
                    for dst, src in zip(base_in, pool[p], strict=True):
                        np.copyto(dst, src)
                    if first_size:
                        base_in[0].reshape(-1)[where] = value
                    t0 = time.perf_counter_ns()
                    op.baseline(base_in, base_out, dims)
                    t1 = time.perf_counter_ns()
                    bs.append(t1 - t0)
            used.append(p)
            i += 1
            if i >= int(shape["min_reps"]) and i % 10 == 0:
                elapsed = time.perf_counter_ns() - start
                if elapsed > budget_ns:
                    break
                if elapsed >= min_ns and _halfwidth(ks, bs, rng) <= float(shape["target"]):
                    break
        _say("T1", index, time.perf_counter_ns())
        _fill(arena, lay, fresh)
        poison(arena, lay)
        fn(*args)
        final = np.concatenate([view(arena, s).reshape(-1) for s in outs])
        np.savez(
            shape["result"],
            kernel_ns=np.asarray(ks, dtype=np.int64),
            baseline_ns=np.asarray(bs, dtype=np.int64),
            used=np.asarray(used, dtype=np.int64),
            stored=stored[: len(stored_idx)],
            stored_idx=np.asarray(stored_idx, dtype=np.int64),
            final=final,
            arena=arena,
        )


def main(argv: list[str]) -> int:
    job_dir = Path(argv[1])
    job = json.loads((job_dir / "job.json").read_text())
    op = OPS[job["op"]]
    try:
        netns = os.readlink("/proc/self/ns/net")
    except OSError:
        netns = "unknown"
    _say("READY", netns)
    fn = _load(job, op)
    _say("LOADED")
    if job["mode"] == "check":
        run_check(job, op, fn)
    else:
        run_bench(job, op, fn)
    _say("DONE")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
