"""How steady is this machine under ktl's own measurements? The host's share, without ktl.

One process pinned to one CPU does what a sum-rows baseline batch does, with nothing of
ktl around it: writes fresh inputs (R x C float32) into a shared-memory buffer, then sums
its rows with NumPy, `calls` times a window, and records the window's median call time.
Windows follow each other for `--seconds`; every `--every` windows the buffer is made anew
(fresh pages, as each benchmark run makes its arenas anew). What varies between windows is
the machine (other tenants of the host's caches and memory, a vCPU moved between physical
cores), which the OS does not show as load or steal, and which every bench run inherits.

    .venv/bin/python benchmarks/bench_host_noise.py                 # 60 s
    .venv/bin/python benchmarks/bench_host_noise.py --tiny          # a smoke run

Prints the windows' median call times: min, median, max, their coefficient of variation,
and how many windows fell more than 15 % above the fastest quartile (the slow mode).
"""

from __future__ import annotations

import argparse
import mmap
import os
import statistics
import sys
import time
from collections.abc import Sequence

import numpy as np


def window(buf: np.ndarray, out: np.ndarray, sources: Sequence[np.ndarray], calls: int) -> float:
    """The median ns of `calls` sums of `buf`'s rows, each after writing fresh contents."""
    times = []
    for i in range(calls):
        buf[:] = sources[i % len(sources)]
        t0 = time.perf_counter_ns()
        np.sum(buf, axis=1, out=out)
        times.append(time.perf_counter_ns() - t0)
    return float(np.median(times))


def fresh_buffer(rows: int, cols: int) -> tuple[np.ndarray, np.ndarray, mmap.mmap]:
    """A memfd-backed (shared memory, as ktl's arenas) input and output, on fresh pages."""
    nbytes = 4 * rows * (cols + 1)
    fd = os.memfd_create("ktl-noise", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, nbytes)
        mem = mmap.mmap(fd, nbytes)
    finally:
        os.close(fd)
    arr = np.frombuffer(mem, dtype=np.float32)
    return arr[:rows * cols].reshape(rows, cols), arr[rows * cols:rows * cols + rows], mem


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--calls", type=int, default=100, help="calls per window")
    ap.add_argument("--every", type=int, default=5, help="windows per fresh buffer")
    ap.add_argument("--tiny", action="store_true", help="a smoke run: 1 s of small windows")
    args = ap.parse_args(argv)
    if args.tiny:
        args.seconds, args.rows, args.cols, args.calls = 1.0, 64, 256, 10
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    rng = np.random.default_rng(7)
    sources = [rng.standard_normal((args.rows, args.cols), dtype=np.float32) for _ in range(4)]
    medians: list[float] = []
    end = time.monotonic() + args.seconds
    buf, out, mem = fresh_buffer(args.rows, args.cols)
    while time.monotonic() < end:
        if medians and len(medians) % args.every == 0:
            del buf, out
            mem.close()
            buf, out, mem = fresh_buffer(args.rows, args.cols)
        medians.append(window(buf, out, sources, args.calls))
        print(f"  window {len(medians)}: {medians[-1] / 1e3:.1f} us", file=sys.stderr,
              flush=True)
    one, five, _ = os.getloadavg()
    fast = float(np.percentile(medians, 25))
    slow = sum(m > 1.15 * fast for m in medians)
    cv = statistics.stdev(medians) / statistics.fmean(medians) if len(medians) > 1 else 0.0
    print(f"machine: {os.cpu_count()} cores, CPU {cpu}, load {one:.2f} / {five:.2f}; "
          f"{args.rows} x {args.cols} float32 row sums, {args.calls} calls a window, "
          f"{len(medians)} windows over {args.seconds:g} s\n")
    print("| windows | median call: min | median | max | CV of the windows | windows > 15 % "
          "above the fastest quartile |")
    print("|---|---|---|---|---|---|")
    print(f"| {len(medians)} | {min(medians) / 1e3:.1f} us | {statistics.median(medians) / 1e3:.1f}"
          f" us | {max(medians) / 1e3:.1f} us | {100 * cv:.1f} % | {slow} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
