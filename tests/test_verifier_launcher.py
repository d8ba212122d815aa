"""The sandbox's native launcher: no Python between fork and exec, whatever threads run.

Python documents `preexec_fn` as unsafe in a threaded parent (a lock another thread
held at fork stays held in the child forever; the run would then be judged a hang).
These tests hold the launcher to the promise: no `preexec_fn`, no Python in any process
of the sandbox's tree, every child up when many start from many threads at once, a
set-up that fails reported as SETUP_FAILED, a plan that is malformed refused.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import struct
import subprocess
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

from verifier.errors import SandboxError
from verifier.sandbox import (
    NO_LAYERS,
    SETUP_FAILED,
    Accounting,
    Limits,
    _process,
    probe_layers,
    run_sandboxed,
)
from verifier.sandbox._confine import ChildPlan, decode_report, encode_plan
from verifier.sandbox._launcher import SOURCE, launcher_binary

TRUE = shutil.which("true") or "/bin/true"
SH = "/bin/sh"


class _PopenSpy:
    """subprocess.Popen as _process calls it, recording each call's arguments."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.procs: list[subprocess.Popen[bytes]] = []
        self.started = threading.Event()
        self._real = subprocess.Popen

    def __call__(self, args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        self.calls.append({"args": list(args), **kwargs})
        proc = self._real(args, **kwargs)
        self.procs.append(proc)
        self.started.set()
        return proc


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants, parents first."""
    out, todo = [], [pid]
    while todo:
        kid = todo.pop(0)
        out.append(kid)
        try:
            children = Path(f"/proc/{kid}/task/{kid}/children").read_text().split()
        except OSError:
            continue
        todo += [int(c) for c in children]
    return out


def _settled_tree(pid: int) -> list[str]:
    """The executables of `pid`'s tree once its command has become `sleep` (dd gone)."""
    deadline = time.monotonic() + 30
    while True:
        exes = []
        for kid in _tree(pid):
            with contextlib.suppress(OSError):
                exes.append(os.readlink(f"/proc/{kid}/exe"))
        if (exes and Path(exes[-1]).name == "sleep") or time.monotonic() > deadline:
            return exes
        time.sleep(0.01)


def test_no_preexec_fn_and_no_python_in_the_sandboxs_processes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every process of the tree but the command is the launcher, never a fork of Python."""
    launcher_binary()  # built before the spy goes in (the build runs cc through subprocess)
    spy = _PopenSpy()
    monkeypatch.setattr(_process.subprocess, "Popen", spy)
    ready_r, ready_w = os.pipe()
    result: list[Any] = []
    runner = threading.Thread(target=lambda: result.append(run_sandboxed(
        [SH, "-c", f"echo up | dd of=/proc/self/fd/{ready_w} 2>/dev/null; exec sleep 30"],
        tmp_path, Limits(wall_s=60.0),
        pass_fds=(ready_w,))))
    runner.start()
    try:
        assert select.select([ready_r], [], [], 30)[0], "the sandboxed command never started"
        assert os.read(ready_r, 16) == b"up\n"  # the command runs: the tree is complete
        assert spy.started.wait(10)
        [call], [proc] = spy.calls, spy.procs
        assert call.get("preexec_fn") is None
        assert call["args"][0] == str(launcher_binary())
        exes = _settled_tree(proc.pid)
        assert len(exes) == 3, exes  # keeper, reaper (the PID namespace's init), command
        assert exes[:2] == [str(launcher_binary())] * 2, exes
        assert Path(exes[2]).name == "sleep" and not any("python" in e for e in exes), exes
    finally:
        for proc in spy.procs:
            _process._kill_sandbox(proc.pid)
        runner.join(30)
        os.close(ready_r)
        os.close(ready_w)
    assert not runner.is_alive() and result[0].signal is not None


def test_many_children_from_many_threads_all_come_up(tmp_path: Path) -> None:
    """Children started at once from several threads (while another thread churns
    through a lock and allocations) all get every layer and run their command."""
    (tmp_path / "alone").mkdir()
    want = run_sandboxed([TRUE], tmp_path / "alone", Limits()).layers  # one child, alone
    assert want.seccomp != "none" and want.user_namespace == probe_layers().user_namespace
    threads, per_thread = 6, 5
    results: list[Any] = []
    errors: list[BaseException] = []
    stop = threading.Event()
    churn_lock = threading.Lock()

    def churn() -> None:
        while not stop.is_set():
            with churn_lock:
                _ = [bytes(64) for _ in range(200)]

    def launch(n: int) -> None:
        try:
            for i in range(per_thread):
                work = tmp_path / f"t{n}-{i}"
                work.mkdir()
                results.append(run_sandboxed([SH, "-c", f"echo {n}-{i}"], work,
                                             Limits(wall_s=60.0)))
        except BaseException as exc:  # reported below, with the others
            errors.append(exc)

    busy = threading.Thread(target=churn)
    busy.start()
    workers = [threading.Thread(target=launch, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(240)
    stop.set()
    busy.join(10)
    assert not errors, errors
    assert len(results) == threads * per_thread
    for res in results:
        assert res.ok, (res.returncode, res.signal, res.stderr)
        assert res.layers == want
    assert sorted(line for res in results for _, line in res.lines) == sorted(
        f"{n}-{i}" for n in range(threads) for i in range(per_thread))


class _MissingCgroup:
    """A run cgroup whose `cgroup.procs` is gone: joining it must fail the set-up."""

    def __init__(self, folder: Path) -> None:
        self.procs_paths = (str(folder / "no-such-cgroup" / "cgroup.procs"),)
        self.memory_bytes = 0

    def kill(self) -> bool:
        return True

    def usage(self) -> Any:
        return types.SimpleNamespace(oom_kills=0, memory_peak=0)


def test_a_set_up_that_fails_is_reported_as_setup_failed(tmp_path: Path) -> None:
    """A cgroup that cannot be joined: the command never runs, no layers are reported."""
    marker = tmp_path / "ran"
    res = run_sandboxed([SH, "-c", f"touch {marker}"], tmp_path, Limits(),
                        accounting=Accounting(_MissingCgroup(tmp_path)))  # type: ignore[arg-type]
    assert res.returncode == SETUP_FAILED and res.layers == NO_LAYERS
    assert "ktl sandbox: cannot join the run's cgroup" in res.stderr
    assert not marker.exists()


def test_a_command_that_cannot_be_executed_raises(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="cannot start the sandboxed child"):
        run_sandboxed([str(tmp_path / "missing")], tmp_path, Limits())


def _launch_with_plan(plan: bytes, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    fd = os.memfd_create("plan", 0)
    os.write(fd, plan)
    try:
        return subprocess.run([str(launcher_binary()), str(fd), TRUE], pass_fds=(fd,),
                              capture_output=True, timeout=30, check=False, cwd=tmp_path)
    finally:
        os.close(fd)


def _plan(**changes: Any) -> ChildPlan:
    base: dict[str, Any] = dict(cpu_s=5, address_space=None, file_size=1 << 20, open_files=32,
                                processes=16, read_only=("/usr",), read_write=("/tmp",),
                                control_fd=3, listen=False)
    base.update(changes)
    return ChildPlan(**base)


@pytest.mark.parametrize("damage", ["truncated", "magic", "trailing", "huge_path", "limit"])
def test_a_malformed_plan_is_refused_before_anything_runs(tmp_path: Path, damage: str) -> None:
    good = encode_plan(_plan(), 0)
    one = encode_plan(_plan(cgroup_procs=("/x",)), 0)  # its path's length sits at byte 80
    bad = {"truncated": good[:-3], "magic": b"X" + good[1:], "trailing": good + b"\0",
           "huge_path": one[:80] + struct.pack("=I", 1 << 30) + one[84:],
           "limit": encode_plan(_plan(cpu_s=0), 0)}[damage]
    done = _launch_with_plan(bad, tmp_path)
    assert done.returncode == SETUP_FAILED
    assert b"ktl sandbox: malformed plan" in done.stderr


def test_the_plan_refuses_what_the_launcher_could_not_carry() -> None:
    with pytest.raises(SandboxError, match="unusable path"):
        encode_plan(_plan(read_only=("/usr\0/x",)), 1)
    with pytest.raises(SandboxError, match="unusable path"):
        encode_plan(_plan(read_write=("x" * 5000,)), 1)
    with pytest.raises(SandboxError, match="cgroup files"):
        encode_plan(_plan(cgroup_procs=("/a",) * 17), 1)


def _report(**changes: int) -> bytes:
    """A launcher report: 12 flag bytes, then Landlock ABI, process limit, tmpfs MiB."""
    flags = dict(user=1, no_caps=1, pid=1, net=1, proc=1, dev=1, seccomp=2, cgroup=1, unacc=0)
    numbers = dict(abi=7, nproc=256, tmpfs=16)
    for key, value in changes.items():
        (flags if key in flags else numbers)[key] = value
    return struct.pack("=4s12Biii", b"KTLL", *flags.values(), 0, 0, 0, *numbers.values())


def test_a_malformed_report_is_refused() -> None:
    layers = decode_report(_report())
    assert layers.seccomp == "notify" and layers.cgroup and layers.private_tmpfs_mib == 16
    for bad in (_report()[:-1], b"KTLX" + _report()[4:], _report(user=2), _report(seccomp=3),
                _report(seccomp=0), _report(abi=-1), _report(tmpfs=-1)):
        with pytest.raises(SandboxError):
            decode_report(bad)


def test_the_launcher_is_built_from_the_source_beside_it() -> None:
    binary = launcher_binary()
    assert binary.is_file() and os.access(binary, os.X_OK)
    assert (binary.parent / "ktl-launcher.c").read_bytes() == SOURCE.read_bytes()
    assert launcher_binary() == binary  # built once per process
