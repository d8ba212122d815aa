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
import ctypes
import dataclasses
import fcntl
import mmap
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from verifier.errors import BuildError, SandboxError, VerifierError
from verifier.ops import OpSpec
from verifier.sandbox import (
    Accounting,
    CgroupUnavailable,
    ChildResult,
    Limits,
    RunCgroup,
    base_env,
    build_program,
    memory_limit,
    run_sandboxed,
)
from verifier.worker._account import AccountingKind, CgroupClock, CpuClock, ProcTreeClock
from verifier.worker._escape import (
    UNASKED_ANSWER,
    Escape,
    EscapeKind,
    ThreadStarts,
    running_threads,
)
from verifier.worker._overlap import TIME_WORDS, overlapping_pairs

__all__ = [
    "OP_CALL",
    "OP_NOP",
    "OP_PAIR",
    "OP_PROTECT",
    "QUIET_THREADS",
    "UNASKED_ANSWER",
    "Activity",
    "BaselineWorker",
    "Escape",
    "EscapeKind",
    "NativeWorker",
    "SharedArena",
    "WorkerGone",
    "WorkerHung",
    "WorkerMisanswered",
    "activity",
    "encode",
    "escaped_work",
    "find_child",
    "kill_child",
    "live_descendants",
    "schedstat",
    "stop_child",
    "stray_processes",
    "worker_binary",
]

OP_NOP, OP_CALL, OP_PAIR, OP_PROTECT, OP_QUIT = 0, 1, 2, 3, 9
MAX_BATCH = 4096
"""Calls per command: its words must fit in a pipe buffer (64 KiB) so a hung child cannot block a write."""
ANSWER = struct.Struct("<qq")
POLL_S = 0.02
QUIET_THREADS = {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "4"}
"""Idle OpenMP threads sleep instead of spinning, so a spinning pool is never
mistaken for work escaping a call, and never slows the other side on a small machine."""
_SOURCE = Path(__file__).with_name("_native_worker.c")
PRIVATE_BYTES = 1 << 30
"""The kernel's private folder is a tmpfs of at most this size (and of its memory limit):
what it writes there never reaches the host's disk, and counts against its cgroup."""
class WorkerGone(VerifierError):
    """The child ended (crash, limit, exit) before answering; `result` says how."""

    def __init__(self, result: ChildResult | None, loaded: bool) -> None:
        super().__init__("the kernel's process ended before answering")
        self.result = result
        self.loaded = loaded


class WorkerHung(VerifierError):
    """The child did not answer within the per-command limit and was killed."""

    def __init__(self, limit_s: float) -> None:
        super().__init__(f"hang: no answer within {limit_s:g} s; killed")
        self.limit_s = limit_s


class WorkerMisanswered(VerifierError):
    """The kernel's process answered something the worker never sends: a status other than
    success, or a count other than the command's. Whatever arrives from that process is the
    kernel's doing (it can write the answer pipe), so this is a fault of the kernel, and the
    process is killed: its answers no longer line up with the commands."""

    def __init__(self, status: int, value: int, expected: int) -> None:
        super().__init__(f"malformed answer from the kernel's process: status {status}, count "
                         f"{value} (the worker answers status 0 and the command's count "
                         f"{expected}); something in the process writes the answer pipe")
        self.status, self.value, self.expected = status, value, expected


class WorkerOverMemory(VerifierError):
    """The child's resident memory passed the parent's watchdog cap and it was killed."""

    def __init__(self, rss: int, cap: int) -> None:
        super().__init__(f"resident memory {rss >> 20} MiB passed the cap of {cap >> 20} MiB")
        self.rss, self.cap = rss, cap


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


def encode(op: int, slots: Sequence[int], dims: Sequence[int], arenas: Sequence[int],
           lazy: Sequence[int] | None = None) -> bytes:
    """One command: {op, count, slot offsets, dims, lazy sizes, arena offsets} as int64."""
    if len(arenas) > MAX_BATCH:
        raise VerifierError(f"a batch holds at most {MAX_BATCH} calls")
    lazy_sizes = list(lazy) if lazy is not None else [0] * len(slots)
    words = [op, len(arenas), *slots, *dims, *lazy_sizes, *arenas]
    return np.asarray(words, dtype="<i8").tobytes()


# -- shared memory -------------------------------------------------------------------------


class SharedArena:
    """A sealed memfd (it cannot shrink or grow: the child cannot make the parent fault) mapped here."""

    def __init__(self, nbytes: int) -> None:
        if nbytes < 0:
            raise VerifierError("arena size must not be negative")
        self.nbytes = max(int(nbytes), 4096)
        self.fd = os.memfd_create("ktl-arena", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(self.fd, self.nbytes)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS,
                        fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
            self._map = mmap.mmap(self.fd, self.nbytes, mmap.MAP_SHARED,
                                  mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError:
            os.close(self.fd)
            raise
        self.bytes: NDArray[np.uint8] = np.frombuffer(self._map, dtype=np.uint8)

    def close(self) -> None:
        self.bytes = np.zeros(0, dtype=np.uint8)
        with contextlib.suppress(BufferError):
            self._map.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


# -- what the child is doing -----------------------------------------------------------------


@dataclass(frozen=True)
class Activity:
    """Threads (tid -> CPU ns) and live child processes of a process at one moment, and the
    process's exact CPU clock (None where it cannot be read). A thread's
    `/proc/.../schedstat` of a thread running on another CPU lags by up to a scheduler tick
    (4 ms at HZ=250); the process clock is brought up to date by the kernel when read."""

    threads: dict[int, int]
    children: tuple[int, ...]
    cpu_ns: int | None = None


def process_clock_ns(pid: int) -> int | None:
    """The exact CPU ns of process `pid` (all its threads), from its POSIX CPU clock; None
    when the kernel refuses it (another PID namespace, a process gone)."""
    clock = ctypes.c_int32(((~pid) << 3 | 2) & 0xFFFFFFFF).value  # CPUCLOCK_SCHED of pid
    try:
        return time.clock_gettime_ns(clock)
    except OSError:
        return None


def schedstat(path: str) -> tuple[int, int]:
    """(ns on CPU, ns waiting on a run queue) of one thread, 0s if unreadable."""
    try:
        with open(path) as fh:
            fields = fh.read().split()
        return int(fields[0]), int(fields[1])
    except (OSError, ValueError, IndexError):
        return 0, 0


def _thread_cpu_ns(task: Path) -> int:
    try:
        return int((task / "schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    try:
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * (10**9 // os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0


def _live(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError):
                kids += [int(x) for x in (task / "children").read_text().split()]
    return kids


def activity(pid: int) -> Activity:
    """The threads of `pid` with their CPU time, and its live descendants."""
    threads: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            if task.name.isdigit():
                threads[int(task.name)] = _thread_cpu_ns(task)
    return Activity(threads, live_descendants(pid), process_clock_ns(pid))


def live_descendants(pid: int) -> tuple[int, ...]:
    """The live (not zombie) processes below `pid`, up to 4096 of them."""
    seen: list[int] = []
    todo = _children(pid)
    while todo and len(seen) < 4096:
        kid = todo.pop()
        if kid not in seen:
            seen.append(kid)
            todo += _children(kid)
    return tuple(k for k in seen if _live(k))


def _ppid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def stray_processes(pid: int) -> tuple[int, ...]:
    """The live processes the kernel's process `pid` started: its descendants, and those
    orphaned to the sandbox's reaper (its parent, when that is a sandbox of this process:
    reaper, keeper, this process). A `setsid` double fork leaves the second child with the
    reaper, not below `pid`."""
    found = list(live_descendants(pid))
    reaper = _ppid(pid)
    keeper = _ppid(reaper) if reaper is not None else None
    if keeper is not None and _ppid(keeper) == os.getpid():
        found += [k for k in live_descendants(reaper or 0) if k != pid and k not in found]
    return tuple(found)


def escaped_work(pid: int, before: Activity, after: Activity, pause_ns: int) -> list[Escape]:
    """What kept running after a call returned: busy threads and live processes it started.

    An honest OpenMP kernel leaves an idle thread pool behind; idle threads use
    (almost) no CPU while the worker waits for its next command (its main thread
    included: it is blocked reading the pipe), so a thread counts as busy only
    when it used over a fifth of the pause (at least 2 ms). Where the process's exact clock
    was read on both sides and grew by less than that, no thread can have: a thread's larger
    growth is CPU it used before the pause, accounted late.
    """
    found: list[Escape] = []
    floor = max(pause_ns // 5, 2_000_000)
    busy = [(tid, cpu - before.threads.get(tid, 0)) for tid, cpu in after.threads.items()
            if cpu - before.threads.get(tid, 0) > floor]
    if before.cpu_ns is not None and after.cpu_ns is not None \
            and after.cpu_ns - before.cpu_ns <= floor:
        busy = []
    if busy:
        found.append(Escape(
            "threads", len(busy), f"{len(busy)} thread(s) still running after the call returned "
            f"(one used {busy[0][1] / 1e6:.0f} ms of CPU in a {pause_ns / 1e6:.0f} ms pause)"))
    if after.children:
        found.append(Escape(
            "processes", len(after.children), f"{len(after.children)} process(es) started by the "
            "kernel still alive after the call returned"))
    return found


# -- the session -------------------------------------------------------------------------------


def _pipe_inode(fd: int) -> str:
    return f"pipe:[{os.fstat(fd).st_ino}]"


def find_child(fd: int, inode: str, is_it: Callable[[int], bool]) -> int | None:
    """The descendant of this process whose `fd` is our pipe `inode` and that `is_it` accepts
    (the sandbox's launcher holds the pipe too); None while there is none."""
    todo = _children(os.getpid())
    while todo:
        kid = todo.pop()
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{kid}/fd/{fd}") == inode and is_it(kid):
                return kid
        todo += _children(kid)
    return None


def kill_child(pid: int | None) -> None:
    """SIGKILL the process group `pid` leads (where it is not ours), else `pid` alone."""
    if pid is None:
        return
    with contextlib.suppress(OSError):
        group = os.getpgid(pid)
        if group != os.getpgrp():
            os.killpg(group, signal.SIGKILL)
            return
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def stop_child(thread: threading.Thread, grace_s: float, wall_s: float,
               kill: Callable[[], None], fds: Sequence[int]) -> None:
    """After a quit was asked: wait `grace_s` for the child's runner thread, else kill the
    child and wait out its wall limit; then close our ends of its pipes."""
    thread.join(timeout=grace_s)
    if thread.is_alive():
        kill()
        thread.join(timeout=wall_s + 5)
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


class _Channel(ABC):
    """Commands out, fixed-size answers in, on the parent's clock, with a watchdog.

    The worker and the baseline process each say how to tell they are alive, their pid,
    how to kill them and what error their loss is."""

    def __init__(self, cmd_w: int, ans_r: int) -> None:
        self.cmd_w, self.ans_r = cmd_w, ans_r

    @abstractmethod
    def alive(self) -> bool: ...

    @abstractmethod
    def pid(self) -> int | None: ...

    @abstractmethod
    def kill(self) -> None: ...

    @abstractmethod
    def gone(self) -> VerifierError: ...

    rss_cap: int | None = None
    last_waited_ns = 0
    """Run-queue wait of the parent and of the child's main thread during the last round trip:
    time the machine was busy with others (scheduling latency), not time the call took."""
    last_cpu_ns = 0
    """CPU time the child used during the last round trip (the native worker: its whole tree)."""
    last_before_ns = 0
    """CPU time the child used between the previous answer and the last command (0 before
    the first answer): work done outside the parent's clock, e.g. on inputs seen early."""
    load_cpu_ns: int | None = None
    """CPU the child used from its start to its first answer: starting up and loading the
    kernel's library (its constructors and whatever they started); None before that answer."""
    outside_total_ns = 0
    """CPU the child used between an answer and the next command, summed over every command
    since the first answer: work outside every call, timed or not."""
    _answer_cpu: int | None = None
    last_value = 0
    """The last answer's value: a count from the native worker (never a time: the kernel's
    process is not believed), the baseline's own time of its calls in ns."""
    last_started: frozenset[int] = frozenset()
    """Threads of the child absent before the last command and running right at its answer,
    as listed in /proc (looked at first thing after the answer)."""
    last_processes: tuple[int, ...] = ()
    """Live processes the child started (`stray_processes`), right at the last answer."""
    last_window: tuple[int, int] = (0, 0)
    """CLOCK_MONOTONIC ns just before the last command was sent and just after its answer."""
    unasked = False
    """An answer was waiting before a command was sent: something in the child's
    process writes answers itself (to stop the parent's clock early)."""

    def misanswered(self, status: int, value: int, expected: int) -> VerifierError:
        """The error for an answer other than (0, `expected`)."""
        return SandboxError(f"the worker could not run the command (status {status}, count "
                            f"{value}, expected {expected})")

    def roundtrip(self, command: bytes, timeout_s: float, expected: int | None = None) -> int:
        """Send `command`, wait for its answer; return the elapsed ns on the parent's clock.

        An answer whose status is not 0 (or whose count is not `expected`, where given) is
        `self.misanswered`."""
        ready, _, _ = select.select([self.ans_r], [], [], 0)
        if ready:
            self.unasked = True
        before = self._clocks()
        t0 = time.perf_counter_ns()
        self.last_window = (time.monotonic_ns(), 0)
        deadline = time.monotonic() + timeout_s
        self._send(command, timeout_s, deadline)
        buf = b""
        while len(buf) < ANSWER.size:
            ready, _, _ = select.select([self.ans_r], [], [], POLL_S)
            if ready:
                chunk = os.read(self.ans_r, ANSWER.size - len(buf))
                if not chunk:
                    raise self.gone()
                buf += chunk
                continue
            if not self.alive():
                raise self.gone()
            self._watch(timeout_s, deadline)
        t1 = time.perf_counter_ns()
        after = self._clocks()
        self.last_window = (self.last_window[0], time.monotonic_ns())
        pid = self.pid()
        # a process not yet found before the command has no threads to compare with
        self.last_started = (frozenset() if pid is None or not before[3] else
                             running_threads(pid, after[3] - before[3] - {pid}))
        self.last_processes = () if pid is None else stray_processes(pid)
        self.last_waited_ns = (after[0] - before[0]) + (after[1] - before[1])
        self.last_cpu_ns = max(after[2] - before[2], 0)
        self.last_before_ns = 0 if self._answer_cpu is None else max(before[2] - self._answer_cpu, 0)
        self.outside_total_ns += self.last_before_ns
        if self._answer_cpu is None:
            self.load_cpu_ns = after[2]
        self._answer_cpu = after[2]
        status, self.last_value = ANSWER.unpack(buf)
        if status != 0 or (expected is not None and self.last_value != expected):
            raise self.misanswered(status, self.last_value, -1 if expected is None else expected)
        return t1 - t0

    def _clocks(self) -> tuple[int, int, int, frozenset[int]]:
        """(this thread's run-queue wait, the child's main thread's run-queue wait, the child's
        CPU time over all its threads), in ns, as the OS accounts them (the child cannot lower
        them), and the child's thread ids."""
        own = schedstat(f"/proc/self/task/{threading.get_native_id()}/schedstat")[1]
        pid = self.pid()
        if pid is None:
            return own, 0, self._tree_cpu(None, 0), frozenset()
        main_wait = cpu = 0
        tids: set[int] = set()
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                on_cpu, waited = schedstat(f"/proc/{pid}/task/{task}/schedstat")
                cpu += on_cpu
                if task.isdigit():
                    tids.add(int(task))
                if task == str(pid):
                    main_wait = waited
        return own, main_wait, self._tree_cpu(pid, cpu), frozenset(tids)

    def _tree_cpu(self, pid: int | None, threads_ns: int) -> int:
        """The child's CPU so far; here its threads' (`threads_ns`), the worker: its tree's."""
        return threads_ns

    def _send(self, command: bytes, timeout_s: float, deadline: float) -> None:
        """Write without ever blocking: a child that stops reading cannot hang the parent."""
        os.set_blocking(self.cmd_w, False)
        view = memoryview(command)
        while view:
            try:
                view = view[os.write(self.cmd_w, view):]
                continue
            except BlockingIOError:
                pass
            except OSError:
                raise self.gone() from None
            select.select([], [self.cmd_w], [], POLL_S)
            if not self.alive():
                raise self.gone()
            self._watch(timeout_s, deadline)

    def _watch(self, timeout_s: float, deadline: float) -> None:
        if time.monotonic() > deadline:
            self.kill()
            raise WorkerHung(timeout_s)
        pid = self.pid()
        if self.rss_cap is not None and pid is not None:
            rss = _rss_bytes(pid)
            if rss > self.rss_cap:
                self.kill()
                raise WorkerOverMemory(rss, self.rss_cap)


class NativeWorker(_Channel):
    """One sandboxed kernel process: `start()`, commands, `close()` -> ChildResult."""

    def __init__(self, library: Path, entry: str, op: OpSpec, arena: SharedArena, workdir: Path,
                 limits: Limits, env: dict[str, str] | None = None, readable: Sequence[Path] = (),
                 gpu: bool = False, rss_cap: int | None = None) -> None:
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
        self._inode = _pipe_inode(cmd_r)
        self.cgroup, self.no_cgroup_reason = _run_cgroup(limits)
        self.clock: CpuClock = CgroupClock(self.cgroup) if self.cgroup else ProcTreeClock()
        argv = [str(self.binary), str(Path(library).resolve()), entry, str(cmd_r), str(ans_w),
                str(arena.fd), str(arena.nbytes)]
        child_env = env if env is not None else base_env(QUIET_THREADS)
        self._thread = threading.Thread(target=self._run, daemon=True, args=(
            argv, workdir, child_env, [*readable, self.binary.parent], gpu))
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


def _run_cgroup(limits: Limits) -> tuple[RunCgroup | None, str | None]:
    """The run's cgroup on this process's CPUs (the pinned one in a pinned run), or why none."""
    try:
        cpus = os.sched_getaffinity(0)
        return RunCgroup.create(cpus, memory_limit(limits), limits.processes + 8), None
    except (CgroupUnavailable, OSError) as exc:
        return None, getattr(exc, "reason", str(exc))


class BaselineWorker(_Channel):
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
                 str(ans_w), str(arena.fd), str(arena.nbytes)],
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
