"""Run untrusted code in a child process with limits; never let it crash the caller.

The child (set up before exec by the native launcher, see `verifier.sandbox._confine`) runs in new user, PID and network namespaces
where the OS allows: no capabilities even when `ktl` runs as root, no other
process visible, every descendant killed with the run. It gets RLIMIT_CPU,
RLIMIT_AS (optional: sanitizers reserve terabytes of virtual memory and use their
own RSS cap instead), RLIMIT_FSIZE, RLIMIT_NOFILE, RLIMIT_NPROC, RLIMIT_CORE 0
(soft = hard, so it cannot raise them back); Landlock filesystem confinement with
/dev reduced to null, zero and urandom; a seccomp filter (`verifier.sandbox._seccomp`)
whose denied calls are reported to the parent, which kills the run and names the
call; an environment built from scratch; a private working folder; death when the
parent dies. The parent enforces a wall-clock timeout, reads stdout with caps on
bytes per line and in total (`verifier.sandbox._output`), caps stderr's size, kills the
whole sandbox on any excess, and collects CPU time and peak RSS from `wait4`.
What was in force comes back as `ChildResult.layers`, never assumed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from verifier.errors import SandboxError
from verifier.gpu import sandbox_grants
from verifier.sandbox import _confine, _landlock
from verifier.sandbox._cgroup import CgroupUnavailable, RunCgroup, Usage
from verifier.sandbox._confine import SETUP_FAILED, ChildPlan
from verifier.sandbox._launcher import launcher_binary
from verifier.sandbox._layers import NO_LAYERS, SandboxLayers
from verifier.sandbox._output import CappedReader
from verifier.sandbox._summary import stderr_summary
from verifier.sandbox._violations import ViolationWatcher

__all__ = ["NO_LAYERS", "SETUP_FAILED", "Accounting", "ChildResult", "Limits", "SandboxLayers",
           "filesystem_confinement", "memory_limit", "probe_layers", "run_sandboxed",
           "sandbox_detail", "sandbox_metrics"]

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
STDERR_CAP = 64 * 1024
"""How much of the end of stderr a ChildResult keeps."""
MAX_LINES = 100_000
GiB = 1024**3
MiB = 1024**2


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
    processes: int = 256
    """RLIMIT_NPROC: processes and threads of the sandbox's uid in its user namespace."""
    line_bytes: int = 64 * 1024
    """Longest stdout line; a longer one kills the run."""
    stdout_bytes: int = 32 * MiB
    """All stdout together; more kills the run (it bounds the parent's memory)."""
    stderr_bytes: int = 16 * MiB
    """All stderr together (kept in a file the parent opened); more kills the run."""
    memory_bytes: int | None = None
    """The run's cgroup memory limit (anonymous, shared memory, memfd and tmpfs pages the
    tree touches first); None: `address_space`, or 3 GiB without one. Only with a cgroup."""
    private_bytes: int | None = None
    """If set, the private folder is a tmpfs of this size in the sandbox's own mount
    namespace (files written there count as its memory and never reach the host's disk)."""


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
    layers: SandboxLayers = NO_LAYERS
    """The confinement the child reported before its command started."""
    denied_syscall: str | None = None
    """The denied system call the child tried (the run was killed for it)."""
    output_excess: str | None = None
    """"line", "total" (stdout) or "stderr" when an output cap killed the run."""
    memory_limited: bool = False
    """The run's cgroup hit its memory limit and the kernel's OOM killer ended a task."""
    memory_limit: int = 0
    """That limit in bytes (0: no cgroup)."""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def last(self, prefix: str) -> str | None:
        for _, line in reversed(self.lines):
            if line.startswith(prefix):
                return line
        return None

    def describe(self, limits: Limits) -> str:
        """Why the child did not finish, in words a user can act on. Its stderr is the
        kernel's choice: summarised (`stderr_summary`: length, digest, which line of the
        worker's own), never quoted."""
        hint = f" ({stderr_summary(self.stderr)})" if self.stderr.strip() else ""
        rss = self.maxrss_bytes / 2**20
        if self.denied_syscall is not None:
            return (f"sandbox violation: the kernel called {self.denied_syscall}, which the "
                    "sandbox denies; the run was killed")
        if self.signal == signal.SIGSYS:
            return ("sandbox violation: killed by SIGSYS for a system call the sandbox denies "
                    "(this machine's seccomp cannot tell the parent which)")
        if self.output_excess is not None:
            what = {"line": f"a stdout line longer than {limits.line_bytes} bytes",
                    "total": f"more than {limits.stdout_bytes} bytes of stdout",
                    "stderr": f"more than {limits.stderr_bytes} bytes of stderr"}[self.output_excess]
            return f"output flood: the child wrote {what}; the run was killed"
        if self.memory_limited:
            return (f"memory limit: the run's cgroup reached {self.memory_limit >> 20} MiB "
                    "(shared memory, memfd and private-folder files included) and was killed")
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
            return f"the sandbox could not be set up for the child{hint}"
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
                    "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/proc",
                    "/sys/devices/system", "/dev/zero", "/dev/urandom")
"""Read-only for every child. Of /dev only zero and urandom (and null, read-write). Of /sys
only the CPU and memory topology (what OpenMP and torch's CPU probe read): not the network
devices' addresses, the PCI tree or the DMI identity; a GPU run also gets `GPU_SYSFS`."""
GPU_SYSFS = ("/sys",)
"""What a GPU run reads of /sys beyond the topology: the driver walks the PCI tree."""
DEV_READ_WRITE = ("/dev/null",)


def filesystem_confinement(gpu: bool = False) -> str:
    """How children's filesystem access is confined here, in words."""
    abi = _landlock.abi_version()
    if abi < 1:
        return "filesystem NOT confined (no Landlock in this kernel)"
    dev = "null, zero, urandom" + (" and the NVIDIA device nodes" if gpu else "")
    return (f"filesystem confined by Landlock ABI v{abi} (read-only system, Python and package "
            f"paths; /dev only {dev}; read-write only its private folder)")


SECCOMP_LEVEL = {"none": 0.0, "kill": 1.0, "notify": 2.0}


def sandbox_metrics(layers: SandboxLayers) -> dict[str, float]:
    """The `sandbox` check row's metrics: one number per layer (1.0 = in force)."""
    out = {name: 1.0 if value else 0.0 for name, value in layers.to_json().items()
           if isinstance(value, bool)}
    out.update(seccomp=SECCOMP_LEVEL[layers.seccomp], landlock_abi=float(layers.landlock_abi),
               process_limit=float(layers.process_limit),
               private_tmpfs_mib=float(layers.private_tmpfs_mib),
               network_isolated=1.0 if layers.network_namespace else 0.0,
               filesystem_confined=1.0 if layers.filesystem_confined else 0.0)
    return out


def sandbox_detail(layers: SandboxLayers) -> str:
    """The `sandbox` check row's text."""
    return ("each run in a child with CPU, memory, file-size, open-file and process limits, a "
            "wall-clock timeout, capped stdout/stderr, scrubbed environment, private folder; "
            + layers.describe())


def probe_layers() -> SandboxLayers:
    """The layers a sandboxed child gets on this machine (runs `true` in the sandbox once)."""
    with tempfile.TemporaryDirectory(prefix="ktl-sandbox-probe-") as tmp:
        true = shutil.which("true", path=SAFE_PATH) or "/bin/true"
        limits = Limits(cpu_s=10, wall_s=30.0, private_bytes=16 * MiB)
        try:  # as a kernel's run is set up: its own cgroup, or seccomp standing in for it
            group: RunCgroup | None = RunCgroup.create(os.sched_getaffinity(0), 64 * MiB, 16)
        except (CgroupUnavailable, OSError):
            group = None
        try:
            return run_sandboxed([true], Path(tmp), limits,
                                 accounting=Accounting(group, deny_unaccountable=True)).layers
        finally:
            if group is not None:
                group.remove()


def _readable_roots(extra: Sequence[Path]) -> list[str]:
    roots = [*SYSTEM_READ_ONLY, sys.base_prefix, sys.prefix, str(_package_dir())]
    return roots + [str(p) for p in extra]


def _kill_sandbox(keeper: int) -> None:
    """Kill the keeper's process group: the keeper and the PID namespace's init, so the
    whole namespace dies (a setsid'd grandchild included)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(keeper, signal.SIGKILL)


@dataclass
class _Run:
    """The parent's view of one running child."""

    proc: subprocess.Popen[bytes]
    reader: CappedReader
    watcher: ViolationWatcher | None
    layers: SandboxLayers
    stderr_fd: int
    start: float

    def kill(self) -> None:
        _kill_sandbox(self.proc.pid)


def _recv(ctl: socket.socket, deadline: float) -> tuple[bytes, list[int]]:
    """One message from the control socket (b"" at end of file or at the deadline)."""
    poller = select.poll()
    poller.register(ctl, select.POLLIN)
    while not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
        if time.monotonic() >= deadline:
            return b"", []
    try:
        msg, anc, _, _ = ctl.recvmsg(64, socket.CMSG_SPACE(4), socket.MSG_DONTWAIT)
    except OSError:
        return b"", []
    fds = [int.from_bytes(data[i:i + 4], sys.byteorder, signed=True)
           for level, kind, data in anc if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
           for i in range(0, len(data) - len(data) % 4, 4)]
    return msg, fds


def _receive_layers(ctl: socket.socket, deadline: float) -> tuple[SandboxLayers, int | None]:
    """The launcher's report, sent by the target just before its exec (NO_LAYERS and no
    listener when the set-up failed first)."""
    msg, fds = _recv(ctl, deadline)
    try:
        layers = _confine.decode_report(msg)
    except SandboxError:
        for fd in fds:
            os.close(fd)
        return NO_LAYERS, None
    for fd in fds[1:]:
        os.close(fd)
    return layers, (fds[0] if fds else None)


def _exec_error(ctl: socket.socket, deadline: float) -> str | None:
    """After the report: end of file once the command runs (the socket is close-on-exec),
    or the errno of an exec that failed."""
    msg, fds = _recv(ctl, deadline)
    for fd in fds:
        os.close(fd)
    if len(msg) == 8 and msg[:4] == _confine.EXEC_FAILED_TAG:
        err = int.from_bytes(msg[4:], sys.byteorder, signed=True)
        return os.strerror(err)
    return None


def _plan_file(plan: ChildPlan) -> int:
    """A sealed-off memory file holding the launcher's plan (read from offset 0)."""
    data = _confine.encode_plan(plan, _landlock.abi_version())
    fd = os.memfd_create("ktl-sandbox-plan", os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
    except OSError:
        os.close(fd)
        raise
    return fd


@dataclass(frozen=True)
class Accounting:
    """How a kernel's run is accounted: its cgroup (None: there is none), and whether
    what /proc cannot account must then be denied (a kernel's run, not a compiler's)."""

    cgroup: RunCgroup | None = None
    deny_unaccountable: bool = False


def memory_limit(limits: Limits) -> int:
    """The cgroup memory limit a run gets under `limits`."""
    if limits.memory_bytes is not None:
        return limits.memory_bytes
    return limits.address_space if limits.address_space is not None else 3 * GiB


@dataclass(frozen=True)
class _Launch:
    """One child as `run_sandboxed` resolved it: the command, its folder, environment and
    limits, the paths it may read and write, its GPU grant, inherited descriptors and
    accounting."""

    argv: Sequence[str]
    workdir: Path
    env: dict[str, str]
    limits: Limits
    read_only: Sequence[str]
    read_write: Sequence[str]
    gpu: bool
    pass_fds: Sequence[int]
    accounting: Accounting


def _start(launch: _Launch, stderr_fd: int) -> _Run:
    """Start the launcher (no Python runs in the forked child: subprocess forks and execs
    in C, and the launcher does the set-up), then wait for its report and its exec."""
    argv, workdir, limits = launch.argv, launch.workdir, launch.limits
    ctl, ctl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    accounting = launch.accounting
    group = accounting.cgroup
    plan = ChildPlan(cpu_s=limits.cpu_s, address_space=limits.address_space,
                     file_size=limits.file_size, open_files=limits.open_files,
                     processes=limits.processes, read_only=tuple(launch.read_only),
                     read_write=tuple(launch.read_write), control_fd=ctl_child.fileno(),
                     listen=True, local_unix_sockets=launch.gpu,
                     cgroup_procs=group.procs_paths if group is not None else (),
                     deny_unaccountable=accounting.deny_unaccountable and group is None,
                     private_dir=str(workdir) if limits.private_bytes else None,
                     private_bytes=limits.private_bytes or 0)
    try:
        with ctl, ctl_child:
            launcher = str(launcher_binary())
            plan_fd = _plan_file(plan)
            start = time.monotonic()  # wall time includes the set-up, as the child's CPU does
            try:
                proc = subprocess.Popen(
                    [launcher, str(plan_fd), *argv], executable=launcher, cwd=workdir,
                    env=launch.env,
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr_fd,
                    start_new_session=True, close_fds=True,
                    pass_fds=(ctl_child.fileno(), plan_fd, *launch.pass_fds))
            finally:
                ctl_child.close()
                os.close(plan_fd)
            deadline = start + limits.wall_s
            layers, listener = _receive_layers(ctl, deadline)
            failed = _exec_error(ctl, deadline) if layers is not NO_LAYERS else None
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(f"cannot start the sandboxed child {argv[0]}: {exc}") from exc
    if failed is not None:
        _kill_sandbox(proc.pid)
        proc.wait()
        if listener is not None:
            os.close(listener)
        raise SandboxError(f"cannot start the sandboxed child {argv[0]}: {failed}")
    assert proc.stdout is not None
    keeper = proc.pid
    reader = CappedReader(proc.stdout.fileno(), limits.line_bytes, limits.stdout_bytes,
                          MAX_LINES, lambda: _kill_sandbox(keeper))
    reader.start()
    watcher = None
    if listener is not None:
        watcher = ViolationWatcher(listener, lambda: _kill_sandbox(keeper))
        watcher.start()
    return _Run(proc, reader, watcher, layers, stderr_fd, start)


def _wait(run: _Run, limits: Limits) -> tuple[int, resource.struct_rusage | None, bool, bool, bool]:
    """Wait for the child under the wall-clock, step and stderr limits.

    Returns (wait status, rusage, timed out, step timed out, stderr over its cap)."""
    timed_out = step_timed_out = stderr_excess = False
    while True:
        pid, status, usage = os.wait4(run.proc.pid, os.WNOHANG)
        if pid:
            return status, usage, timed_out, step_timed_out, stderr_excess
        now = time.monotonic()
        if now - run.start > limits.wall_s:
            timed_out = True
        elif limits.step_wall_s is not None:
            lines = run.reader.lines
            last = lines[-1][0] if lines else run.start
            step_timed_out = now - last > limits.step_wall_s
        stderr_excess = stderr_excess or os.fstat(run.stderr_fd).st_size > limits.stderr_bytes
        if timed_out or step_timed_out or stderr_excess:
            run.kill()
            _, status, usage = os.wait4(run.proc.pid, 0)
            return status, usage, timed_out, step_timed_out, stderr_excess
        time.sleep(0.005)


def _peak_rss(usage: resource.struct_rusage | None, group: Usage | None) -> int:
    """The sandbox's peak memory: the smaller of two upper bounds.

    wait4's ru_maxrss keeps the high-water mark of the memory the child was forked
    from (Linux records the old mm's peak at exec), so under a large parent (a test
    process that imported torch) every child looks big; the cgroup's peak counts page
    cache and tmpfs besides resident memory. Each is at least the true peak.
    """
    rss = int(usage.ru_maxrss * 1024) if usage else 0
    if group is not None and group.memory_peak > 0:
        return min(rss, group.memory_peak) if rss else group.memory_peak
    return rss


def _stderr_tail(fd: int) -> str:
    """The end of stderr, read through the parent's own descriptor (never the path,
    which the child may have replaced with a FIFO or a link)."""
    size = os.fstat(fd).st_size
    return os.pread(fd, STDERR_CAP, max(0, size - STDERR_CAP)).decode("utf-8", "replace")


def run_sandboxed(  # noqa: PLR0913 (44 callers; the grants could be one object)
    argv: Sequence[str],
    workdir: Path,
    limits: Limits,
    env: Mapping[str, str] | None = None,
    readable: Sequence[Path] = (),
    gpu: bool = False,
    pass_fds: Sequence[int] = (),
    accounting: Accounting | None = None,
    system: Sequence[str] | None = None,
) -> ChildResult:
    """Run `argv` (never through a shell) in `workdir` under `limits`.

    The child may write only under `workdir` (also its HOME and TMPDIR) and read
    only system paths, the Python installation, this package and `readable`; with
    `system`, only those paths and `readable` (a compiler: its toolchain and headers).
    With `gpu`, it may also use the NVIDIA device nodes and read the driver's
    folders, and has no address-space limit (the driver maps GPU memory into it);
    it may create AF_UNIX sockets (NVIDIA's cuInit needs one) that can reach no
    address (`connect` and addressed sends fail with EACCES); other socket families
    fail with EACCES instead of ending the run.
    `pass_fds` stay open in the target under the same numbers (the native worker's
    command and answer pipes and its arena memfd).
    `accounting` puts the child in the caller's per-run cgroup before it runs anything (its
    owner reads and removes it; what is left in it is killed here when the run ends) or,
    with none, has seccomp deny what /proc cannot account. Without `accounting` the run
    gets a cgroup of its own where one can be made (memory and task limits), removed here.
    Returns a ChildResult whatever the child does; raises SandboxError only when the
    child cannot be started at all. The parent never reopens a path inside `workdir`
    after the child started (the child could have swapped it for a FIFO).
    """
    child_env = dict(env if env is not None else base_env())
    child_env.update({"HOME": str(workdir), "TMPDIR": str(workdir),
                      "PYTHONPATH": _import_path(workdir)})
    read_only = (_readable_roots(readable) if system is None else
                 [*system, *(str(p) for p in readable)])
    read_write = [str(workdir), *DEV_READ_WRITE]
    if gpu:
        driver_dirs, devices = sandbox_grants()
        read_only += [*driver_dirs, *GPU_SYSFS]
        read_write += devices
        limits = dataclasses.replace(limits, address_space=None)
        if driver_dirs:  # where the probe found libcuda, e.g. only on the caller's LD_LIBRARY_PATH
            child_env["LD_LIBRARY_PATH"] = ":".join(driver_dirs)
    own = _own_cgroup(limits) if accounting is None else None
    accounting = accounting or Accounting(own)
    try:
        return _run(_Launch(argv, workdir, child_env, limits, read_only, read_write, gpu,
                            pass_fds, accounting))
    finally:
        if own is not None:
            own.remove()


def _own_cgroup(limits: Limits) -> RunCgroup | None:
    try:
        return RunCgroup.create(os.sched_getaffinity(0), memory_limit(limits),
                                limits.processes + 8)
    except (CgroupUnavailable, OSError):
        return None


def _run(launch: _Launch) -> ChildResult:
    accounting = launch.accounting
    stderr_fd = os.open(launch.workdir / ".stderr", os.O_RDWR | os.O_CREAT | os.O_TRUNC
                        | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        run = _start(launch, stderr_fd)
        try:
            status, usage, timed_out, step_timed_out, stderr_excess = _wait(run, launch.limits)
        finally:
            run.kill()  # whatever is left of the sandbox
            if accounting.cgroup is not None:
                accounting.cgroup.kill()
            run.reader.stop()
            if run.watcher is not None:
                run.watcher.stop()
            assert run.proc.stdout is not None
            run.proc.stdout.close()
        wall = time.monotonic() - run.start
        stderr = _stderr_tail(stderr_fd)
    finally:
        os.close(stderr_fd)
    code = os.waitstatus_to_exitcode(status)
    run.proc.returncode = code
    violation = run.watcher.violation if run.watcher is not None else None
    group = accounting.cgroup.usage() if accounting.cgroup is not None else None
    return ChildResult(
        returncode=code if code >= 0 else None,
        signal=-code if code < 0 else None,
        timed_out=timed_out,
        step_timed_out=step_timed_out,
        wall_s=wall,
        cpu_s=(usage.ru_utime + usage.ru_stime) if usage else 0.0,
        maxrss_bytes=_peak_rss(usage, group),
        lines=list(run.reader.lines),
        stderr=stderr,
        network_isolated=run.layers.network_namespace,
        layers=run.layers,
        denied_syscall=violation.name if violation is not None else None,
        output_excess="stderr" if stderr_excess else run.reader.excess,
        memory_limited=group is not None and group.oom_kills > 0,
        memory_limit=accounting.cgroup.memory_bytes if accounting.cgroup is not None else 0,
    )
