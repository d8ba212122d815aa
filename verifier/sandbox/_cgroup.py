"""A cgroup (v1) per sandboxed run: complete CPU accounting, a cpuset, a memory and a task limit.

What runs inside a kernel's process tree can start threads, `CLONE_VM` processes and
forks, exit them before an answer, move them between CPUs and write shared memory
that no RSS shows. A cgroup sees all of it from outside: `cpuacct.usage` counts the
CPU of every task that was ever in the group (tasks that exited included), the
cpuset bounds every task's affinity (a task cannot widen it from inside),
`memory.limit_in_bytes` counts the pages the group touched first (anonymous,
shared memory, memfd and tmpfs pages, page cache) and `pids.max` the tasks.

`RunCgroup.create` makes one group per run in each of the four controllers, under a
`ktl` group below the caller's own cgroup in that hierarchy (so the host's limits
on the caller still hold). The child joins it before it runs anything of the
kernel's: the sandbox's first process writes `0` (itself) to every `cgroup.procs`
listed in `procs_paths`, and everything it starts inherits the group.
`remove` kills what is left (repeatedly, through `cgroup.procs`, until it is empty)
and removes the directories, never recursively.

Where no group can be made (not root, no v1 hierarchy, a read-only mount)
`create` raises `CgroupUnavailable` with the reason, and the caller falls back to
what `/proc` shows (see `verifier.worker._native`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from verifier.errors import SandboxError

__all__ = ["CONTROLLERS", "CgroupUnavailable", "RunCgroup", "cgroup_reason", "parse_cpu_list"]

CONTROLLERS = ("cpuacct", "cpuset", "memory", "pids")
ROOT = Path("/sys/fs/cgroup")
PARENT = "ktl"
KILL_ROUNDS = 200
"""Rounds of SIGKILL to every task in the group before removal gives up (a task forking
as fast as it is killed still runs out: pids.max bounds it)."""
MAX_CPU_LIST = 4096


class CgroupUnavailable(SandboxError):
    """No per-run cgroup can be made here; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"no per-run cgroup: {reason}")
        self.reason = reason


def parse_cpu_list(text: str) -> frozenset[int]:
    """`0-3,7` -> {0, 1, 2, 3, 7} (a cpuset list; ValueError if malformed or huge)."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        first, last = int(lo), int(hi or lo)
        if not 0 <= first <= last < MAX_CPU_LIST:
            raise ValueError(f"bad CPU range {part!r}")
        out.update(range(first, last + 1))
    return frozenset(out)


def _cpu_list(cpus: Iterable[int]) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def _own_path(controller: str, proc_cgroup: str) -> str | None:
    """This process's path in `controller`'s v1 hierarchy, from /proc/self/cgroup's text."""
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and controller in parts[1].split(","):
            return parts[2]
    return None


def _read(path: Path) -> str:
    return path.read_text()


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


@dataclass(frozen=True)
class _Where:
    """The run's directory in each controller's hierarchy."""

    dirs: dict[str, Path]

    def file(self, controller: str, name: str) -> Path:
        return self.dirs[controller] / name


def _parents(root: Path) -> dict[str, Path]:
    """The `ktl` group under this process's own cgroup in each controller (made if absent)."""
    try:
        own = _read(Path("/proc/self/cgroup"))
    except OSError as exc:
        raise CgroupUnavailable(f"cannot read /proc/self/cgroup: {exc}") from exc
    out: dict[str, Path] = {}
    for controller in CONTROLLERS:
        rel = _own_path(controller, own)
        base = root / controller
        if rel is None or not (base / "cgroup.procs").is_file():
            raise CgroupUnavailable(f"the v1 {controller} controller is not mounted at {base}")
        here = base / rel.lstrip("/")
        parent = here / PARENT
        try:
            parent.mkdir(exist_ok=True)
        except OSError as exc:
            raise CgroupUnavailable(f"cannot make {parent}: {exc.strerror}") from exc
        if controller == "cpuset":
            _inherit_cpuset(here, parent)
        out[controller] = parent
    return out


def _inherit_cpuset(above: Path, group: Path) -> None:
    """A new cpuset group starts empty: give it its parent's CPUs and memory nodes."""
    for name in ("cpuset.cpus", "cpuset.mems"):
        if not _read(group / name).strip():
            _write(group / name, _read(above / name).strip())


@dataclass(frozen=True)
class Usage:
    """What the group used, read from outside."""

    cpu_ns: int
    memory_peak: int
    memory_limit_hits: int
    oom_kills: int


class RunCgroup:
    """One run's group in cpuacct, cpuset, memory and pids (see the module's text)."""

    def __init__(self, where: _Where, cpus: frozenset[int], memory_bytes: int,
                 tasks: int) -> None:
        self._where = where
        self.cpus, self.memory_bytes, self.tasks = cpus, memory_bytes, tasks
        self._removed = False

    @classmethod
    def create(cls, cpus: Iterable[int], memory_bytes: int, tasks: int,
               root: Path = ROOT) -> RunCgroup:
        """Make the run's group: CPUs `cpus` only, `memory_bytes` of memory (swap none),
        at most `tasks` tasks. Raises CgroupUnavailable when that cannot be done here."""
        wanted = frozenset(int(c) for c in cpus)
        if not wanted or memory_bytes < 1 << 20 or tasks < 1:
            raise SandboxError("a run's cgroup needs CPUs, at least 1 MiB of memory and a task")
        if os.geteuid() != 0:
            raise CgroupUnavailable("ktl is not running as root")
        parents = _parents(root)
        name = f"run-{os.getpid()}-{secrets.token_hex(6)}"
        made: dict[str, Path] = {}
        group = cls(_Where(made), wanted, memory_bytes, tasks)
        try:
            for controller, parent in parents.items():
                path = parent / name
                path.mkdir()
                made[controller] = path
            group._configure(parents["cpuset"])
        except (OSError, ValueError) as exc:
            group.remove()
            detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise CgroupUnavailable(f"cannot set up the run's cgroup {name}: {detail}") from exc
        return group

    def _configure(self, cpuset_parent: Path) -> None:
        allowed = parse_cpu_list(_read(cpuset_parent / "cpuset.cpus"))
        if not self.cpus <= allowed:
            raise ValueError(f"CPUs {_cpu_list(self.cpus)} are not all in the parent's cpuset "
                             f"{_cpu_list(allowed)}")
        w = self._where
        _write(w.file("cpuset", "cpuset.cpus"), _cpu_list(self.cpus))
        _write(w.file("cpuset", "cpuset.mems"), _read(cpuset_parent / "cpuset.mems").strip())
        _write(w.file("memory", "memory.limit_in_bytes"), str(self.memory_bytes))
        swap = w.file("memory", "memory.memsw.limit_in_bytes")
        if swap.exists():  # memory + swap: no swapping out of the limit
            _write(swap, str(self.memory_bytes))
        with contextlib.suppress(OSError):
            _write(w.file("memory", "memory.swappiness"), "0")
        _write(w.file("pids", "pids.max"), str(self.tasks))

    @property
    def name(self) -> str:
        return next(iter(self._where.dirs.values())).name if self._where.dirs else ""

    @property
    def procs_paths(self) -> tuple[str, ...]:
        """The `cgroup.procs` files the child writes `0` to, to join every controller."""
        return tuple(str(self._where.file(c, "cgroup.procs")) for c in CONTROLLERS)

    def cpu_ns(self) -> int:
        """CPU time of every task that was ever in the group, in ns (cpuacct.usage)."""
        return int(_read(self._where.file("cpuacct", "cpuacct.usage")))

    def percpu_ns(self) -> tuple[int, ...]:
        """The same per CPU (cpuacct.usage_percpu): where the group's time was spent."""
        return tuple(int(x) for x in _read(self._where.file("cpuacct",
                                                             "cpuacct.usage_percpu")).split())

    def usage(self) -> Usage:
        """CPU, peak memory and how often the memory limit was hit (0s where unreadable)."""
        def number(controller: str, name: str) -> int:
            with contextlib.suppress(OSError, ValueError):
                return int(_read(self._where.file(controller, name)))
            return 0

        oom = 0
        with contextlib.suppress(OSError, ValueError):
            for line in _read(self._where.file("memory", "memory.oom_control")).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    oom = int(value)
        return Usage(number("cpuacct", "cpuacct.usage"),
                     number("memory", "memory.max_usage_in_bytes"),
                     number("memory", "memory.failcnt"), oom)

    def pids(self) -> list[int]:
        """Every process in the group now (any controller: a task may have left one)."""
        found: set[int] = set()
        for controller in self._where.dirs:
            with contextlib.suppress(OSError, ValueError):
                found.update(int(x) for x in _read(self._where.file(controller,
                                                                    "cgroup.procs")).split())
        return sorted(found)

    def kill(self) -> bool:
        """SIGKILL every task until the group is empty; True if it emptied."""
        for _ in range(KILL_ROUNDS):
            left = self.pids()
            if not left:
                return True
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)
        return not self.pids()

    def remove(self) -> None:
        """Kill what is left and remove the group's directories (idempotent, never raises)."""
        if self._removed:
            return
        self._removed = True
        self.kill()
        for controller, path in list(self._where.dirs.items()):
            for _ in range(100):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        break
                    self.kill()
                    time.sleep(0.01)
            self._where.dirs.pop(controller, None)


def cgroup_reason(root: Path = ROOT) -> str | None:
    """None when per-run cgroups can be made here, else why not (makes and removes a probe)."""
    try:
        RunCgroup.create(os.sched_getaffinity(0), 64 << 20, 16, root).remove()
    except CgroupUnavailable as exc:
        return exc.reason
    return None
