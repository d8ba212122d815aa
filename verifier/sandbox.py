"""Run untrusted code in a child process with limits; never let it crash the caller.

Each child gets: RLIMIT_CPU, RLIMIT_AS (optional: sanitizers reserve terabytes of
virtual memory and use their own RSS cap instead), RLIMIT_FSIZE, RLIMIT_NOFILE,
RLIMIT_CORE 0 (soft = hard, so the child cannot raise them back); a wall-clock
timeout after which its whole process group is killed; an environment built from
scratch; a private working folder; its own empty network namespace where the OS
allows (`unshare(CLONE_NEWNET)`; whether it worked is reported, never assumed);
and death when the parent dies. The parent reads the child's stdout line by line
with its own clock and collects the child's CPU time and peak RSS from `wait4`.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from verifier import _gpu, _landlock
from verifier._errors import SandboxError

__all__ = ["ChildResult", "Limits", "filesystem_confinement", "run_sandboxed"]

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
STDERR_CAP = 64 * 1024
GiB = 1024**3


@dataclass(frozen=True)
class Limits:
    """Resource limits of one child."""

    cpu_s: int = 60
    wall_s: float = 60.0
    address_space: int | None = 4 * GiB
    file_size: int = 1 * GiB
    open_files: int = 64
    step_wall_s: float | None = None
    """If set, the wall-clock limit between two progress lines (one case)."""


@dataclass
class ChildResult:
    """What happened to a child, seen from the parent."""

    returncode: int | None
    signal: int | None
    timed_out: bool
    step_timed_out: bool
    wall_s: float
    cpu_s: float
    maxrss_bytes: int
    lines: list[tuple[float, str]] = field(default_factory=list)
    stderr: str = ""
    network_isolated: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def last(self, prefix: str) -> str | None:
        for _, line in reversed(self.lines):
            if line.startswith(prefix):
                return line
        return None

    def describe(self, limits: Limits) -> str:
        """Why the child did not finish, in words a user can act on."""
        tail = self.stderr.strip().splitlines()[-3:]
        hint = f" (stderr: {' | '.join(tail)[:300]})" if tail else ""
        rss = self.maxrss_bytes / 2**20
        if self.step_timed_out or self.timed_out:
            limit = limits.step_wall_s if self.step_timed_out else limits.wall_s
            return f"hang: killed after the wall-clock limit of {limit:g} s"
        if self.signal == signal.SIGXCPU:
            return f"hang: killed at the CPU-time limit of {limits.cpu_s} s"
        if self.signal == signal.SIGXFSZ:
            return f"killed at the file-size limit of {limits.file_size} bytes"
        cap = limits.address_space or 0
        near_limit = cap > 0 and self.maxrss_bytes > 0.5 * cap
        if self.signal is not None:
            name = signal.Signals(self.signal).name
            if near_limit:
                return (f"unbounded allocation: crashed with {name} after peak RSS {rss:.0f} MiB "
                        f"near the address-space limit of {cap // 2**20} MiB{hint}")
            return f"crash: killed by {name} (peak RSS {rss:.0f} MiB){hint}"
        if "MemoryError" in self.stderr or near_limit:
            return (f"unbounded allocation: ran out of the address-space limit "
                    f"(peak RSS {rss:.0f} MiB){hint}")
        if self.returncode == SETUP_FAILED:
            return "the sandbox could not confine the child's filesystem access (Landlock setup failed)"
        return f"crash: exited with status {self.returncode}{hint}"


def _package_dir() -> Path:
    return Path(__file__).resolve().parent


def _import_path(workdir: Path) -> str:
    """A folder holding only a link to this package, for the child's PYTHONPATH.

    The child may read this package but not the rest of the checkout beside it
    (which can hold keys, e.g. a demo's data folder).
    """
    folder = workdir / ".ktl-pkg"
    folder.mkdir(exist_ok=True)
    link = folder / "verifier"
    if not link.is_symlink():
        link.symlink_to(_package_dir(), target_is_directory=True)
    return str(folder)


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A scrubbed environment: nothing of the caller's leaks in."""
    env = {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0",
           "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": str(os.cpu_count() or 1),
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    if extra:
        env.update(extra)
    return env


SYSTEM_READ_ONLY = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache",
                    "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/proc", "/sys",
                    "/dev")
SETUP_FAILED = 97
"""Exit status of a child whose confinement could not be set up (it never runs the command)."""


def filesystem_confinement() -> str:
    """How children's filesystem access is confined here, in words."""
    abi = _landlock.abi_version()
    if abi < 1:
        return "filesystem NOT confined (no Landlock in this kernel)"
    return (f"filesystem confined by Landlock ABI v{abi} (read-only system, Python and package "
            "paths; read-write only its private folder)")


def _readable_roots(extra: Sequence[Path]) -> list[str]:
    roots = [*SYSTEM_READ_ONLY, sys.base_prefix, sys.prefix, str(_package_dir())]
    return roots + [str(p) for p in extra]


def _preexec(limits: Limits, read_only: Sequence[str], read_write: Sequence[str]) -> None:
    """Runs in the child between fork and exec."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    libc.unshare(CLONE_NEWNET)  # fails quietly without privileges; the worker reports its netns
    if _landlock.abi_version() >= 1 and not _landlock.confine(read_only, read_write):
        os._exit(SETUP_FAILED)
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 1))
    if limits.address_space is not None:
        resource.setrlimit(resource.RLIMIT_AS, (limits.address_space, limits.address_space))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size, limits.file_size))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _own_netns() -> str:
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return "unknown"


def run_sandboxed(
    argv: Sequence[str],
    workdir: Path,
    limits: Limits,
    env: Mapping[str, str] | None = None,
    readable: Sequence[Path] = (),
    gpu: bool = False,
    pass_fds: Sequence[int] = (),
) -> ChildResult:
    """Run `argv` (never through a shell) in `workdir` under `limits`.

    The child may write only under `workdir` (also its HOME and TMPDIR) and read
    only system paths, the Python installation, this package and `readable`.
    With `gpu`, it may also use the NVIDIA device nodes and read the driver's
    folders, and has no address-space limit (the driver maps GPU memory into it).
    `pass_fds` stay open in the child under the same numbers (the native worker's
    command and answer pipes and its arena memfd).
    Returns a ChildResult whatever the child does; raises SandboxError only when
    the child cannot be started at all. The parent never reopens a path inside
    `workdir` after the child started (the child could have swapped it for a FIFO).
    """
    child_env = dict(env if env is not None else base_env())
    child_env.update({"HOME": str(workdir), "TMPDIR": str(workdir),
                      "PYTHONPATH": _import_path(workdir)})
    read_only = _readable_roots(readable)
    read_write = [str(workdir), "/dev/null"]
    if gpu:
        driver_dirs, devices = _gpu.sandbox_grants()
        read_only += driver_dirs
        read_write += devices
        limits = dataclasses.replace(limits, address_space=None)
        if driver_dirs:  # where the probe found libcuda, e.g. only on the caller's LD_LIBRARY_PATH
            child_env["LD_LIBRARY_PATH"] = ":".join(driver_dirs)
    stderr_path = workdir / ".stderr"
    parent_ns = _own_netns()
    lines: list[tuple[float, str]] = []
    with open(stderr_path, "w+b") as err:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                list(argv), cwd=workdir, env=child_env,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                start_new_session=True, close_fds=True, pass_fds=tuple(pass_fds),
                preexec_fn=lambda: _preexec(limits, read_only, read_write),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxError(f"cannot start the sandboxed child {argv[0]}: {exc}") from exc
        assert proc.stdout is not None
        stdout = proc.stdout

        def reader() -> None:
            for raw in stdout:
                if len(lines) < 100_000:
                    lines.append((time.monotonic(), raw.decode("utf-8", "replace").rstrip("\n")))

        thread = threading.Thread(target=reader, daemon=True)
        thread.start()
        timed_out = step_timed_out = False
        status = 0
        usage: resource.struct_rusage | None = None
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            now = time.monotonic()
            if now - start > limits.wall_s:
                timed_out = True
            elif limits.step_wall_s is not None:
                last = lines[-1][0] if lines else start
                step_timed_out = now - last > limits.step_wall_s
            if timed_out or step_timed_out:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.005)
        wall = time.monotonic() - start
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # stray grandchildren
        proc.returncode = os.waitstatus_to_exitcode(status)
        thread.join(timeout=2.0)
        stdout.close()
        err.seek(max(0, os.fstat(err.fileno()).st_size - STDERR_CAP))
        stderr = err.read(STDERR_CAP).decode("utf-8", "replace")
    code = proc.returncode
    ready = next((line for _, line in lines if line.startswith("READY ")), None)
    return ChildResult(
        returncode=code if code >= 0 else None,
        signal=-code if code < 0 else None,
        timed_out=timed_out,
        step_timed_out=step_timed_out,
        wall_s=wall,
        cpu_s=(usage.ru_utime + usage.ru_stime) if usage else 0.0,
        maxrss_bytes=int(usage.ru_maxrss * 1024) if usage else 0,
        lines=list(lines),
        stderr=stderr,
        network_isolated=ready is not None and ready.split(" ", 1)[1] not in (parent_ns, "unknown"),
    )
