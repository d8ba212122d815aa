"""A kernel's cost read from outside: the CPU of its whole process tree, and how it was read.

A kernel's cost is everything its process tree consumes: every thread, every process it
starts (`CLONE_VM` ones included), tasks that exit before the answer, before, during and
between calls. Two ways to read it, both from the OS and never from the process:

- `CgroupClock`: the run's cgroup (`verifier.sandbox.RunCgroup`) counts the CPU of every
  task that was ever in it, in ns. Complete.
- `ProcTreeClock`, where no cgroup can be made: per process of the tree (the worker, what it
  started, what was orphaned to the sandbox's reaper) the larger of its live threads' ns
  (`/proc/<pid>/task/*/schedstat`) and its whole-process ticks (`stat` utime + stime, which
  keep the time of threads that exited), plus the ticks of reaped children (`cutime` +
  `cstime`, the reaper's too). Complete only because seccomp denies what it cannot see
  (`clone` with CLONE_VM but not CLONE_THREAD); it never goes backwards (a task read
  between its exit and its parent's reaping would make it dip).
"""

from __future__ import annotations

import contextlib
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Literal

from verifier.sandbox import RunCgroup
from verifier.worker._proc import ppid, stray_processes

__all__ = ["AccountingKind", "CgroupClock", "CpuClock", "ProcTreeClock", "busy_ns", "charged_ns"]

AccountingKind = Literal["cgroup", "process-tree"]
_TICK_NS = 10**9 // os.sysconf("SC_CLK_TCK")


def busy_ns(elapsed_ns: float, waited_ns: float, cpu_ns: float, threads: int = 1) -> float:
    """A round trip's time without the scheduling latency the OS accounted to it. Pure.

    Under load most of a round trip can be waiting for a CPU after a wake-up: `waited_ns`,
    the run-queue waits of the parent and of the child's main thread, is taken out. The
    result is never less than the child's CPU time over its allowed `threads`, so work
    moved to other threads (whose waits are not subtracted, and which make the main thread
    wait as long as they run) cannot hide.
    """
    return float(max(elapsed_ns - waited_ns, cpu_ns / max(threads, 1)))


class CpuClock(ABC):
    """The CPU ns the kernel's whole tree used so far (monotone)."""

    kind: AccountingKind

    @abstractmethod
    def cpu_ns(self, pid: int | None) -> int:
        """`pid`: the worker's (None before it is known)."""


class CgroupClock(CpuClock):
    kind: AccountingKind = "cgroup"

    def __init__(self, group: RunCgroup) -> None:
        self.group = group

    def cpu_ns(self, pid: int | None) -> int:
        try:
            return self.group.cpu_ns()
        except (OSError, ValueError):
            return 0


def _stat_fields(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _process_ns(pid: int) -> int:
    """One process: max(live threads' exact ns, whole-process ticks) + reaped children's ticks."""
    fields = _stat_fields(pid)
    if fields is None or len(fields) < 15:
        return 0
    try:
        whole = (int(fields[11]) + int(fields[12])) * _TICK_NS
        children = (int(fields[13]) + int(fields[14])) * _TICK_NS
    except ValueError:
        return 0
    live = 0
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError), \
                    open(f"/proc/{pid}/task/{task}/schedstat") as fh:
                live += int(fh.read().split()[0])
    return max(live, whole) + children


class ProcTreeClock(CpuClock):
    kind: AccountingKind = "process-tree"

    def __init__(self) -> None:
        self._high = 0

    def cpu_ns(self, pid: int | None) -> int:
        if pid is None:
            return self._high
        total = _process_ns(pid) + sum(_process_ns(p) for p in stray_processes(pid))
        reaper = ppid(pid)
        fields = _stat_fields(reaper) if reaper is not None and reaper != os.getpid() else None
        if fields is not None and len(fields) > 14:
            with contextlib.suppress(ValueError):
                total += (int(fields[13]) + int(fields[14])) * _TICK_NS  # orphans it reaped
        self._high = max(self._high, total)
        return self._high


def charged_ns(busy_ns: float, before_ns: int, threads: int) -> float:
    """A batch's cost: its busy time plus the tree's CPU since the previous answer (work
    started before the clock, e.g. on inputs seen early), over the allowed threads."""
    return busy_ns + max(before_ns, 0) / max(threads, 1)
