"""The command channel both kinds of worker share: commands out over one pipe, answers in
over another, on the parent's clock, with a watchdog (time limit, resident memory, death).

`Channel` holds the plumbing: a write that never blocks (`_send`), exact reads (`_read_exactly`),
the watchdog (`_watch`) and the OS's clocks around a command (`_begin`, `_end`: run-queue waits,
the child's CPU, its threads started and the processes it left). A fixed-size answer
(`roundtrip`: the native worker and the baseline process) or a framed JSON one (the torch
child, `verifier.worker._torch`) is read on top of it. Also the command words (`encode`), the
shared memory both sides map (`SharedArena`) and the errors a child's loss raises.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import select
import struct
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from verifier.errors import SandboxError, VerifierError
from verifier.sandbox import ChildResult
from verifier.worker._escape import running_threads
from verifier.worker._proc import rss_bytes, schedstat, stray_processes

__all__ = ["ANSWER", "MAX_BATCH", "OP_CALL", "OP_NOP", "OP_PAIR", "OP_PROTECT", "OP_QUIT",
           "POLL_S", "QUIET_THREADS", "Channel", "SharedArena", "WorkerGone", "WorkerHung",
           "WorkerMisanswered", "WorkerOverMemory", "encode", "stop_child"]

OP_NOP, OP_CALL, OP_PAIR, OP_PROTECT, OP_QUIT = 0, 1, 2, 3, 9
MAX_BATCH = 4096
"""Calls per command: its words must fit in a pipe buffer (64 KiB) so a hung child cannot block a write."""
ANSWER = struct.Struct("<qq")
POLL_S = 0.02
QUIET_THREADS = {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "4"}
"""Idle OpenMP threads sleep instead of spinning, so a spinning pool is never
mistaken for work escaping a call, and never slows the other side on a small machine."""


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


def encode(op: int, slots: Sequence[int], dims: Sequence[int], arenas: Sequence[int],
           lazy: Sequence[int] | None = None) -> bytes:
    """One command: {op, count, slot offsets, dims, lazy sizes, arena offsets} as int64."""
    if len(arenas) > MAX_BATCH:
        raise VerifierError(f"a batch holds at most {MAX_BATCH} calls")
    lazy_sizes = list(lazy) if lazy is not None else [0] * len(slots)
    words = [op, len(arenas), *slots, *dims, *lazy_sizes, *arenas]
    return np.asarray(words, dtype="<i8").tobytes()


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


class Channel(ABC):
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
        before = self._begin()
        t0 = time.perf_counter_ns()
        deadline = time.monotonic() + timeout_s
        self._send(command, timeout_s, deadline)
        buf = self._read_exactly(ANSWER.size, timeout_s, deadline)
        t1 = time.perf_counter_ns()
        self._end(before)
        status, self.last_value = ANSWER.unpack(buf)
        if status != 0 or (expected is not None and self.last_value != expected):
            raise self.misanswered(status, self.last_value, -1 if expected is None else expected)
        return t1 - t0

    def _begin(self) -> tuple[int, int, int, frozenset[int]]:
        """Before a command: note an answer already waiting (`unasked`), read the clocks and
        open the command's window."""
        ready, _, _ = select.select([self.ans_r], [], [], 0)
        if ready:
            self.unasked = True
        before = self._clocks()
        self.last_window = (time.monotonic_ns(), 0)
        return before

    def _end(self, before: tuple[int, int, int, frozenset[int]]) -> None:
        """After its answer: the window closed, the threads started and processes left, the
        run-queue waits, the CPU during and before the command."""
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

    def _read_exactly(self, n: int, timeout_s: float, deadline: float) -> bytes:
        """Read `n` bytes of answer, watching the child while none arrive."""
        buf = b""
        while len(buf) < n:
            ready, _, _ = select.select([self.ans_r], [], [], POLL_S)
            if ready:
                chunk = os.read(self.ans_r, n - len(buf))
                if not chunk:
                    raise self.gone()
                buf += chunk
                continue
            if not self.alive():
                raise self.gone()
            self._watch(timeout_s, deadline)
        return buf

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
            rss = rss_bytes(pid)
            if rss > self.rss_cap:
                self.kill()
                raise WorkerOverMemory(rss, self.rss_cap)
