"""The baseline's own process: NumPy float32 calls on a memfd, commanded like the native worker.

Run as `python -m verifier.worker._baseline OP CMD_FD ANS_FD MEM_FD MEM_BYTES THREADS` by
`BaselineWorker`. It never loads a kernel library, so nothing a kernel does in its
own process can speed up or slow down the baseline it is compared with. It reads
the same commands as `_native_worker.c` (see `verifier.worker._native.encode`) and
answers {status, ns}: being trusted, it times its own calls, and takes out of that time
what the OS says its thread spent waiting for a CPU, never going below its CPU over the
allowed threads (`verifier.worker.busy_ns`), exactly as the kernel's round trip is
accounted: a CPU shared with other work slows both sides' clocks alike, so it does not
move the ratio (issue 42: before, only the kernel's waits were taken out, and a spinner on
the pinned CPU read 10-20 % speed-ups into honest kernels, and noise).
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
import time
from typing import Any

import numpy as np

from verifier.ops import OPS, OpSpec
from verifier.worker._account import busy_ns
from verifier.worker._arena import Layout, layout, view
from verifier.worker._channel import ANSWER, MAX_BATCH, OP_CALL, OP_NOP, OP_QUIT
from verifier.worker._proc import schedstat

_OWN_SCHEDSTAT = "/proc/thread-self/schedstat"


def _read(fd: int, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def timed(calls: list[tuple[list[Any], list[Any]]], run: Any, dims: dict[str, int],
          threads: int = 1) -> int:
    """The ns `run` took over `calls`, less this thread's run-queue waits meanwhile, never
    below this process's CPU over `threads` (`busy_ns`, as the kernel's round trip)."""
    waited0 = schedstat(_OWN_SCHEDSTAT)[1]
    cpu0 = time.process_time_ns()
    t0 = time.perf_counter_ns()
    for ins, outs in calls:
        run(ins, outs, dims)
    elapsed = time.perf_counter_ns() - t0
    cpu = time.process_time_ns() - cpu0
    waited = schedstat(_OWN_SCHEDSTAT)[1] - waited0
    return int(busy_ns(elapsed, max(waited, 0), cpu, threads))


def serve(op: OpSpec, cmd_fd: int, ans_fd: int, mem: Any, threads: int = 1) -> None:
    """Answer commands until QUIT or EOF; a CALL's answer value is its own time in ns.

    This process is trusted (it never loads a kernel), so it times the baseline calls
    itself, around the calls only, as the previous design did: parsing a command in
    Python must not count against the baseline.
    """
    arena = np.frombuffer(mem, dtype=np.uint8)
    nb, nd = len(op.inputs) + len(op.outputs), len(op.dims)
    shapes: dict[tuple[int, ...], tuple[Layout, dict[str, int]]] = {}
    views: dict[tuple[int, tuple[int, ...]], tuple[list[Any], list[Any]]] = {}
    while True:
        kind, count = struct.unpack("<qq", _read(cmd_fd, 16))
        if kind == OP_QUIT:
            return
        if not 0 <= count <= MAX_BATCH:
            raise ValueError("bad batch size")
        words = np.frombuffer(_read(cmd_fd, 8 * (2 * nb + nd + count)), dtype="<i8").tolist()
        dims_list = tuple(words[nb:nb + nd])
        elapsed = 0
        if kind == OP_CALL:
            if dims_list not in shapes:
                dims = dict(zip(op.dims, dims_list, strict=True))
                shapes[dims_list] = (layout(op, dims), dims)
            lay, dims = shapes[dims_list]
            calls = []
            for base in words[2 * nb + nd:]:
                key = (base, dims_list)
                if key not in views:
                    region = arena[base:base + lay.total]
                    views[key] = ([view(region, s) for s in lay.slots if not s.is_output],
                                  [view(region, s) for s in lay.slots if s.is_output])
                calls.append(views[key])
            elapsed = timed(calls, op.baseline, dims, threads)
        elif kind != OP_NOP:
            raise ValueError("unknown command")
        os.write(ans_fd, ANSWER.pack(0, elapsed))


def main(argv: list[str]) -> int:
    op = OPS[argv[1]]
    cmd_fd, ans_fd, mem_fd, nbytes = (int(x) for x in argv[2:6])
    threads = int(argv[6]) if len(argv) > 6 else 1
    mem = mmap.mmap(mem_fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    try:
        serve(op, cmd_fd, ans_fd, mem, max(threads, 1))
    except EOFError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
