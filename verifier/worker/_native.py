"""The parent's side of the native worker: build it, share arenas with it, command it.

The kernel's process runs only `_native_worker.c` (no interpreter of ours, no
numpy) plus the kernel. Arenas live in one sealed memfd mapped by both sides: the
parent fills inputs and prefills outputs there, sends a command over a pipe, and
reads a fixed-size answer from another pipe; it times the round trip on its own
clock and snapshots the outputs itself. Nothing the child writes to a path is
ever opened. The same command format drives the baseline process
(`verifier.worker._baseline`), so both are timed the same way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from verifier.errors import BuildError, SandboxError, VerifierError
from verifier.ops import OpSpec
from verifier.sandbox import (
    Accounting,
    ChildResult,
    Limits,
    base_env,
    build_program,
    memory_limit,
    run_sandboxed,
)
from verifier.worker._account import (
    AccountingKind,
    CgroupClock,
    CpuClock,
    ProcTreeClock,
    run_cgroup,
)
from verifier.worker._channel import (
    OP_CALL,
    OP_NOP,
    OP_PAIR,
    OP_PROTECT,
    OP_QUIT,
    QUIET_THREADS,
    Channel,
    SharedArena,
    WorkerGone,
    WorkerMisanswered,
    encode,
    stop_child,
)
from verifier.worker._escape import Escape, ThreadStarts
from verifier.worker._overlap import TIME_WORDS, overlapping_pairs
from verifier.worker._proc import find_child, kill_child, pipe_inode

__all__ = ["BaselineWorker", "NativeWorker", "worker_binary", "worker_source"]

_SOURCE = Path(__file__).with_name("_native_worker.c")
PRIVATE_BYTES = 1 << 30
"""The kernel's private folder is a tmpfs of at most this size (and of its memory limit):
what it writes there never reaches the host's disk, and counts against its cgroup."""


# -- the worker program ----------------------------------------------------------------


def worker_source(op: OpSpec) -> str:
    """The worker's C source for `op`'s signature."""
    ni, no, nd = len(op.inputs), len(op.outputs), len(op.dims)
    proto = ", ".join(["const float*"] * ni + ["float*"] * no + ["int64_t"] * nd)
    args = ", ".join([f"ptr(arena, slot, {i})" for i in range(ni + no)] + [f"d[{i}]" for i in range(nd)])
    head = (f"#define KTL_NB {ni + no}\n#define KTL_ND {nd}\n#define KTL_PROTO {proto}\n"
            f"#define KTL_ARGS {args}\n")
    return head + _SOURCE.read_text()


def worker_binary(op: OpSpec) -> Path:
    """The worker program for `op`, compiled once per process and source hash with the system cc."""
    return build_program(worker_source(op), "ktl-worker", "ktl's native worker",
                         ("-ldl", "-lpthread"), BuildError)


@dataclasses.dataclass(frozen=True)
class WorkerSandbox:
    """Where a kernel's process runs and what it may use: its folder and limits, its
    environment (None: the quiet default), the paths it may read besides the system's, the
    GPU, and a cap on its resident memory (None: none)."""

    workdir: Path
    limits: Limits
    env: dict[str, str] | None = None
    readable: Sequence[Path] = ()
    gpu: bool = False
    rss_cap: int | None = None


class NativeWorker(Channel):
    """One sandboxed kernel process: `start()`, commands, `close()` -> ChildResult."""

    def __init__(self, library: Path, entry: str, op: OpSpec, arena: SharedArena,
                 sandbox: WorkerSandbox) -> None:
        limits, rss_cap = sandbox.limits, sandbox.rss_cap
        if limits.private_bytes is None:  # the private folder: a tmpfs counted in its memory
            limits = dataclasses.replace(limits, private_bytes=min(memory_limit(limits),
                                                                   PRIVATE_BYTES))
        self.op, self.arena, self.limits = op, arena, limits
        self.binary = worker_binary(op)
        cmd_r, cmd_w = os.pipe()
        ans_r, ans_w = os.pipe()
        super().__init__(cmd_w, ans_r)
        self._child_fds = (cmd_r, ans_w)
        self.rss_cap = rss_cap
        self.killed = False
        self.starts = ThreadStarts()
        self._closed = False
        self.result: ChildResult | None = None
        self._pid: int | None = None
        self._inode = pipe_inode(cmd_r)
        self.cgroup, self.no_cgroup_reason = run_cgroup(limits)
        self.clock: CpuClock = CgroupClock(self.cgroup) if self.cgroup else ProcTreeClock()
        argv = [str(self.binary), str(Path(library).resolve()), entry, str(cmd_r), str(ans_w),
                str(arena.fd), str(arena.nbytes)]
        child_env = sandbox.env if sandbox.env is not None else base_env(QUIET_THREADS)
        self._thread = threading.Thread(target=self._run, daemon=True, args=(
            argv, sandbox.workdir, child_env, [*sandbox.readable, self.binary.parent],
            sandbox.gpu))
        self._thread.start()

    def _run(self, argv: list[str], workdir: Path, env: dict[str, str], readable: list[Path],
             gpu: bool) -> None:
        try:
            self.result = run_sandboxed(argv, workdir, self.limits, env, readable=readable, gpu=gpu,
                                        pass_fds=(*self._child_fds, self.arena.fd),
                                        accounting=Accounting(self.cgroup, deny_unaccountable=True))
        except SandboxError:
            self.result = None

    @property
    def accounting(self) -> AccountingKind:
        """How the tree's CPU is read: its cgroup, or /proc with CLONE_VM processes denied."""
        return self.clock.kind

    def _tree_cpu(self, pid: int | None, threads_ns: int) -> int:
        return self.clock.cpu_ns(pid)

    def alive(self) -> bool:
        return self._thread.is_alive()

    def pid(self) -> int | None:
        """The worker's pid: the descendant of this process holding our command pipe."""
        if self._pid is None:
            self._pid = find_child(self._child_fds[0], self._inode,
                                   lambda kid: os.readlink(f"/proc/{kid}/exe") == str(self.binary))
        return self._pid

    def kill(self) -> None:
        self.killed = True
        kill_child(self.pid())

    def misanswered(self, status: int, value: int, expected: int) -> VerifierError:
        self.kill()
        return WorkerMisanswered(status, value, expected)

    def gone(self) -> VerifierError:
        self._thread.join(timeout=self.limits.wall_s + 5)
        loaded = self.result is not None and self.result.last("LOADED") is not None
        return WorkerGone(self.result, loaded)

    def call(self, arenas: Sequence[int], slots: Sequence[int], dims: Sequence[int],
             timeout_s: float, lazy: Sequence[int] | None = None) -> int:
        """Call the kernel once per arena offset, in order; elapsed ns on the parent's clock.

        Threads the calls left running at the answer are judged by `self.starts`."""
        self._look()
        ns = self.roundtrip(encode(OP_CALL, slots, dims, arenas, lazy), timeout_s, len(arenas))
        self.starts.answered(self.last_started, len(self.last_processes))
        return ns

    def pair(self, first: Sequence[int], second: Sequence[int], slots: Sequence[int],
             dims: Sequence[int], timeout_s: float, times_at: int) -> int:
        """Two threads started from a barrier call the kernel, one on each of `first` in turn,
        the other on each of `second`; how many pairs of their calls overlapped in time
        (`verifier.worker._overlap`). The worker writes the calls' times at byte `times_at` of the
        arena, `TIME_WORDS * len(first)` int64 words that the parent zeroes first."""
        if len(first) != len(second) or not first:
            raise VerifierError("both threads need the same, non-zero number of calls")
        words = TIME_WORDS * len(first)
        if times_at < 0 or times_at % 8 or times_at + 8 * words > self.arena.nbytes:
            raise VerifierError("the timing words must lie inside the arena, 8-byte aligned")
        times = self.arena.bytes[times_at:times_at + 8 * words].view(np.int64)
        times[:] = 0
        self._look()
        self.roundtrip(encode(OP_PAIR, slots, dims, [*first, *second, times_at]), timeout_s,
                       2 * len(first) + 1)
        self.starts.answered(frozenset(), len(self.last_processes))  # its threads: see ThreadStarts
        return overlapping_pairs(times.copy(), len(first), self.last_window)

    def protect(self, ranges: Sequence[tuple[int, int, int]], timeout_s: float = 10.0) -> None:
        """Set the protection of page ranges (offset, length, PROT_* of `verifier.worker._arena`)
        of the worker's own mapping of the arena, in order: guard pages and read-only inputs."""
        words = [w for r in ranges for w in r]
        self._look()
        self.roundtrip(encode(OP_PROTECT, [0] * len(self.op.inputs + self.op.outputs),
                              [0] * len(self.op.dims), words), timeout_s, len(words))

    def loaded(self, timeout_s: float = 30.0) -> int:
        """The CPU the child used before its first call (`load_cpu_ns`), answering an empty
        command first if none was answered yet (the worker answers once the library loaded)."""
        if self.load_cpu_ns is None:
            self.nop(timeout_s)
        return self.load_cpu_ns or 0

    def nop(self, timeout_s: float = 10.0) -> int:
        """An empty command's round trip: the parent's overhead per batch."""
        self._look()
        return self.roundtrip(encode(OP_NOP, [0] * len(self.op.inputs + self.op.outputs),
                                     [0] * len(self.op.dims), []), timeout_s, 0)

    def _look(self) -> None:
        pid = self.pid()
        if pid is not None:
            self.starts.look(pid)

    def look(self) -> list[Escape]:
        """Look at the threads now (after a pause), and give the thread findings so far."""
        self._look()
        return self.starts.take()

    def close(self) -> ChildResult | None:
        """Ask the worker to quit (killing it if it does not), then give its ChildResult."""
        if self._closed:
            return self.result
        self._closed = True
        with contextlib.suppress(OSError):
            os.write(self.cmd_w, encode(OP_QUIT, [], [], []))
        stop_child(self._thread, 2.0, self.limits.wall_s, self.kill,
                   (self.cmd_w, self.ans_r, *self._child_fds))
        if self.cgroup is not None:
            self.final_cpu_ns = self.cgroup.usage().cpu_ns
            if self._answer_cpu is not None:
                self.tail_cpu_ns = max(self.final_cpu_ns - self._answer_cpu, 0)
            self.cgroup.remove()
        return self.result

    final_cpu_ns = 0
    tail_cpu_ns = 0
    """The cgroup's CPU after the last answer, to the end of the run: work deferred past
    every timed call (0 without a cgroup)."""
    """The cgroup's CPU over the whole run, read at `close` (0 without a cgroup)."""


class BaselineWorker(Channel):
    """The baseline's own process (`verifier.worker._baseline`): it never loads the kernel."""

    def __init__(self, op: OpSpec, arena: SharedArena, threads: int) -> None:
        self.op = op
        cmd_r, cmd_w = os.pipe()
        ans_r, ans_w = os.pipe()
        super().__init__(cmd_w, ans_r)
        root = str(Path(__file__).resolve().parent.parent)
        env = base_env({"OPENBLAS_NUM_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
                        "MKL_NUM_THREADS": str(threads), "PYTHONPATH": root, **QUIET_THREADS})
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-s", "-B", "-m", "verifier.worker._baseline", op.name, str(cmd_r),
                 str(ans_w), str(arena.fd), str(arena.nbytes), str(threads)],
                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, pass_fds=(cmd_r, ans_w, arena.fd), close_fds=True)
        except OSError as exc:
            raise SandboxError(f"cannot start the baseline process: {exc}") from exc
        finally:
            os.close(cmd_r)
            os.close(ans_w)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def pid(self) -> int | None:
        return self.proc.pid

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()

    def gone(self) -> VerifierError:
        self.kill()
        _, err = self.proc.communicate(timeout=10)
        return SandboxError(f"the baseline process failed: {err.decode('utf-8', 'replace')[-500:]}")

    def call(self, arenas: Sequence[int], slots: Sequence[int], dims: Sequence[int],
             timeout_s: float) -> int:
        return self.roundtrip(encode(OP_CALL, slots, dims, arenas), timeout_s)

    def nop(self, timeout_s: float = 30.0) -> int:
        return self.roundtrip(encode(OP_NOP, [0] * len(self.op.inputs + self.op.outputs),
                                     [0] * len(self.op.dims), []), timeout_s)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self.cmd_w, encode(OP_QUIT, [], [], []))
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        for fd in (self.cmd_w, self.ans_r):
            with contextlib.suppress(OSError):
                os.close(fd)
