"""The per-run cgroup: CPU of every task, an unwidenable cpuset, memory with shared memory
and tmpfs counted, a task limit, removal that survives lingering tasks; and the tmpfs
private folder. Real groups where this machine allows them (root, cgroup v1), else skipped;
nothing here asserts on a timing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from verifier.sandbox import (
    Accounting,
    CgroupUnavailable,
    Limits,
    RunCgroup,
    cgroup_reason,
    run_sandboxed,
)
from verifier.sandbox._cgroup import parse_cpu_list

REASON = cgroup_reason()
needs_cgroup = pytest.mark.skipif(REASON is not None, reason=f"no per-run cgroup: {REASON}")
MiB = 1 << 20


@given(st.frozensets(st.integers(0, 300), min_size=1, max_size=40))
def test_cpu_lists_round_trip(cpus: frozenset[int]) -> None:
    ordered = sorted(cpus)
    ranges, start = [], ordered[0]
    for a, b in zip(ordered, [*ordered[1:], None], strict=True):
        if b != a + 1:
            ranges.append(f"{start}-{a}" if a != start else str(a))
            start = b if b is not None else start
    assert parse_cpu_list(",".join(ranges) + "\n") == cpus


@pytest.mark.parametrize("bad", ["x", "3-1", "-1", "0-99999"])
def test_bad_cpu_lists_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_cpu_list(bad)


def test_no_hierarchy_is_a_typed_reason(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        with pytest.raises(CgroupUnavailable, match="not running as root"):
            RunCgroup.create({0}, 64 * MiB, 8, root=tmp_path)
        return
    with pytest.raises(CgroupUnavailable, match="controller is not mounted") as info:
        RunCgroup.create({0}, 64 * MiB, 8, root=tmp_path)
    assert "not mounted" in info.value.reason
    assert cgroup_reason(tmp_path) == info.value.reason


def _group(tasks: int = 64, memory: int = 256 * MiB) -> RunCgroup:
    cpu = max(os.sched_getaffinity(0))
    return RunCgroup.create({cpu}, memory, tasks)


def _run_py(code: str, work: Path, group: RunCgroup, **limits: int) -> list[str]:
    res = run_sandboxed([sys.executable, "-I", "-c", code], work,
                        Limits(wall_s=60.0, address_space=None, **limits),
                        accounting=Accounting(group))
    assert res.ok, res.stderr
    assert res.layers.cgroup
    return [line for _, line in res.lines]


BURN = """
import os, time
def burn():
    x = 0
    for i in range(2_000_000):
        x += i
pid = os.fork()
if pid == 0:           # a second process, reaped before the end: its CPU must still count
    burn()
    os._exit(0)
os.waitpid(pid, 0)
burn()
print(time.process_time(), os.times().children_user + os.times().children_system)
"""


@needs_cgroup
def test_the_group_counts_the_cpu_of_every_task(tmp_path: Path) -> None:
    group = _group()
    try:
        before = group.cpu_ns()
        own, children = map(float, _run_py(BURN, tmp_path, group)[-1].split())
        used = group.cpu_ns() - before
        # the process's own account and its reaped child's: the group saw at least both
        assert used >= 0.95 * (own + children) * 1e9
        assert sum(group.percpu_ns()) >= used  # all of it on the pinned CPU's counter too
        assert group.percpu_ns()[max(group.cpus)] >= 0.95 * used
    finally:
        group.remove()


AFFINITY = """
import os
print(sorted(os.sched_getaffinity(0)))
try:
    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
except OSError as exc:
    print("refused", exc.errno)
print(sorted(os.sched_getaffinity(0)))
"""


@needs_cgroup
def test_the_cpuset_cannot_be_widened_from_inside(tmp_path: Path) -> None:
    group = _group()
    try:
        lines = _run_py(AFFINITY, tmp_path, group)
    finally:
        group.remove()
    pinned = str(sorted(group.cpus))
    assert lines[0] == pinned and lines[-1] == pinned


FORKS = """
import os, time
made = 0
for _ in range(60):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        made += 1
    except OSError:
        break
print(made)
"""


@needs_cgroup
def test_the_task_limit_holds(tmp_path: Path) -> None:
    group = _group(tasks=12)
    try:
        made = int(_run_py(FORKS, tmp_path, group, processes=500)[-1])
    finally:
        group.remove()
    assert made <= 12 - 3  # keeper, reaper and the target are tasks of the group too


MEMFD = """
import mmap, os
try:
    os.memfd_create("flood")
    print("memfd allowed", flush=True)
except OSError as exc:
    print("memfd refused", exc.errno, flush=True)
shared = mmap.mmap(-1, 256 << 20)  # shared anonymous memory: shmem, as a memfd's pages are
chunk = b"x" * (1 << 20)
for i in range(256):
    shared.write(chunk)
print("wrote 256 MiB")
"""


@needs_cgroup
def test_shared_memory_counts_against_the_limit(tmp_path: Path) -> None:
    group = _group(memory=96 * MiB)
    try:
        res = run_sandboxed([sys.executable, "-I", "-c", MEMFD], tmp_path,
                            Limits(wall_s=60.0, address_space=None), accounting=Accounting(group))
        usage = group.usage()
    finally:
        group.remove()
    assert not res.ok and res.memory_limited and res.memory_limit == 96 * MiB
    assert "memory limit" in res.describe(Limits())
    assert usage.oom_kills >= 1 and usage.memory_peak <= 96 * MiB
    lines = [line for _, line in res.lines]
    assert "wrote 256 MiB" not in lines
    assert "memfd refused 1" in lines  # round 3: memfd_create is EPERM outside GPU runs


FILL = """
import os
chunk = b"x" * (1 << 20)
try:
    with open("big.bin", "wb") as fh:
        for i in range(64):
            fh.write(chunk)
            fh.flush()
except OSError as exc:
    print("stopped", exc.errno)
print(sorted(os.listdir(".")))
"""


def test_the_private_folder_is_a_size_limited_tmpfs(tmp_path: Path) -> None:
    res = run_sandboxed([sys.executable, "-I", "-c", FILL], tmp_path,
                        Limits(wall_s=60.0, address_space=None, private_bytes=8 * MiB))
    if not res.layers.private_tmpfs_mib:
        pytest.skip("no mount namespace for the sandbox here")
    lines = [line for _, line in res.lines]
    assert res.layers.private_tmpfs_mib == 8
    assert lines[0] == "stopped 28"  # ENOSPC at 8 MiB
    assert not (tmp_path / "big.bin").exists()  # nothing reached the host's folder
    assert ".stderr" not in lines[-1]  # the child sees its own tmpfs, not the host's folder


@needs_cgroup
def test_removal_kills_what_lingers_and_leaves_no_directory() -> None:
    group = _group()
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        for path in group.procs_paths:
            Path(path).write_text(str(sleeper.pid))
        assert group.pids() == [sleeper.pid]
        dirs = [Path(p).parent for p in group.procs_paths]
        group.remove()
        assert sleeper.wait(timeout=10) == -9
        assert not any(d.exists() for d in dirs)
        group.remove()  # idempotent
    finally:
        sleeper.kill()
        sleeper.wait()


BIG_PARENT = """
import json, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from verifier.sandbox import Limits, run_sandboxed
ballast = bytearray(700 << 20)          # a parent of 700 MiB resident, like a test process
for i in range(0, len(ballast), 4096):  # that imported torch
    ballast[i] = 1
res = run_sandboxed(["/bin/sh", "-c", "kill -SEGV $$"], Path({work!r}),
                    Limits(wall_s=30.0, address_space=1 << 30))
print(json.dumps({{"rss": res.maxrss_bytes, "why": res.describe(Limits(address_space=1 << 30))}}))
"""


@needs_cgroup
def test_a_crash_under_a_big_parent_is_a_crash_not_an_unbounded_allocation(tmp_path: Path) -> None:
    """wait4's peak RSS carries the high-water mark of the process the child was forked
    from; with a run's cgroup the sandbox reports its own peak, so a small kernel that
    crashes is not blamed for the parent's 700 MiB."""
    import json

    root = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run([sys.executable, "-c", BIG_PARENT.format(root=root, work=str(tmp_path))],
                         capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout.splitlines()[-1])
    assert got["rss"] < 300 * MiB, got
    assert got["why"].startswith("crash: killed by SIGSEGV"), got
