"""The native worker: what the kernel's process holds, and what it cannot do to the parent."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from verifier import OPS, KernelSpec, get_runtime
from verifier.sandbox import Limits
from verifier.worker._arena import layout, view
from verifier.worker._channel import SharedArena, WorkerGone, WorkerHung, encode
from verifier.worker._native import NativeWorker, WorkerSandbox
from verifier.worker._proc import activity, escaped_work

ROOT = Path(__file__).resolve().parent.parent
FLAWED = ROOT / "tests" / "flawed_kernels"


def _worker(kernel: Path, tmp: Path, arena: SharedArena, **limits: float) -> NativeWorker:
    spec = KernelSpec.load(kernel)
    art = get_runtime(spec.runtime).build(spec, "release", tmp)
    run = tmp / "run"
    run.mkdir()
    return NativeWorker(art.path, spec.entry, OPS[spec.op], arena,
                        WorkerSandbox(run, Limits(wall_s=limits.get("wall_s", 60.0),
                                                  step_wall_s=None),
                                      readable=[art.path.parent]))


def test_worker_calls_the_kernel_on_shared_memory(tmp_path: Path) -> None:
    op = OPS["sum"]
    dims = {"R": 8, "C": 33}
    lay = layout(op, dims)
    arena = SharedArena(2 * lay.total)
    worker = _worker(ROOT / "examples" / "sum-rows", tmp_path, arena)
    x = np.random.default_rng(0).standard_normal((8, 33)).astype(np.float32)
    for j in range(2):
        view(arena.bytes[j * lay.total:(j + 1) * lay.total], lay.slots[0])[...] = x * (j + 1)
    ns = worker.call([0, lay.total], [s.offset for s in lay.slots], [8, 33], 10.0)
    assert ns > 0 and worker.nop() > 0
    for j in range(2):
        out = view(arena.bytes[j * lay.total:(j + 1) * lay.total], lay.slots[1])
        assert np.allclose(out, (x * (j + 1)).sum(axis=1), rtol=1e-5)
    result = worker.close()
    assert result is not None and result.ok and result.last("LOADED")
    arena.close()


def test_the_kernel_finds_no_python_in_its_process(tmp_path: Path) -> None:
    """Attack 1's constructor looks for PyRun_SimpleString: there is none to find."""
    arena = SharedArena(4096)
    worker = _worker(FLAWED / "forged_baseline", tmp_path, arena)
    worker.nop()
    result = worker.close()
    assert result is not None
    assert ("KTL-PROBE python=0" in [line for _, line in result.lines]), result.lines


def test_the_arena_cannot_be_shrunk_under_the_parent() -> None:
    """The memfd is sealed: a kernel truncating it cannot make the parent fault (SIGBUS)."""
    arena = SharedArena(8192)
    with pytest.raises(PermissionError):
        os.ftruncate(arena.fd, 0)
    arena.bytes[-1] = 7
    assert arena.bytes[-1] == 7
    arena.close()


def test_a_hung_kernel_is_killed_at_the_parents_deadline(tmp_path: Path) -> None:
    op = OPS["sum"]
    dims = {"R": 1, "C": 7}  # the hang kernel spins on rows of length 7
    lay = layout(op, dims)
    arena = SharedArena(lay.total)
    worker = _worker(FLAWED / "hang", tmp_path, arena)
    start = time.monotonic()
    with pytest.raises((WorkerHung, WorkerGone)):
        worker.call([0], [s.offset for s in lay.slots], [1, 7], 1.0)
    worker.close()
    assert time.monotonic() - start < 15
    arena.close()


def test_idle_threads_are_not_escaped_work_but_busy_ones_are() -> None:
    # a process of our own with no children: the test worker's pid would also show the
    # processes other tests in the same worker left running (a server, a pool)
    import subprocess
    import sys

    idle = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); "
                             "time.sleep(30)"], stdout=subprocess.PIPE)
    try:
        pid = idle.pid
        assert idle.stdout is not None and idle.stdout.readline() == b"up\n"  # started, idle
        before = activity(pid)
        assert escaped_work(pid, before, activity(pid), 50_000_000) == []
    finally:
        idle.kill()
        idle.wait()
        if idle.stdout is not None:
            idle.stdout.close()
    busy = type(before)({**before.threads, pid: before.threads[pid] + 40_000_000}, ())
    assert [e.key for e in escaped_work(pid, before, busy, 50_000_000)] == [("threads", 1)]
    spawned = type(before)(before.threads, (123456,))
    found = escaped_work(pid, before, spawned, 50_000_000)
    assert [e.key for e in found] == [("processes", 1)] and "process" in str(found[0])


def test_commands_are_fixed_width_words() -> None:
    raw = encode(1, [0, 64], [3, 4], [0, 128])
    words = np.frombuffer(raw, dtype="<i8").tolist()
    assert words == [1, 2, 0, 64, 3, 4, 0, 0, 0, 128]
