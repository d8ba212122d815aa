"""What a child process is doing, read from /proc and its CPU clocks, never from the child.

Its threads and their CPU (`activity`), the processes it started (`live_descendants`,
`stray_processes`, orphans of the sandbox's reaper included), what kept running after a
call returned (`escaped_work`), which descendant holds a pipe of ours (`find_child`), its
resident memory (`rss_bytes`), and killing it (`kill_child`). The bottom of `worker`:
imports nothing of the folder but `_escape`'s types.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from verifier.worker._escape import Escape

__all__ = ["Activity", "activity", "escaped_work", "find_child", "kill_child", "live_descendants",
           "pipe_inode", "ppid", "process_clock_ns", "rss_bytes", "schedstat", "stray_processes"]


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


def ppid(pid: int) -> int | None:
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
    reaper = ppid(pid)
    keeper = ppid(reaper) if reaper is not None else None
    if keeper is not None and ppid(keeper) == os.getpid():
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


def pipe_inode(fd: int) -> str:
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


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
